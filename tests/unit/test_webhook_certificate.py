"""The stack's webhook certificate (in place of HAMi's certgen jobs): what the API server checks
of it, shown by a real TLS handshake in this process, and when the provider replaces it."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from components.lifecycle import webhook_certificate as wc
from components.providers.webhook_certificate import WebhookCertificateProvider

NAMES = wc.service_names("hami-scheduler", "hami-system")


@pytest.fixture(scope="module")
def issued() -> wc.Issued:
    return wc.issue(NAMES, [wc.LOOPBACK])


def _handshake(tmp_path: Path, served: wc.Issued, trusted_ca: str, server_hostname: str) -> None:
    """A TLS server with `served`'s certificate; a client trusting `trusted_ca` only and asking
    for `server_hostname`, as the API server dials a webhook Service. Raises what the client saw."""
    (tmp_path / "tls.crt").write_text(served.cert_pem)
    (tmp_path / "tls.key").write_text(served.key_pem)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cadata=trusted_ca)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls:
                tls.sendall(b"x")
    finally:
        thread.join(5)
        listener.close()


@pytest.mark.parametrize("name", [*NAMES, wc.LOOPBACK])
def test_a_client_trusting_the_ca_alone_accepts_the_server_under_each_name(tmp_path, issued, name):
    _handshake(tmp_path, issued, issued.ca_pem, name)


def test_another_name_is_refused(tmp_path, issued):
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|doesn't match"):
        _handshake(tmp_path, issued, issued.ca_pem, "hami-scheduler.other-namespace.svc")


def test_another_issues_ca_is_refused(tmp_path, issued):
    """Each tenant's certificate has a CA of its own: another tenant's caBundle trusts none of it."""
    other = wc.issue(NAMES, [wc.LOOPBACK])
    assert other.ca_pem != issued.ca_pem
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        _handshake(tmp_path, issued, other.ca_pem, NAMES[0])


def test_the_certificate_is_for_serving_only_and_the_ca_for_signing_only(issued):
    cert = x509.load_pem_x509_certificate(issued.cert_pem.encode())
    ca = x509.load_pem_x509_certificate(issued.ca_pem.encode())
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == x509.ExtendedKeyUsage(
        [ExtendedKeyUsageOID.SERVER_AUTH]
    )
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    cert.verify_directly_issued_by(ca)
    days = (cert.not_valid_after_utc - dt.datetime.now(dt.UTC)).days
    assert wc.VALID_DAYS - 1 <= days <= wc.VALID_DAYS
    assert issued.not_after == cert.not_valid_after_utc.isoformat()


def test_a_certificate_needs_a_name():
    with pytest.raises(ValueError, match="at least one DNS name"):
        wc.issue([], [wc.LOOPBACK])


NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("not_after", "due"),
    [
        ("2040-01-01T00:00:00+00:00", False),
        ("2031-01-02T00:00:00+00:00", False),  # a year and a day left
        ("2030-12-31T00:00:00+00:00", True),  # less than a year
        ("2029-06-01T00:00:00+00:00", True),  # expired
        ("2030-06-01T00:00:00", True),  # no zone: UTC
        ("2040-01-01T00:00:00Z", False),
        ("", True),
        (None, True),
        ("next year", True),
    ],
)
def test_renewal_is_due_within_a_year_of_the_end_or_when_the_end_is_unknown(not_after, due):
    assert wc.renewal_due(not_after, now=NOW) is due


def _state(**changes: object) -> dict:
    props = {"dns_names": NAMES, "ip_addresses": [wc.LOOPBACK], "valid_days": wc.VALID_DAYS, "renew_days": 365}
    return WebhookCertificateProvider().create({**props, **changes}).outs


def test_create_outputs_a_certificate_for_the_inputs():
    outs = _state()
    cert = x509.load_pem_x509_certificate(outs["tls_crt"].encode())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == NAMES
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == [wc.LOOPBACK]
    assert outs["fingerprint"] == wc.Issued(outs["ca_crt"], outs["tls_crt"], outs["tls_key"], "").fingerprint
    assert "PRIVATE KEY" in outs["tls_key"]
    assert "tls_key" in WebhookCertificateProvider.SECRET_OUTPUTS


def test_a_second_up_keeps_the_certificate():
    olds = _state()
    news = {k: olds[k] for k in ("dns_names", "ip_addresses", "valid_days", "renew_days")}
    assert not WebhookCertificateProvider().diff("id", olds, news).changes


def test_a_certificate_near_its_end_is_replaced_by_the_next_up():
    olds = {**_state(), "not_after": (dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).isoformat()}
    news = {k: olds[k] for k in ("dns_names", "ip_addresses", "valid_days", "renew_days")}
    found = WebhookCertificateProvider().diff("id", olds, news)
    assert found.changes and found.replaces == ["not_after"]


@pytest.mark.parametrize(
    ("key", "value"), [("dns_names", ["hami-scheduler.kube-system.svc"]), ("ip_addresses", []), ("valid_days", 90)]
)
def test_other_names_or_validity_replace_it(key, value):
    olds = _state()
    news = {k: olds[k] for k in ("dns_names", "ip_addresses", "valid_days", "renew_days")}
    found = WebhookCertificateProvider().diff("id", olds, {**news, key: value})
    assert found.replaces == [key]


def test_a_refresh_keeps_it():
    olds = _state()
    assert WebhookCertificateProvider().read("id", olds).outs == olds
