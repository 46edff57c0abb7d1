"""What a team may write in its TenantControlPlane: every field of Kamaji's spec, judged.

A team's control plane runs as pods in the shared management cluster, so its spec is an
allow-list, not a list of known dangers. Each field of the CRD's `spec` (as of the pinned Kamaji)
is judged once, here:

- OWN: it shapes only the team's own tenant (its workers, its add-ons, its API server's flags
  that Kamaji manages);
- BOUNDED: it runs in the shared cluster but the namespace's ResourceQuota and LimitRange bound it;
- HELD: a rule of its own holds it to one value (the platform's DataStore, the team's schema and
  NodePorts, NodePort service, a replica cap, the pinned Konnectivity server version);
- REFUSED: anything else (an image, an argument, a volume, a security context, a node placement or
  a service exposure of the team's choice in the shared cluster): absent, or at the value the
  CRD's defaulting writes. An object Kamaji writes back empty is judged key by key.

The CRD prunes unknown fields, so a spec holds only the fields judged here; a test walks Kamaji's
schema and fails on any field not judged (a Kamaji upgrade's new fields are judged before use).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from components.config.versions import KONNECTIVITY_VERSION

OWN = "own"
BOUNDED = "bounded"
HELD = "held"
REFUSED = "refused"

# More replicas than this would let one team's control plane crowd out the others'.
MAX_CONTROL_PLANE_REPLICAS = 3


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class Judgment:
    verdict: str
    why: str
    # What the CRD's defaulting writes here (the field is then present on every object).
    default: Any = ABSENT


def own(why: str) -> Judgment:
    return Judgment(OWN, why)


def bounded(why: str) -> Judgment:
    return Judgment(BOUNDED, why)


def held(why: str) -> Judgment:
    return Judgment(HELD, why)


def refused(why: str, default: Any = ABSENT) -> Judgment:
    return Judgment(REFUSED, why, default)


Tree = Mapping[str, "Judgment | Tree"]


def _metadata(why: str) -> Tree:
    """An `additionalMetadata` object: Kamaji writes it back empty (`{}`, a Go struct without
    omitempty, when it updates the whole object), so a team's next update carries it: its keys are
    what is refused, not the object."""
    return {"labels": refused(why), "annotations": refused(why)}


_IMAGE = "an image of the team's choice in the shared cluster"
_PLACEMENT = "placement on the shared cluster's nodes is the platform's"
_EXPOSURE = "what the shared cluster exposes is the platform's"
_WORKERS = "runs on the team's own workers"
_QUOTA = "bounded by the namespace's ResourceQuota and LimitRange"
_POD = "the control-plane pod's identity and privileges in the shared cluster"

SPEC: Tree = {
    "addons": {
        "coreDNS": own(_WORKERS),
        "kubeProxy": own(_WORKERS),
        "konnectivity": {
            "agent": own(_WORKERS),
            "server": {
                "port": held("the Konnectivity NodePort reserved for the team"),
                "image": refused(_IMAGE, default="registry.k8s.io/kas-network-proxy/proxy-server"),
                "version": held(
                    f"the Konnectivity version the platform mirrors and builds ({KONNECTIVITY_VERSION}), "
                    "which every tenant's spec names"
                ),
                "extraArgs": refused("arguments of the team's choice to a process in the shared cluster"),
                "resources": bounded(_QUOTA),
                "securityContext": refused(_POD),
            },
        },
    },
    "controlPlane": {
        "deployment": {
            "replicas": held(f"at most {MAX_CONTROL_PLANE_REPLICAS} replicas"),
            "resources": bounded(_QUOTA),
            "strategy": bounded("a rollout's extra pods are " + _QUOTA),
            "probes": own("the timing of the team's own control plane's probes"),
            "additionalContainers": refused("containers of the team's choice in the shared cluster"),
            "additionalInitContainers": refused("containers of the team's choice in the shared cluster"),
            "additionalVolumes": refused("volumes (host paths, other Secrets) in the shared cluster"),
            "additionalVolumeMounts": refused("volumes (host paths, other Secrets) in the shared cluster"),
            # Kamaji writes these two as empty objects: judged key by key.
            "additionalMetadata": _metadata("labels and annotations the shared cluster's controllers act on"),
            "podAdditionalMetadata": _metadata("pod labels that other Services select in the shared cluster"),
            "affinity": refused(_PLACEMENT),
            "nodeSelector": refused(_PLACEMENT),
            "tolerations": refused(_PLACEMENT),
            "topologySpreadConstraints": refused(_PLACEMENT),
            "automountServiceAccountToken": refused(_POD),
            "containerSecurityContexts": refused(_POD),
            "podSecurityContext": refused(_POD),
            "runtimeClassName": refused(_POD),
            "serviceAccountName": refused(_POD, default="default"),
            "extraArgs": refused("arguments of the team's choice to processes holding the DataStore's credentials"),
            "registrySettings": {
                "registry": refused(_IMAGE, default="registry.k8s.io"),
                "apiServerImage": refused(_IMAGE, default="kube-apiserver"),
                "controllerManagerImage": refused(_IMAGE, default="kube-controller-manager"),
                "schedulerImage": refused(_IMAGE, default="kube-scheduler"),
                "tagSuffix": refused(_IMAGE),
            },
        },
        "service": {
            "serviceType": held("a NodePort service on the team's reserved ports"),
            "additionalMetadata": _metadata(_EXPOSURE),
            "additionalPorts": refused(_EXPOSURE),
            "allocateLoadBalancerNodePorts": refused(_EXPOSURE),
        },
        "gateway": refused(_EXPOSURE + " (a gateway route may take another team's hostname)"),
        "ingress": refused(_EXPOSURE + " (an ingress may take another team's hostname)"),
    },
    "dataStore": held("the platform's DataStore"),
    "dataStoreSchema": held("the team's own keys, as the platform names them"),
    "dataStoreUsername": held("the team's own DataStore user, as the platform names it"),
    "dataStoreOverrides": refused("another DataStore for some of the tenant's resources"),
    "kubernetes": {
        "version": own("the tenant's version (the stack checks each step)"),
        "kubelet": own("the configuration of the team's own kubelets"),
        "admissionControllers": own("admission in the team's own API server"),
    },
    "networkProfile": {
        "port": held("the API NodePort reserved for the team"),
        "address": own("the address the tenant's kubeconfigs and certificates name"),
        "advertiseAddress": own("the address the tenant's workers are told"),
        "certSANs": own("the tenant's own certificate"),
        "clusterDomain": own("the tenant's own DNS domain"),
        "dnsServiceIPs": own("inside the tenant's service range"),
        "podCidr": own("the tenant's own pod range"),
        "podCidrs": own("the tenant's own pod range"),
        "serviceCidr": own("the tenant's own service range"),
        "serviceCidrs": own("the tenant's own service range"),
        "allowAddressAsExternalIP": refused(
            "a Service external IP in the shared cluster captures that address's traffic"
        ),
        "loadBalancerClass": refused(_EXPOSURE),
        "loadBalancerSourceRanges": refused(_EXPOSURE),
    },
    "writePermissions": own("read-only modes of the team's own API server"),
}


def judgments(tree: Tree = SPEC, prefix: str = "spec") -> Iterator[tuple[str, Judgment]]:
    """Every judged field, by its dotted path."""
    for key, node in tree.items():
        path = f"{prefix}.{key}"
        if isinstance(node, Judgment):
            yield path, node
        else:
            yield from judgments(node, path)


def _cel(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(value)


def present(path: str) -> str:
    """A CEL test that a dotted path is set (each parent tested first, as `has` needs)."""
    parts = path.split(".")
    return " && ".join(f"has(object.{'.'.join(parts[: i + 1])})" for i in range(1, len(parts)))


def equals(path: str, value: Any) -> str:
    """A CEL test that a dotted path is set to `value` (a held field)."""
    return f"{present(path)} && object.{path} == {_cel(value)}"


def refusal(path: str, judgment: Judgment) -> str:
    """A CEL rule that holds when a refused field is absent or at its default."""
    if judgment.default is ABSENT:
        return f"!({present(path)})"
    return f"!({present(path)}) || object.{path} == {_cel(judgment.default)}"


def refusals(tree: Tree = SPEC) -> list[tuple[str, str, str]]:
    """(path, CEL rule, why) for every refused field."""
    return [(path, refusal(path, j), j.why) for path, j in judgments(tree) if j.verdict == REFUSED]
