"""TenantVersion: a Python dynamic provider that holds a tenant's Kubernetes version in the
state, so that `pulumi preview` refuses a step Kamaji's webhook would refuse (a downgrade, a
skipped minor, a minor above Kamaji's kubeadm) before anything is touched. Its check compares
the version the stack last applied (the state's input) with the new one, by Kamaji's rules
(components.config.tenant_version); the TenantControlPlane depends on it. It calls no API.
This module is imported by the provider process: importing it creates no resources and does no I/O.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult

from components.config.tenant_version import create_refusal, step_refusal
from components.providers.base import Provider, ProviderResource


class TenantVersionProvider(Provider):
    REPLACES = ("tenant",)
    UPDATES = ("version",)
    SECRETS = ()
    CONNECTION = ()

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        old, new = olds.get("version"), news.get("version", "")
        reason = step_refusal(old, new) if old else create_refusal(new)
        failures = [CheckFailure("version", f"{news.get('key', 'version')}: {reason}")] if reason else []
        return CheckResult(news, failures)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=props["tenant"], outs=props)


class TenantVersion(ProviderResource, module="gpu-tenancy", name="TenantVersion"):
    """The tenant's Kubernetes version as last applied; a step Kamaji would refuse fails preview."""

    def __init__(self, name: str, *, tenant: str, version: str, key: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TenantVersionProvider(), name, {"tenant": tenant, "version": version, "key": key}, opts)
