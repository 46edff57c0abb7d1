"""Kubernetes clients for the program's own automation: bounded calls, no key material on disk.

- Every request carries a timeout (REQUEST_TIMEOUT unless the caller gives its own), so a hung
  connection can never outlive a deadline: the client library passes no timeout by default and
  urllib3 then blocks for ever.
- The CA, client certificate and key of a kubeconfig go into anonymous in-memory files
  (memfd): the client library would write them to /tmp, where they stay if the process is
  killed. They vanish with the process.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

# (connect, read) seconds for one API request.
REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)

_memfd_lock = threading.Lock()
_load_lock = threading.Lock()
_memfds: dict[str, str] = {}


def _memfd_with(content: str | bytes, *_args: object, **_kwargs: object) -> str:
    """A path to an in-memory file holding `content` (one per distinct content, kept open)."""
    data = content.encode() if isinstance(content, str) else content
    key = base64.b64encode(data).decode()
    with _memfd_lock:
        if key not in _memfds:
            fd = os.memfd_create("gpu-tenancy-kube", os.MFD_CLOEXEC)
            os.write(fd, data)
            _memfds[key] = f"/proc/self/fd/{fd}"
        return _memfds[key]


def _with_default_timeout(api_client: Any, timeout: tuple[float, float]) -> Any:
    """Make every request of this client use `timeout` unless the call sets its own."""
    rest = api_client.rest_client
    request: Callable[..., Any] = rest.request

    def bounded(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return request(*args, _request_timeout=_request_timeout or timeout, **kwargs)

    rest.request = bounded
    return api_client


def api_client(
    kubeconfig: str,
    timeout: tuple[float, float] = REQUEST_TIMEOUT,
    connections: int = 4,
    token: Callable[[], str] | None = None,
) -> Any:
    """An ApiClient for a kubeconfig's text; made per use, never kept on a pickled provider.
    `connections`: the HTTP pool size, for callers that send requests from several threads.
    `token`: asked for the bearer token before each request (a token that is renewed)."""
    from kubernetes import client as k8s_client
    from kubernetes.config import kube_config

    current_context(kubeconfig)  # one plain error for a kubeconfig with no usable current context
    doc = yaml.safe_load(kubeconfig)
    # The library writes inline key material through this one function; send it to memory.
    with _load_lock:
        original = kube_config._create_temp_file_with_content
        kube_config._create_temp_file_with_content = _memfd_with
        try:
            configuration = k8s_client.Configuration()
            configuration.connection_pool_maxsize = connections
            kube_config.load_kube_config_from_dict(doc, client_configuration=configuration)
            if token is not None:
                # the key the loader sets (and auth_settings reads first)
                configuration.refresh_api_key_hook = lambda c: c.api_key.update(BearerToken=f"Bearer {token()}")
            client = k8s_client.ApiClient(configuration)
        finally:
            kube_config._create_temp_file_with_content = original
    return _with_default_timeout(client, timeout)


def core_api(
    kubeconfig: str,
    timeout: tuple[float, float] = REQUEST_TIMEOUT,
    connections: int = 4,
    token: Callable[[], str] | None = None,
) -> Any:
    """A CoreV1Api for a kubeconfig's text (see api_client)."""
    from kubernetes import client

    return client.CoreV1Api(api_client(kubeconfig, timeout, connections, token))


def apps_api_of(core: Any) -> Any:
    """An AppsV1Api on the same connection as a CoreV1Api (core_api)."""
    from kubernetes import client

    return client.AppsV1Api(core.api_client)


def custom_objects_api_of(core: Any) -> Any:
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


def get_json(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """A client call's answer as plain JSON: no model classes (faster), the shape watches give."""
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


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
