"""Kubernetes clients for the program's own automation: bounded calls, no key material on disk.

- Every request carries a timeout (REQUEST_TIMEOUT unless the caller gives its own), so a hung
  connection can never outlive a deadline: the client library passes no timeout by default and
  urllib3 then blocks for ever.
- The CA, client certificate and key of a kubeconfig go into anonymous in-memory files
  (memfd), named in the kubeconfig as its files: the client library would write inline ones to
  /tmp, where they stay if the process is killed. They vanish with the process.
- The official client is used as documented: its kubeconfig loader, Configuration, the per-call
  `_request_timeout` (given a default by a subclass) and `_preload_content=False` for plain JSON;
  nothing of its internals is replaced (bench/kube_client.py measures the choice).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api, CustomObjectsApi

# (connect, read) seconds for one API request.
REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)

_memfd_lock = threading.Lock()
_memfds: dict[bytes, str] = {}

# The kubeconfig fields that carry key material inline, and the file field each stands for.
_INLINE_FILES = {
    "cluster": (("certificate-authority-data", "certificate-authority"),),
    "user": (("client-certificate-data", "client-certificate"), ("client-key-data", "client-key")),
}


def _memfd_with(data: bytes) -> str:
    """A path to an in-memory file holding `data` (one per distinct content, kept open)."""
    with _memfd_lock:
        if data not in _memfds:
            fd = os.memfd_create("gpu-tenancy-kube", os.MFD_CLOEXEC)
            os.write(fd, data)
            _memfds[data] = f"/proc/self/fd/{fd}"
        return _memfds[data]


def _in_memory(doc: dict[str, Any]) -> dict[str, Any]:
    """The kubeconfig with its inline CA, certificate and key given as paths of in-memory files.

    The client library writes inline key material to files under /tmp, left there if the process
    is killed; a kubeconfig may name files instead, so it gets files that live in memory only and
    vanish with the process. The library then loads the kubeconfig as documented."""
    out = dict(doc)
    for kind, fields in _INLINE_FILES.items():
        entries = []
        for entry in doc.get(f"{kind}s") or []:
            body = entry.get(kind) if isinstance(entry, dict) else None
            if isinstance(body, dict):
                body = dict(body)
                for data_key, file_key in fields:
                    if body.get(data_key):
                        body[file_key] = _memfd_with(base64.b64decode(body.pop(data_key)))
                entry = {**entry, kind: body}
            entries.append(entry)
        if entries:
            out[f"{kind}s"] = entries
    return out


@functools.cache
def _bounded_client_class() -> type:
    """ApiClient whose requests carry `timeout` unless the call gives its own `_request_timeout`
    (the library's per-call parameter; it has no default, and urllib3 then waits for ever)."""
    from kubernetes import client as k8s_client

    class BoundedApiClient(k8s_client.ApiClient):  # type: ignore[misc]
        def __init__(self, configuration: Any, timeout: tuple[float, float]):
            super().__init__(configuration)
            self.default_timeout = timeout

        def call_api(self, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
            return super().call_api(*args, _request_timeout=_request_timeout or self.default_timeout, **kwargs)

    return BoundedApiClient


def api_client(
    kubeconfig: str,
    timeout: tuple[float, float] = REQUEST_TIMEOUT,
    connections: int = 4,
    token: Callable[[], str] | None = None,
) -> ApiClient:
    """An ApiClient for a kubeconfig's text; made per use, never kept on a pickled provider.
    `connections`: the HTTP pool size, for callers that send requests from several threads.
    `token`: asked for the bearer token before each request (a token that is renewed)."""
    from kubernetes import client as k8s_client
    from kubernetes.config import kube_config

    current_context(kubeconfig)  # one plain error for a kubeconfig with no usable current context
    configuration = k8s_client.Configuration()
    configuration.connection_pool_maxsize = connections
    kube_config.load_kube_config_from_dict(
        _in_memory(yaml.safe_load(kubeconfig)), client_configuration=configuration, persist_config=False
    )
    if token is not None:
        # the key the loader sets (and auth_settings reads first)
        configuration.refresh_api_key_hook = lambda c: c.api_key.update(BearerToken=f"Bearer {token()}")
    return _bounded_client_class()(configuration, timeout)


def core_api(
    kubeconfig: str,
    timeout: tuple[float, float] = REQUEST_TIMEOUT,
    connections: int = 4,
    token: Callable[[], str] | None = None,
) -> CoreV1Api:
    """A CoreV1Api for a kubeconfig's text (see api_client)."""
    from kubernetes import client

    return client.CoreV1Api(api_client(kubeconfig, timeout, connections, token))


def apps_api_of(core: CoreV1Api) -> AppsV1Api:
    """An AppsV1Api on the same connection as a CoreV1Api (core_api)."""
    from kubernetes import client

    return client.AppsV1Api(core.api_client)


def custom_objects_api_of(core: CoreV1Api) -> CustomObjectsApi:
    """A CustomObjectsApi on the same connection as a CoreV1Api (core_api)."""
    from kubernetes import client

    return client.CustomObjectsApi(core.api_client)


class KubeconfigError(ValueError):
    """A kubeconfig that does not say, through its current context, which cluster and user to use."""


@dataclass(frozen=True)
class CurrentContext:
    """The cluster and user a kubeconfig's current-context names (their names and their entries)."""

    name: str
    cluster_name: str
    cluster: dict[str, Any]
    user_name: str | None
    user: dict[str, Any]

    def cluster_field(self, key: str) -> str:
        value = self.cluster.get(key)
        if not isinstance(value, str) or not value:
            raise KubeconfigError(f"kubeconfig cluster {self.cluster_name!r} (context {self.name!r}) has no {key}")
        return value


def _named(doc: dict[str, Any], kind: str, name: object, field: str) -> dict[str, Any] | None:
    for entry in doc.get(kind) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(field)
            return value if isinstance(value, dict) else {}
    return None


def _names(doc: dict[str, Any], kind: str) -> str:
    names = [str(e.get("name")) for e in doc.get(kind) or [] if isinstance(e, dict)]
    return ", ".join(names) or "none"


def _named_by_context(doc: dict[str, Any], context: object, field: str, name: object) -> dict[str, Any]:
    """The cluster or user entry a context names; an error naming both when the file lacks it."""
    found = _named(doc, f"{field}s", name, field)
    if found is None:
        raise KubeconfigError(
            f"kubeconfig context {context!r} names {field} {name!r}, which is not one of its {field}s "
            f"({_names(doc, f'{field}s')})"
        )
    return found


def current_context(kubeconfig: str | dict[str, Any]) -> CurrentContext:
    """The cluster and user the kubeconfig's current-context names, as kubectl and client-go pick
    them: an adopted kubeconfig may hold several contexts, and their order means nothing. The one
    place the program reads which cluster and user a kubeconfig means."""
    try:
        doc = yaml.safe_load(kubeconfig) if isinstance(kubeconfig, str) else kubeconfig
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig is not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise KubeconfigError("kubeconfig is not a YAML mapping")
    name = doc.get("current-context")
    if not name:
        raise KubeconfigError(f"kubeconfig has no current-context (its contexts: {_names(doc, 'contexts')})")
    context = _named(doc, "contexts", name, "context")
    if context is None:
        raise KubeconfigError(
            f"kubeconfig's current-context {name!r} is not one of its contexts ({_names(doc, 'contexts')})"
        )
    cluster_name = context.get("cluster")
    if not cluster_name:
        raise KubeconfigError(f"kubeconfig context {name!r} names no cluster")
    cluster = _named_by_context(doc, name, "cluster", cluster_name)
    user_name = context.get("user") or None  # no user: anonymous, as client-go allows
    user = _named_by_context(doc, name, "user", user_name) if user_name else {}
    return CurrentContext(str(name), str(cluster_name), cluster, user_name and str(user_name), user)


def _one_context(server: str, ca_data: str, user: dict[str, Any], name: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
        },
        sort_keys=False,
    )


def token_kubeconfig(server: str, ca_data: str, token: str, name: str = "gpu-tenancy") -> str:
    """A kubeconfig for a bearer token (a ServiceAccount's), CA given base64 as in kubeconfigs."""
    return _one_context(server, ca_data, {"token": token}, name)


def token_file_kubeconfig(server: str, ca_data: str, path: str, name: str = "gpu-tenancy") -> str:
    """A kubeconfig whose token is read from `path` (client-go re-reads it every minute), for a
    client whose token a keeper renews (components.kube.bound_token)."""
    return _one_context(server, ca_data, {"tokenFile": path}, name)


def cluster_ca(kubeconfig: str) -> str:
    """The base64 CA of the current context's cluster."""
    return current_context(kubeconfig).cluster_field("certificate-authority-data")


def cluster_server(kubeconfig: str) -> str:
    """The server URL of the current context's cluster."""
    return current_context(kubeconfig).cluster_field("server")


def rewrite_server(kubeconfig: str, server: str) -> str:
    """Return the kubeconfig with every cluster's server replaced by `server`.

    k3s writes https://127.0.0.1:6443, which only works inside its container; the host and the
    worker containers reach it on its Docker network address (which k3s puts in its cert SANs).
    """
    doc = yaml.safe_load(kubeconfig)
    if not isinstance(doc, dict) or not isinstance(doc.get("clusters"), list) or not doc["clusters"]:
        raise ValueError("kubeconfig has no clusters")
    for entry in doc["clusters"]:
        entry["cluster"]["server"] = server
    return yaml.safe_dump(doc, sort_keys=False)


def endpoint_kubeconfig(kubeconfig: str, server: str) -> str:
    """The kubeconfig's current context alone, its cluster named `server` and pointing there.

    A provider given `cluster=server` then says at preview, before the kubeconfig is known,
    which API server it reaches: the policy pack attributes objects by it.
    """
    current = current_context(kubeconfig)
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": server, "cluster": {**current.cluster, "server": server}}],
            "users": [{"name": server, "user": current.user}],
            "contexts": [{"name": server, "context": {"cluster": server, "user": server}}],
            "current-context": server,
        },
        sort_keys=False,
    )


def read_answer(call: Callable[..., Any], *args: Any, **kwargs: Any) -> bytes:
    """A client call's answer, as the API server sent it: no model classes (bench/kube_client.py:
    a list decoded into them takes 2.9 times as long). The answer is read whole, so its connection
    goes back to the pool: an answer left unread costs the next request a new TLS connection
    (2.4 times the CPU per request). The one place `_preload_content` is given."""
    return bytes(call(*args, _preload_content=False, **kwargs).data)


def send(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """A call whose answer the caller does not need (a write, a probe); see read_answer."""
    read_answer(call, *args, **kwargs)


def get_json(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """A client call's answer as plain JSON, the shape watches give (see read_answer)."""
    return json.loads(read_answer(call, *args, **kwargs))


def get_json_or_none(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any] | None:
    """The same, or None when the API says the object does not exist (404)."""
    try:
        return get_json(call, *args, **kwargs)
    except Exception as exc:
        if http_status(exc) == 404:
            return None
        raise


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a kubernetes client error (None for any other exception)."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None
