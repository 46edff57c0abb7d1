"""A team stack's grant as the unit tier gives it (what scripts/grant-team.sh sets): a bound token
that expires in 2100, the management API server's URL and the harness's CA; and the record the
shipped platform stack (Pulumi.platform.yaml) publishes for a team."""

from __future__ import annotations

import base64
import json

from components.kube.client import cluster_ca
from components.kube.platform_record import PlatformRecord
from tests.support.harness import TENANT_SUPER


def jwt(exp: float) -> str:
    """A token whose only claim is its expiry (read, never verified, by the program)."""
    body = base64.urlsafe_b64encode(json.dumps({"exp": exp}).encode()).decode().rstrip("=")
    return f"e30.{body}.sig"


TOKEN = jwt(4102444800)  # 2100-01-01
CA = cluster_ca(TENANT_SUPER)
SERVER = "https://172.31.0.2:6443"
GRANT = {"gpu-tenancy:managementServer": SERVER, "gpu-tenancy:managementCa": CA}
SECRET = ("gpu-tenancy:managementToken",)


def team_config(config: dict) -> dict:
    """A team stack's config with the grant its platform owner set (the token a secret)."""
    return {**config, "gpu-tenancy:managementToken": TOKEN, **GRANT}


def record(team: str, api_port: int, konnectivity_port: int, schema: str | None = None) -> PlatformRecord:
    """What the shipped platform stack publishes for `team` (its DataStore `etcd-<team>`; its etcd
    keys named from its own name unless `schema` says otherwise)."""
    own = team.replace("-", "_")
    return PlatformRecord(
        team=team,
        lab="gpu-platform",
        address="172.31.0.2",
        network="gpu-platform",
        datastore=f"etcd-{team}",
        schema=schema or f"gpu_tenancy_{own}_{own}",
        api_port=api_port,
        konnectivity_port=konnectivity_port,
    )
