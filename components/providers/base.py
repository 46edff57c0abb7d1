"""What every dynamic provider here shares, so each states only what differs: which inputs
replace the resource, which update it, what it computes, and its create (and, where it acts,
update, read and delete), all through components.ops.

- `diff`: a change of a REPLACES input replaces (deleting first when DELETE_BEFORE_REPLACE:
  the object has one name); of an UPDATES input updates; anything else is no change.
- `update`: by default the new inputs with the outputs computed before (nothing to redo).
- `read`: by default the state as it is (refresh finds no drift in what it cannot look up). A
  read reports what it finds and never fails on it: a refresh that raised would stop
  `up --refresh` before the resources that repair the finding are updated.
- `drifted`: what the last read found breaks the resource's promise (a webhook no longer
  reached, a card no longer registered): the diff then asks for an update, which redoes the
  work and fails with the reason if it still cannot.
- `ProviderResource`: registers the inputs, the SECRETS among them as secrets, the OUTPUTS as
  still unknown and the SECRET_OUTPUTS (a token) as secrets too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pulumi
from pulumi.dynamic import DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult


class Provider(ResourceProvider):
    REPLACES: ClassVar[tuple[str, ...]] = ()
    UPDATES: ClassVar[tuple[str, ...]] = ()
    OUTPUTS: ClassVar[tuple[str, ...]] = ()
    SECRETS: ClassVar[tuple[str, ...]] = ("kubeconfig",)
    SECRET_OUTPUTS: ClassVar[tuple[str, ...]] = ()
    DELETE_BEFORE_REPLACE: ClassVar[bool] = False

    def replaces(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> list[str]:
        return [k for k in self.REPLACES if olds.get(k) != news.get(k)]

    def updates(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        return any(olds.get(k) != news.get(k) for k in self.UPDATES)

    def drifted(self, olds: Mapping[str, Any]) -> bool:
        return False

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = self.replaces(olds, news)
        return DiffResult(
            changes=bool(replaces) or self.updates(olds, news) or self.drifted(olds),
            replaces=replaces,
            delete_before_replace=self.DELETE_BEFORE_REPLACE,
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**news, **{k: olds.get(k) for k in self.OUTPUTS}})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)


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
