"""Runs `__main__.py` under `pulumi.runtime.set_mocks` and records every registration.

Mocked: the engine and every provider (no Docker, no cluster). Command stdout, the Kamaji
kubeconfig Secret and image ids are canned values, so the program's own data flow can run.
"""

from __future__ import annotations

import base64
import functools
import gc
import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

from components.domain.names import PROJECT
from components.lifecycle import webhook_certificate

ROOT = Path(__file__).resolve().parents[2]

K3S_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- cluster: {certificate-authority-data: Q0E=, server: 'https://127.0.0.1:6443'}
  name: default
contexts:
- context: {cluster: default, user: default}
  name: default
current-context: default
users:
- name: default
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
"""
# kubeadm's admin.conf names the controlPlaneEndpoint (the management node's address) itself.
KUBEADM_ADMIN_KUBECONFIG = K3S_KUBECONFIG.replace("127.0.0.1:6443", "172.30.0.2:6443")
# A real (self-signed, test-only) CA in the tenant kubeconfigs: the program pins its public key.
TENANT_CA = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJqakNDQVRXZ0F3SUJBZ0lVSk9jZ0lDQVRlQ254bFFZa3RqaTQ3a3ZKS0R3"
    "d0NnWUlLb1pJemowRUF3SXcKSERFYU1CZ0dBMVVFQXd3UmFHRnlibVZ6Y3kxMFpXNWhiblF0WTJFd0lCY05Nall4TWpBeU1qTXdN"
    "ekV3V2hnUApNakV5TmpFeE1EZ3lNekF6TVRCYU1Cd3hHakFZQmdOVkJBTU1FV2hoY201bGMzTXRkR1Z1WVc1MExXTmhNRmt3CkV3"
    "WUhLb1pJemowQ0FRWUlLb1pJemowREFRY0RRZ0FFNjhvdG80Skh3QmtmMGFHcDA3UWM3OFFvbDZEd0FDaWkKMkpQMUlsWnl6Sk95"
    "V1NGWUFtMTdxUEJvUHhMYmNCb09QZm5ZaUNyZ216N3BISUR0ZGRYMHo2TlRNRkV3SFFZRApWUjBPQkJZRUZHcnFpTGdqSkY3SHIr"
    "MkZNOUM5Si9ZRldDZmpNQjhHQTFVZEl3UVlNQmFBRkdycWlMZ2pKRjdICnIrMkZNOUM5Si9ZRldDZmpNQThHQTFVZEV3RUIvd1FG"
    "TUFNQkFmOHdDZ1lJS29aSXpqMEVBd0lEUndBd1JBSWcKUEZLdk1WTmswalZid1VVOGJWdUlBdjhqUEdwV25DUmNIOGlyaDg4dG1D"
    "c0NJQ0VzWDRXN25FRVF0cjlvUENrOApqYzFMZGZHTWhwTFZicVQwWEdqYXRqVTYKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
)
TENANT_CA_HASH = "sha256:1afdf5c7388a7c75a08c536ca240d80d136d85ecc5b58af36045b09a9c8e6f93"
TENANT_ADMIN = (
    K3S_KUBECONFIG.replace("127.0.0.1:6443", "tenant:1").replace("default", "admin").replace("Q0E=", TENANT_CA)
)
TENANT_SUPER = (
    K3S_KUBECONFIG.replace("127.0.0.1:6443", "tenant:1").replace("default", "super").replace("Q0E=", TENANT_CA)
)
MACHINE_ID = "0123456789abcdef0123456789abcdef"
JOIN_TOKEN = "abc123.0123456789abcdef"
KINDNET_TEMPLATE = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kindnet, namespace: kube-system}
spec:
  template:
    spec:
      containers:
      - name: kindnet-cni
        env:
        - {name: POD_SUBNET, value: {{ .PodSubnet }}}
"""


def bound_token(account: str) -> str:
    """What the mocked BoundToken of `account` holds."""
    return f"bound-token-of-{account}"


SA_TOKEN = bound_token("gpu-tenancy-releaser")
AUTOMATION_TOKEN = bound_token("gpu-tenancy-automation")


SIG = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def _unwrap(value: Any) -> Any:
    """Replace Pulumi's secret envelopes by {"secret": value} so tests can see both facts."""
    if isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            return {"secret": _unwrap(value.get("value"))}
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    provider: str
    read_id: str | None = None
    delete_before_replace: bool = False
    # The types a resource was registered under before (Pulumi aliases), as the engine gets them.
    alias_types: tuple[str, ...] = ()
    # The replacement_trigger option's value (None: no trigger).
    replacement_trigger: Any = None


@functools.cache
def _issued(name: str, dns_names: tuple[str, ...], ips: tuple[str, ...]) -> webhook_certificate.Issued:
    return webhook_certificate.issue(list(dns_names), list(ips))


class ProgramMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        if args.typ == "command:local:Command":
            script = args.inputs.get("create", "")
            if "k3s.yaml" in script:
                state["stdout"] = K3S_KUBECONFIG
            elif "kubeadm init" in script:
                state["stdout"] = KUBEADM_ADMIN_KUBECONFIG
            elif "default-cni.yaml" in script:
                state["stdout"] = KINDNET_TEMPLATE
            elif "kubeadm join" in script:
                state["stdout"] = MACHINE_ID + "\n"
            else:
                state["stdout"] = ""
        elif args.typ == "docker:index/remoteImage:RemoteImage":
            state["imageId"] = "sha256:" + args.inputs["name"].encode().hex()[:12]
        elif args.typ == "docker:index/image:Image":
            state["repoDigest"] = "sha256:" + args.inputs["imageName"].encode().hex()[:12]
        elif args.typ == "docker:index/container:Container":
            state["networkDatas"] = [{"ipAddress": "172.30.0.9", "networkName": "gpu-lab"}]
        elif args.typ == "pulumi-python:dynamic/gpu-tenancy:BoundToken":
            state["token"] = bound_token(args.inputs["account"])
            state["expires"] = "2027-12-03T00:00:00Z"
        elif args.typ == "pulumi-python:dynamic/gpu-tenancy:BootstrapToken":
            state["token"] = JOIN_TOKEN
            state["expiration"] = "2027-12-03T02:00:00Z"
            state["revoked"] = False
        elif args.typ == "pulumi-python:dynamic/gpu-tenancy:WebhookCertificate":
            # One per resource name for the whole session: a second run of a program sees the
            # certificate its state would hold (the engine keeps it; only a renewal replaces it).
            issued = _issued(args.name, tuple(args.inputs["dns_names"]), tuple(args.inputs["ip_addresses"]))
            state.update(
                ca_crt=issued.ca_pem,
                tls_crt=issued.cert_pem,
                tls_key=issued.key_pem,
                not_after=issued.not_after,
                fingerprint=issued.fingerprint,
            )
        elif args.typ == "pulumi-python:dynamic/gpu-tenancy:NodeDrain":
            state["moved"] = []  # a new worker hands nothing over
        elif args.typ == "kubernetes:core/v1:Secret" and args.resource_id:
            state["data"] = {
                "admin.conf": base64.b64encode(TENANT_ADMIN.encode()).decode(),
                "super-admin.conf": base64.b64encode(TENANT_SUPER.encode()).decode(),
            }
        return (args.resource_id or f"{args.name}-id", state)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


@dataclass
class Recorder(MockMonitor):
    registrations: list[Registration] = field(default_factory=list)
    stack_outputs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(ProgramMocks())

    def _record(self, request: Any, read_id: str | None = None) -> None:
        inputs = _unwrap(json_format.MessageToDict(request.properties if read_id else request.object))
        self.registrations.append(
            Registration(
                type=request.type,
                name=request.name,
                urn=self.make_urn(request.parent, request.type, request.name),
                parent=request.parent,
                custom=request.custom if not read_id else True,
                inputs=inputs,
                dependencies=list(request.dependencies),
                property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()}
                if not read_id
                else {},
                provider=request.provider,
                read_id=read_id,
                delete_before_replace=getattr(request, "deleteBeforeReplace", False) if not read_id else False,
                alias_types=tuple(a.spec.type for a in request.aliases if a.spec.type) if not read_id else (),
                replacement_trigger=_unwrap(json_format.MessageToDict(request.replacement_trigger))
                if not read_id and request.HasField("replacement_trigger")
                else None,
            )
        )

    def RegisterResource(self, request):
        if request.type != "pulumi:pulumi:Stack":
            self._record(request)
        return super().RegisterResource(request)

    def ReadResource(self, request):
        self._record(request, read_id=request.id)
        return super().ReadResource(request)

    # Queries used by the tests.
    def of_type(self, typ: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == typ]

    def named(self, name: str) -> Registration:
        (found,) = [r for r in self.registrations if r.name == name]
        return found

    def by_urn(self, urn: str) -> Registration:
        (found,) = [r for r in self.registrations if r.urn == urn]
        return found


def load_config_file(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text())["config"]


def run_program(config: dict[str, Any], stack: str = "dev", secret_keys: tuple[str, ...] = ()) -> Recorder:
    """Run the real `__main__.py` against mocks; config keys are `gpu-tenancy:<key>`."""
    recorder = Recorder()
    pulumi.runtime.set_mocks(ProgramMocks(), project=PROJECT, stack=stack, preview=False, monitor=recorder)
    pulumi.runtime.set_all_config(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()},
        [f"{k}" for k in secret_keys],
    )

    @pulumi.runtime.test
    def program():
        root = pulumi.runtime.settings.get_root_resource()
        if root is not None and isinstance(getattr(root, "outputs", None), dict):
            root.outputs.clear()  # the exports of this run only, not an earlier one's
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        exports = pulumi.runtime.settings.get_root_resource().outputs
        return pulumi.Output.all(*[_describe(v) for v in exports.values()]).apply(
            lambda vals: recorder.stack_outputs.update(zip(exports, vals, strict=True))
        )

    try:
        program()
    finally:
        # A program that stopped leaves futures holding its error; their finalizers log it. Run them
        # now: run later by the garbage collector inside a compile(), CPython 3.11 fails that
        # compile ("AST constructor recursion depth mismatch"), e.g. pytest's own import of a plugin.
        gc.collect()
    return recorder


def _describe(value: Any) -> pulumi.Output[Any]:
    """An export's plain value, with each secret Output wrapped as {"secret": value}."""
    if isinstance(value, dict):
        keys = list(value)
        return pulumi.Output.all(*[_describe(value[k]) for k in keys]).apply(lambda v: dict(zip(keys, v, strict=True)))
    if isinstance(value, list):
        return pulumi.Output.all(*[_describe(v) for v in value]).apply(list)
    out = pulumi.Output.from_input(value)
    return pulumi.Output.all(out, out.is_secret()).apply(lambda p: {"secret": p[0]} if p[1] else p[0])


def deps(rec: Any, name: str) -> set[str]:
    """Names of everything the named resource depends on (options and property inputs)."""
    r = rec.named(name)
    all_deps = set(r.dependencies)
    for urns in r.property_dependencies.values():
        all_deps.update(urns)
    return {rec.by_urn(u).name for u in all_deps}


def reaches(rec: Any, name: str, target: str) -> bool:
    """Whether the named resource depends on `target`, directly or through others."""
    seen, todo = set(), [name]
    while todo:
        for dep in deps(rec, todo.pop()) - seen:
            if dep == target:
                return True
            seen.add(dep)
            todo.append(dep)
    return False


def provider_name(reg: Any) -> str | None:
    return reg.provider.split("::")[-2] if reg.provider else None
