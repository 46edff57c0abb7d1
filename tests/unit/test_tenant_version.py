"""Kamaji's version rules as the stack applies them at preview: a new tenant at most at the
minor of Kamaji's kubeadm; an existing one one minor up per step, never down, any patch within
a minor. The same cases run against Kamaji's own webhook in the real-Kamaji tier."""

from __future__ import annotations

import pytest

from components.config import versions
from components.config.load import load_stack_config
from components.config.problems import ConfigError
from components.config.tenant_version import create_refusal, parse, step_refusal
from components.providers.tenant_version import TenantVersionProvider

# (old, new, refusal or None): old None = a new tenant.
CASES = [
    (None, "v1.35.1", None),
    (None, "v1.36.9", None),  # patch ignored
    (None, "v1.37.0", "greater than the supported one, actually v1.36"),
    ("v1.35.1", "v1.36.0", None),  # one minor up
    ("v1.35.1", "v1.35.7", None),
    ("v1.35.7", "v1.35.1", None),  # patch down within a minor: Kamaji compares minors only
    ("v1.36.0", "v1.35.1", "unable to downgrade a TenantControlPlane from 1.36.0 to 1.35.0"),
    ("v1.34.2", "v1.36.0", "non-sequential mode"),
    ("v1.35.1", "v1.37.0", "greater than the supported one (v1.36)"),
    ("v1.35.1", "1.36.0", None),  # Kamaji takes the version with or without its v
]


@pytest.mark.parametrize(("old", "new", "refused"), CASES)
def test_the_rules(old, new, refused):
    reason = step_refusal(old, new) if old else create_refusal(new)
    assert (reason is None) == (refused is None), reason
    if refused:
        assert refused in reason


def test_the_supported_minor_is_kamajis_kubeadm():
    assert versions.KAMAJI_KUBEADM_VERSION == "v1.36.0"
    assert parse(versions.KAMAJI_KUBEADM_VERSION) == (1, 36)
    assert parse("v1.35") is None and parse("latest") is None


def test_preview_fails_on_a_step_kamaji_would_refuse():
    p = TenantVersionProvider()
    key = "tenant team-a: kubernetesVersion"
    down = p.check({"tenant": "team-a", "version": "v1.36.0"}, {"tenant": "team-a", "version": "v1.35.1", "key": key})
    assert [(f.property, f.reason) for f in down.failures] == [
        ("version", f"{key}: unable to downgrade a TenantControlPlane from 1.36.0 to 1.35.0")
    ]
    up = p.check({"version": "v1.35.1"}, {"tenant": "team-a", "version": "v1.36.0", "key": key})
    assert not up.failures
    assert p.diff(
        "team-a", {"tenant": "team-a", "version": "v1.35.1"}, {"tenant": "team-a", "version": "v1.36.0"}
    ).changes
    new = p.check({}, {"tenant": "team-a", "version": "v1.37.1", "key": key})
    assert "greater than the supported one" in new.failures[0].reason


def test_the_config_refuses_a_version_above_kamajis_in_kamajis_words():
    tenant = {"name": "team-a", "kubernetesVersion": "v1.37.0", "gpu": {"model": "A100-80GB", "cardsPerNode": 1}}
    tenant["quota"] = {"gpus": 1, "gpumemMb": 81920, "gpucoresPercent": 100}
    with pytest.raises(ConfigError) as refused:
        load_stack_config("gpu-tenancy", {"tenants": [tenant]})
    text = str(refused.value)
    assert "tenants[0].kubernetesVersion" in text
    assert "greater than the supported one, actually v1.36" in text and "pinned: v1.35.1" in text
