"""What one previewed object asks for: the kinds the rulebook counts, and everything else that
mentions `nvidia.com/`, which must declare its usage or is refused (the pack fails closed).

Counted kinds carry a pod template: Pod, ReplicationController, ReplicaSet, Deployment,
StatefulSet, DaemonSet (once per node of the tenant), Job (its parallelism), CronJob (its Job's
parallelism; one Job at a time, so concurrencyPolicy Forbid or Replace) and PodTemplate (one pod),
each also as its server-side-apply Patch type. Any other object whose inputs name an
`nvidia.com/` resource (a key, or a YAML key inside a string: a CustomResource, a Helm release's
values, a ConfigGroup's YAML) is counted only by its declaration: the annotation
`gpu-tenancy/gpu-usage` (for a Helm release, the same key at the top of its values) holding
`{"gpus": N, "gpumemMb": N, "gpucoresPercent": N}`, the totals it may run at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from components.domain.names import DECLARED_USAGE_ANNOTATION, FAIL_ON_PENDING_ANNOTATION, TENANT_LABEL
from components.domain.requests import ANY_CARD, CardTypes, Quota

_TEMPLATE = ("spec", "template", "spec")
_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    # type (without the Patch suffix): (where the pod spec sits, where its replica count sits)
    "kubernetes:core/v1:Pod": (("spec",), None),
    "kubernetes:core/v1:PodTemplate": (("template", "spec"), None),
    "kubernetes:core/v1:ReplicationController": (_TEMPLATE, ("spec", "replicas")),
    "kubernetes:apps/v1:Deployment": (_TEMPLATE, ("spec", "replicas")),
    "kubernetes:apps/v1:StatefulSet": (_TEMPLATE, ("spec", "replicas")),
    "kubernetes:apps/v1:DaemonSet": (_TEMPLATE, None),
    "kubernetes:apps/v1:ReplicaSet": (_TEMPLATE, ("spec", "replicas")),
    "kubernetes:batch/v1:Job": (_TEMPLATE, ("spec", "parallelism")),
    "kubernetes:batch/v1:CronJob": (
        ("spec", "jobTemplate", "spec", "template", "spec"),
        ("spec", "jobTemplate", "spec", "parallelism"),
    ),
}
POD_SPEC_PATHS = {t: path for t, (path, _) in _KINDS.items()} | {f"{t}Patch": p for t, (p, _) in _KINDS.items()}
REPLICA_PATHS = {t: r for t, (_, r) in _KINDS.items() if r} | {f"{t}Patch": r for t, (_, r) in _KINDS.items() if r}
# Where a kind whose rollout may surge (gpu.rollouts) keeps its strategy.
STRATEGY_PATHS = {"Deployment": ("spec", "strategy"), "DaemonSet": ("spec", "updateStrategy")}
# Subtrees that select or describe, never ask: a GPU type annotation, a node label.
_NOT_ASKING = frozenset({"annotations", "labels", "nodeSelector", "matchLabels"})
# `nvidia.com/<name>:` as a YAML (or JSON) key inside text.
_YAML_KEY = re.compile(r"""(?:^|[\s{,'"])nvidia\.com/[A-Za-z0-9._-]+['"]?\s*:""", re.MULTILINE)
_DECLARED_KEYS = {"gpus": "gpus", "gpumemMb": "gpumem_mb", "gpucoresPercent": "gpucores"}


def kind_of(resource_type: str) -> str:
    return resource_type.rsplit(":", 1)[1].removesuffix("Patch")


def safe(fn: Callable[[], Any], unknown: list[str], what: str) -> Any:
    try:
        return fn()
    except UnknownValueError:
        unknown.append(what)
        return None


def get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


def mentions_gpu(value: Any, unknown: list[str], where: str = "") -> bool:
    """Whether the inputs name an nvidia.com/ resource anywhere they could ask for one."""
    try:
        if isinstance(value, Mapping):
            for k in value:
                if str(k).startswith("nvidia.com/"):
                    return True
                if str(k) in _NOT_ASKING:
                    continue
                if mentions_gpu(value[k], unknown, f"{where}.{k}" if where else str(k)):
                    return True
            return False
        if isinstance(value, str):
            return bool(_YAML_KEY.search(value))
        if isinstance(value, Sequence):
            return any(mentions_gpu(v, unknown, f"{where}[{i}]") for i, v in enumerate(value))
    except UnknownValueError:
        unknown.append(where or "inputs")
    return False


class DeclarationError(ValueError):
    pass


def declared_usage(text: Any) -> Quota:
    """The totals a declaration gives; DeclarationError says what is wrong with it."""
    try:
        doc = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        raise DeclarationError(f"{DECLARED_USAGE_ANNOTATION} is not JSON: {text!r}") from None
    if not isinstance(doc, Mapping) or set(doc) - set(_DECLARED_KEYS) or not doc:
        raise DeclarationError(
            f"{DECLARED_USAGE_ANNOTATION} must be a JSON object with gpus, gpumemMb and gpucoresPercent, got {text!r}"
        )
    values = {}
    for key, attr in _DECLARED_KEYS.items():
        v = doc.get(key, 0)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise DeclarationError(f"{DECLARED_USAGE_ANNOTATION}: {key} must be a whole number >= 0, got {v!r}")
        values[attr] = v
    return Quota(**values)


@dataclass
class Workload:
    """What one object asks for: its containers' resources times its replicas, or (for a kind
    the rulebook cannot count) its declaration, or why it can be neither."""

    kind: str
    name: str
    replicas: int
    containers: list[tuple[str, Mapping[str, Any]]]
    must_fit: bool = True
    label: str | None = None
    unknown: list[str] = field(default_factory=list)
    counted: bool = True
    # An uncounted kind: what it declared (None: nothing), or why the declaration is refused.
    declared: Quota | None = None
    refusal: str = ""
    mentions: bool = False
    # spec.strategy (Deployment) or spec.updateStrategy (DaemonSet), as given; None: the default.
    strategy: Any = None
    # The pod's nvidia.com/use-gputype and nouse-gputype (its template's annotations); unknown at
    # preview: any card (the least it can ask).
    types: CardTypes = ANY_CARD

    @property
    def asks_for_gpu(self) -> bool:
        if not self.counted:
            return self.mentions
        return any(str(k).startswith("nvidia.com/") for _, res in self.containers for k in res)


def _meta(props: Mapping[str, Any], name: str, unknown: list[str]) -> tuple[str, str | None, Mapping[str, Any]]:
    obj_name = safe(lambda: get(props, "metadata", "name"), unknown, "metadata.name") or name
    labels = safe(lambda: get(props, "metadata", "labels"), unknown, "metadata.labels")
    label = labels.get(TENANT_LABEL) if isinstance(labels, Mapping) else None
    annotations = safe(lambda: get(props, "metadata", "annotations"), unknown, "metadata.annotations")
    return (
        str(obj_name),
        label if isinstance(label, str) else None,
        annotations if isinstance(annotations, Mapping) else {},
    )


def _uncounted(resource_type: str, props: Mapping[str, Any], name: str) -> Workload | None:
    unknown: list[str] = []
    if not mentions_gpu(props, unknown):
        return Workload(resource_type, name, 1, [], counted=False, unknown=unknown) if unknown else None
    obj_name, label, annotations = _meta(props, name, unknown)
    kind = resource_type.rsplit(":", 1)[-1]
    text = annotations.get(DECLARED_USAGE_ANNOTATION)
    if text is None:
        values = safe(lambda: get(props, "values"), unknown, "values")
        text = values.get(DECLARED_USAGE_ANNOTATION) if isinstance(values, Mapping) else None
    w = Workload(kind, obj_name, 1, [], False, label, unknown, counted=False, mentions=True)
    if text is None:
        w.refusal = (
            f"its inputs name nvidia.com/ resources, but the pack cannot count a {resource_type}; declare what it "
            f'runs at most at once with the annotation {DECLARED_USAGE_ANNOTATION}: \'{{"gpus": N, "gpumemMb": N, '
            '"gpucoresPercent": N}\' (for a Helm release, that key at the top of its values)'
        )
    else:
        try:
            w.declared = declared_usage(text)
        except DeclarationError as exc:
            w.refusal = str(exc)
    return w


def workload_of(resource_type: str, props: Mapping[str, Any], name: str) -> Workload | None:
    """The object's GPU ask: its pod template's containers (init containers too) and replicas for
    a counted kind; its declaration (or why there is none) for any other that mentions GPUs."""
    path = POD_SPEC_PATHS.get(resource_type)
    if path is None:
        if resource_type.startswith("pulumi:providers:"):
            return None
        return _uncounted(resource_type, props, name)
    unknown: list[str] = []
    kind = kind_of(resource_type)
    obj_name, label, annotations = _meta(props, name, unknown)
    must_fit = annotations.get(FAIL_ON_PENDING_ANNOTATION) != "false"
    replicas: Any = 1
    if resource_type in REPLICA_PATHS:
        where = ".".join(REPLICA_PATHS[resource_type])
        replicas = safe(lambda: get(props, *REPLICA_PATHS[resource_type]), unknown, where)
        if replicas is None:
            replicas = 1  # the API's default, and the least a value unknown at preview can be
    refusal = ""
    if kind == "CronJob":
        policy = safe(lambda: get(props, "spec", "concurrencyPolicy"), unknown, "spec.concurrencyPolicy")
        if policy not in ("Forbid", "Replace") and "spec.concurrencyPolicy" not in unknown:
            refusal = (
                f"concurrencyPolicy {policy or 'Allow (the default)'} lets any number of its Jobs run at once, "
                "which no quota can count; set concurrencyPolicy: Forbid (or Replace)"
            )
    strategy = None
    if kind in STRATEGY_PATHS:
        where = ".".join(STRATEGY_PATHS[kind])
        strategy = safe(lambda: get(props, *STRATEGY_PATHS[kind]), unknown, where)
    spec = safe(lambda: get(props, *path), unknown, ".".join(path))
    containers: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(spec, Mapping):
        for group in ("initContainers", "containers", "ephemeralContainers"):
            items = safe(lambda g=group: spec.get(g), unknown, f"{'.'.join(path)}.{group}") or []
            if not isinstance(items, Sequence):
                continue
            for i, c in enumerate(items):
                cname = safe(lambda c=c: c.get("name"), unknown, f"{group}[{i}].name") or f"{group}[{i}]"
                limits = safe(lambda c=c: get(c, "resources", "limits"), unknown, f"{cname}.resources.limits")
                requests = safe(lambda c=c: get(c, "resources", "requests"), unknown, f"{cname}.resources.requests")
                res = limits if isinstance(limits, Mapping) and limits else requests
                if isinstance(res, Mapping):
                    containers.append((str(cname), res))
    pod_meta = (*path[:-1], "metadata", "annotations")
    pod_annotations = annotations if len(path) == 1 else safe(lambda: get(props, *pod_meta), [], ".".join(pod_meta))
    types = CardTypes.from_annotations(pod_annotations) if isinstance(pod_annotations, Mapping) else ANY_CARD
    return Workload(
        kind,
        obj_name,
        int(replicas),
        containers,
        must_fit,
        label,
        unknown,
        refusal=refusal,
        strategy=strategy,
        types=types,
    )
