"""How the stack config speaks: pydantic's errors turned into one message per key
(`gpu-tenancy:tenants[1].quota.gpumemMb: ...`), collected so every problem is found in one pass
and reported together in one ConfigError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from components.config.fields import ERROR_TYPE, Section


class ConfigError(ValueError):
    """Every problem found in the stack config, each naming its key."""

    def __init__(self, problems: list[tuple[str, str]], warnings: tuple[str, ...] = ()):
        self.problems = problems
        # What was noticed besides (a quota beyond the fleet, ...): a check prints these too.
        self.warnings = warnings
        lines = "\n".join(f"  {key}: {msg}" for key, msg in problems)
        super().__init__(f"invalid stack config ({len(problems)} problem(s)):\n{lines}")


# -- reading -----------------------------------------------------------------------------------
def key_of(project: str, loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return f"{project}:{out}"


def model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model a location points into (for 'allowed keys' messages)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        model = inner_model(field.annotation)
    return model


def inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or getattr(annotation, "__metadata__", ()):
        found = inner_model(arg)
        if found is not None:
            return found
    origin = getattr(annotation, "__origin__", None)
    return inner_model(origin) if origin not in (None, annotation) else None


def problems_of(exc: ValidationError, cls: type[BaseModel], prefix: Sequence[str | int], project: str) -> list:
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        if err["type"] == ERROR_TYPE:
            msg = err["ctx"]["msg"]
        elif err["type"] == "extra_forbidden":
            parent = model_at(cls, loc[:-1])
            msg = f"unknown key; allowed: {', '.join(parent.keys())}" if parent else "unknown key"  # type: ignore[attr-defined]
        elif err["type"] == "missing":
            parent = model_at(cls, loc[:-1])
            field = next(
                (f for n, f in (parent.model_fields if parent else {}).items() if (f.alias or n) == loc[-1]), None
            )
            msg = f"is required: {field.description}" if field and field.description else "is required"
        else:
            msg = f"{err['msg']}, got {err.get('input')!r}"
        out.append((key_of(project, (*prefix, *loc)), msg))
    return out


def read_section(cls: type[Section], value: object, prefix: Sequence[str | int], project: str, problems: list) -> Any:
    """Validate one section; its problems are added, and None returned, when it is invalid."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        problems.append(
            (key_of(project, prefix), f"must be an object with keys {', '.join(cls.keys())}, got {value!r}")
        )
        return None
    try:
        return cls.model_validate(dict(value), by_alias=True, by_name=False)
    except ValidationError as exc:
        problems.extend(problems_of(exc, cls, prefix, project))
        return None


class Collector:
    def __init__(self, project: str):
        self.project = project
        self.problems: list[tuple[str, str]] = []
        self.warnings: list[str] = []

    def fail(self, path: str, msg: str) -> None:
        self.problems.append((f"{self.project}:{path}", msg))
