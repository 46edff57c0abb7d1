"""Running the gpu-quotas pack's policies in-process, as the engine would: two tenants' config,
objects as the engine passes them (props, a provider reaching a tenant's cluster), and the
violations a policy reports. Shared by the policy tests and the engine tier."""

from __future__ import annotations

import sys
from pathlib import Path

from pulumi_policy import (
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "policy"))
import gpu_objects as go  # noqa: E402
import gpu_policies as gp  # noqa: E402
import gpu_tenants as gt  # noqa: E402

TEAM_A = {
    "name": "team-a",
    "pools": [{"name": "worker", "nodes": 1}],
    "gpu": {"model": "A100-80GB", "cardsPerNode": 1},
    "quota": {"gpus": 10, "gpumemMb": 81920, "gpucoresPercent": 100},
}
TEAM_B = {
    "name": "team-b",
    "gpu": {"model": "L4", "cardsPerNode": 4},
    "quota": {"gpus": 40, "gpumemMb": 92136, "gpucoresPercent": 400},
}
# The pack's config has the stack config's own shape: {"tenants": [<as in gpu-tenancy:tenants>]}.
CONFIG = {"tenants": [TEAM_A, TEAM_B]}
OPTS = PolicyResourceOptions(False, [], False, [], None, [])
POLICY = {p.name: p for p in gp.POLICIES}


def container(limits: dict, name: str = "main", where: str = "limits") -> dict:
    return {"name": name, "image": "busybox", "resources": {where: limits}}


def pod_spec(*containers: dict, init: list | None = None) -> dict:
    spec = {"containers": list(containers)}
    if init:
        spec["initContainers"] = init
    return spec


def obj(kind: str, name: str, spec: dict, tenant: str = "team-a", replicas: int | None = None) -> tuple[str, dict]:
    typ = next(t for t in go.POD_SPEC_PATHS if t.endswith(":" + kind))
    meta = {"name": name, "labels": {gt.TENANT_LABEL: tenant}}
    if kind == "Pod":
        return typ, {"metadata": meta, "spec": spec}
    template = {"metadata": {}, "spec": spec}
    if kind == "CronJob":
        return typ, {
            "metadata": meta,
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}},
        }
    body: dict = {"template": template}
    if replicas is not None:
        body["replicas" if kind != "Job" else "parallelism"] = replicas
    return typ, {"metadata": meta, "spec": body}


# The tenants' API servers: the default management address, NodePorts 31443 + their index.
ENDPOINTS = {"team-a": "https://172.30.0.2:31443", "team-b": "https://172.30.0.2:31444"}
UNSET = object()


def provider(name: str, props: dict | None = None) -> PolicyProviderResource:
    """A Kubernetes provider as the pack sees it; `team-x` reaches that tenant's API server (the
    `cluster` input the program sets), any other name has no known cluster unless props say."""
    if props is None:
        props = {"cluster": ENDPOINTS[name]} if name in ENDPOINTS else {}
    return PolicyProviderResource(
        "pulumi:providers:kubernetes", props, f"urn:pulumi:s::p::pulumi:providers:kubernetes::{name}", name
    )


def via_label(props: dict) -> PolicyProviderResource | None:
    """By default an object goes through the provider of the tenant its label names."""
    label = (props.get("metadata") or {}).get("labels", {}).get(gt.TENANT_LABEL)
    return provider(label) if label in ENDPOINTS else None


def run_resource(policy: str, typ: str, props: dict, config: dict = CONFIG, via: object = UNSET) -> list[str]:
    out: list[str] = []
    given = via_label(props) if via is UNSET else via
    args = ResourceValidationArgs(typ, props, f"urn:pulumi:s::p::{typ}::x", "x", OPTS, given, config)
    POLICY[policy].validate(args, lambda msg, urn=None: out.append(msg))
    return out


def run_stack(policy: str, objs: list[tuple[str, dict]], config: dict = CONFIG) -> list[str]:
    out: list[str] = []
    resources = [
        PolicyResource(
            t,
            p,
            f"urn:pulumi:s::p::{t}::{p['metadata']['name']}",
            p["metadata"]["name"],
            OPTS,
            via_label(p),
            None,
            [],
            {},
        )
        for t, p in objs
    ]
    POLICY[policy].validate(StackValidationArgs(resources, config), lambda msg, urn=None: out.append(msg))
    return out
