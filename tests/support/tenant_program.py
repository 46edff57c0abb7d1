"""What the tenant-level test programs share: an adopted cluster (secret config `kubeconfig`)
and one tenant `team-a` with one A100 per node whose single workload is config `workload`,
read through the project's own config loader."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config.load import load_stack_config
from components.config.model import TenantConfig, WorkloadConfig


@dataclass
class AdoptedTenant:
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    tenant: TenantConfig
    workload: WorkloadConfig


def adopted_tenant(quota: dict[str, int]) -> AdoptedTenant:
    config = pulumi.Config()
    kubeconfig = config.require_secret("kubeconfig")
    tenant = {
        "name": "team-a",
        "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
        "quota": quota,
        "workloads": [config.require_object("workload")],
    }
    (t,) = load_stack_config(pulumi.get_project(), {"tenants": [tenant]}).tenants
    (w,) = t.workloads
    return AdoptedTenant(kubeconfig, k8s.Provider("adopted", kubeconfig=kubeconfig), t, w)
