#!/usr/bin/env bash
# The main job: `pulumi up` of the dev stack on a local file backend and the local Docker engine.
# Sets up .venv, logs in to a file backend under .pulumi-state/, creates the dev stack on first
# use, then runs the update. Uses the pulumi on PATH; on a machine without one (offline), the
# CLI is built from Go modules by tools/build.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
bash scripts/setup-venv.sh requirements.txt
if ! command -v pulumi >/dev/null 2>&1; then
  # shellcheck disable=SC1090
  . "$(bash tools/build.sh --print-env | tail -n 1)"
fi
if ! docker info >/dev/null 2>&1; then
  echo "error: no Docker engine answers (docker info failed); the dev stack runs its clusters in Docker" >&2
  exit 1
fi
mkdir -p .pulumi-state
export PULUMI_BACKEND_URL="file://$ROOT/.pulumi-state"
if [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  echo "note: PULUMI_CONFIG_PASSPHRASE is not set; using an empty passphrase for this local lab" >&2
  export PULUMI_CONFIG_PASSPHRASE=""
fi
pulumi stack select dev 2>/dev/null || pulumi stack init dev --secrets-provider passphrase
pulumi up --yes --stack dev "$@"
