"""Field types of the stack config: each checks its own value and says what is allowed, in
the words a stack file uses (`must be 1-24 h, got 25`); the sections are built from them.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any
from urllib.parse import urlsplit

from cryptography import x509
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from components.domain.catalog import GPU_MODELS, GpuModel

NODE_PORT_RANGE = range(30000, 32768)
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h)")
_DURATION_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
GO_DURATION_MAX_NS = 2**63 - 1  # Go's time.Duration is an int64 of nanoseconds (about 2562047 h)
# A container image reference as Docker parses it (distribution/reference): [domain[:port]/]path[:tag][@digest].
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REF = re.compile(
    rf"^(?:{_DOMAIN}/)?{_PATH}(?:/{_PATH})*(?::[\w][\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
# An image repository without tag or digest (the tag is filled in: a node image per Kubernetes version).
IMAGE_REPOSITORY = re.compile(rf"^(?:{_DOMAIN}/)?{_PATH}(?:/{_PATH})*$")
# A stack name that can be part of an etcd key prefix and user name (Pulumi's own allow `.` too).
STACK_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_UNITS = re.compile(r"\s*[0-9.]+\s*[KMGTkmgt]i?[Bb]?\s*")

ERROR_TYPE = "gpu_tenancy"


def invalid(message: str) -> PydanticCustomError:
    # The text travels in the context, so braces in a user's value are never formatted.
    return PydanticCustomError(ERROR_TYPE, "{msg}", {"msg": message})


# -- field types: each checks its own value and says what is allowed ------------------------
def integer(lo: int, hi: int, unit: str = "", mb: bool = False) -> Any:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            hint = ""
            if mb and isinstance(value, str) and _UNITS.fullmatch(value):
                hint = " (units are not accepted: give plain MB, e.g. 10240 for 10Gi)"
            what = f"a plain integer in MB ({lo}-{hi})" if mb else f"an integer {lo}-{hi}{unit}"
            raise invalid(f"must be {what}, got {value!r}{hint}")
        if not lo <= value <= hi:
            raise invalid(f"must be {lo}-{hi}{unit}, got {value}")
        return value

    return Annotated[int, BeforeValidator(check), Field(ge=lo, le=hi)]


def string(pattern: re.Pattern[str] | None, what: str, max_len: int = 253) -> Any:
    def check(value: object) -> str:
        if not isinstance(value, str) or not value:
            raise invalid(f"must be a non-empty string ({what}), got {value!r}")
        if len(value) > max_len or (pattern is not None and not pattern.match(value)):
            raise invalid(f"must be {what}, got {value!r}")
        return value

    return Annotated[str, BeforeValidator(check), Field(min_length=1, max_length=max_len)]


def go_duration(what: str) -> Any:
    """A Go duration (`30s`, `5m`, `1h30m`) the program passes to a Go flag: positive, and within
    Go's time.Duration, which a larger value overflows (the flag parse then fails at start)."""

    def check(value: object) -> str:
        parts = _DURATION_PART.findall(value) if isinstance(value, str) else []
        if not parts or "".join(n + u for n, u in parts) != value:
            raise invalid(f"must be {what}, a Go duration like 30s, 5m or 1h30m, got {value!r}")
        ns = sum(int(n) * _DURATION_NS[u] for n, u in parts)
        if not 0 < ns <= GO_DURATION_MAX_NS:
            raise invalid(f"must be more than 0 and at most {GO_DURATION_MAX_NS // _DURATION_NS['h']}h, got {value!r}")
        return value

    return Annotated[str, BeforeValidator(check), Field(min_length=2, max_length=32)]


def choice(allowed: Sequence[str], message: Callable[[object], str] | None = None) -> Any:
    def check(value: object) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise invalid(message(value) if message else f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return Annotated[str, BeforeValidator(check), WithJsonSchema({"type": "string", "enum": list(allowed)})]


def _network(value: object) -> str:
    if not isinstance(value, str) or "/" not in value:
        raise invalid(f"must be an IPv4 network with its prefix length, like 10.244.0.0/16, got {value!r}")
    try:
        ipaddress.IPv4Network(value)
    except ValueError as exc:
        raise invalid(f"must be an IPv4 network like 10.244.0.0/16, got {value!r} ({exc})") from None
    return value


def _address(value: object) -> str:
    try:
        ipaddress.IPv4Address(value if isinstance(value, str) else "")
    except ValueError:
        raise invalid(f"must be an IPv4 address, got {value!r}") from None
    return value  # type: ignore[return-value]


def _gpu_model(value: object) -> GpuModel:
    if isinstance(value, GpuModel):
        return value
    if not isinstance(value, str) or value not in GPU_MODELS:
        raise invalid(f"unknown GPU model {value!r}; allowed: {', '.join(sorted(GPU_MODELS))}")
    return GPU_MODELS[value]


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"must be true or false, got {value!r}")
    return value


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(c, str) for c in value):
        raise invalid(f"must be a list of strings, got {value!r}")
    return tuple(value)


def list_of(what: str) -> Callable[[object], object]:
    def check(value: object) -> object:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise invalid(f"must be a list of {what}, got {value!r}")
        return value

    return check


def mapping(keys: Callable[[], list[str]]) -> Callable[[object], object]:
    """A nested section must be a mapping; None stands for an empty one."""

    def check(value: object) -> object:
        if value is None:
            return {}
        if isinstance(value, BaseModel):
            return value
        if not isinstance(value, Mapping):
            raise invalid(f"must be an object with keys {', '.join(keys())}, got {value!r}")
        return value

    return check


# A registry host as an image names it: a DNS name or IPv4 address, an optional port.
REGISTRY_HOST = re.compile(rf"^{_DOMAIN}$")


def _mirror_endpoint(value: object) -> str:
    """http(s)://host[:port] and nothing else: the runtime adds the API path (/v2/<registry>)."""
    if not isinstance(value, str) or not value:
        raise invalid(f"must be the mirror's URL, http://host[:port] or https://host[:port], got {value!r}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https"):
        raise invalid(f"must start with http:// or https://, got {value!r}")
    if parts.username or parts.password:
        raise invalid(f"must not carry credentials, got {value!r}")
    if parts.path or parts.query or parts.fragment or value.endswith(("?", "#")):
        raise invalid(
            f"must be http(s)://host[:port] without a path, got {value!r}: images are looked up under "
            "/v2/<upstream registry>/ in it"
        )
    try:
        port = parts.port
    except ValueError:
        raise invalid(f"has an invalid port, got {value!r}") from None
    if not parts.hostname or not REGISTRY_HOST.match(parts.netloc) or port == 0:
        raise invalid(f"must name a host, like http://172.17.0.1:5000, got {value!r}")
    return value


def _pem_certificates(value: object) -> str:
    """One or more PEM certificates that parse (a CA given as a path or a key is refused here)."""
    if not isinstance(value, str) or "-----BEGIN CERTIFICATE-----" not in value:
        raise invalid(
            "must be the mirror's CA certificate in PEM (-----BEGIN CERTIFICATE-----...), got "
            f"{value[:40] + '...' if isinstance(value, str) and len(value) > 40 else value!r}"
        )
    try:
        certs = x509.load_pem_x509_certificates(value.encode())
    except ValueError as exc:
        raise invalid(f"is not a readable PEM certificate: {exc}") from None
    if not certs:
        raise invalid("holds no certificate")
    return value if value.endswith("\n") else value + "\n"


def _http_url(value: object) -> str:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid(f"must be an http(s):// URL, got {value!r}")
    return value  # type: ignore[return-value]


def https_url_problem(value: object) -> str | None:
    """Why `value` is not an API server's https:// URL (None: it is one)."""
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme != "https" or not parts.hostname:
        return f"must be the API server's https:// URL, got {value!r}"
    return None


def base64_pem_problem(value: object) -> str | None:
    """Why `value` is not a CA as a kubeconfig gives it: base64 of PEM certificates (None: it is)."""
    try:
        pem = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
        certs = x509.load_pem_x509_certificates(pem) if pem else []
    except ValueError:
        certs = []
    if not certs:
        shown = value[:40] + "..." if isinstance(value, str) and len(value) > 40 else value
        return f"must be the CA as a kubeconfig's certificate-authority-data (base64 of PEM), got {shown!r}"
    return None


def pinned_image(what: str) -> Any:
    """An image reference with a tag or a digest: a Docker engine pulls `latest` for neither."""

    def check(value: object) -> str:
        if not isinstance(value, str) or not IMAGE_REF.match(value) or len(value) > 255:
            raise invalid(f"must be an image reference ({what}), got {value!r}")
        last = value.rsplit("/", 1)[-1]
        if ":" not in last and "@" not in value:
            raise invalid(f"must pin a tag or a digest ({what}), got {value!r}")
        return value

    return Annotated[str, BeforeValidator(check), Field(min_length=1, max_length=255)]


MirrorEndpoint = Annotated[str, BeforeValidator(_mirror_endpoint)]
PemCertificates = Annotated[str, BeforeValidator(_pem_certificates)]
HttpUrl = Annotated[str, BeforeValidator(_http_url)]


DnsLabel = string(DNS_1123, "a DNS label (a-z, 0-9, '-')", 63)
Network = Annotated[str, BeforeValidator(_network), Field(pattern=r"^[0-9.]+/[0-9]+$")]
Address = Annotated[str, BeforeValidator(_address)]
Port = integer(NODE_PORT_RANGE.start, NODE_PORT_RANGE.stop - 1, " (the management cluster's NodePort range)")
Model = Annotated[
    GpuModel,
    BeforeValidator(_gpu_model),
    PlainSerializer(lambda m: m.key, return_type=str),
    WithJsonSchema({"type": "string", "enum": sorted(GPU_MODELS)}),
]
Bool = Annotated[bool, BeforeValidator(_boolean)]
Strings = Annotated[tuple[str, ...], BeforeValidator(_strings)]


class Section(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
        validate_default=True,
        # Python code may build a model by field name; stack config is read by its keys only.
        validate_by_name=True,
        validate_by_alias=True,
    )

    @classmethod
    def keys(cls) -> list[str]:
        return [f.alias or n for n, f in cls.model_fields.items()]


def section(cls: type[Section]) -> Any:
    return Annotated[cls, BeforeValidator(mapping(cls.keys))]
