#!/usr/bin/env bash
# Creates .venv (the virtualenv Pulumi.yaml names), installs the given requirements file, and the
# project itself (editable, no dependencies) for its console script `gpu-tenancy`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
req=${1:-requirements.txt}
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  python3 -m venv "$ROOT/.venv"
fi
# A stamp per project root and requirements: a .venv linked into a copy of the project (the lab
# tier's) installs the project from the copy, which drops this root's stamps, so the next run
# here installs it from here again (its console script would name the copy's python otherwise).
root=$(printf '%s' "$ROOT" | sha256sum | cut -c1-8)
stamp="$ROOT/.venv/.installed-$root-$(cat "$ROOT/$req" "$ROOT/requirements.txt" "$ROOT/policy/requirements.txt" "$ROOT/components/controllers/release/requirements.txt" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -e "$stamp" ]; then
  "$ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$ROOT/$req"
  "$ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --editable "$ROOT"
  find "$ROOT/.venv/" -maxdepth 1 -name '.installed-*' ! -name ".installed-$root-*" -delete
  touch "$stamp"
fi
