"""A docker worker whose join failed heals with the next `up`, through the real engine against
the real API server with kube-controller-manager's tokencleaner: its token lapses and is
cleaned up, the next `up` issues a fresh one (which the join, re-run by the engine, would use),
and once the worker's Node is there and its membership has revoked the token, `up` changes
nothing. kubeadm and the worker container need Docker (end-to-end tier): here the worker's
kubelet and NodeMembership are played by the test, as in the external-pool test."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from components.lifecycle import bootstrap_token as bs
from tests.support.waits import settles

PROGRAM = Path(__file__).parent / "programs" / "worker_token"
NODE = "lab-team-a-worker-0"
TTL = 15
pytestmark = pytest.mark.integration


def outputs(pulumi_cli, work) -> dict:
    return json.loads(pulumi_cli("stack", "output", "--json", "--show-secrets", cwd=work).stdout)


def test_a_failed_join_gets_a_fresh_token_on_the_next_up_and_a_joined_worker_keeps_still(
    pulumi_cli, with_tokencleaner, tmp_path
):
    core = with_tokencleaner.core()
    work = pulumi_cli.new_stack(PROGRAM, tmp_path / "program", with_tokencleaner.kubeconfig_text)
    pulumi_cli("config", "set", "node", NODE, cwd=work)
    pulumi_cli("config", "set", "ttlSeconds", str(TTL), cwd=work)
    try:
        pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
        first = outputs(pulumi_cli, work)
        tid = first["tokenId"]
        pulumi_cli("preview", "--expect-no-changes", cwd=work)  # within its life: kept for the join

        # The join failed (no Node) and the token lapsed: the tokencleaner removes it.
        gone = settles(lambda: bs.held_token(core, tid, first["token"]) is None, timeout=TTL + 60, interval=1)
        assert gone, "the tokencleaner never removed the lapsed token"
        pulumi_cli("up", "--yes", "--skip-preview", cwd=work)
        fresh = outputs(pulumi_cli, work)
        assert fresh["tokenId"] == tid and fresh["token"] != first["token"]
        expires = datetime.fromisoformat(fresh["expiration"].replace("Z", "+00:00"))
        assert expires > datetime.now(UTC)
        assert bs.held_token(core, tid, fresh["token"]) is not None  # live: the join can use it

        # The join works this time: the kubelet registers the Node, the membership revokes the token.
        core.create_node({"metadata": {"name": NODE, "labels": {bs.HOSTNAME_LABEL: NODE}}})
        assert bs.delete_token(core, tid, fresh["token"])
        pulumi_cli("preview", "--expect-no-changes", cwd=work)
        assert settles(lambda: datetime.now(UTC) > expires, timeout=TTL + 5, interval=1)  # its life is over too
        pulumi_cli("preview", "--expect-no-changes", cwd=work)  # a joined worker is never sent to join again
    finally:
        pulumi_cli("destroy", "--yes", cwd=work, check=False)
        if core.list_node(field_selector=f"metadata.name={NODE}").items:
            core.delete_node(NODE)
