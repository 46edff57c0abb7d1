"""The stack config described from the model itself: the JSON Schema of the tenants (the policy
pack's config) and the table of every key in docs/config.md.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    TypeAdapter,
)

from components.config.fields import Section
from components.config.model import (
    MANAGEMENT_CA_KEY,
    MANAGEMENT_SERVER_KEY,
    MANAGEMENT_TOKEN_KEY,
    ROLE_LAB,
    ROLE_PLATFORM,
    ROLE_TEAM,
    ChartsConfig,
    ClusterConfig,
    HamiConfig,
    ImagesConfig,
    MirrorConfig,
    TeamSlot,
    TenantConfig,
)
from components.config.problems import inner_model


def tenants_schema() -> dict[str, Any]:
    """JSON Schema of a list of tenants (the policy pack's config), with every $ref inlined."""
    schema = TypeAdapter(list[TenantConfig]).json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return inline(schema)


# Keys read outside the sections (their checks are in load_stack_config).
TOP_LEVEL_KEYS = {
    "role": f"`{ROLE_LAB}` (default: everything), `{ROLE_PLATFORM}` (cluster + Kamaji) or `{ROLE_TEAM}` (one team)",
    "kubeconfig": "secret: the adopted management cluster's kubeconfig, when cluster.mode is `kubeconfig`",
    MANAGEMENT_TOKEN_KEY: "team stacks, secret: the team's management-cluster token (`scripts/grant-team.sh`)",
    MANAGEMENT_SERVER_KEY: "team stacks: the management API server's `https://` URL (`scripts/grant-team.sh`)",
    MANAGEMENT_CA_KEY: "team stacks: the management API server's CA, base64 PEM (`scripts/grant-team.sh`)",
}
SECTIONS: tuple[tuple[str, type[Section]], ...] = (
    ("cluster", ClusterConfig),
    ("hami", HamiConfig),
    ("tenants[]", TenantConfig),
    ("teams[]", TeamSlot),
    ("mirror", MirrorConfig),
    ("images", ImagesConfig),
    ("charts", ChartsConfig),
)


def _bounds(metadata: list[Any]) -> tuple[int, int] | None:
    lo = next((m.ge for m in metadata if hasattr(m, "ge")), None)
    hi = next((m.le for m in metadata if hasattr(m, "le")), None)
    return (int(lo), int(hi)) if lo is not None and hi is not None else None


def _range(f: Any) -> tuple[int, int] | None:
    """The (lowest, highest) an integer key takes, from its type's own bounds (the field's, or
    those of the integer inside an optional type)."""
    import typing

    found = _bounds(f.metadata)
    types = [f.annotation]
    while found is None and types:
        for arg in typing.get_args(types.pop()):
            found = found or _bounds(getattr(arg, "metadata", None) or [])
            types.append(arg)
    return found


def _with_range(text: str, f: Any) -> str:
    found = _range(f)
    return f"{text} ({found[0]:,} to {found[1]:,})" if found else text


def reference_rows() -> list[tuple[str, str, str]]:
    """(key, default, meaning) for every key of the stack config, from the model itself."""
    from pydantic_core import PydanticUndefined

    rows = [(key, "-", text) for key, text in TOP_LEVEL_KEYS.items()]

    def walk(prefix: str, cls: type[Section]) -> None:
        for name, f in cls.model_fields.items():
            key = f"{prefix}.{f.alias or name}"
            nested = inner_model(f.annotation)
            if nested is not None:
                is_list = "tuple" in str(f.annotation) or "list" in str(f.annotation)
                walk(key + ("[]" if is_list else ""), nested)  # type: ignore[arg-type]
                continue
            if f.default is PydanticUndefined:
                default = "required"
            elif f.default in (None, ()):
                default = "-"
            elif isinstance(f.default, bool):
                default = f"`{str(f.default).lower()}`"
            else:
                default = f"`{f.default}`"
            rows.append((key, default, _with_range(f.description or "", f)))

    for prefix, cls in SECTIONS:
        walk(prefix, cls)
    return rows
