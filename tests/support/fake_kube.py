"""A small in-memory stand-in for the CoreV1Api calls the ops code makes, for fast unit tests
of its decisions (release, watch loop, guards). Objects are plain JSON, as `get_json` gives
them; patches are JSON merge patches with the API server's resourceVersion precondition
(409 on a stale one); any call can be made to fail with `fail(verb, name, status)`.
The real API server stays the judge in the integration tier."""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiException


class Answer:
    def __init__(self, obj: Any):
        self.data = json.dumps(obj).encode()


def merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def selects(selector: str | None, obj: dict[str, Any]) -> bool:
    """An equality label selector (`k=v,k2=v2`), as the API server applies it."""
    labels = obj["metadata"].get("labels") or {}
    wanted = (part.split("=", 1) for part in (selector or "").split(",") if part)
    return all(labels.get(key) == value for key, value in wanted)


@dataclass
class FakeCore:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    secrets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    _failures: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    _rv: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)
    on_patch: Callable[[str, str], None] | None = None

    # -- test set-up --------------------------------------------------------------------
    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def add_node(self, name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None):
        self.nodes[name] = {
            "metadata": {
                "name": name,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
                "resourceVersion": self._next_rv(),
            },
            "spec": {},
        }

    def remove_node(self, name: str) -> None:
        del self.nodes[name]

    def add_pod(
        self,
        namespace: str,
        name: str,
        annotations: dict[str, str] | None = None,
        node: str | None = None,
        scheduler: str | None = None,
        conditions: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        pod = {
            "metadata": {
                "namespace": namespace,
                "name": name,
                "uid": f"uid-{namespace}-{name}",
                "annotations": dict(annotations or {}),
                "resourceVersion": self._next_rv(),
            },
            "spec": {"containers": [{"name": "c"}]},
            "status": {"conditions": list(conditions or [])},
        }
        if node:
            pod["spec"]["nodeName"] = node
        if scheduler:
            pod["spec"]["schedulerName"] = scheduler
        self.pods[(namespace, name)] = pod
        return copy.deepcopy(pod)

    def fail(self, verb: str, name: str, status: int, times: int = -1) -> None:
        """Make `verb` on `name` answer HTTP `status` (`times` times; -1 for ever)."""
        self._failures[(verb, name)] = (status, times)

    def heal(self, verb: str, name: str) -> None:
        self._failures.pop((verb, name), None)

    # -- the API ------------------------------------------------------------------------
    def _call(self, verb: str, name: str) -> None:
        with self._lock:
            self.calls.append((verb, name))
            status, times = self._failures.get((verb, name), (0, 0))
            if not status:
                return
            if times > 0:
                self._failures[(verb, name)] = (status, times - 1) if times > 1 else (0, 0)
        raise ApiException(status=status, reason=f"injected {status}")

    def _patch(self, obj: dict[str, Any] | None, patch: dict[str, Any]) -> None:
        if obj is None:
            raise ApiException(status=404, reason="Not Found")
        want = (patch.get("metadata") or {}).get("resourceVersion")
        if want is not None and want != obj["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        patch = copy.deepcopy(patch)
        patch.get("metadata", {}).pop("resourceVersion", None)
        merge(obj, patch)
        obj["metadata"]["resourceVersion"] = self._next_rv()

    def _delete(self, store: dict[Any, dict[str, Any]], key: Any, body: Any) -> Answer:
        """As the API server deletes: 404 when absent, 409 when a precondition (uid, ...) fails."""
        with self._lock:
            found = store.get(key)
            if found is None:
                raise ApiException(status=404, reason="Not Found")
            want = (body or {}).get("preconditions") or {}
            if any(found["metadata"].get(k) != v for k, v in want.items()):
                raise ApiException(status=409, reason="Conflict")
            del store[key]
        return Answer({})

    def read_node(self, name: str, **_kw: Any) -> Answer:
        self._call("read_node", name)
        if name not in self.nodes:
            raise ApiException(status=404, reason="Not Found")
        return Answer(self.nodes[name])

    def patch_node(self, name: str, body: dict[str, Any], **_kw: Any) -> Answer:
        self._call("patch_node", name)
        with self._lock:
            self._patch(self.nodes.get(name), body)
        if self.on_patch:
            self.on_patch("node", name)
        return Answer(self.nodes[name])

    def list_node(self, label_selector: str | None = None, **_kw: Any) -> Answer:
        self._call("list_node", label_selector or "")
        items = [n for n in self.nodes.values() if selects(label_selector, n)]
        return Answer({"items": items, "metadata": {"resourceVersion": str(self._rv)}})

    def create_namespaced_secret(self, namespace: str, body: dict[str, Any], **_kw: Any) -> Answer:
        """Stored as the API server keeps it: `stringData` becomes base64 `data`."""
        name = body["metadata"]["name"]
        self._call("create_namespaced_secret", f"{namespace}/{name}")
        if (namespace, name) in self.secrets:
            raise ApiException(status=409, reason="AlreadyExists")
        data = {k: base64.b64encode(v.encode()).decode() for k, v in (body.get("stringData") or {}).items()}
        meta = {**body["metadata"], "uid": f"uid-{namespace}-{name}", "resourceVersion": self._next_rv()}
        self.secrets[(namespace, name)] = {"metadata": meta, "type": body.get("type"), "data": data}
        return Answer(self.secrets[(namespace, name)])

    def read_namespaced_secret(self, name: str, namespace: str, **_kw: Any) -> Answer:
        self._call("read_namespaced_secret", f"{namespace}/{name}")
        if (namespace, name) not in self.secrets:
            raise ApiException(status=404, reason="Not Found")
        return Answer(self.secrets[(namespace, name)])

    def delete_namespaced_secret(self, name: str, namespace: str, body: Any = None, **_kw: Any) -> Answer:
        self._call("delete_namespaced_secret", f"{namespace}/{name}")
        return self._delete(self.secrets, (namespace, name), body)

    def read_namespaced_pod(self, name: str, namespace: str, **_kw: Any) -> Answer:
        self._call("read_namespaced_pod", f"{namespace}/{name}")
        if (namespace, name) not in self.pods:
            raise ApiException(status=404, reason="Not Found")
        return Answer(self.pods[(namespace, name)])

    def patch_namespaced_pod(self, name: str, namespace: str, body: dict[str, Any], **_kw: Any) -> Answer:
        self._call("patch_namespaced_pod", f"{namespace}/{name}")
        with self._lock:
            self._patch(self.pods.get((namespace, name)), body)
        if self.on_patch:
            self.on_patch("pod", f"{namespace}/{name}")
        return Answer(self.pods[(namespace, name)])

    def create_namespaced_pod(
        self, namespace: str, body: dict[str, Any], dry_run: str | None = None, **_kw: Any
    ) -> Answer:
        """A new uid each time; AlreadyExists (409) for a name in use, dry run or not."""
        name = body["metadata"]["name"]
        self._call("create_namespaced_pod" + ("(dry-run)" if dry_run else ""), f"{namespace}/{name}")
        with self._lock:
            if (namespace, name) in self.pods:
                raise ApiException(status=409, reason="AlreadyExists")
            pod = copy.deepcopy(body)
            if dry_run:
                return Answer(pod)
            pod["metadata"].update(uid=f"uid-{namespace}-{name}-{self._next_rv()}", resourceVersion=self._next_rv())
            pod.setdefault("status", {"phase": "Pending"})
            self.pods[(namespace, name)] = pod
        return Answer(pod)

    def delete_namespaced_pod(self, name: str, namespace: str, body: Any = None, **_kw: Any) -> Answer:
        self._call("delete_namespaced_pod", f"{namespace}/{name}")
        return self._delete(self.pods, (namespace, name), body)

    def list_pod_for_all_namespaces(self, **_kw: Any) -> Answer:
        self._call("list_pod_for_all_namespaces", "")
        return Answer({"items": list(self.pods.values()), "metadata": {"resourceVersion": str(self._rv)}})

    def list_namespaced_pod(self, namespace: str, label_selector: str | None = None, **_kw: Any) -> Answer:
        self._call("list_namespaced_pod", namespace)
        items = [p for (ns, _), p in self.pods.items() if ns == namespace and selects(label_selector, p)]
        return Answer({"items": items, "metadata": {"resourceVersion": str(self._rv)}})

    def list_namespaced_event(self, namespace: str, field_selector: str = "", **_kw: Any) -> Answer:
        self._call("list_namespaced_event", namespace)
        fields = dict(part.split("=", 1) for part in field_selector.split(",") if part)
        items = [
            e
            for e in self.events
            if all((e.get("involvedObject") or {}).get(k.split(".", 1)[1]) == v for k, v in fields.items())
        ]
        return Answer({"items": items})

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.pods[(namespace, name)])


@dataclass
class FakeApps:
    """The AppsV1Api reads the rollout wait makes: Deployments and their ReplicaSets."""

    deployments: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    replica_sets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def put_deployment(
        self, namespace: str, name: str, generation: int, observed: int, revision: str, labels: dict[str, str]
    ) -> dict[str, Any]:
        self.deployments[(namespace, name)] = {
            "metadata": {
                "namespace": namespace,
                "name": name,
                "uid": f"uid-{namespace}-{name}",
                "generation": generation,
                "labels": dict(labels),
                "annotations": {"deployment.kubernetes.io/revision": revision},
            },
            "status": {"observedGeneration": observed},
        }
        return self.deployments[(namespace, name)]

    def put_replica_set(
        self,
        namespace: str,
        deployment: str,
        revision: str,
        template_hash: str,
        labels: dict[str, str],
        failure: str | None = None,
    ) -> None:
        name = f"{deployment}-{template_hash}"
        conditions = [{"type": "ReplicaFailure", "status": "True", "message": failure}] if failure else []
        self.replica_sets[(namespace, name)] = {
            "metadata": {
                "namespace": namespace,
                "name": name,
                "labels": {**labels, "pod-template-hash": template_hash},
                "annotations": {"deployment.kubernetes.io/revision": revision},
                "ownerReferences": [{"kind": "Deployment", "name": deployment, "uid": f"uid-{namespace}-{deployment}"}],
            },
            "status": {"conditions": conditions},
        }

    def read_namespaced_deployment(self, name: str, namespace: str, **_kw: Any) -> Answer:
        if (namespace, name) not in self.deployments:
            raise ApiException(status=404, reason="Not Found")
        return Answer(self.deployments[(namespace, name)])

    def list_namespaced_replica_set(self, namespace: str, label_selector: str | None = None, **_kw: Any) -> Answer:
        items = [r for (ns, _), r in self.replica_sets.items() if ns == namespace and selects(label_selector, r)]
        return Answer({"items": items})
