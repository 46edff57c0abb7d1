"""What the shipped platform asks of its management node's CPU: the requests the scheduler reserves
for kubeadm's own pods, Kamaji, each team's etcd and each team's control-plane pod (LimitRange's
default per container: Kamaji names no requests), one rollout's surge included, fit the 2-core
host the lab runs on. With 100m per container they did not: on the platform lab a second team's
control-plane rollout stayed Pending with `Insufficient cpu`."""

from __future__ import annotations

import yaml

from components.platform.kamaji import kamaji_values
from components.platform.team_access import CONTAINER_LIMITS, CONTROL_PLANE_CONTAINERS
from components.platform.team_datastore import ETCD_REQUESTS
from tests.support.docker_lab import ROOT

# kubeadm v1.35's static pods (etcd, kube-apiserver, -controller-manager, -scheduler) and its two
# CoreDNS replicas, as `kubectl describe node` lists them on the lab's management node.
KUBEADM_MILLICORES = 100 + 250 + 200 + 100 + 2 * 100
LAB_HOST_MILLICORES = 2000


def millicores(value: str) -> int:
    return int(value.removesuffix("m")) if value.endswith("m") else int(float(value) * 1000)


def test_the_shipped_platforms_teams_fit_a_2_core_management_node_through_a_rollout():
    teams = yaml.safe_load((ROOT / "Pulumi.platform.yaml").read_text())["config"]["gpu-tenancy:teams"]
    per_pod = CONTROL_PLANE_CONTAINERS * millicores(CONTAINER_LIMITS["defaultRequest"]["cpu"])
    kamaji = millicores(kamaji_values()["resources"]["requests"]["cpu"])
    etcds = len(teams) * millicores(ETCD_REQUESTS["cpu"])
    steady = KUBEADM_MILLICORES + kamaji + etcds + len(teams) * per_pod
    assert steady + per_pod <= LAB_HOST_MILLICORES, (steady, per_pod)
