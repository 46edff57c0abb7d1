#!/usr/bin/env bash
# The tests: lint, unit and policy tests, and the integration tier on real upstream binaries
# (built or reused by tools/build.sh). End-to-end tests skip, saying why, without Docker.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
bash scripts/setup-venv.sh requirements-dev.txt
bash tools/build.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest -ra "$@"
