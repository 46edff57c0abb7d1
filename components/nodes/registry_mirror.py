"""What a node's container runtime is given so that every pull goes through the lab's mirror.

Kamaji pulls each tenant's kube-apiserver and konnectivity-server with `imagePullPolicy: Always`,
so images preloaded into a node are not enough on a closed network: the runtime itself must ask
the mirror. Manifests and charts keep their upstream names; the runtime maps each registry to
its path in the mirror (components.config.image_refs says the layout):

- containerd (the lab's node image, kind's nodes): one `hosts.toml` per registry under
  `config_path`, read at every pull (no restart), the mirror host with `override_path`;
- k3s (the management cluster): `registries.yaml`, read at start, one mirror per registry with
  a rewrite into its path.

Over HTTPS the mirror's CA is written beside them and named by each. containerd asks the mirror
only (never the upstream registry), so a pull from a mirror that does not answer says the
mirror's address.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from components.config.model import MirrorConfig

CONTAINERD_CERTS_DIR = "/etc/containerd/certs.d"
K3S_REGISTRIES = "/etc/rancher/k3s/registries.yaml"
K3S_MIRROR_CA = "/etc/rancher/k3s/mirror-ca.crt"
CA_FILE = "mirror-ca.crt"
CONTAINERD = "containerd"
K3S = "k3s"


@dataclass(frozen=True)
class Mirror:
    """The mirror as nodes reach it: `http(s)://host[:port]` without a path, and its CA (PEM)."""

    endpoint: str
    ca_pem: str | None = None

    @property
    def host(self) -> str:
        """`host[:port]`: the name images are pushed under."""
        return urlsplit(self.endpoint).netloc

    @property
    def https(self) -> bool:
        return self.endpoint.startswith("https://")

    def url(self, registry: str) -> str:
        """Where the mirror serves `registry`'s images, as a registry API root (ends in /v2/...)."""
        return f"{self.endpoint}/v2/{registry}"


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for these characters


def hosts_toml(mirror: Mirror, registry: str) -> str:
    """containerd's host configuration for one upstream registry: the mirror and nothing else.

    containerd tries each `[host]` in order, then the file's `server`, which when left out is the
    upstream registry itself (registry-1.docker.io for docker.io): a pull the mirror cannot answer
    would go out to the internet and report the upstream's error, not the mirror's. So `server` is
    the mirror too. The `[host]` table stays: containerd 1.6 refuses a hosts.toml without one and
    then falls back to the upstream."""
    settings = ['capabilities = ["pull", "resolve"]', "override_path = true"]
    if mirror.https and mirror.ca_pem:
        settings.append(f"ca = {_toml(f'{CONTAINERD_CERTS_DIR}/{registry}/{CA_FILE}')}")
    lines = [
        f"# gpu-tenancy: {registry} through the lab's registry mirror, never the upstream",
        f"server = {_toml(mirror.url(registry))}",
        *settings,
        "",
        f"[host.{_toml(mirror.url(registry))}]",
        *(f"  {s}" for s in settings),
    ]
    return "\n".join(lines) + "\n"


def containerd_files(mirror: Mirror, registries: Iterable[str]) -> dict[str, str]:
    """Path -> content of every file a containerd node needs (hosts.toml, and the CA per registry)."""
    files: dict[str, str] = {}
    for registry in sorted(set(registries)):
        files[f"{CONTAINERD_CERTS_DIR}/{registry}/hosts.toml"] = hosts_toml(mirror, registry)
        if mirror.https and mirror.ca_pem:
            files[f"{CONTAINERD_CERTS_DIR}/{registry}/{CA_FILE}"] = mirror.ca_pem
    return files


def k3s_registries_yaml(mirror: Mirror, registries: Iterable[str]) -> str:
    """k3s's registries.yaml: each registry mirrored into its path (JSON is YAML)."""
    doc: dict[str, object] = {
        "mirrors": {
            registry: {"endpoint": [mirror.endpoint], "rewrite": {"^(.*)$": f"{registry}/$1"}}
            for registry in sorted(set(registries))
        }
    }
    if mirror.https and mirror.ca_pem:
        doc["configs"] = {mirror.host: {"tls": {"ca_file": K3S_MIRROR_CA}}}
    return json.dumps(doc, indent=2) + "\n"


def k3s_files(mirror: Mirror, registries: Iterable[str]) -> dict[str, str]:
    files = {K3S_REGISTRIES: k3s_registries_yaml(mirror, registries)}
    if mirror.https and mirror.ca_pem:
        files[K3S_MIRROR_CA] = mirror.ca_pem
    return files


def mirror_files(mirror: MirrorConfig | None, registries: Iterable[str], runtime: str) -> dict[str, str]:
    """The files a node of `runtime` (CONTAINERD or K3S) starts with: {} without a mirror."""
    if mirror is None:
        return {}
    m = Mirror(mirror.endpoint, mirror.ca_cert)
    return k3s_files(m, registries) if runtime == K3S else containerd_files(m, registries)
