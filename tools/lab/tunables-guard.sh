#!/usr/bin/env bash
# Keeps this machine's kernel tunables that a kubelet rewrites put back while a lab runs.
# A kubelet started in a privileged container (every lab node) sets, through the shared
# /proc/sys, kernel.panic=10, kernel.panic_on_oops=1 and vm.overcommit_memory=1, each time it
# starts. On a host booted with panic=1 that turns any kernel oops into a reboot. This records the
# values when it starts and writes them back whenever they differ, every $GUARD_INTERVAL seconds
# (default 1), saying so on stderr, until it is stopped (TERM/INT: one last check first).
# Usage: tools/lab/tunables-guard.sh &   (PROC_SYS overrides /proc/sys, for its own test)
set -euo pipefail
PROC_SYS=${PROC_SYS:-/proc/sys}
INTERVAL=${GUARD_INTERVAL:-1}
KEYS=(kernel/panic kernel/panic_on_oops vm/overcommit_memory)
declare -A want
for k in "${KEYS[@]}"; do want[$k]=$(cat "$PROC_SYS/$k"); done
echo "tunables-guard: keeping $(for k in "${KEYS[@]}"; do printf '%s=%s ' "${k//\//.}" "${want[$k]}"; done)" >&2

check() {
  local k now
  for k in "${KEYS[@]}"; do
    now=$(cat "$PROC_SYS/$k")
    if [ "$now" != "${want[$k]}" ]; then
      echo "${want[$k]}" > "$PROC_SYS/$k"
      echo "tunables-guard: ${k//\//.} was $now, put back to ${want[$k]}" >&2
    fi
  done
}
trap 'check; exit 0' TERM INT
while :; do
  check
  sleep "$INTERVAL" &
  wait $! || true
done
