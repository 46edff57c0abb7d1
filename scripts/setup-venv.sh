#!/usr/bin/env bash
# Creates .venv (the virtualenv Pulumi.yaml names) and installs the given requirements file.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
req=${1:-requirements.txt}
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  python3 -m venv "$ROOT/.venv"
fi
stamp="$ROOT/.venv/.installed-$(cat "$ROOT/$req" "$ROOT/requirements.txt" "$ROOT/policy/requirements.txt" "$ROOT/components/ops/requirements.txt" | sha256sum | cut -c1-16)"
if [ ! -e "$stamp" ]; then
  "$ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$ROOT/$req"
  touch "$stamp"
fi
