"""Charts for the tiers that cannot reach a chart repository: small charts written by the test,
Helm's own CLI (built by tools/build.sh at the provider's Helm) to package and push them, and
Debian's docker-registry as the OCI registry they are pushed to."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pulumi
import yaml

from components.kube.waiting import TimedOut, wait_until
from tests.support.tools import ROOT

REGISTRY_SH = ROOT / "tools" / "lab" / "registry.sh"
# Renders the values the release was given (after Helm merged them with the chart's, here none)
# into a ConfigMap the test reads back.
VALUES_TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Chart.Name }}-values
data:
  chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
  values.json: {{ toJson .Values | quote }}
"""


def write_chart(path: Path, name: str, version: str, subcharts: Mapping[str, str] | None = None) -> Path:
    """A chart `name` at `version` whose one template is VALUES_TEMPLATE, with each subchart
    (name -> version) unpacked under charts/ and declared as a dependency, as `helm dependency
    build` leaves a chart such as Kamaji's."""
    path.mkdir(parents=True, exist_ok=True)
    meta: dict[str, object] = {"apiVersion": "v2", "name": name, "version": version}
    if subcharts:
        meta["dependencies"] = [
            {"name": n, "version": v, "repository": "https://charts.example.invalid"} for n, v in subcharts.items()
        ]
        for sub, sub_version in subcharts.items():
            write_chart(path / "charts" / sub, sub, sub_version)
    (path / "Chart.yaml").write_text(yaml.safe_dump(meta))
    (path / "templates").mkdir(exist_ok=True)
    (path / "templates" / "values.yaml").write_text(VALUES_TEMPLATE)
    return path


class Helm:
    """Helm's CLI with its config, cache and registry credentials in `home` (never the user's)."""

    def __init__(self, env: Mapping[str, str], home: Path):
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            **env,
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
            "HELM_REGISTRY_CONFIG": str(home / "registry.json"),
        }

    def __call__(self, *args: str) -> str:
        proc = subprocess.run(["helm", *args], env=self.env, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout + proc.stderr

    def package(self, chart: Path, out: Path) -> Path:
        """`helm package`: the archive Helm names `<name>-<version>.tgz`."""
        out.mkdir(parents=True, exist_ok=True)
        said = self("package", str(chart), "--destination", str(out))
        return Path(said.strip().rsplit(": ", 1)[-1])

    def push(self, archive: Path, repository: str, plain_http: bool = False, ca_file: Path | None = None) -> str:
        """`helm push ARCHIVE oci://host/path` (the chart lands at `<repository>/<name>:<tag>`)."""
        args = ["push", str(archive), repository]
        args += ["--plain-http"] if plain_http else []
        args += ["--ca-file", str(ca_file)] if ca_file else []
        return self(*args)


def registry_config(storage: Path, listen: str, tls: tuple[Path, Path] | None = None) -> str:
    """docker-registry's config: filesystem storage, one listen address, optionally TLS."""
    http: dict[str, object] = {"addr": listen}
    if tls:
        http["tls"] = {"certificate": str(tls[0]), "key": str(tls[1])}
    return yaml.safe_dump(
        {
            "version": 0.1,
            "log": {"level": "warn"},
            "storage": {"filesystem": {"rootdirectory": str(storage)}},
            "http": http,
        }
    )


def wait_for_registry(
    url: str, proc: subprocess.Popen | None = None, ca: Path | None = None, timeout: float = 20
) -> None:
    """Until `<url>/v2/` answers 200 (the registry's API version check)."""
    context = ssl.create_default_context(cafile=str(ca)) if ca else None

    def answers() -> bool:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"docker-registry exited {proc.returncode} before answering at {url}")
        try:
            with urllib.request.urlopen(f"{url}/v2/", timeout=2, context=context) as resp:  # noqa: S310
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    wait_until(answers, timeout=timeout, interval=0.2, what=f"docker-registry to answer at {url}/v2/")


class Registry:
    """`docker-registry serve` of our own (for a listen address or TLS tools/lab/registry.sh does not offer)."""

    def __init__(self, workdir: Path, listen: str, tls: tuple[Path, Path] | None = None, ca: Path | None = None):
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "config.yml"
        config.write_text(registry_config(workdir / "storage", listen, tls))
        self.host = listen
        self.url = f"{'https' if tls else 'http'}://{listen}"
        self.log = workdir / "registry.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [shutil.which("docker-registry") or "docker-registry", "serve", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for_registry(self.url, self.proc, ca)
        except (RuntimeError, TimedOut):
            self.stop()
            raise

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class LabRegistry:
    """The lab's own registry (tools/lab/registry.sh) with its config, storage and pid file in
    `cache`, so a test's registry is its own and its stop touches nothing else."""

    def __init__(self, cache: Path, listen: str):
        self.env = {**os.environ, "GPU_TENANCY_CACHE": str(cache)}
        self.url = self._run("start", "--listen", listen).strip().splitlines()[-1]
        self.host = self.url.removeprefix("http://")

    def _run(self, *args: str) -> str:
        proc = subprocess.run(
            ["bash", str(REGISTRY_SH), *args], env=self.env, capture_output=True, text=True, timeout=60
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"tools/lab/registry.sh {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}"
            )
        return proc.stdout

    def stop(self) -> None:
        self._run("stop")


# A HAMi repository whose charts/hami is the pinned chart with its dependencies (its published
# package unpacked): developer-run tiers install HAMi's real chart from it.
HAMI_SRC = "HAMI_SRC"


def real_hami_chart() -> Path:
    """HAMi's real chart directory from HAMI_SRC, or the test skipped naming what to set."""
    import pytest

    from components.config import chart_sources, versions

    src = os.environ.get(HAMI_SRC)
    version = versions.HAMI_CHART_VERSION
    if not src:
        pytest.skip(
            f"set {HAMI_SRC} to a HAMi repository whose charts/hami is chart {version} with its dependencies "
            "under charts/hami/charts, to install the real chart"
        )
    chart = Path(src) / "charts" / "hami"
    try:
        chart_sources.parse(str(chart), "hami", version, Path.cwd())
    except chart_sources.ChartSourceError as exc:
        pytest.fail(f"{HAMI_SRC}={src}: {exc}")
    return chart


def render_only(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """A transform for test programs putting a real chart on an API server without nodes: Helm
    creates what it renders, but runs no hooks (disableWebhooks on install, disableCRDHooks on
    upgrade) and waits for nothing."""
    if args.type_ != "kubernetes:helm.sh/v3:Release":
        return None
    props = {**args.props, "disableWebhooks": True, "disableCRDHooks": True, "skipAwait": True}
    return pulumi.ResourceTransformResult(props, args.opts)
