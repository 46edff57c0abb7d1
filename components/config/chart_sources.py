"""Where a chart comes from: its repository (the default), a local directory, or an OCI registry.

One config string per chart: `https://...` (a chart repository), `oci://host[:port]/path/<chart>:<version>`
(an OCI registry, the tag being the chart's version), or a path (absolute, or relative to the
project directory) holding the unpacked chart. Whatever the source, the version is the stack's
pinned one: the values the stack gives are written for it.

An oci:// reference names no scheme: the kubernetes provider's Helm (3.18) asks the registry over
https and, when an HTTP server answers, over plain HTTP, whatever the host. Over https the
registry must be trusted by the machine that runs `pulumi` (its system roots, or SSL_CERT_FILE):
the provider pulls with a registry client of its own, to which repositoryOpts.caFile is not given.
"""

from __future__ import annotations

import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = "repo"
DIRECTORY = "directory"
OCI = "oci"
OCI_PREFIX = "oci://"
# oci://host[:port]/path/name:tag (Helm's own grammar: a tag is the chart's SemVer with + as _).
_OCI = re.compile(
    r"^oci://(?P<host>[A-Za-z0-9.-]+(?::[0-9]+)?)(?P<path>(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}))?$"
)
_REPO = re.compile(r"^https?://[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[^\s?#]*)?$")


class ChartSourceError(ValueError):
    """A chart source that cannot serve the pinned chart; the message says why in the config's words."""


@dataclass(frozen=True)
class ChartSource:
    """What helm is given: `chart` (a name in `repo`, an oci:// reference, or a directory) and
    `repo` (only for a chart repository)."""

    kind: str
    chart: str
    version: str
    repo: str | None = None

    @property
    def where(self) -> str:
        return self.repo if self.kind == REPO else self.chart


def repository(chart: str, version: str, repo: str) -> ChartSource:
    return ChartSource(REPO, chart, version, repo)


def parse(value: object, chart: str, version: str, base: Path) -> ChartSource:
    """The source a config string names for `chart` at `version` (directories are read, relative
    to `base`, to check they hold that chart)."""
    if not isinstance(value, str) or not value.strip():
        raise ChartSourceError(
            f"must be a chart repository URL (https://...), an OCI reference (oci://host/path/{chart}:{version}) "
            f"or a directory holding the chart, got {value!r}"
        )
    if value.startswith(OCI_PREFIX):
        return _oci(value, chart, version)
    if "://" in value:
        if not _REPO.match(value):
            raise ChartSourceError(
                f"must be an http(s):// chart repository URL, an oci:// reference or a directory, got {value!r}"
            )
        return repository(chart, version, value)
    return _directory(value, chart, version, base)


def _oci(value: str, chart: str, version: str) -> ChartSource:
    m = _OCI.match(value)
    if m is None:
        raise ChartSourceError(
            f"must be an OCI reference like oci://registry.example.com/charts/{chart}:{version}, got {value!r}"
        )
    if not m["tag"]:
        raise ChartSourceError(f"names no tag: write the chart version the stack pins, {value}:{oci_tag(version)}")
    name = m["path"].rsplit("/", 1)[-1]
    if name != chart:
        raise ChartSourceError(f"names chart {name!r}; this key takes {chart!r}")
    if m["tag"] not in (version, oci_tag(version)):
        raise ChartSourceError(f"is tagged {m['tag']!r}; the stack pins {chart} {version} (tag {oci_tag(version)})")
    return ChartSource(OCI, f"oci://{m['host']}{m['path']}", version)


def oci_tag(version: str) -> str:
    """The OCI tag Helm pushes a chart version under (`+` is not allowed in a tag)."""
    return version.replace("+", "_")


def _directory(value: str, chart: str, version: str, base: Path) -> ChartSource:
    path = Path(value)
    path = path if path.is_absolute() else base / path
    meta = path / "Chart.yaml"
    if not path.is_dir():
        found = "is not a directory" if path.exists() else "does not exist"
        raise ChartSourceError(f"{path} {found}; give the unpacked chart's directory")
    if not meta.is_file():
        raise ChartSourceError(f"{path} has no Chart.yaml: give the unpacked chart's directory")
    try:
        doc = yaml.safe_load(meta.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ChartSourceError(f"{meta} cannot be read as YAML: {exc}") from None
    doc = doc if isinstance(doc, dict) else {}
    if doc.get("name") != chart:
        raise ChartSourceError(f"{meta} names chart {doc.get('name')!r}; this key takes {chart!r}")
    if str(doc.get("version")) != version:
        raise ChartSourceError(f"{meta} is version {doc.get('version')!r}; the stack pins {chart} {version}")
    missing = _missing_dependencies(path, _dependencies(path, doc))
    if missing:
        raise ChartSourceError(
            f"{path} lacks its dependencies {', '.join(missing)} under charts/ (run `helm dependency build {value}` "
            "where the chart repository is reachable, then copy the directory)"
        )
    return ChartSource(DIRECTORY, str(path), version)


def _dependencies(path: Path, doc: dict) -> list[object]:
    """A chart's declared dependencies: Chart.yaml's, or an apiVersion v1 chart's requirements.yaml."""
    deps = doc.get("dependencies")
    requirements = path / "requirements.yaml"
    if not deps and doc.get("apiVersion") == "v1" and requirements.is_file():
        try:
            req = yaml.safe_load(requirements.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ChartSourceError(f"{requirements} cannot be read as YAML: {exc}") from None
        deps = req.get("dependencies") if isinstance(req, dict) else None
    return deps if isinstance(deps, list) else []


def _missing_dependencies(path: Path, deps: list[object]) -> list[str]:
    """Dependencies not under charts/, unpacked or packaged (Helm installs a directory only with
    them, and matches them by the name in their own Chart.yaml, not by file name)."""
    present = _subchart_names(path / "charts")
    missing = []
    for dep in deps:
        if not isinstance(dep, dict) or not dep.get("name"):
            continue
        if str(dep["name"]) not in present:
            missing.append(f"{dep['name']} {dep.get('version', '')}".strip())
    return missing


def _subchart_names(charts: Path) -> set[str]:
    """The chart names under a chart's charts/: each directory's Chart.yaml, each archive's."""
    names: set[str] = set()
    if not charts.is_dir():
        return names
    for entry in sorted(charts.iterdir()):
        doc: object = None
        try:
            if entry.is_dir() and (entry / "Chart.yaml").is_file():
                doc = yaml.safe_load((entry / "Chart.yaml").read_text())
            elif entry.is_file() and entry.name.endswith(".tgz"):
                doc = _archived_chart(entry)
        except (OSError, yaml.YAMLError, tarfile.TarError, zlib.error, EOFError):
            continue
        if isinstance(doc, dict) and doc.get("name"):
            names.add(str(doc["name"]))
    return names


def _archived_chart(archive: Path) -> object:
    """The Chart.yaml of a packaged chart (`<dir>/Chart.yaml` at the archive's top)."""
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            parts = member.name.strip("/").split("/")
            if member.isfile() and len(parts) == 2 and parts[1] == "Chart.yaml":
                f = tar.extractfile(member)
                return yaml.safe_load(f.read()) if f is not None else None
    return None
