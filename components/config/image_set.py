"""Every image and chart a stack's config makes the lab pull, and who pulls each: what a closed
network's mirror must hold before `pulumi up`. Read from the stack's own config and the pinned
versions, so the list and the stack cannot drift apart.

Three pullers, because each reads a different configuration:
- the Docker engine (node containers, the management node, KWOK, the release controller's build):
  `images.*`;
- the management cluster's runtime (its own control plane and storage, Kamaji and each tenant's
  control plane): the mirror;
- each tenant's workers' runtime (HAMi, Konnectivity's agent, kube-proxy, CoreDNS, workloads): the mirror.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from components.config import versions
from components.config.chart_sources import ChartSource
from components.config.image_refs import STANDARD_REGISTRIES, ImageRef
from components.config.model import (
    DISTRIBUTION_K3S,
    MODE_DOCKER,
    POOL_DOCKER,
    POOL_KWOK,
    ROLE_PLATFORM,
    ROLE_TEAM,
    StackConfig,
    TenantConfig,
)

DOCKER_ENGINE = "docker engine"
MANAGEMENT = "management cluster"
WORKERS = "tenant workers"
# Nodes that pull through the mirror (the Docker engine does not read it).
MIRRORED = (MANAGEMENT, WORKERS)


@dataclass(frozen=True)
class Need:
    """One image: its upstream reference, who pulls it, what for. `tag_note` says who decides a
    tag the stack does not pin (empty: the reference is exact)."""

    ref: str
    puller: str
    why: str
    tag_note: str = ""

    @property
    def name(self) -> str:
        return ImageRef.parse(self.ref).name


def _tenant(t: TenantConfig, cfg: StackConfig) -> list[Need]:
    v = t.kubernetes_version
    who = f"tenant {t.name}"
    needs = [
        Need(f"registry.k8s.io/{c}:{v}", MANAGEMENT, f"{who}'s control plane (Kamaji)")
        for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
    ]
    # Every tenant's spec pins Konnectivity (Kamaji's v0.<tenant minor>.0 is not published for all).
    server, agent = versions.KONNECTIVITY_IMAGES
    needs += [
        Need(server, MANAGEMENT, f"{who}'s Konnectivity server"),
        Need(agent, WORKERS, f"{who}'s Konnectivity agent"),
        Need(f"{versions.KUBE_PROXY_REPOSITORY}:{v}", WORKERS, f"{who}'s kube-proxy"),
        Need(versions.TENANT_COREDNS_IMAGE, WORKERS, f"{who}'s CoreDNS (Kamaji's addon)"),
    ]
    if t.pools_of(POOL_DOCKER):
        needs.append(
            Need(t.worker_image(cfg.cluster.node_image, cfg.images.nodes), DOCKER_ENGINE, f"{who}'s docker workers")
        )
    if t.pools_of(POOL_KWOK):
        needs.append(Need(cfg.images.kwok, DOCKER_ENGINE, f"{who}'s KWOK controller"))
    needs += [
        Need(f"{versions.HAMI_IMAGE}:{versions.HAMI_EXTENDER_IMAGE_TAG}", WORKERS, f"{who}'s HAMi scheduler extender"),
        Need(f"registry.k8s.io/kube-scheduler:{v}", WORKERS, f"{who}'s HAMi kube-scheduler"),
    ]
    if t.real_gpus:
        needs.append(
            Need(f"{versions.HAMI_IMAGE}:{versions.HAMI_CHART_IMAGE_TAG}", WORKERS, f"{who}'s HAMi device plugin")
        )
    else:
        needs.append(Need(versions.HAMI_MOCK_PLUGIN_IMAGE, WORKERS, f"{who}'s mock device plugin (chart default)"))
    needs += [Need(w.image, WORKERS, f"{who}'s workload {w.name}") for w in t.workloads]
    return needs


def images(cfg: StackConfig) -> list[Need]:
    """Every image the stack makes the lab pull, each once (first puller and purpose kept)."""
    needs: list[Need] = []
    if cfg.role != ROLE_TEAM:
        if cfg.cluster.mode == MODE_DOCKER and cfg.cluster.distribution == DISTRIBUTION_K3S:
            needs.append(Need(cfg.images.k3s, DOCKER_ENGINE, "the management cluster (k3s)"))
        elif cfg.cluster.mode == MODE_DOCKER:
            v = versions.MANAGEMENT_KUBERNETES_VERSION
            needs.append(Need(cfg.images.management, DOCKER_ENGINE, "the management node (kubeadm)"))
            needs += [
                Need(ref, MANAGEMENT, f"the management cluster's own control plane (kubeadm {v})")
                for ref in versions.kubeadm_images(v)
                if "/pause:" not in ref  # the node carries it
            ]
            needs.append(
                Need(versions.LOCAL_PATH_PROVISIONER_IMAGE, MANAGEMENT, "the management cluster's storage (local-path)")
            )
        needs += [Need(ref, MANAGEMENT, "cert-manager (chart default)") for ref in versions.CERT_MANAGER_IMAGES]
        needs.append(Need(versions.KAMAJI_IMAGE, MANAGEMENT, "Kamaji's controller"))
        # a platform's etcds are each team's own, their certificates from cert-manager: no cfssl job
        per_team = cfg.role == ROLE_PLATFORM
        why = "kamaji-etcd, each team's own DataStore" if per_team else "kamaji-etcd, Kamaji's default DataStore"
        needs += [
            Need(ref, MANAGEMENT, why)
            for ref in versions.KAMAJI_ETCD_IMAGES
            if not (per_team and ref == versions.KAMAJI_ETCD_CFSSL_IMAGE)
        ]
    if any(t.runs_controllers for t in cfg.tenants):
        needs.append(
            Need(
                cfg.images.releaser_base,
                DOCKER_ENGINE,
                "base of the release controller's image (built on the host)",
            )
        )
    for t in cfg.tenants:
        needs += _tenant(t, cfg)
    seen: set[tuple[str, str]] = set()
    unique = []
    for n in needs:
        if (n.name, n.puller) not in seen:
            seen.add((n.name, n.puller))
            unique.append(n)
    return unique


def charts(cfg: StackConfig) -> list[tuple[str, ChartSource]]:
    """(config key, source) of each chart the stack installs."""
    keys = {ROLE_TEAM: ("hami",), ROLE_PLATFORM: ("certManager", "kamaji", "kamajiEtcd")}.get(
        cfg.role, ("certManager", "kamaji", "hami")
    )
    return [(k, cfg.chart(k)) for k in keys]


def mirror_registries(cfg: StackConfig) -> tuple[str, ...]:
    """The registries the nodes send through the mirror: the standard four, those the stack's
    node-pulled images name, and the mirror's own `registries`."""
    named = {ImageRef.parse(n.ref).registry for n in images(cfg) if n.puller in MIRRORED}
    extra: Iterable[str] = cfg.mirror.registries if cfg.mirror else ()
    return tuple(sorted({*STANDARD_REGISTRIES, *named, *extra}))
