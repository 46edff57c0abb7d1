"""What every dynamic provider here shares, so each states only what differs: which inputs
replace the resource, which update it, what it computes, and its create (and, where it acts,
redo, look and remove), each through its back-end of the same name (components.lifecycle).

- CONNECTION inputs (the tenant's kubeconfig) say how to reach the tenant, not what the resource
  is. A credential is rotated (a renewed token, a new certificate) without anything to redo, yet
  the resource must keep the newest one: the engine hands a later update, refresh or delete the
  state's outputs, never the program's inputs, so a credential left in the old state is the one
  a `destroy` a year on would use. So a change of a CONNECTION input alone is a change, and its
  update stores the new value and does nothing else (no gate waits again).
- `diff`: a change of a REPLACES input replaces (deleting first when DELETE_BEFORE_REPLACE:
  the object has one name); of an UPDATES input, or drift, updates (`redo`); of a CONNECTION
  input alone updates the stored connection only; anything else is no change.
- `redo`: by default the new inputs with the outputs computed before (nothing to redo).
- `read` calls `look`, by default the state as it is (refresh finds no drift in what it cannot
  look up). A read reports what it finds and never fails: a refresh that raised would stop
  `up --refresh` before the resources that repair the finding are updated. A tenant that cannot
  be asked (unreachable, or refusing the credential) is no finding: the state stays as it was.
- `drifted`: what the last read found breaks the resource's promise (a webhook no longer
  reached, a card no longer registered): the diff then asks for an update, which redoes the
  work and fails with the reason if it still cannot.
- `delete` calls `remove`, by default nothing: a gate holds nothing in the tenant and never
  asks it, so a destroy passes whatever became of the credential. Where `remove` acts and the
  tenant refuses the stored credential, the error says what to do.
- `ProviderResource`: registers the inputs, the SECRETS among them as secrets, the OUTPUTS as
  still unknown and the SECRET_OUTPUTS (a token) as secrets too.
- An error of the project's own (a gate that says what to do) reaches whoever runs `up` as its
  message alone, not under a Python traceback (`plain_own_errors`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import pulumi
from pulumi.dynamic import DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from components.kube.client import http_status, send

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

REFUSED = (401, 403)
OWN_PACKAGE = "components."


class _PlainOwnErrors:
    """The dynamic-provider host's `traceback` module, but an error whose class is the project's
    own is formatted as its message: those are written to be read by whoever runs `up` (which
    machine to join, which control plane still uses a DataStore). Anything else is a bug and
    keeps its traceback."""

    def __init__(self, real: ModuleType):
        self._real = real

    def format_exc(self, *args: Any, **kwargs: Any) -> str:
        exc = sys.exc_info()[1]
        if exc is not None and type(exc).__module__.startswith(OWN_PACKAGE):
            return str(exc)
        return self._real.format_exc(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def plain_own_errors(host: ModuleType | None = None) -> None:
    """Pulumi's Python dynamic-provider host (`python -m pulumi.dynamic`, its module running as
    `__main__`) reports every error a provider raises as `traceback.format_exc()`; its `traceback`
    is swapped for `_PlainOwnErrors` there, once. Anywhere else (the program, a test) nothing
    changes. Runs when this module is first imported: the host imports it to load a provider."""
    host = host or sys.modules.get("__main__")
    if host is None or not hasattr(host, "DynamicResourceProviderServicer"):
        return
    real = getattr(host, "traceback", None)
    if isinstance(real, ModuleType):
        host.traceback = _PlainOwnErrors(real)  # type: ignore[attr-defined]


class CredentialRefusedError(Exception):
    """The tenant refused the credential stored with a resource that holds something there."""


def answering(core: CoreV1Api) -> Any:
    """`core`, once the tenant has answered one authenticated request (its API list): a look
    whose own code turns API errors into findings asks this first, so an unreachable tenant or
    a refused credential is "cannot ask", never "the cards are gone"."""
    send(core.get_api_resources)
    return core


class Provider(ResourceProvider):
    REPLACES: ClassVar[tuple[str, ...]] = ()
    UPDATES: ClassVar[tuple[str, ...]] = ()
    CONNECTION: ClassVar[tuple[str, ...]] = ("kubeconfig",)
    OUTPUTS: ClassVar[tuple[str, ...]] = ()
    SECRETS: ClassVar[tuple[str, ...]] = ("kubeconfig",)
    SECRET_OUTPUTS: ClassVar[tuple[str, ...]] = ()
    DELETE_BEFORE_REPLACE: ClassVar[bool] = False

    def replaces(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> list[str]:
        return [k for k in self.REPLACES if olds.get(k) != news.get(k)]

    def updates(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        return any(olds.get(k) != news.get(k) for k in self.UPDATES)

    def reconnects(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        return any(olds.get(k) != news.get(k) for k in self.CONNECTION)

    def drifted(self, olds: Mapping[str, Any]) -> bool:
        return False

    def redo_needed(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        """Whether an update has work to do, else it only stores new connection data (what the
        diff saw: an UPDATES input changed, or drift)."""
        return self.updates(olds, news) or self.drifted(olds)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = self.replaces(olds, news)
        return DiffResult(
            changes=bool(replaces) or self.updates(olds, news) or self.drifted(olds) or self.reconnects(olds, news),
            replaces=replaces,
            delete_before_replace=self.DELETE_BEFORE_REPLACE,
        )

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        if self.redo_needed(olds, news):
            return self.redo(id_, olds, news)
        return UpdateResult(outs=self.kept(olds, news))

    def kept(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> dict[str, Any]:
        """The new inputs (a new credential among them) with the outputs computed before."""
        return {**news, **{k: olds.get(k) for k in self.OUTPUTS}}

    def redo(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.kept(olds, news))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        try:
            return self.look(id_, props)
        except Exception:  # noqa: BLE001 - cannot ask the tenant: no finding, the state stays
            return ReadResult(id_=id_, outs=props)

    def look(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        try:
            self.remove(id_, props)
        except Exception as exc:
            status = http_status(exc)
            if status not in REFUSED:
                raise
            raise CredentialRefusedError(
                f"{type(self).__name__.removesuffix('Provider')} {id_}: the tenant refused the stored "
                f"credential ({status} {getattr(exc, 'reason', '') or ''}), so what this resource holds "
                "there is not removed. `pulumi up` stores the current credential without redoing "
                "anything; destroy after it. If the tenant no longer exists, `pulumi state delete` "
                "this resource."
            ) from None

    def remove(self, id_: str, props: dict[str, Any]) -> None:
        return None


class ProviderResource(Resource):
    """A dynamic resource of one Provider: its inputs, SECRETS wrapped, OUTPUTS unknown."""

    def __init__(
        self, provider: Provider, name: str, inputs: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None
    ):
        props = {k: pulumi.Output.secret(v) if k in provider.SECRETS else v for k, v in inputs.items()}
        if provider.SECRET_OUTPUTS:
            secret = pulumi.ResourceOptions(additional_secret_outputs=list(provider.SECRET_OUTPUTS))
            opts = pulumi.ResourceOptions.merge(opts, secret)
        super().__init__(provider, name, {**props, **dict.fromkeys(provider.OUTPUTS)}, opts)


plain_own_errors()
