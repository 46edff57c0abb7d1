"""Kamaji's CRDs (byte copies of upstream's files, kept beside the project in shared/fixtures/kamaji,
or wherever GPU_TENANCY_KAMAJI_CRDS names), for the tests that hold what the program writes, or
lets a team write, to their schema. Without them those tests skip, naming the file; CI sets
GPU_TENANCY_REQUIRE_FIXTURES, and a missing file fails there instead."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.harness import ROOT

FOLDER = Path(os.environ.get("GPU_TENANCY_KAMAJI_CRDS") or Path(ROOT).parent / "shared" / "fixtures" / "kamaji")
TENANT_CONTROL_PLANES = "kamaji.clastix.io_tenantcontrolplanes.yaml"
DATASTORES = "kamaji.clastix.io_datastores.yaml"


def crd_path(name: str) -> Path:
    """The CRD file `name`; the test skips (fails under GPU_TENANCY_REQUIRE_FIXTURES) without it."""
    path = FOLDER / name
    if not path.is_file():
        why = f"Kamaji's CRD {name} is not at {path} (upstream's file; GPU_TENANCY_KAMAJI_CRDS names its folder)"
        if os.environ.get("GPU_TENANCY_REQUIRE_FIXTURES"):
            pytest.fail(why)
        pytest.skip(why)
    return path


def crd(name: str = TENANT_CONTROL_PLANES) -> dict[str, Any]:
    return yaml.safe_load(crd_path(name).read_text())


def spec_schema() -> dict[str, Any]:
    """The v1alpha1 schema of a TenantControlPlane's `spec`."""
    (version,) = [v for v in crd()["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]["properties"]["spec"]
