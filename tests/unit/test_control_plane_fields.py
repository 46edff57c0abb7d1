"""The team control-plane allow-list against Kamaji's CRD: every field of the spec judged once,
no judgment of a field the CRD lacks, every refused field's default the CRD's own, and the
admission policy built from it (issue: the policy was a deny-list of four fields)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from components.config.model import TeamSlot
from components.config.versions import KONNECTIVITY_VERSION
from components.platform.control_plane_fields import (
    ABSENT,
    HELD,
    MAX_CONTROL_PLANE_REPLICAS,
    OWN,
    REFUSED,
    SPEC,
    Judgment,
    equals,
    judgments,
    present,
    refusal,
    refusals,
)
from components.platform.team_access import (
    CONTAINER_LIMITS,
    CONTROL_PLANE_CONTAINERS,
    CONTROL_PLANE_QUOTA,
    control_plane_policy,
)
from tests.support.kamaji_crd import spec_schema

SLOT = TeamSlot(name="team-a", api_port=31443, konnectivity_port=31132)


def schema_fields(schema: dict[str, Any], path: str = "spec") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property of an object schema, by dotted path (array items' properties under `path[]`)."""
    for key, sub in (schema.get("properties") or {}).items():
        yield f"{path}.{key}", sub
        yield from schema_fields(sub, f"{path}.{key}")
    if schema.get("type") == "array" and "items" in schema:
        yield from schema_fields(schema["items"], f"{path}[]")


def judged_at(path: str, judged: dict[str, Judgment]) -> str | None:
    """The judged field that covers `path` (itself or an ancestor), or the path itself when its
    children are judged one by one; None when nobody judged it."""
    if any(j.startswith(path + ".") for j in judged):
        return path
    parts = path.replace("[]", "").split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in judged:
            return ".".join(parts[:i])
    return None


def test_every_field_of_kamajis_spec_is_judged():
    judged = dict(judgments())
    unjudged = [path for path, _ in schema_fields(spec_schema()) if judged_at(path, judged) is None]
    assert judged_at("spec.controlPlane.deployment.registrySettings.registry", judged) is not None
    assert unjudged == [], (
        f"fields of Kamaji's TenantControlPlane nobody judged in control_plane_fields.SPEC: {unjudged}"
    )


def test_every_judgment_names_a_field_of_the_crd():
    fields = {path for path, _ in schema_fields(spec_schema())}
    assert [path for path, _ in judgments() if path not in fields] == []


def test_a_judgment_is_a_whole_field_or_its_children_never_both():
    """A field judged whole has no judged children (each field is judged once)."""
    paths = [path for path, _ in judgments()]
    assert [p for p in paths if any(q.startswith(p + ".") for q in paths)] == []


def crd_default(path: str, schema: dict[str, Any]) -> Any:
    """What the CRD's defaulting writes at `path`: its own default, else its parent's default's key."""
    node, parent_default = schema, ABSENT
    for key in path.split(".")[1:]:
        parent_default = node.get("default", ABSENT)
        node = node["properties"][key]
    if "default" in node:
        return node["default"]
    if isinstance(parent_default, dict) and key in parent_default:
        return parent_default[key]
    return ABSENT


def test_refused_fields_are_held_at_the_crds_own_defaults():
    """A defaulted field is present on every object: refusing it outright would refuse them all."""
    schema = spec_schema()
    wrong = {
        path: (j.default, crd_default(path, schema))
        for path, j in judgments()
        if j.verdict == REFUSED and j.default != crd_default(path, schema)
    }
    assert wrong == {}


def test_defaulted_fields_refused_whole_have_no_defaults_below():
    """A refused field with a default object must be judged key by key (registrySettings), or the
    rule `!has` would refuse every object the CRD defaults."""
    schema = spec_schema()
    for path, j in judgments():
        if j.verdict == REFUSED and j.default is ABSENT:
            assert crd_default(path, schema) is ABSENT, path


def rules(team: str = "team-a") -> dict[str, str]:
    policy = control_plane_policy(SLOT, "default", "gpu-tenancy")
    return {v["message"]: v["expression"] for v in policy["validations"]}


def test_policy_has_one_named_rule_per_refused_field():
    messages = list(rules())
    for path, j in judgments():
        if j.verdict == REFUSED:
            (message,) = [m for m in messages if f"{path} is not allowed" in m]
            assert message.startswith("team team-a's control plane: ") and j.why in message


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("spec.controlPlane.gateway", "!(has(object.spec.controlPlane) && has(object.spec.controlPlane.gateway))"),
        ("spec.dataStoreOverrides", "!(has(object.spec.dataStoreOverrides))"),
    ],
)
def test_refusal_tests_each_parent_first(path, expected):
    assert refusal(path, Judgment(REFUSED, "x")) == expected


def test_refusal_of_a_defaulted_field_allows_its_default():
    rule = refusal("spec.controlPlane.deployment.serviceAccountName", Judgment(REFUSED, "x", default="default"))
    assert rule.endswith("|| object.spec.controlPlane.deployment.serviceAccountName == 'default'")
    assert refusal("spec.networkProfile.allowAddressAsExternalIP", Judgment(REFUSED, "x", default=False)).endswith(
        "== false"
    )


def test_schema_held_by_equality_not_a_suffix():
    """Team `a`'s rule names its own schema whole: `..._team_a` (team-a's) no longer matches."""
    (expression,) = [e for m, e in rules().items() if "dataStoreSchema" in m]
    assert "== 'gpu_tenancy_team_a_team_a'" in expression and "endsWith" not in expression
    a = control_plane_policy(TeamSlot(name="a", api_port=31445, konnectivity_port=31134), "default", "gpu-tenancy")
    (a_rule,) = [v["expression"] for v in a["validations"] if "dataStoreSchema" in v["message"]]
    assert "== 'gpu_tenancy_a_a'" in a_rule and "team_a" not in a_rule


def test_held_fields_have_a_rule_each():
    held = [path for path, j in judgments() if j.verdict == HELD]
    text = " ".join(rules())
    assert [p for p in held if p not in text] == []


SERVER_VERSION = "spec.addons.konnectivity.server.version"


def test_the_konnectivity_server_version_is_held_to_the_pinned_one():
    """Every tenant's spec names it (Kamaji's own pick, v0.<minor>.0, is not published for every
    minor): held to the version the platform mirrors and builds, no longer refused; the agent
    runs on the team's own workers and stays the team's."""
    judged = dict(judgments())
    assert judged[SERVER_VERSION].verdict == HELD and KONNECTIVITY_VERSION in judged[SERVER_VERSION].why
    assert judged["spec.addons.konnectivity.agent"].verdict == OWN
    assert judged["spec.addons.konnectivity.server.image"].verdict == REFUSED
    assert SERVER_VERSION not in [path for path, _, _ in refusals()]
    assert not [m for m in rules() if f"{SERVER_VERSION} is not allowed" in m]


def test_the_policy_holds_the_konnectivity_server_to_the_pinned_version():
    """One rule, naming the field and the value, true only when the field is present and equal."""
    (message, expression), *more = [(m, e) for m, e in rules().items() if SERVER_VERSION in m]
    assert more == []
    assert message == (
        f"team team-a's control plane: {SERVER_VERSION} must be 'v0.36.0' "
        "(the Konnectivity server image the platform mirrors and builds)"
    )
    assert expression == equals(SERVER_VERSION, KONNECTIVITY_VERSION)
    assert expression == (
        "has(object.spec.addons) && has(object.spec.addons.konnectivity) && "
        "has(object.spec.addons.konnectivity.server) && has(object.spec.addons.konnectivity.server.version) && "
        "object.spec.addons.konnectivity.server.version == 'v0.36.0'"
    )


def test_policy_judges_the_teams_own_requests():
    policy = control_plane_policy(SLOT, "default", "gpu-tenancy")
    (condition,) = policy["matchConditions"]
    assert (
        condition["expression"] == "request.userInfo.username == 'system:serviceaccount:tenant-team-a:gpu-tenancy-team'"
    )


def test_quota_holds_the_replica_cap_through_a_rollout():
    """A rollout at the replica cap (100 % surge) fits, its containers at LimitRange's defaults;
    memory limits are bounded, not only requests (limits are what a pod may really use)."""
    surged = 2 * MAX_CONTROL_PLANE_REPLICAS
    assert int(CONTROL_PLANE_QUOTA["pods"]) >= surged
    default = int(CONTAINER_LIMITS["default"]["memory"].removesuffix("Gi"))
    assert int(CONTROL_PLANE_QUOTA["limits.memory"].removesuffix("Gi")) == surged * CONTROL_PLANE_CONTAINERS * default
    assert CONTROL_PLANE_QUOTA["count/tenantcontrolplanes.kamaji.clastix.io"] == "1"


def test_present_guards_every_level():
    assert present("spec.a.b") == "has(object.spec.a) && has(object.spec.a.b)"


def test_spec_tree_is_only_judgments_and_subtrees():
    def walk(tree: Any) -> None:
        for node in tree.values():
            assert isinstance(node, Judgment | dict)
            if isinstance(node, dict):
                walk(node)

    walk(SPEC)
