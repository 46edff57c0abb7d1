#!/usr/bin/env bash
# The tests: lint, unit and policy tests, the integration tier on real upstream binaries (built or
# reused by tools/build.sh), and the Docker tier on the lab's node image and the management node's
# images (built or reused by tools/images/build.sh) where Docker is installed: an engine is started for
# the run where none answers, and stopped after it. End-to-end tests skip, saying why, without a
# live dev stack.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
bash scripts/setup-venv.sh requirements-dev.txt
bash tools/build.sh
started=""
if command -v dockerd >/dev/null 2>&1 || docker info >/dev/null 2>&1; then
  # A failure here is said once; the Docker tier then skips naming what is missing.
  if started=$(bash tools/lab/docker.sh); then
    trap '[ -z "$started" ] || { kill "$started"; wait "$started" 2>/dev/null || true; }' EXIT
    version=$(.venv/bin/python -c 'from components.config.versions import DEFAULT_TENANT_VERSION as v; print(v)')
    bash tools/images/build.sh node --kubernetes "$version" || echo "[test] the node image did not build" >&2
    # What the management node runs (kubeadm's images, the provisioner), pulled through the lab's
    # registry; the tenant kube-apiserver the mirror's test pulls is among them.
    bash tools/images/build.sh management || echo "[test] the management node's images did not build" >&2
  fi
else
  echo "[test] no Docker installed (apt-get install docker.io): the Docker tier will be skipped" >&2
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest -ra "$@"
