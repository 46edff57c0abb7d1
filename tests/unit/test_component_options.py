"""Components take Pulumi's own options: `provider` reaches their children by inheritance, and
`depends_on` is handed to the children that must wait (components.platform.component_options).
Shown on the graphs of the shipped stacks: every Kubernetes object lands on the cluster its
component was given, and what a component was told to wait for, its children wait for."""

from __future__ import annotations

import ast
from pathlib import Path

import pulumi
import pytest

from components.domain.names import bootstrap_provider, tenant_provider
from components.platform.component_options import waits_for
from tests.support.harness import load_config_file, provider_name, run_program

ROOT = Path(__file__).resolve().parents[2]
TENANTS = ("team-a", "team-b")


class _Res(pulumi.CustomResource):
    def __init__(self) -> None:  # never registered: only its type matters here
        pass


def test_waits_for_reads_what_a_component_was_told_to_wait_for():
    a, b = _Res(), _Res()
    assert waits_for(None) == []
    assert waits_for(pulumi.ResourceOptions()) == []
    assert waits_for(pulumi.ResourceOptions(depends_on=a)) == [a]
    assert waits_for(pulumi.ResourceOptions(depends_on=[a, b])) == [a, b]
    # An Output of resources cannot be handed to children as it is: refused, with the reason.
    with pytest.raises(TypeError, match="a resource or a list of resources"):
        waits_for(pulumi.ResourceOptions(depends_on=pulumi.Output.from_input([a])))


def test_no_args_class_carries_a_provider_or_depends_on():
    """Those are resource options: a component's Args say what it builds, not where or after what."""
    found = []
    for path in sorted((ROOT / "components").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Args"):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        field = stmt.target.id
                        if field in ("depends_on", "provider") or field.endswith("_provider"):
                            found.append(f"{path.relative_to(ROOT)}: {node.name}.{field}")
    assert not found, found


@pytest.fixture(scope="module")
def dev():
    return run_program(load_config_file(ROOT / "Pulumi.dev.yaml"))


def ancestors(rec, reg) -> list[str]:
    """The names of a registration's parents, nearest first."""
    by_urn = {r.urn: r for r in rec.registrations}
    out, parent = [], reg.parent
    while parent in by_urn:
        out.append(by_urn[parent].name)
        parent = by_urn[parent].parent
    return out


@pytest.mark.parametrize("team", TENANTS)
def test_every_kubernetes_object_of_a_tenant_is_on_the_cluster_its_component_was_given(dev, team):
    """In a GpuTenant: the control plane's objects on the management cluster (the tenant
    component's provider), the automation identity's on the super-admin's bootstrap provider,
    everything else on the tenant through its automation identity."""
    checked = 0
    for reg in dev.registrations:
        if not reg.custom or not reg.type.startswith("kubernetes:"):
            continue
        chain = ancestors(dev, reg)
        if team not in chain:
            continue
        if f"{team}-cp-automation" in chain:
            expected = bootstrap_provider(team)
        elif f"{team}-cp" in chain:
            expected = "management-k8s"
        else:
            expected = tenant_provider(team)
        assert provider_name(reg) == expected, f"{reg.name}: on {provider_name(reg)}, not {expected}"
        checked += 1
    assert checked > 20


@pytest.mark.parametrize("team", TENANTS)
def test_what_a_component_waits_for_its_children_wait_for(dev, team):
    """Each tenant waits for Kamaji's DataStore (its TCP is deleted before it); HAMi's chart for
    the last worker settled; each workload's objects for HAMi's gates and the quota."""
    datastore = dev.named("kamaji-datastore").urn
    tcp = dev.named(f"{team}-cp-tcp")
    assert datastore in tcp.dependencies
    release = dev.named(f"{team}-hami-release")
    last_settled = [
        r for r in dev.registrations if r.name.startswith(f"{team}-worker-") and r.name.endswith("-settled")
    ]
    assert last_settled and last_settled[-1].urn in release.dependencies
    gates = {dev.named(f"{team}-hami-webhook-probe").urn, dev.named(f"{team}-hami-registration").urn}
    workloads = [r for r in dev.registrations if r.type.startswith("kubernetes:") and "GpuWorkload" in r.urn]
    assert workloads
    for workload in workloads:
        if team in ancestors(dev, workload):
            assert gates <= set(workload.dependencies), workload.name


def test_a_platform_s_team_access_is_made_after_kamaji():
    """A TeamAccess given `depends_on` (Kamaji's release): every object of it waits for it."""
    rec = run_program(load_config_file(ROOT / "Pulumi.platform.yaml"), stack="platform")
    kamaji = rec.named("kamaji-kamaji").urn
    objects = [r for r in rec.registrations if r.custom and any(a.startswith("team-") for a in ancestors(rec, r))]
    assert len(objects) >= 10
    for reg in objects:
        assert kamaji in reg.dependencies, reg.name
