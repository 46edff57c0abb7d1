"""Pinned upstream versions: the one table every component reads.

Pairs chosen to work together: HAMi chart 2.8.3 ships a device config that the mock device
plugin 1.0.1 parses (charts 2.9.0+ crash it); Kamaji's chart is only published as
0.0.0+latest, so its image tag is what pins the code; tenants stay on a Kubernetes minor for
which Kamaji embeds kubeadm and konnectivity images exist.
"""

from __future__ import annotations

from types import MappingProxyType

K3S_IMAGE = "docker.io/rancher/k3s:v1.35.0-k3s1"

CERT_MANAGER_CHART = "cert-manager"
CERT_MANAGER_REPO = "https://charts.jetstack.io"
CERT_MANAGER_VERSION = "v1.18.3"
# The images cert-manager's chart runs at its own version (its values' image.repository defaults).
CERT_MANAGER_IMAGES = tuple(
    f"quay.io/jetstack/cert-manager-{c}:{CERT_MANAGER_VERSION}"
    for c in ("controller", "webhook", "cainjector", "startupapicheck")
)

KAMAJI_CHART = "kamaji"
KAMAJI_REPO = "https://clastix.github.io/charts"
KAMAJI_CHART_VERSION = "0.0.0+latest"
KAMAJI_IMAGE_TAG = "26.8.2-edge"
# Each team's own etcd on a platform: the chart the Kamaji chart above carries as its dependency
# (clastix/kamaji-etcd v0.17.0, etcd KAMAJI_ETCD_VERSION), installed once per team.
KAMAJI_ETCD_CHART = "kamaji-etcd"
KAMAJI_ETCD_CHART_VERSION = "0.17.0"
KAMAJI_IMAGE = f"docker.io/clastix/kamaji:{KAMAJI_IMAGE_TAG}"
# Each tenant's CoreDNS, named in its TenantControlPlane (addons.coreDNS): Kamaji 26.8.2-edge's own
# pick (its kubeadm, k8s.io/kubernetes v1.36.3, constants.CoreDNSVersion) where the spec names none.
TENANT_COREDNS_IMAGE = "registry.k8s.io/coredns/coredns:v1.14.2"


def coredns_addon(image: str = TENANT_COREDNS_IMAGE) -> dict[str, str]:
    """A TCP's addons.coreDNS naming `image`. Kamaji's kubeadm makes `<imageRepository>/coredns:<imageTag>`
    (but `registry.k8s.io` alone becomes `registry.k8s.io/coredns`) and reads the tag only where the
    repository is set too, so both are given."""
    name, tag = image.rsplit(":", 1)
    repository, base = name.rsplit("/", 1)
    if base != "coredns" or repository == "registry.k8s.io":
        raise ValueError(
            f"{image}: kubeadm names CoreDNS's image <repository>/coredns (registry.k8s.io/coredns/coredns)"
        )
    return {"imageRepository": repository, "imageTag": tag}


# The kubeadm that Kamaji 26.8.2-edge embeds (internal/upgrade/kubeadm_version.go): the highest
# tenant minor it accepts (see tenant_version).
KAMAJI_KUBEADM_VERSION = "v1.36.0"

HAMI_CHART = "hami"
HAMI_REPO = "https://project-hami.github.io/HAMi/"
HAMI_CHART_VERSION = "2.8.3"
# The chart's own images (device plugin and its monitor) stay at the chart's version; the
# scheduler extender runs v2.10.0. HAMi 2.8.3's Filter drops a pod's earlier allocation record
# without its quota usage, so each re-filter (every bind refused by the node lock, routine when
# several GPU pods start on one node) charges the pod again: a namespace whose ResourceQuota
# equals its use (every workload namespace here) starves with ResourceQuotaNotFit until HAMi
# restarts. 2.10.0 removes the usage with the record. Its scheduler takes chart 2.8.3's flags,
# RBAC (the same rules) and webhook as they are, but not its device config (`vnpus` became a
# map): it reads the stack's own (components.tenant.hami.scheduler_device_config).
HAMI_CHART_IMAGE_TAG = "v2.8.3"
HAMI_EXTENDER_IMAGE_TAG = "v2.10.0"
HAMI_IMAGE = "docker.io/projecthami/hami"
# The chart's default for its mock device plugin. (Its webhook-certificate jobs, and their
# certgen image, are off: the stack makes the certificate, components/tenant/hami.py.)
HAMI_MOCK_PLUGIN_IMAGE = "docker.io/projecthami/mock-device-plugin:1.0.1"

KUBE_SCHEDULER_REGISTRY = "registry.k8s.io"
# Each tenant's kube-proxy (components/tenant/kube_proxy.py), at the tenant's version.
KUBE_PROXY_REPOSITORY = "registry.k8s.io/kube-proxy"
KUBE_SCHEDULER_REPOSITORY = "kube-scheduler"

# Tenant Kubernetes versions with a worker image of the same release: the minors a tenant can be
# on and move between (one minor up per `up`, see tenant_version). HAMi's kube-scheduler runs the
# tenant's version too (registry.k8s.io/kube-scheduler:<version>). Each is pinned by the digest
# kind's release notes give: v1.35.1 is kind v0.31.0's default, v1.36.1 kind v0.32.0's (kind
# published no v1.36.0 image), within Kamaji's v1.36.
KIND_NODE_IMAGES = MappingProxyType(
    {
        "v1.35.1": "docker.io/kindest/node:v1.35.1"
        "@sha256:05d7bcdefbda08b4e038f644c4df690cdac3fba8b06f8289f30e10026720a1ab",
        "v1.36.1": "docker.io/kindest/node:v1.36.1"
        "@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5",
    }
)
DEFAULT_TENANT_VERSION = "v1.35.1"
# The lab's own node images, built from the package registries by `tools/images/build.sh node`
# for each version above (`<repository>:<version>`); the cluster's `nodeImage` selects them.
LAB_NODE_REPOSITORY = "gpu-tenancy/node"
# The busybox every lab node carries (Debian bookworm's busybox-static, imported at boot): the
# local-path provisioner's helper pods run it, so making a volume pulls nothing.
LAB_BUSYBOX_IMAGE = "gpu-tenancy/busybox:1.35.0"
# A Python 3.11 base for the release controller's image built here (`tools/images/build.sh python`:
# Debian's python3.11, pip in a venv at /opt/python); not the official image, so chosen by name:
# `images.releaserBase: gpu-tenancy/python:3.11`.
LAB_PYTHON_IMAGE = "gpu-tenancy/python:3.11"

# The management cluster's Kubernetes when the stack makes it (`cluster.mode: docker`, kubeadm on
# the lab's node image): a version with a node image above, so the workers' images serve it too.
# kubeadm of that version names the rest of its images (etcd, CoreDNS, pause, kube-proxy).
MANAGEMENT_KUBERNETES_VERSION = "v1.35.1"
# What kubeadm of each pinned version deploys beside the control plane (its `config images list`;
# the tools tier checks this table against the built kubeadm): etcd, CoreDNS and pause tags.
KUBEADM_IMAGE_TAGS = MappingProxyType(
    {
        "v1.35.1": MappingProxyType({"etcd": "3.6.6-0", "coredns": "v1.13.1", "pause": "3.10.1"}),
        "v1.36.1": MappingProxyType({"etcd": "3.6.8-0", "coredns": "v1.14.2", "pause": "3.10.2"}),
    }
)


# kamaji-etcd (Kamaji's dependency, `>=0.15.0`; 0.17.0 is the repository's newest) with its own
# choices for a management cluster of MANAGEMENT_KUBERNETES_VERSION, pinned in Kamaji's values so
# that none is pulled by a moving tag: etcd at the chart's appVersion; its post-install job's etcd
# client at the chart's v3.5.6 (the last upstream etcd image with a shell, which the job runs);
# its jobs' kubectl at `v<major>.<minor>` of the cluster (the chart's rule: a moving tag upstream);
# cfssl at a release instead of the chart's `latest`, which Kubernetes pulls on every job.
KAMAJI_ETCD_VERSION = "v3.6.12"
KAMAJI_ETCD_IMAGE = f"quay.io/coreos/etcd:{KAMAJI_ETCD_VERSION}"
KAMAJI_ETCD_CLIENT_VERSION = "v3.5.6"
KAMAJI_ETCD_CLIENT_IMAGE = f"quay.io/coreos/etcd:{KAMAJI_ETCD_CLIENT_VERSION}"
KAMAJI_ETCD_KUBECTL_IMAGE = "docker.io/clastix/kubectl:" + MANAGEMENT_KUBERNETES_VERSION.rsplit(".", 1)[0]
CFSSL_VERSION = "v1.6.5"
KAMAJI_ETCD_CFSSL_IMAGE = f"docker.io/cfssl/cfssl:{CFSSL_VERSION}"
KAMAJI_ETCD_IMAGES = (KAMAJI_ETCD_IMAGE, KAMAJI_ETCD_CLIENT_IMAGE, KAMAJI_ETCD_KUBECTL_IMAGE, KAMAJI_ETCD_CFSSL_IMAGE)


def kubeadm_images(version: str) -> tuple[str, ...]:
    """Every image `kubeadm init` of `version` runs, as `kubeadm config images list` names them."""
    tags = KUBEADM_IMAGE_TAGS[version]
    return (
        *(f"registry.k8s.io/{c}:{version}" for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")),
        f"registry.k8s.io/kube-proxy:{version}",
        f"registry.k8s.io/coredns/coredns:{tags['coredns']}",
        f"registry.k8s.io/pause:{tags['pause']}",
        f"registry.k8s.io/etcd:{tags['etcd']}",
    )


# The management cluster's storage: rancher's local-path provisioner (hostPath volumes made on
# demand, deleted with their claim), built from its Go module; its helper pods run the node's busybox.
LOCAL_PATH_PROVISIONER_VERSION = "v0.0.33"
LOCAL_PATH_PROVISIONER_IMAGE = f"docker.io/rancher/local-path-provisioner:{LOCAL_PATH_PROVISIONER_VERSION}"
# Konnectivity for every tenant: Kamaji picks v0.<tenant minor>.0, which is not published for
# every minor (v0.35.0 is not); the tenants' addons name this one.
KONNECTIVITY_VERSION = "v0.36.0"
KONNECTIVITY_IMAGES = (
    f"registry.k8s.io/kas-network-proxy/proxy-server:{KONNECTIVITY_VERSION}",
    f"registry.k8s.io/kas-network-proxy/proxy-agent:{KONNECTIVITY_VERSION}",
)

# KWOK's controller for kwok pools (the same version tools/build.sh builds for the tests).
KWOK_VERSION = "0.7.0"
KWOK_IMAGE = f"registry.k8s.io/kwok/kwok:v{KWOK_VERSION}"

# The release controller's image is built from components/controllers/release/Dockerfile on this base.
RELEASER_BASE_IMAGE = "docker.io/library/python:3.11-slim"
