"""Test program: the project's TenantVersion gate for tenant team-a at config `version`."""

import pulumi

from components.providers.tenant_version import TenantVersion

TenantVersion(
    "version", tenant="team-a", version=pulumi.Config().require("version"), key="tenant team-a: kubernetesVersion"
)
