#!/usr/bin/env bash
# Makes sure a Docker engine answers, for the lab and its tests. Where none does, starts
# Debian's dockerd (apt-get install docker.io) in the background, logging to
# $GPU_TENANCY_CACHE/dockerd.log, and prints its PID; where one answers, prints nothing.
# Where this machine's capability bounding set lacks a capability, the engine it starts runs
# containers through tools/lab/lab-runc (privileged containers fail at create otherwise); an
# engine already running without such a runtime on such a host is an error, said in one line.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${GPU_TENANCY_CACHE:-$HOME/.cache/gpu-tenancy}
RUNTIME=lab-runc

lacking=$("$ROOT/tools/lab/lab-runc" --missing-capabilities | paste -sd, -)

if docker info >/dev/null 2>&1; then
  if [ -n "$lacking" ] && ! docker info -f '{{.DefaultRuntime}}' | grep -qx "$RUNTIME"; then
    echo "error: this host's capability bounding set lacks $lacking, and the running Docker engine's" \
      "default runtime is $(docker info -f '{{.DefaultRuntime}}'): register tools/lab/lab-runc as its default" \
      "runtime (dockerd --add-runtime $RUNTIME=$ROOT/tools/lab/lab-runc --default-runtime $RUNTIME)" >&2
    exit 1
  fi
  exit 0
fi
command -v dockerd >/dev/null || { echo "error: no dockerd (apt-get install docker.io)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: no jq (apt-get install jq); tools/lab/lab-runc needs it" >&2; exit 1; }
mkdir -p "$CACHE"
args=()
if [ -n "$lacking" ]; then
  args+=(--add-runtime "$RUNTIME=$ROOT/tools/lab/lab-runc" --default-runtime "$RUNTIME")
fi
nohup dockerd "${args[@]}" >"$CACHE/dockerd.log" 2>&1 &
pid=$!
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then echo "$pid"; exit 0; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 1
done
echo "error: dockerd did not answer within 60 s; its log: $CACHE/dockerd.log" >&2
tail -n 5 "$CACHE/dockerd.log" >&2 || true
exit 1
