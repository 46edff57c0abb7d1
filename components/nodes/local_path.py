"""The management cluster's storage: rancher's local-path provisioner, as plain objects the stack
applies (ManagementCluster) and the Docker tier applies the same way.

Why a provisioner rather than volumes the stack makes: Kamaji's DataStore (kamaji-etcd) claims
its volumes through a StatefulSet, whose claims are made and deleted with its replicas; only a
provisioner follows that, and deletes a volume with its claim. local-path is what kind ships for
the same job, and it builds from its Go module (tools/images/build.sh local-path-provisioner).

Volumes live under /var of the node, which is the node container's own Docker volume: removing
the node removes them. The helper pods that make and remove a volume's directory run the busybox
every lab node carries, so making a volume pulls nothing.

Least privilege: cluster-wide only what a provisioner must see (nodes, claims, storage classes)
and change (volumes, events); the helper pods and the provisioner's config only in its namespace.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from components.config.versions import LAB_BUSYBOX_IMAGE, LOCAL_PATH_PROVISIONER_IMAGE

NAMESPACE = "local-path-storage"
STORAGE_CLASS = "local-path"
PROVISIONER = "rancher.io/local-path"
VOLUMES_PATH = "/var/local-path-provisioner"
_NAME = "local-path-provisioner"
_ACCOUNT = f"{_NAME}-service-account"

_SETUP = """#!/bin/sh
set -eu
mkdir -m 0777 -p "$VOL_DIR"
"""
_TEARDOWN = """#!/bin/sh
set -eu
rm -rf "$VOL_DIR"
"""


def _helper_pod(helper_image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "helper-pod", "image": helper_image, "imagePullPolicy": "IfNotPresent"}],
        },
    }


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def manifests(image: str = LOCAL_PATH_PROVISIONER_IMAGE, helper_image: str = LAB_BUSYBOX_IMAGE) -> list[dict[str, Any]]:
    """The namespace, identity, RBAC, config, Deployment and default StorageClass, in apply order."""
    meta = {"name": _NAME, "namespace": NAMESPACE}
    account = {"kind": "ServiceAccount", "name": _ACCOUNT, "namespace": NAMESPACE}
    config = {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [VOLUMES_PATH]}]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": _ACCOUNT, "namespace": NAMESPACE}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": _NAME},
            "rules": [
                _rule([""], ["nodes", "persistentvolumeclaims"], ["get", "list", "watch"]),
                _rule([""], ["persistentvolumes"], ["get", "list", "watch", "create", "patch", "update", "delete"]),
                _rule([""], ["events"], ["create", "patch"]),
                _rule(["storage.k8s.io"], ["storageclasses"], ["get", "list", "watch"]),
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": _NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": _NAME},
            "subjects": [account],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                _rule([""], ["pods"], ["get", "list", "watch", "create", "patch", "update", "delete"]),
                _rule([""], ["pods/log", "configmaps"], ["get", "list", "watch"]),
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": _NAME},
            "subjects": [account],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", "namespace": NAMESPACE},
            "data": {
                "config.json": json.dumps(config),
                "setup": _SETUP,
                "teardown": _TEARDOWN,
                "helperPod.yaml": yaml.safe_dump(_helper_pod(helper_image), sort_keys=False),
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": _NAME}},
                "template": {
                    "metadata": {"labels": {"app": _NAME}},
                    "spec": {
                        "serviceAccountName": _ACCOUNT,
                        "containers": [
                            {
                                "name": _NAME,
                                "image": image,
                                "imagePullPolicy": "IfNotPresent",
                                "command": [_NAME, "start", "--config", "/etc/config/config.json"],
                                "env": [
                                    {
                                        "name": "POD_NAMESPACE",
                                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                    },
                                    {"name": "CONFIG_MOUNT_PATH", "value": "/etc/config/"},
                                ],
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/config/"}],
                                "securityContext": {"allowPrivilegeEscalation": False},
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "local-path-config"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                # The cluster's only class: claims that name none (kamaji-etcd's) get it.
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        },
    ]
