"""Platform-role test program: exports what the real platform stack exports (platform_outputs),
for an adopted management cluster (the test's kube-apiserver); Docker and Kamaji are left out."""

import pulumi

from components.config.model import load_stack_config
from components.platform.platform_link import platform_outputs

config = pulumi.Config()
cfg = load_stack_config(
    "gpu-tenancy",
    {"role": "platform", "cluster": config.require_object("cluster"), "teams": config.require_object("teams")},
)
pulumi.export("platform", platform_outputs(config.require_secret("kubeconfig"), "lab-net", cfg, "default"))
