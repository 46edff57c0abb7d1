"""Kamaji's TenantControlPlane CRD (a byte copy of upstream beside the project, in shared/), for
the tests that hold what the program writes, or lets a team write, to its schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.harness import ROOT

CRD = Path(ROOT).parent / "shared" / "fixtures" / "kamaji" / "kamaji.clastix.io_tenantcontrolplanes.yaml"


def spec_schema() -> dict[str, Any]:
    """The v1alpha1 schema of a TenantControlPlane's `spec`."""
    if not CRD.exists():
        pytest.fail(f"Kamaji CRD fixture not found at {CRD}: the shared/ folder must sit beside the project")
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]["properties"]["spec"]
