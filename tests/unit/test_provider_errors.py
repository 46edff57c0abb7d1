"""How a provider's error reaches whoever runs `up`: Pulumi's Python dynamic-provider host reports
every error as `traceback.format_exc()` (its `_abort_with_traceback`, taken here from the installed
SDK's own source, since importing that module starts its server). With the project's providers
loaded, an error of the project's own is its message alone; any other keeps its traceback."""

from __future__ import annotations

import ast
import importlib.util
import traceback
import types
from pathlib import Path

import pytest

from components.lifecycle.datastore_teardown import DataStoreInUseError
from components.lifecycle.machines_joined import NoMachineJoinedError
from components.providers.base import plain_own_errors

SAID = "tenant team-b: no machine of its own has joined yet (pool gpus: 0 of 1). join each machine"


def host_module() -> types.ModuleType:
    """A stand-in for the running host: the SDK's wrapper, with the names it looks up."""
    spec = importlib.util.find_spec("pulumi.dynamic")
    assert spec and spec.submodule_search_locations
    source = (Path(next(iter(spec.submodule_search_locations))) / "__main__.py").read_text()
    (wrapper,) = [
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "_abort_with_traceback"
    ]
    host = types.ModuleType("__main__")
    host.traceback = traceback
    host.grpc = types.SimpleNamespace(StatusCode=types.SimpleNamespace(UNKNOWN="UNKNOWN"))
    host.DynamicResourceProviderServicer = object
    exec(compile(ast.Module(body=[wrapper], type_ignores=[]), "<sdk>", "exec"), host.__dict__)  # noqa: S102
    return host


class Context:
    said = ""

    def abort(self, _code: str, details: str) -> None:
        self.said = details


def reported(host: types.ModuleType, error: Exception) -> str:
    def create(_self, _request, _context):
        raise error

    context = Context()
    host._abort_with_traceback(create)(None, None, context)
    return context.said


@pytest.mark.parametrize("error", [NoMachineJoinedError(SAID), DataStoreInUseError("DataStore etcd-team-b is used")])
def test_an_error_of_the_projects_own_is_its_message_alone(error):
    host = host_module()
    assert reported(host, error).startswith("Traceback (most recent call last)")  # the SDK as it is
    plain_own_errors(host)
    assert reported(host, error) == str(error)
    plain_own_errors(host)  # a second provider module loaded: still once
    assert reported(host, error) == str(error)


def test_a_bug_keeps_its_traceback():
    host = host_module()
    plain_own_errors(host)
    said = reported(host, KeyError("pools"))
    assert said.startswith("Traceback (most recent call last)") and "KeyError: 'pools'" in said


def test_nothing_changes_outside_the_host():
    program = types.ModuleType("__main__")
    program.traceback = traceback
    plain_own_errors(program)
    assert program.traceback is traceback
