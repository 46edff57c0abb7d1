#!/usr/bin/env bash
# The main job: `pulumi up` of the dev stack on a local file backend and the local Docker engine.
# Refuses a passphrase variable set but empty, checks for a Docker engine (nothing slow happens
# without one), sets up .venv, logs in to
# a file backend under .pulumi-state/, creates the dev stack on first use, then runs the update.
# Secrets in the state are encrypted with a passphrase kept in .pulumi-passphrase (made once,
# random, mode 0600, git-ignored) unless PULUMI_CONFIG_PASSPHRASE(_FILE) is set. Builds the lab's
# node images the stack names and the engine lacks (tools/images/build.sh). Uses the pulumi
# on PATH; on a machine without one (offline), the CLI is built from Go modules by tools/build.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
for var in PULUMI_CONFIG_PASSPHRASE PULUMI_CONFIG_PASSPHRASE_FILE; do
  # Set but empty: Pulumi would take the empty value (secrets under an empty passphrase).
  if [ -n "${!var+set}" ] && [ -z "${!var}" ]; then
    echo "error: $var is set but empty; unset it (the script then keeps a random passphrase in" \
      ".pulumi-passphrase) or give it a value" >&2
    exit 1
  fi
done
if ! docker info >/dev/null 2>&1; then
  echo "error: no Docker engine answers (docker info failed); the dev stack runs its clusters in Docker" >&2
  exit 1
fi
if [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  if [ ! -s .pulumi-passphrase ]; then
    (umask 077 && python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > .pulumi-passphrase)
    echo "note: created .pulumi-passphrase (random, mode 0600): it decrypts the dev stack's secrets; keep it" >&2
  fi
  chmod 600 .pulumi-passphrase
  export PULUMI_CONFIG_PASSPHRASE_FILE="$ROOT/.pulumi-passphrase"
fi
bash scripts/setup-venv.sh requirements.txt
if ! command -v pulumi >/dev/null 2>&1; then
  # shellcheck disable=SC1090
  . "$(bash tools/build.sh --print-env | tail -n 1)"
fi
# The lab's own node images the stack names (the management node's, and workers' where
# cluster.nodeImage is the lab's) are built here, not pulled: tools/images/build.sh, cached.
repository=$(.venv/bin/python -c 'from components.config.versions import LAB_NODE_REPOSITORY as r; print(r)')
for ref in $(.venv/bin/python -m components.reports.image_list --stack dev --refs --pulled-by engine); do
  case "${ref#docker.io/}" in
    "$repository":*)
      image=${ref#docker.io/}
      docker image inspect "$image" >/dev/null 2>&1 || bash tools/images/build.sh node --kubernetes "${image##*:}" ;;
  esac
done
mkdir -p .pulumi-state
export PULUMI_BACKEND_URL="file://$ROOT/.pulumi-state"
pulumi stack select dev 2>/dev/null || pulumi stack init dev --secrets-provider passphrase
# Kubelets started by the update rewrite this host's kernel tunables (docs/lab.md, The lab's node image):
# they are put back while it runs, where this user may write them.
if [ -w /proc/sys/kernel/panic ]; then
  bash tools/lab/tunables-guard.sh &
  guard=$!
  trap 'kill "$guard" 2>/dev/null || true' EXIT
fi
pulumi up --yes --stack dev "$@"
