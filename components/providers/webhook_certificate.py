"""WebhookCertificate: a webhook's CA and serving certificate, made in the engine (no job, no
image), its private key a secret output.

It holds nothing in a cluster and asks none: the Secret and the caBundle that carry it are plain
Kubernetes resources of the component using it. Each preview judges the certificate's age: one
within `renew_days` of its end is replaced (a new CA too), and whatever reads `fingerprint`
(the server's pod annotation) follows.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult

from components.lifecycle.webhook_certificate import issue, renewal_due
from components.providers.base import Provider, ProviderResource


class WebhookCertificateProvider(Provider):
    REPLACES = ("dns_names", "ip_addresses", "valid_days")
    UPDATES = ("renew_days",)
    CONNECTION = ()
    SECRETS = ()
    OUTPUTS = ("ca_crt", "tls_crt", "tls_key", "not_after", "fingerprint")
    SECRET_OUTPUTS = ("tls_key",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        issued = issue(list(props["dns_names"]), list(props["ip_addresses"]), int(props["valid_days"]))
        fingerprint = issued.fingerprint  # parsed from the PEM: once
        outs = {
            **props,
            "ca_crt": issued.ca_pem,
            "tls_crt": issued.cert_pem,
            "tls_key": issued.key_pem,
            "not_after": issued.not_after,
            "fingerprint": fingerprint,
        }
        return CreateResult(id_=fingerprint[:16], outs=outs)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        found = super().diff(id_, olds, news)
        if found.replaces or not renewal_due(olds.get("not_after"), renew_days=int(news["renew_days"])):
            return found
        return DiffResult(changes=True, replaces=["not_after"], delete_before_replace=False)


class WebhookCertificate(ProviderResource, module="gpu-tenancy", name="WebhookCertificate"):
    """`tls_crt`/`tls_key` for `dns_names` and `ip_addresses`, signed by `ca_crt` (PEM), valid
    until `not_after`; `fingerprint` is the serving certificate's SHA-256."""

    ca_crt: pulumi.Output[str]
    tls_crt: pulumi.Output[str]
    tls_key: pulumi.Output[str]
    not_after: pulumi.Output[str]
    fingerprint: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        dns_names: list[str],
        ip_addresses: list[str],
        valid_days: int,
        renew_days: int,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(
            WebhookCertificateProvider(),
            name,
            {"dns_names": dns_names, "ip_addresses": ip_addresses, "valid_days": valid_days, "renew_days": renew_days},
            opts,
        )
