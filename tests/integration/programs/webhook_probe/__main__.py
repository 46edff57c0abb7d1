"""Tenant-level test program: the project's HamiWebhookProbe on an adopted cluster given by the
secret config `kubeconfig`, with the update's probe timeout from config `timeoutSeconds`."""

import pulumi

from components.providers.webhook_probe import HamiWebhookProbe

config = pulumi.Config()
probe = HamiWebhookProbe(
    "probe",
    kubeconfig=config.require_secret("kubeconfig"),
    hami_revision=1,
    timeout_seconds=config.require_int("timeoutSeconds"),
)
pulumi.export("schedulerName", probe.scheduler_name)
