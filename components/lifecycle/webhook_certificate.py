"""An admission webhook's serving certificate and the CA the API server trusts it by.

HAMi's chart would make them with Helm hook jobs running a certgen image published only under a
personal Docker Hub account (and from a repository that is not packaged): on a closed network
that is one more image to mirror, from a source nobody vouches for. The stack makes them instead,
per tenant: a CA of its own (no tenant trusts another's webhook) and a serving certificate for the
names the API server dials (`<service>.<namespace>.svc`) and the loopback address the chart's
certgen also signed. ECDSA P-256, as kubeadm's own certificates; the CA's key is never kept.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# What the chart's certgen signed besides the Service's name: the extender also answers there.
LOOPBACK = "127.0.0.1"
# Issued for ten years and renewed by the `up` that finds less than one left (a webhook whose
# certificate expired is skipped silently, failurePolicy Ignore: GPU pods would bypass HAMi).
VALID_DAYS = 3650
RENEW_DAYS = 365


@dataclass(frozen=True)
class Issued:
    ca_pem: str
    cert_pem: str
    key_pem: str
    not_after: str  # ISO 8601, UTC

    @property
    def fingerprint(self) -> str:
        """The serving certificate's SHA-256: a pod annotation, so a new one restarts the server."""
        der = x509.load_pem_x509_certificate(self.cert_pem.encode()).public_bytes(serialization.Encoding.DER)
        return hashlib.sha256(der).hexdigest()


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names an API server dials for a webhook Service (it uses the first)."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def issue(
    dns_names: list[str], ip_addresses: list[str], valid_days: int = VALID_DAYS, now: dt.datetime | None = None
) -> Issued:
    """A new CA and a serving certificate it signed for `dns_names` and `ip_addresses`."""
    if not dns_names:
        raise ValueError("a webhook certificate needs at least one DNS name")
    now = now or dt.datetime.now(dt.UTC)
    start = now - dt.timedelta(minutes=5)  # clocks of the API server's host may lag a little
    end = now + dt.timedelta(days=valid_days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{dns_names[0]} webhook CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_names[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
        )  # digitalSignature
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return Issued(_pem(ca), _pem(cert), key_pem, end.replace(microsecond=0).isoformat())


def renewal_due(not_after: str | None, now: dt.datetime | None = None, renew_days: int = RENEW_DAYS) -> bool:
    """Whether a certificate valid until `not_after` is to be replaced now (unknown: yes)."""
    if not not_after:
        return True
    try:
        end = dt.datetime.fromisoformat(not_after)
    except ValueError:
        return True
    if end.tzinfo is None:
        end = end.replace(tzinfo=dt.UTC)
    return end - (now or dt.datetime.now(dt.UTC)) < dt.timedelta(days=renew_days)
