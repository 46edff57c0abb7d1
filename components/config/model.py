"""The stack config as one typed model (pydantic v2, camelCase keys as aliases): its sections,
their vocabulary (modes, roles, limits) and defaults. The field types are in `fields`, reading
and the checks across fields in `load` and `checks`, the messages in `problems`, the JSON Schema
and docs/config.md's table in `reference`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import (
    BeforeValidator,
    Field,
)

from components.config import versions
from components.config.chart_sources import ChartSource, repository
from components.config.fields import (
    DNS_1035,
    DNS_1123,
    IMAGE_REF,
    IMAGE_REPOSITORY,
    REGISTRY_HOST,
    STACK_NAME,
    Address,
    Bool,
    DnsLabel,
    HttpUrl,
    MirrorEndpoint,
    Model,
    Network,
    PemCertificates,
    Port,
    Section,
    Strings,
    choice,
    go_duration,
    integer,
    list_of,
    pinned_image,
    section,
    string,
)
from components.config.tenant_version import create_refusal
from components.domain.catalog import GPU_MODELS, GpuModel
from components.domain.hami_annotations import RES_GPU, RES_GPUCORES, RES_GPUMEM
from components.domain.names import (
    datastore_schema,
    kwok_name,
    release_controller_container,
    team_datastore,
    worker_name,
    workload_resource,
)
from components.domain.requests import INT32_MAX, CardTypes, Demand, GpuRequest, PodRequest, Quota, demand, pod_request
from components.domain.rollouts import RECREATE, ROLLING_UPDATE, surge
from components.domain.rules import Fleet, NodeGroup

WORKLOAD_KINDS = ("Pod", "Deployment")
MAX_CLUSTER_NAME = 20
MAX_TENANT_NAME = 30
MAX_WORKLOAD_NAME = 50
MAX_WORKERS = 10
# Simulated nodes are API objects only; the bench shows 1,000 of them, the limit leaves headroom.
MAX_KWOK_NODES = 5000
MAX_EXTERNAL_NODES = 1000
MAX_POOL_NAME = 20
MAX_CARDS_PER_NODE = 8
MAX_REPLICAS = 100
MAX_QUOTA = 10**9
HOSTNAME_MAX = 63
# kube-controller-manager gives each node a /24 of the pod CIDR (its IPv4 default).
NODE_POD_PREFIX = 24

MODE_DOCKER = "docker"
MODE_KUBECONFIG = "kubeconfig"
# What the stack runs as the management cluster in mode docker: kubeadm on the lab's node image
# (every image built from the package registries, the workers' own distribution) or k3s.
DISTRIBUTION_KUBEADM = "kubeadm"
DISTRIBUTION_K3S = "k3s"
# Worker pool modes: kindest/node containers joined by kubeadm; KWOK's simulated nodes; the
# team's own machines, joined with a bootstrap token the stack outputs.
POOL_DOCKER = "docker"
POOL_KWOK = "kwok"
POOL_EXTERNAL = "external"
POOL_MODES = (POOL_DOCKER, POOL_KWOK, POOL_EXTERNAL)
# Docker nodes are limited per tenant (all its docker pools together), the others per pool.
POOL_MAX_NODES = {POOL_KWOK: MAX_KWOK_NODES, POOL_EXTERNAL: MAX_EXTERNAL_NODES}
# What a stack builds: the whole lab; the shared platform (cluster + Kamaji) only; or one team's
# tenants on a platform it reads from the management cluster with its team's own token.
ROLE_LAB = "lab"
ROLE_PLATFORM = "platform"
ROLE_TEAM = "team"
# A team stack's grant, set by the platform owner (scripts/grant-team.sh): its team's
# management-cluster token (secret; TeamAccess's account), and the management API server's URL and
# CA (base64 PEM, as a kubeconfig's certificate-authority-data) it needs to be reached at all.
MANAGEMENT_TOKEN_KEY = "managementToken"
MANAGEMENT_SERVER_KEY = "managementServer"
MANAGEMENT_CA_KEY = "managementCa"
GRANT_KEYS = (MANAGEMENT_TOKEN_KEY, MANAGEMENT_SERVER_KEY, MANAGEMENT_CA_KEY)
# What a tool that never reads a key (a secret, or a grant the file does not hold) passes for it.
NOT_READ = "(not read)"
ROLES = (ROLE_LAB, ROLE_PLATFORM, ROLE_TEAM)


# -- the sections -----------------------------------------------------------------------------
# A worker's join waits up to this long for its containerd, then kubeadm up to its default TLS
# bootstrap timeout (v1beta4 `timeouts.tlsBootstrap`): its token must outlive both, with margin.
CONTAINERD_WAIT_SECONDS = 120
KUBEADM_TLS_BOOTSTRAP_SECONDS = 300
# kubeadm's wait for the token's signature in cluster-info (v1beta4 `timeouts.discovery`; its
# default is 5 minutes): the tenant is Ready before a join starts and signs a new token within a
# second, so a token still unsigned after this has lapsed or was revoked, and the join says so.
KUBEADM_DISCOVERY_SECONDS = 90
MIN_BOOTSTRAP_TOKEN_MINUTES = (
    -(-(CONTAINERD_WAIT_SECONDS + KUBEADM_DISCOVERY_SECONDS + KUBEADM_TLS_BOOTSTRAP_SECONDS) // 60) + 3
)


class ClusterConfig(Section):
    """The management cluster: a node container on a Docker network, or an adopted kubeconfig."""

    mode: choice(
        (MODE_DOCKER, MODE_KUBECONFIG), lambda v: f"must be '{MODE_DOCKER}' or '{MODE_KUBECONFIG}', got {v!r}"
    ) = Field(
        MODE_DOCKER,
        description="`docker` (a node container the stack makes, see `distribution`), or `kubeconfig` to adopt "
        "the cluster in the secret `kubeconfig`",
    )
    distribution: choice((DISTRIBUTION_KUBEADM, DISTRIBUTION_K3S)) = Field(
        DISTRIBUTION_KUBEADM,
        description="in mode docker: `kubeadm` (`kubeadm init` on the lab's node image, `images.management`; "
        "every image it runs is built by tools/images/build.sh) or `k3s` (`images.k3s`, pulled from its registry)",
    )
    name: string(DNS_1035, f"a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters", MAX_CLUSTER_NAME) = Field(
        "gpu-lab", description="prefix of every Docker name (network, containers, volumes)"
    )
    subnet: Network = Field(
        "172.30.0.0/24",
        description="the Docker network's IPv4 subnet: room for the gateway, the management cluster and every "
        "container of the tenants",
    )
    management_ip: Address = Field(
        "172.30.0.2", alias="managementIp", description="NodePort address of the management cluster, inside subnet"
    )
    node_image: (
        string(
            IMAGE_REPOSITORY,
            "an image repository without tag or digest, like gpu-tenancy/node or registry.example.com/lab/node",
            255,
        )
        | None
    ) = Field(
        None,
        alias="nodeImage",
        description="docker workers' images: `<nodeImage>:<tenant version>`, built by `tools/images/build.sh node` "
        "(the lab's image; they bring their own pod network); default: kind's node images, pinned by digest",
    )
    bootstrap_token_minutes: integer(
        MIN_BOOTSTRAP_TOKEN_MINUTES,
        1440,
        f" min (a join alone may take {CONTAINERD_WAIT_SECONDS} s for containerd, kubeadm's "
        f"{KUBEADM_DISCOVERY_SECONDS} s discovery and its {KUBEADM_TLS_BOOTSTRAP_SECONDS} s TLS bootstrap)",
    ) = Field(
        15,
        description=f"lifetime of a worker's bootstrap token (at least {MIN_BOOTSTRAP_TOKEN_MINUTES}: it must "
        "outlive the join's waits); each is revoked as soon as its join is done",
    )


NODE_POLICIES = ("binpack", "spread")


class HamiConfig(Section):
    """HAMi's scheduler as the stack runs it; the defaults were chosen by bench/hami_fleet.py."""

    node_lock_timeout: go_duration("HAMi's node lock timeout") = Field(
        "5m", description="passed as the scheduler's --node-lock-timeout, the only setting that takes effect"
    )
    kube_qps: integer(1, 1000, " requests/s") = Field(
        200, description="HAMi scheduler's API request rate, --kube-qps (HAMi's own default is 5: ~0.5 pods/s)"
    )
    kube_burst: integer(1, 2000, " requests") = Field(400, description="its --kube-burst, at least kubeQps")
    node_scheduler_policy: choice(NODE_POLICIES) = Field(
        "spread",
        description="spread (least-used node first) or binpack (fill a node first: binds then queue on its lock)",
    )
    log_level: integer(0, 10) = Field(
        1,
        description="klog -v of HAMi's extender and its kube-scheduler (the chart's 4 logs ~24 lines per node per pod)",
    )


class GpuFleet(Section):
    model: Model = Field(description="the card model: " + ", ".join(sorted(GPU_MODELS)))
    cards_per_node: integer(1, MAX_CARDS_PER_NODE) = Field(
        1, description="cards per GPU node (the nodes of the external, else kwok, else docker pools)"
    )


class QuotaConfig(Section):
    gpus: integer(1, MAX_QUOTA, " vGPUs") = Field(description="vGPUs the tenant's pods may hold together")
    gpumem_mb: integer(1, MAX_QUOTA, " MB", mb=True) = Field(alias="gpumemMb", description="GPU memory, MB")
    gpucores: integer(1, MAX_QUOTA, " %") = Field(alias="gpucoresPercent", description="GPU cores, % of one card")

    @property
    def quota(self) -> Quota:
        return Quota(gpus=self.gpus, gpumem_mb=self.gpumem_mb, gpucores=self.gpucores)


_RESOURCE_KEYS = {RES_GPU: "gpus", RES_GPUMEM: "gpumemMb", RES_GPUCORES: "gpucoresPercent"}


ROLLOUT_STRATEGIES = (ROLLING_UPDATE, RECREATE)


class RolloutConfig(Section):
    """How a Deployment replaces its pods. The default never needs a GPU the workload does not
    already hold: one pod goes, then its successor comes (surge 0, unavailable 1). A surge needs
    room for the extra pods in the budget and on the cards, and the checks count it."""

    strategy: choice(ROLLOUT_STRATEGIES) = Field(
        ROLLING_UPDATE, description="`RollingUpdate` (a few pods at a time) or `Recreate` (all go, then all come)"
    )
    max_surge: integer(0, MAX_REPLICAS) = Field(
        0, description="RollingUpdate: pods started above `replicas` (counted in the quota and the fit)"
    )
    max_unavailable: integer(0, MAX_REPLICAS) = Field(
        1, description="RollingUpdate: pods that may be down at once (not both 0)"
    )

    def spec(self) -> dict[str, object]:
        """The Deployment's `spec.strategy`."""
        if self.strategy == RECREATE:
            return {"type": RECREATE}
        return {
            "type": ROLLING_UPDATE,
            "rollingUpdate": {"maxSurge": self.max_surge, "maxUnavailable": self.max_unavailable},
        }


class WorkloadConfig(Section):
    """A GPU workload a tenant's stack declares (created in the tenant, awaited by ReleaseWait)."""

    name: string(DNS_1123, f"a DNS label of at most {MAX_WORKLOAD_NAME} characters", MAX_WORKLOAD_NAME) = Field(
        description="the Pod's or Deployment's name"
    )
    kind: choice(WORKLOAD_KINDS) = Field("Pod", description="Pod or Deployment")
    image: string(IMAGE_REF, "an image reference like busybox:1.36 or registry.example.com/team/app", 255) = Field(
        description="container image"
    )
    command: Strings = Field((), description="container command")
    replicas: integer(1, MAX_REPLICAS) = Field(1, description="Deployment replicas (a Pod has one)")
    namespace: DnsLabel = Field("default", description="tenant namespace (not a reserved one)")
    gpus: integer(0, 64) | None = Field(None, description="nvidia.com/gpu: vGPUs per pod")
    gpumem_mb: integer(0, INT32_MAX, " MB", mb=True) | None = Field(
        None, alias="gpumemMb", description="nvidia.com/gpumem: MB per vGPU, a plain integer"
    )
    gpucores_percent: integer(0, 100, " %") | None = Field(
        None, description="nvidia.com/gpucores: % of one card per vGPU"
    )
    card_type: string(None, "a card type substring") | None = Field(
        None,
        description="nvidia.com/use-gputype: the card types it may use (comma list of substrings of a card type, "
        "as HAMi matches them)",
    )
    avoid_card_type: string(None, "a card type substring") | None = Field(
        None, description="nvidia.com/nouse-gputype: the card types it must not use (comma list of substrings)"
    )
    rollout: section(RolloutConfig) = Field(
        RolloutConfig(),
        description="Deployments: `strategy`, `maxSurge`, `maxUnavailable` (default: surge 0, unavailable 1)",
    )
    wait_seconds: integer(5, 3600, " s") = Field(
        120, description="how long `up` waits for HAMi to bind each pod (a rollout: its new pods, old ones gone)"
    )
    fail_on_pending: Bool = Field(
        True,
        description="true: `up` fails if a pod is not bound in time, and the workload must fit the fleet; "
        "false: it may stay Pending (still counted against the quota)",
    )

    @property
    def limits(self) -> tuple[tuple[str, int], ...]:
        values = {RES_GPU: self.gpus, RES_GPUMEM: self.gpumem_mb, RES_GPUCORES: self.gpucores_percent}
        return tuple((res, v) for res, v in values.items() if v is not None)

    def pod(self, card: GpuModel) -> PodRequest:
        return pod_request([(self.name, dict(self.limits))], card)

    def request(self, card: GpuModel) -> GpuRequest:
        return self.pod(card).containers[0][1]

    @property
    def strategy(self) -> dict[str, object] | None:
        """The Deployment's `spec.strategy` (a Pod has none)."""
        return self.rollout.spec() if self.kind == "Deployment" else None

    @property
    def types(self) -> CardTypes:
        """The card types it may land on (HAMi's use-gputype / nouse-gputype)."""
        return CardTypes.of(self.card_type, self.avoid_card_type)

    def demand(self, cards: Iterable[GpuModel]) -> Demand:
        """Its demand on a fleet of these card models (components.domain.requests.demand)."""
        extra = surge(self.kind, self.strategy, self.replicas)
        limits = [(self.name, dict(self.limits))]
        return demand(f"{self.kind} {self.name}", limits, cards, self.types, self.replicas, self.fail_on_pending, extra)


# A join token is short-lived: `up` renews it while machines are still to join.
DEFAULT_JOIN_TOKEN_HOURS = 2
MAX_JOIN_TOKEN_HOURS = 24


class PoolConfig(Section):
    """A group of worker nodes of one mode (see POOL_MODES); a tenant has one or more."""

    name: string(DNS_1035, f"a DNS-1035 label of at most {MAX_POOL_NAME} characters", MAX_POOL_NAME) = Field(
        description="the pool's name, unique in its tenant; node names are <lab>-<tenant>-<pool>-<index>"
    )
    mode: choice(POOL_MODES) = Field(
        POOL_DOCKER,
        description="`docker` (kindest/node containers), `kwok` (simulated nodes) or `external` (your machines)",
    )
    nodes: integer(1, MAX_KWOK_NODES) = Field(
        1, description=f"nodes in the pool (docker at most {MAX_WORKERS}, external at most {MAX_EXTERNAL_NODES})"
    )
    gpu: section(GpuFleet) | None = Field(
        None,
        description="`model` and `cardsPerNode` of this pool's nodes, when they differ from the tenant's `gpu` "
        "(a mixed fleet)",
    )
    join_token_hours: integer(1, MAX_JOIN_TOKEN_HOURS, " h") | None = Field(
        None,
        description="external pools: lifetime of the join token the stack outputs "
        f"(default {DEFAULT_JOIN_TOKEN_HOURS}); `up` renews it while machines are still to join "
        "and revokes it once all have",
    )


DEFAULT_POOLS = ({"name": "worker", "mode": POOL_DOCKER, "nodes": 1},)


class TenantConfig(Section):
    name: string(
        DNS_1035, f"a DNS-1035 label (a-z first, then a-z0-9-, at most {MAX_TENANT_NAME})", MAX_TENANT_NAME
    ) = Field(description="the tenant's name; every name the lab derives for it starts with it")
    kubernetes_version: choice(
        tuple(versions.KIND_NODE_IMAGES),
        lambda v: (
            (isinstance(v, str) and create_refusal(v) or f"no worker image is pinned for {v!r}")
            + f"; pinned: {', '.join(versions.KIND_NODE_IMAGES)}"
        ),
    ) = Field(versions.DEFAULT_TENANT_VERSION, description="one with a pinned worker image")
    pools: Annotated[tuple[PoolConfig, ...], BeforeValidator(list_of("pools"))] = Field(
        DEFAULT_POOLS,
        description="worker pools: `name`, `mode`, `nodes` (default: one docker worker); a docker or an external pool",
    )
    gpu: section(GpuFleet) = Field(
        description="`model` and `cardsPerNode` of the tenant's GPU nodes (a pool's own `gpu` overrides it)"
    )
    quota: section(QuotaConfig) = Field(description="`gpus`, `gpumemMb`, `gpucoresPercent`")
    # None: 31443 + the tenant's index (31132 + index for Konnectivity); filled by load_stack_config.
    api_port: Port | None = Field(
        None, description="NodePort of the tenant API server (30000-32767, unique; default 31443 + the tenant's index)"
    )
    konnectivity_port: Port | None = Field(
        None, description="NodePort of its Konnectivity server (unique; default 31132 + the tenant's index)"
    )
    pod_cidr: Network = Field("10.244.0.0/16", description="tenant pod network, a /24 per node")
    service_cidr: Network = Field("10.96.0.0/16", description="tenant service network, /12 or smaller")
    workloads: Annotated[tuple[WorkloadConfig, ...], BeforeValidator(list_of("workloads"))] = Field(
        (), description="GPU workloads the stack creates in the tenant"
    )

    def worker_image(self, node_image: str | None, overrides: Mapping[str, str] | None = None) -> str:
        """The docker workers' image: `images.nodes` at its version, else `<node_image>:<version>` (the
        lab's build), else kind's pinned one."""
        if overrides and self.kubernetes_version in overrides:
            return overrides[self.kubernetes_version]
        if node_image:
            return f"{node_image}:{self.kubernetes_version}"
        return versions.KIND_NODE_IMAGES[self.kubernetes_version]

    @property
    def dns_service_ip(self) -> str:
        return str(ipaddress.IPv4Network(self.service_cidr)[10])

    def pools_of(self, mode: str) -> tuple[PoolConfig, ...]:
        return tuple(p for p in self.pools if p.mode == mode)

    @property
    def real_gpus(self) -> bool:
        """External pools bring real cards: HAMi's NVIDIA plugin, no fake inventory, no release controller."""
        return bool(self.pools_of(POOL_EXTERNAL))

    @property
    def gpu_pools(self) -> tuple[PoolConfig, ...]:
        """The pools whose nodes carry the tenant's cards: external pools, else kwok pools, else the
        docker pools. Docker workers beside kwok or external pools run the system pods and real
        non-GPU containers; the mock plugin could not advertise a large node's cards anyway."""
        for mode in (POOL_EXTERNAL, POOL_KWOK):
            if self.pools_of(mode):
                return self.pools_of(mode)
        return self.pools_of(POOL_DOCKER)

    @property
    def docker_nodes(self) -> int:
        return sum(p.nodes for p in self.pools_of(POOL_DOCKER))

    @property
    def system_pool_mode(self) -> str:
        """Where the tenant's system pods (HAMi's scheduler, CoreDNS, the Konnectivity agent) run:
        its docker workers, else its own machines (a tenant of external pools only)."""
        return POOL_DOCKER if self.pools_of(POOL_DOCKER) else POOL_EXTERNAL

    @property
    def runs_controllers(self) -> bool:
        """Whether the stack runs the controllers' image for this tenant (its release controller,
        or KWOK's token keeper), which it builds on the Docker host first."""
        return not self.real_gpus or bool(self.pools_of(POOL_KWOK))

    def node_names(self, lab: str, pool: PoolConfig) -> list[str]:
        """Names of the nodes this stack makes for a pool (external machines name themselves)."""
        return (
            [] if pool.mode == POOL_EXTERNAL else [worker_name(lab, self.name, pool.name, i) for i in range(pool.nodes)]
        )

    def made_names(self, lab: str) -> list[tuple[str, str, str]]:
        """(what, name, key) for every name this stack derives from the tenant's config that must
        be unique in the stack: Docker containers, Nodes, workload resources. Names join config
        values with '-', so two configs can derive the same one (`a-b`/`c` and `a`/`b-c`)."""
        made: list[tuple[str, str, str]] = []
        for j, pool in enumerate(self.pools):
            for n in self.node_names(lab, pool):
                made.append(("node", n, f"pools[{j}].name"))
                if pool.mode == POOL_DOCKER:
                    made.append(("Docker container", n, f"pools[{j}].name"))
        if not self.real_gpus:
            made.append(("Docker container", release_controller_container(lab, self.name), "name"))
        if self.pools_of(POOL_KWOK):
            kwok = kwok_name(lab, self.name)
            made += [("Docker container", kwok, "name"), ("Docker container", f"{kwok}-token-keeper", "name")]
        for j, w in enumerate(self.workloads):
            made.append(("workload", workload_resource(self.name, w.namespace, w.name), f"workloads[{j}].name"))
        return made

    @property
    def lab_containers(self) -> int:
        """Containers the tenant runs on the lab's Docker network, each taking one of its addresses."""
        return sum(what == "Docker container" for what, _, _ in self.made_names(""))

    def pool_gpu(self, pool: PoolConfig) -> GpuFleet:
        """The cards of one pool's nodes: its own `gpu`, else the tenant's."""
        return pool.gpu or self.gpu

    @property
    def fleet(self) -> Fleet:
        """The GPU nodes, pool by pool, each pool of its own card model (a mixed fleet has several)."""
        return Fleet(
            tuple(
                NodeGroup(self.pool_gpu(p).model, p.nodes, self.pool_gpu(p).cards_per_node, p.name)
                for p in self.gpu_pools
            )
        )

    def gpu_nodes(self, lab: str) -> list[tuple[str, GpuFleet]]:
        """Each node the stack makes that carries fake cards, with its pool's cards."""
        return [(n, self.pool_gpu(p)) for p in self.gpu_pools for n in self.node_names(lab, p)]

    def demands(self) -> list[Demand]:
        models = self.fleet.models
        return [w.demand(models) for w in self.workloads]


class MirrorConfig(Section):
    """The registry every node's container runtime pulls through (a closed network's, or the
    lab's own: tools/lab/registry.sh); images keep their upstream names (components.config.image_refs)."""

    endpoint: MirrorEndpoint = Field(
        description="`http://host[:port]` or `https://host[:port]`, no path: each upstream registry's images are "
        "kept under `/<registry>/` in it (`172.17.0.1:5000/registry.k8s.io/kube-apiserver`)"
    )
    ca_cert: PemCertificates | None = Field(
        None, description="https only: the PEM CA that signed the mirror's certificate (default: the system's)"
    )
    registries: Annotated[
        tuple[string(REGISTRY_HOST, "a registry host like nvcr.io or registry.example.com:5000", 255), ...],
        BeforeValidator(list_of("registry hosts")),
    ] = Field(
        (),
        description="more registries to send through it, beyond docker.io, registry.k8s.io, quay.io, ghcr.io and "
        "those the stack's own images name",
    )

    @property
    def host(self) -> str:
        """`host[:port]`: the name images are kept under in it."""
        return urlsplit(self.endpoint).netloc


class ImagesConfig(Section):
    """Images the Docker engine itself runs (it does not read the nodes' mirror): each on its own
    key, tag or digest pinned; default: upstream's, pinned in components.config.versions."""

    management: pinned_image("the lab's node image at the management cluster's Kubernetes") = Field(
        f"{versions.LAB_NODE_REPOSITORY}:{versions.MANAGEMENT_KUBERNETES_VERSION}",
        description="the management node (distribution kubeadm): the lab's node image built for "
        f"{versions.MANAGEMENT_KUBERNETES_VERSION} (tools/images/build.sh node), or the same from elsewhere",
    )
    k3s: pinned_image("the management cluster's k3s image") = Field(
        versions.K3S_IMAGE, alias="k3s", description="the management cluster's k3s (distribution k3s)"
    )
    kwok: pinned_image("KWOK's controller image") = Field(
        versions.KWOK_IMAGE, description="KWOK's controller for kwok pools"
    )
    releaser_base: pinned_image("a Python 3.11 image with pip") = Field(
        versions.RELEASER_BASE_IMAGE,
        alias="releaserBase",
        description="base of the release controller's image, which the token keeper runs too",
    )
    python_index: HttpUrl | None = Field(
        None,
        alias="pythonIndex",
        description="a PyPI mirror's simple index the release controller's image installs its packages from "
        "(default: pip's)",
    )
    python_index_ca_cert: PemCertificates | None = Field(
        None,
        alias="pythonIndexCaCert",
        description="the PEM CA(s) pip trusts, instead of the base image's bundle, when it installs the release "
        "controller's packages over HTTPS: a PyPI mirror's private CA, or the CA of a TLS-inspecting proxy "
        "between the host and PyPI; the CA(s) themselves, not a system bundle (Pulumi hands the program its "
        "config in one environment variable, which Linux limits to 128 KiB) (default: the base image's bundle)",
    )
    nodes: Annotated[
        dict[
            choice(
                tuple(versions.KIND_NODE_IMAGES),
                lambda v: f"names no pinned tenant version: {v!r}; pinned: {', '.join(versions.KIND_NODE_IMAGES)}",
            ),
            pinned_image("a node image of that Kubernetes version"),
        ],
        BeforeValidator(lambda v: {} if v is None else v),
    ] = Field(
        {},
        description="docker workers' image per tenant version (`v1.35.1: registry.example.com/kindest/node:v1.35.1"
        "@sha256:...`): the image `cluster.nodeImage` (or kind's pinned one) names, from elsewhere; wins over both",
    )


# The charts a stack installs, by config key: (chart, pinned version, its repository).
CHARTS = {
    "certManager": (versions.CERT_MANAGER_CHART, versions.CERT_MANAGER_VERSION, versions.CERT_MANAGER_REPO),
    "kamaji": (versions.KAMAJI_CHART, versions.KAMAJI_CHART_VERSION, versions.KAMAJI_REPO),
    "hami": (versions.HAMI_CHART, versions.HAMI_CHART_VERSION, versions.HAMI_REPO),
    "kamajiEtcd": (versions.KAMAJI_ETCD_CHART, versions.KAMAJI_ETCD_CHART_VERSION, versions.KAMAJI_REPO),
}
_CHART_SOURCE = string(None, "a chart repository URL, an oci:// reference or a directory", 1024)


class ChartsConfig(Section):
    """Where each chart comes from (components.config.chart_sources): strings here, read and
    checked against the pinned chart by load_stack_config."""

    cert_manager: _CHART_SOURCE | None = Field(
        None,
        alias="certManager",
        description=f"cert-manager {versions.CERT_MANAGER_VERSION}: a repository URL (default "
        f"{versions.CERT_MANAGER_REPO}), `oci://host/path/cert-manager:{versions.CERT_MANAGER_VERSION}` or a directory",
    )
    kamaji: _CHART_SOURCE | None = Field(
        None,
        description=f"Kamaji {versions.KAMAJI_CHART_VERSION} with its kamaji-etcd dependency: a repository URL "
        f"(default {versions.KAMAJI_REPO}), an oci:// reference or a directory (with charts/kamaji-etcd)",
    )
    hami: _CHART_SOURCE | None = Field(
        None,
        description=f"HAMi {versions.HAMI_CHART_VERSION}: a repository URL (default {versions.HAMI_REPO}), "
        f"`oci://host/path/hami:{versions.HAMI_CHART_VERSION}` or a directory",
    )
    kamaji_etcd: _CHART_SOURCE | None = Field(
        None,
        alias="kamajiEtcd",
        description=f"platform stacks: kamaji-etcd {versions.KAMAJI_ETCD_CHART_VERSION}, each team's own etcd: a "
        f"repository URL (default {versions.KAMAJI_REPO}), an oci:// reference or a directory (the Kamaji "
        "chart's charts/kamaji-etcd)",
    )


# A team's own etcd on a platform (TeamSlot.etcd_quota_mb): etcd's default quota is 2 GiB.
ETCD_QUOTA_MB_MIN, ETCD_QUOTA_MB_DEFAULT, ETCD_QUOTA_MB_MAX = 256, 2048, 8192


class TeamSlot(Section):
    """A team's reserved ports and etcd keys on the shared platform (the platform stack's `teams`
    registry)."""

    name: string(DNS_1035, f"a DNS-1035 label of at most {MAX_TENANT_NAME}", MAX_TENANT_NAME) = Field(
        description="the team's tenant name, as its team stack spells it"
    )
    api_port: Port = Field(description="the NodePort reserved for its API server")
    konnectivity_port: Port = Field(description="the NodePort reserved for its Konnectivity server")
    stack: string(STACK_NAME, "letters, digits, `-` and `_`", 100) | None = Field(
        None,
        description="the team stack's name where it is not the team's: its control plane's etcd keys "
        "are named from it (Kamaji's are immutable, so a team keeps its stack's)",
    )
    etcd_quota_mb: integer(ETCD_QUOTA_MB_MIN, ETCD_QUOTA_MB_MAX, " MB") = Field(
        ETCD_QUOTA_MB_DEFAULT,
        description="the size quota of the team's own etcd (its --quota-backend-bytes): at it, etcd raises its "
        "space alarm and the team's control plane turns read-only; its volume holds twice as much",
    )

    def datastore_schema(self, project: str) -> str:
        """The team's etcd key prefix and user in its DataStore: the platform names it (and
        publishes it to the team stack), its policy holds the team to it by equality."""
        return datastore_schema(project, self.stack or self.name, self.name)

    @property
    def datastore(self) -> str:
        """The Kamaji DataStore of the team's own etcd (cluster-scoped, so named apart from the lab's
        shared `default`)."""
        return team_datastore(self.name)


@dataclass(frozen=True)
class StackConfig:
    """The validated whole, as load_stack_config assembles it."""

    project: str
    cluster: ClusterConfig
    tenants: tuple[TenantConfig, ...]
    hami: HamiConfig
    role: str = ROLE_LAB
    # A team stack's management API server and its CA (its grant; None in other roles).
    management_server: str | None = None
    management_ca: str | None = None
    teams: tuple[TeamSlot, ...] = ()
    # Closed networks: the nodes' registry mirror (None: pull from upstream), the Docker engine's
    # own images, each chart's source by its config key (CHARTS).
    mirror: MirrorConfig | None = None
    images: ImagesConfig = ImagesConfig()
    charts: Mapping[str, ChartSource] = field(default_factory=dict)
    # Not errors: said at `up` (e.g. a quota above what the fleet can hold).
    warnings: tuple[str, ...] = ()

    def chart(self, key: str) -> ChartSource:
        """Where the chart of config key `key` (CHARTS) comes from: `charts.<key>`, else its repository."""
        chart, version, repo = CHARTS[key]
        return self.charts.get(key) or repository(chart, version, repo)

    def datastore_schema(self, stack: str, tenant: str) -> str:
        """A lab's or platform's own tenant's etcd keys (a team stack's come from the platform,
        PlatformLink.schema)."""
        return datastore_schema(self.project, stack, tenant)
