"""A team stack's grant as the unit tier gives it (what scripts/grant-team.sh sets): a bound token
that expires in 2100, the management API server's URL and the harness's CA."""

from __future__ import annotations

import base64
import json

from components.kube.client import cluster_ca
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
