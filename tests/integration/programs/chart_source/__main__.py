"""One of the stack's charts (config `chart`: hami, kamaji or cert-manager), installed by the
project's helm_release with the stack's own values, from the source config `source` names
(read and checked by components.config.chart_sources, as the stack's `charts.*` keys are), in
namespace `namespace`, on the cluster of the secret config `kubeconfig`. Config `renderOnly:
true` is for a real chart on an API server without nodes: Helm renders it with those values and
creates what it renders, but runs no hooks and waits for nothing."""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components.config import chart_sources, versions
from components.config.model import HamiConfig
from components.platform.helm import HelmReleaseArgs, helm_release
from components.platform.kamaji import CERT_MANAGER, KAMAJI, cert_manager_values, kamaji_values
from components.tenant.hami import HAMI, hami_values
from tests.support.charts import render_only

config = pulumi.Config()
CHARTS = {
    "hami": (HAMI, lambda: hami_values(versions.DEFAULT_TENANT_VERSION, HamiConfig())),
    "kamaji": (KAMAJI, kamaji_values),
    "cert-manager": (CERT_MANAGER, cert_manager_values),
}
chart, values = CHARTS[config.require("chart")]
source = chart_sources.parse(config.require("source"), chart.chart, chart.version, Path.cwd())


class Charts(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions):
        super().__init__("test:index:Charts", name, None, opts)


provider = k8s.Provider("cluster", kubeconfig=config.require_secret("kubeconfig"))
parent = Charts(
    "charts",
    pulumi.ResourceOptions(provider=provider, transforms=[render_only] if config.get_bool("renderOnly") else None),
)
release = helm_release(
    "release",
    HelmReleaseArgs(chart, config.require("namespace"), values(), source),
    pulumi.ResourceOptions(parent=parent),
)
pulumi.export("status", release.status)
