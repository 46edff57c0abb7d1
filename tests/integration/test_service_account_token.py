"""The releaser's token read: it waits until the token controller fills the Secret (here a
thread writes it, as kube-controller-manager does a moment after creation), and says so plainly
when it never comes."""

from __future__ import annotations

import base64
import threading
import time
import uuid

import pytest
from kubernetes import client

from components.ops.service_account_token import TokenNotIssuedError, wait_for_token

pytestmark = pytest.mark.integration


def token_secret(core, name: str) -> None:
    core.create_namespaced_secret(
        "default",
        client.V1Secret(
            metadata=client.V1ObjectMeta(name=name, annotations={"kubernetes.io/service-account.name": "default"}),
            type="kubernetes.io/service-account-token",
        ),
    )


def test_waits_for_the_token_controller(cluster):
    core = cluster.core()
    name = f"sa-token-{uuid.uuid4().hex[:6]}"
    token_secret(core, name)

    def token_controller():
        time.sleep(1.5)
        core.patch_namespaced_secret(name, "default", {"data": {"token": base64.b64encode(b"issued").decode()}})

    threading.Thread(target=token_controller).start()
    assert wait_for_token(core, "default", name, timeout=20, interval=0.2) == "issued"


def test_a_token_never_issued_is_reported(cluster):
    core = cluster.core()
    name = f"sa-token-{uuid.uuid4().hex[:6]}"
    token_secret(core, name)
    with pytest.raises(TokenNotIssuedError, match="kube-controller-manager"):
        wait_for_token(core, "default", name, timeout=1, interval=0.2)
