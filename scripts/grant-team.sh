#!/usr/bin/env bash
# The platform owner gives a team stack its grant to the management cluster: a bound token of the
# team's own ServiceAccount (made by the platform stack), valid HOURS (default 720), set as the
# team stack's secret config `managementToken`, and where the management API server is and its CA
# (`managementServer`, `managementCa`). The admin kubeconfig and the token go through pipes only:
# never a file, never an argument.
#   scripts/grant-team.sh TEAM [HOURS]            # docker mode: the admin kubeconfig from the management
#                                                 # node (kubeadm's admin.conf), or the k3s container
#   MANAGEMENT_KUBECONFIG=admin.yaml scripts/grant-team.sh TEAM [HOURS]   # an adopted cluster
# Env: PLATFORM_STACK (default platform; docker mode reads its stack file here, not its state),
# TEAM_STACK (default TEAM), PULUMI_PROJECT_DIR (the team stack's project, default this one),
# PULUMI_BACKEND_URL and the passphrase as for the team stack's `up` (its backend, not the platform's).
# Run it again to renew (before the token expires); the team stack's next `up` uses the new one.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
team=${1:?usage: scripts/grant-team.sh TEAM [HOURS]}
hours=${2:-720}
platform=${PLATFORM_STACK:-platform}
stack=${TEAM_STACK:-$team}
platform_cluster() {
  .venv/bin/python - "$platform" <<'PY'
import sys

from components.config.load import load_stack_file
from components.config.problems import ConfigError
from components.config.stack_file import StackFileError, resolve

try:
    cluster = load_stack_file(resolve(sys.argv[1]).path, secrets_set=True).cluster
except (StackFileError, ConfigError) as exc:
    sys.exit(f"error: platform stack {sys.argv[1]}: {exc}")
print(cluster.name, cluster.management_ip)
PY
}
admin_kubeconfig() {
  if [ -n "${MANAGEMENT_KUBECONFIG:-}" ]; then
    cat "$MANAGEMENT_KUBECONFIG"
    return
  fi
  local lab ip
  read -r lab ip <<<"$platform_lab"
  if docker container inspect "$lab-management" >/dev/null 2>&1; then
    docker exec "$lab-management" cat /etc/kubernetes/admin.conf
  else
    docker exec "$lab-k3s" cat /etc/rancher/k3s/k3s.yaml | sed "s#https://127.0.0.1:6443#https://$ip:6443#"
  fi
}
if [ -z "${MANAGEMENT_KUBECONFIG:-}" ]; then
  # The lab's name and address from the platform's stack file, not its state: the backend `pulumi`
  # points at here is the team stack's, which need not hold the platform's stack.
  platform_lab=$(platform_cluster)
fi
admin=$(admin_kubeconfig)
tool() { printf '%s' "$admin" | .venv/bin/python -m components.kube.team_token "$@"; }
set_config() { pulumi --cwd "${PULUMI_PROJECT_DIR:-$ROOT}" config set --stack "$stack" "$@"; }
# The token first: a team the platform does not know stops here, before the stack is touched.
token=$(tool --team "$team" --hours "$hours")
printf '%s' "$token" | set_config --secret managementToken
unset token
tool --show server | set_config managementServer
tool --show ca | set_config managementCa
echo "team $team: managementToken (valid $hours h), managementServer and managementCa set on stack $stack" >&2
