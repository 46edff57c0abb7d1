"""Any value, at any key of the stack config, gives a valid config or one ConfigError naming
keys: never a traceback. Values are what YAML can hold (None, bools, numbers, strings, lists,
mappings), dropped into every key of the dev stack's config one at a time and all together."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config.load import load_stack_config
from components.config.problems import ConfigError
from tests.support.harness import ROOT, load_config_file

DEV = {k.split(":", 1)[1]: v for k, v in load_config_file(ROOT / "Pulumi.dev.yaml").items()}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["20k", "1e4", "10Gi", "", "default", "kube-system", "10.0.0.0", "10.0.0.0/30", "x" * 80]),
)
yaml_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in the config (mapping keys and list indexes), including the roots."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*prefix, i))
    return out


ALL_PATHS = paths(DEV)


def replaced(path: tuple, value: Any) -> dict:
    config = copy.deepcopy(DEV)
    node = config
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return config


def check(config: dict) -> None:
    try:
        cfg = load_stack_config("gpu-tenancy", config)
    except ConfigError as err:
        assert err.problems
        for key, msg in err.problems:
            assert key.startswith("gpu-tenancy:") and isinstance(msg, str) and msg
        return
    assert cfg.tenants or cfg.role == "platform"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_PATHS), yaml_values)
def test_any_value_at_any_key(path, value):
    check(replaced(path, value))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), yaml_values), min_size=2, max_size=6))
def test_many_bad_values_at_once(changes):
    config = copy.deepcopy(DEV)
    for path, value in changes:
        try:
            node = config
            for part in path[:-1]:
                node = node[part]
            node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced the parent
    check(config)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            ["cluster", "tenants", "hami", "role", "platformStack", "teams", "managementServer", "managementCa"]
        ),
        yaml_values,
    )
)
def test_any_top_level_shape(raw):
    check(raw)
