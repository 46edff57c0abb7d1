"""Tenant-level test program: components.tenant.hami.trusted_release, as the Hami component calls
it, for chart `hami` at config `version` from the directory config `chart` (the test's own, or
HAMi's real one), with the values of config `values` (JSON). Config `renderOnly: true` is for a
real chart on an API server without nodes: Helm creates what it renders but runs no hooks and
waits for nothing. Cluster: secret config `kubeconfig`."""

import json
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components.config import chart_sources
from components.domain.names import HAMI_NAMESPACE
from components.platform.helm import Chart, HelmReleaseArgs
from components.tenant.hami import HAMI_RELEASE, trusted_release
from tests.support.charts import render_only

config = pulumi.Config()
version = config.require("version")
chart = Chart(HAMI_RELEASE, "hami", version, "https://charts.example.invalid")
source = chart_sources.parse(config.require("chart"), "hami", version, Path.cwd())


class Tenant(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions):
        super().__init__("test:index:Tenant", name, None, opts)


provider = k8s.Provider("tenant", kubeconfig=config.require_secret("kubeconfig"))
parent = Tenant(
    "t", pulumi.ResourceOptions(provider=provider, transforms=[render_only] if config.get_bool("renderOnly") else None)
)
values = json.loads(config.require("values"))
trusted = trusted_release("hami", HelmReleaseArgs(chart, HAMI_NAMESPACE, values, source), parent)
pulumi.export("fingerprint", trusted.certificate.fingerprint)
pulumi.export("caCrt", trusted.certificate.ca_crt)
