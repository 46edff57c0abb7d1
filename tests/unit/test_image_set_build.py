"""The rest of the lab's image set (tools/images/build.sh etcd, coredns, konnectivity,
local-path-provisioner, kwok, python, kamaji-etcd, kamaji-etcd-jobs, all): a wrapper module for
every version the script will ask for and none other, each requiring exactly that release with its
go.sum complete; the script derives the etcd and CoreDNS modules from kubeadm's image list, builds
every binary with cgo off and -trimpath, and refuses what it cannot build in one line, before
anything is built (stub docker, kubeadm, debootstrap and go: nothing real is called)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from components.config.versions import (
    CFSSL_VERSION,
    KAMAJI_ETCD_CFSSL_IMAGE,
    KAMAJI_ETCD_CLIENT_IMAGE,
    KAMAJI_ETCD_CLIENT_VERSION,
    KAMAJI_ETCD_IMAGE,
    KAMAJI_ETCD_VERSION,
    KIND_NODE_IMAGES,
    KONNECTIVITY_IMAGES,
    KONNECTIVITY_VERSION,
    KUBEADM_IMAGE_TAGS,
    KWOK_IMAGE,
    KWOK_VERSION,
    LOCAL_PATH_PROVISIONER_IMAGE,
    LOCAL_PATH_PROVISIONER_VERSION,
    TENANT_COREDNS_IMAGE,
)

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools/images/build.sh"
MODULES = ROOT / "tools/go/images"

# kubeadm's etcd tags (versions.KUBEADM_IMAGE_TAGS, held to the built kubeadm by the Docker tier),
# and kamaji-etcd's own etcd (Kamaji's default DataStore).
ETCD_VERSIONS = {"v" + t["etcd"].rsplit("-", 1)[0] for t in KUBEADM_IMAGE_TAGS.values()} | {KAMAJI_ETCD_VERSION}
COREDNS_VERSIONS = {t["coredns"] for t in KUBEADM_IMAGE_TAGS.values()} | {TENANT_COREDNS_IMAGE.rsplit(":", 1)[1]}
TARGETS = [
    "node",
    "kubeadm",
    "control-plane",
    "etcd",
    "coredns",
    "konnectivity",
    "local-path-provisioner",
    "kwok",
    "python",
    "kamaji-etcd",
    "kamaji-etcd-jobs",
    "all",
]


def test_the_kubeadm_table_covers_every_pinned_version():
    assert set(KUBEADM_IMAGE_TAGS) == set(KIND_NODE_IMAGES)


def _go_mod(module: Path) -> str:
    go_mod = (module / "go.mod").read_text()
    assert "\nreplace " not in go_mod and "replace (" not in go_mod, f"{module}: a wrapper replaces nothing"
    return go_mod


@pytest.mark.parametrize("version", sorted(ETCD_VERSIONS))
def test_an_etcd_module_for_every_tag_kubeadm_lists(version):
    module = MODULES / "etcd" / version
    assert f"\nrequire go.etcd.io/etcd/server/v3 {version}\n" in _go_mod(module)
    main = (module / "main.go").read_text()
    assert '"go.etcd.io/etcd/server/v3/etcdmain"' in main and "etcdmain.Main(os.Args)" in main


@pytest.mark.parametrize("version", sorted(COREDNS_VERSIONS))
def test_a_coredns_module_for_every_version_kubeadm_or_the_tenants_use(version):
    module = MODULES / "coredns" / version
    assert f"\nrequire github.com/coredns/coredns {version}\n" in _go_mod(module)
    main = (module / "main.go").read_text()
    assert '_ "github.com/coredns/coredns/core/plugin"' in main and "coremain.Run()" in main


def test_a_konnectivity_module_requiring_the_server_and_its_client_of_the_same_release():
    go_mod = _go_mod(MODULES / "konnectivity" / KONNECTIVITY_VERSION)
    for name in ("sigs.k8s.io/apiserver-network-proxy", "sigs.k8s.io/apiserver-network-proxy/konnectivity-client"):
        required = rf"^\s*(require )?{re.escape(name)} {KONNECTIVITY_VERSION}( // indirect)?$"
        assert re.search(required, go_mod, re.M), name
    tools_go = (MODULES / "konnectivity" / KONNECTIVITY_VERSION / "tools.go").read_text()
    assert tools_go.startswith("//go:build tools\n")
    for cmd in ("server", "agent"):
        assert f'_ "sigs.k8s.io/apiserver-network-proxy/cmd/{cmd}"' in tools_go
    assert sorted(i.rsplit("/", 1)[1] for i in KONNECTIVITY_IMAGES) == [
        f"proxy-agent:{KONNECTIVITY_VERSION}",
        f"proxy-server:{KONNECTIVITY_VERSION}",
    ]


def test_a_local_path_provisioner_module_of_the_pinned_release():
    module = MODULES / "local-path-provisioner" / LOCAL_PATH_PROVISIONER_VERSION
    go_mod = _go_mod(module)
    assert f"\nrequire github.com/rancher/local-path-provisioner {LOCAL_PATH_PROVISIONER_VERSION}\n" in go_mod
    tools_go = (module / "tools.go").read_text()
    assert tools_go.startswith("//go:build tools\n") and '_ "github.com/rancher/local-path-provisioner"' in tools_go
    assert LOCAL_PATH_PROVISIONER_IMAGE.endswith(f":{LOCAL_PATH_PROVISIONER_VERSION}")
    assert KWOK_IMAGE.endswith(f":v{KWOK_VERSION}")


def test_kamaji_etcds_etcd_is_the_module_of_its_tag():
    assert KAMAJI_ETCD_IMAGE == f"quay.io/coreos/etcd:{KAMAJI_ETCD_VERSION}"
    assert f"\nrequire go.etcd.io/etcd/server/v3 {KAMAJI_ETCD_VERSION}\n" in _go_mod(
        MODULES / "etcd" / KAMAJI_ETCD_VERSION
    )


def test_an_etcdctl_module_of_the_jobs_etcd_client():
    module = MODULES / "etcdctl" / KAMAJI_ETCD_CLIENT_VERSION
    assert f"\nrequire go.etcd.io/etcd/etcdctl/v3 {KAMAJI_ETCD_CLIENT_VERSION}\n" in _go_mod(module)
    # Its siblings at the same release (etcdctl's own go.mod replaces them with relative paths).
    for sibling in ("api/v3", "client/v3", "client/pkg/v3"):
        assert re.search(
            rf"^\s+go\.etcd\.io/etcd/{re.escape(sibling)} {KAMAJI_ETCD_CLIENT_VERSION} ", _go_mod(module), re.M
        )
    main = (module / "main.go").read_text()
    assert '"go.etcd.io/etcd/etcdctl/v3/ctlv3"' in main and "ctlv3.MustStart()" in main
    assert KAMAJI_ETCD_CLIENT_IMAGE == f"quay.io/coreos/etcd:{KAMAJI_ETCD_CLIENT_VERSION}"


def test_a_cfssl_module_with_both_commands_the_job_runs():
    module = MODULES / "cfssl" / CFSSL_VERSION
    assert f"\nrequire github.com/cloudflare/cfssl {CFSSL_VERSION}\n" in _go_mod(module)
    tools_go = (module / "tools.go").read_text()
    assert tools_go.startswith("//go:build tools\n")
    for cmd in ("cfssl", "cfssljson"):
        assert f'_ "github.com/cloudflare/cfssl/cmd/{cmd}"' in tools_go
    assert KAMAJI_ETCD_CFSSL_IMAGE == f"docker.io/cfssl/cfssl:{CFSSL_VERSION}"


def test_no_module_for_a_version_nobody_asks_for():
    assert {p.name for p in (MODULES / "etcd").iterdir()} == ETCD_VERSIONS
    assert {p.name for p in (MODULES / "coredns").iterdir()} == COREDNS_VERSIONS
    assert {p.name for p in (MODULES / "konnectivity").iterdir()} == {KONNECTIVITY_VERSION}
    assert {p.name for p in (MODULES / "local-path-provisioner").iterdir()} == {LOCAL_PATH_PROVISIONER_VERSION}
    assert {p.name for p in (MODULES / "etcdctl").iterdir()} == {KAMAJI_ETCD_CLIENT_VERSION}
    assert {p.name for p in (MODULES / "cfssl").iterdir()} == {CFSSL_VERSION}
    assert {p.name for p in MODULES.iterdir()} == {
        "etcd",
        "coredns",
        "konnectivity",
        "local-path-provisioner",
        "etcdctl",
        "cfssl",
    }


@pytest.mark.parametrize("module", sorted(p.parent.relative_to(MODULES) for p in MODULES.glob("*/*/go.mod")), ids=str)
def test_every_required_module_has_its_checksum(module):
    """What `go mod tidy` leaves: the build looks nothing up that go.sum does not pin."""
    go_mod = (MODULES / module / "go.mod").read_text()
    required = re.findall(r"^\s*(?:require )?(\S+) (v\S+)(?: // indirect)?$", go_mod, re.M)
    assert len(required) > 10, required
    go_sum = set((MODULES / module / "go.sum").read_text().splitlines())
    lacking = [f"{n} {v}" for n, v in required if not any(line.startswith(f"{n} {v} h1:") for line in go_sum)]
    assert not lacking, f"tools/go/images/{module}/go.sum lacks (run go mod tidy there): {lacking}"


def _run(
    tmp_path: Path, *args: str, kubeadm: dict[str, list[str]] | None = None, engine: bool = True
) -> subprocess.CompletedProcess:
    """The script with a docker whose engine answers and holds no image, a go that records how it
    was called and fails, and a cache with only the given kubeadm stubs (version -> listed images)."""
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    # debootstrap records its arguments and fails: no rootfs is made.
    (stub / "debootstrap").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/debootstrap.calls\nexit 9\n')
    (stub / "debootstrap").chmod(0o755)
    answers = 'case "$1 $2" in info*) exit 0 ;; "image inspect") exit 1 ;; esac\n' if engine else ""
    (stub / "docker").write_text(f'#!/bin/sh\n{answers}echo "unexpected: docker $*" >&2; exit 9\n')
    (stub / "go").write_text(f'#!/bin/sh\necho "CGO_ENABLED=$CGO_ENABLED $*" >> {tmp_path}/go.calls\nexit 9\n')
    for tool in ("docker", "go"):
        (stub / tool).chmod(0o755)
    cache = tmp_path / "cache"
    for version, listed in (kubeadm or {}).items():
        (cache / "kube" / version).mkdir(parents=True)
        path = cache / "kube" / version / "kubeadm"
        path.write_text("#!/bin/sh\n" + "".join(f"echo {image}\n" for image in listed))
        path.chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}", "GPU_TENANCY_CACHE": str(cache)}
    return subprocess.run(["bash", str(BUILD), *args], env=env, capture_output=True, text=True, timeout=60)


def _go_calls(tmp_path: Path) -> list[str]:
    calls = tmp_path / "go.calls"
    return calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["etcd-server"], "error: unknown target etcd-server"),
        (["etcd", "--version", "v3.6.6"], "error: unknown argument --version"),
        (["etcd", "--kubernetes", "v1.34.0"], "no wrapper module tools/go/node/v1.34.0 for Kubernetes v1.34.0"),
        (["coredns", "--kubernetes", "v1.35.1"], "error: unknown argument --kubernetes"),
        (["coredns", "--version", "v1.12.0"], "no wrapper module tools/go/images/coredns/v1.12.0 for registry.k8s"),
        (["konnectivity", "--component", "proxy-agent"], "error: unknown argument --component"),
        (["all", "--kubernetes", "v1.35.1"], "error: unknown argument --kubernetes"),
        (["control-plane", "--component", "kubelet"], "--component kubelet: expected one of kube-apiserver"),
        (["kubeadm", "--kubernetes", "v1.34.0"], "no wrapper module tools/go/node/v1.34.0 for Kubernetes v1.34.0"),
        (["kubeadm", "--push", "172.17.0.1:5000"], "error: kubeadm builds no image: --push is for images"),
        (["kubeadm", "--rebuild"], "error: kubeadm builds no image: --rebuild is for images"),
    ],
)
def test_what_it_cannot_build_is_refused_in_one_line_before_building(tmp_path, args, says):
    proc = _run(tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
    assert not _go_calls(tmp_path)


def test_the_usage_names_every_target(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 2
    usage = proc.stderr
    for target in TARGETS:
        assert re.search(rf"(^|\s|\|){re.escape(target)}(\s|$)", usage, re.M), (target, usage)


@pytest.mark.parametrize("versions", [[], ["--kubernetes", "v1.36.1"]])
def test_kubeadm_is_the_binary_alone_of_each_version_built_without_an_engine(tmp_path, versions):
    """CI's image-table check reads kubeadm of every pinned version; a node image per version is
    the lab's, not the tier's. The engine stub refuses even `docker info`: none is asked."""
    proc = _run(tmp_path, "kubeadm", *versions, engine=False)
    assert proc.returncode == 9, proc.stderr
    assert "unexpected" not in proc.stderr and "no Docker engine" not in proc.stderr, proc.stderr
    (call,) = _go_calls(tmp_path)  # the first build fails (the go stub): nothing after it
    first = versions[1] if versions else next(iter(KUBEADM_IMAGE_TAGS))
    assert call.startswith("CGO_ENABLED=0 ") and "k8s.io/kubernetes/cmd/kubeadm" in call, call
    assert f"version.gitVersion={first} " in call and f"/kube/{first}/kubeadm" in call, call


def test_an_etcd_tag_without_a_module_is_refused_naming_the_module(tmp_path):
    proc = _run(tmp_path, "etcd", "--kubernetes", "v1.35.1", kubeadm={"v1.35.1": ["registry.k8s.io/etcd:3.9.9-0"]})
    assert proc.returncode == 2, proc.stderr
    assert "no wrapper module tools/go/images/etcd/v3.9.9 for registry.k8s.io/etcd:3.9.9-0" in proc.stderr


def test_etcd_is_built_from_the_module_of_the_tag_kubeadm_lists(tmp_path):
    version = "v1.35.1"
    listed = [f"registry.k8s.io/etcd:{KUBEADM_IMAGE_TAGS[version]['etcd']}", "registry.k8s.io/pause:3.10.1"]
    proc = _run(tmp_path, "etcd", "--kubernetes", version, kubeadm={version: listed})
    assert proc.returncode == 9, proc.stderr
    assert "etcd v3.6.6: building (module tools/go/images/etcd/v3.6.6)" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "building"),
    [
        (["etcd", "--kubernetes", "v1.36.1"], "etcd v3.6.8: building (module tools/go/images/etcd/v3.6.8)"),
        (["coredns", "--version", "v1.14.2"], "coredns v1.14.2: building (module tools/go/images/coredns/v1.14.2)"),
        (["konnectivity"], f"proxy-server {KONNECTIVITY_VERSION}: building (module tools/go/images/konnectivity/"),
        (
            ["local-path-provisioner"],
            f"local-path-provisioner {LOCAL_PATH_PROVISIONER_VERSION}: building (module "
            f"tools/go/images/local-path-provisioner/{LOCAL_PATH_PROVISIONER_VERSION})",
        ),
        (["kwok"], f"kwok v{KWOK_VERSION}: building (sigs.k8s.io/kwok/cmd/kwok@v{KWOK_VERSION}, cgo off)"),
        (
            ["kamaji-etcd"],
            f"etcd {KAMAJI_ETCD_VERSION}: building (module tools/go/images/etcd/{KAMAJI_ETCD_VERSION})",
        ),
        (["kamaji-etcd-jobs"], f"cfssl {CFSSL_VERSION}: building (module tools/go/images/cfssl/{CFSSL_VERSION})"),
    ],
)
def test_every_go_build_of_an_image_has_cgo_off_and_trimmed_paths(tmp_path, args, building):
    kubeadm = {v: [f"registry.k8s.io/etcd:{t['etcd']}"] for v, t in KUBEADM_IMAGE_TAGS.items()}
    proc = _run(tmp_path, *args, kubeadm=kubeadm)
    assert proc.returncode == 9 and building in proc.stderr, proc.stderr
    (call,) = _go_calls(tmp_path)
    assert call.startswith("CGO_ENABLED=0 ") and " -trimpath " in call, call


def test_coredns_asks_kubeadm_of_every_pinned_version_and_checks_every_module_before_building(tmp_path):
    """The first version's CoreDNS has a module, the last one's none: refused naming it, nothing built."""
    first, *_, last = KUBEADM_IMAGE_TAGS
    kubeadm = {
        first: [f"registry.k8s.io/coredns/coredns:{KUBEADM_IMAGE_TAGS[first]['coredns']}"],
        last: ["registry.k8s.io/coredns/coredns:v0.0.1"],
    }
    proc = _run(tmp_path, "coredns", kubeadm=kubeadm)
    assert proc.returncode == 2, proc.stderr
    assert "no wrapper module tools/go/images/coredns/v0.0.1 for registry.k8s.io/coredns/coredns:v0.0.1" in proc.stderr
    assert not _go_calls(tmp_path)


def _case(target: str) -> str:
    """The body of the script's `case "$target"` branch for TARGET (up to its `;;`)."""
    text = BUILD.read_text()
    match = re.search(rf"^  {re.escape(target)}\)\n(.*?)^    ;;$", text, re.M | re.S)
    assert match, target
    return match.group(1)


def test_all_builds_the_python_base_and_kamaji_etcds_images_after_checking_their_modules():
    body = _case("all")
    for builder in ("build_python", "build_kamaji_etcd", "build_kamaji_etcd_jobs"):
        assert re.search(rf"^\s+{builder}$", body, re.M), builder
    # The modules are checked before the first image is built.
    first_build = body.index("build_node")
    for check in ("kamaji_etcd_module >/dev/null", "kamaji_etcd_jobs_modules"):
        assert -1 < body.find(check) < first_build, check


def test_management_leaves_them_to_all():
    body = _case("management")
    assert "build_python" not in body and "build_kamaji_etcd" not in body


def test_python_is_a_debian_minbase_rootfs_with_python_and_venv(tmp_path):
    proc = _run(tmp_path, "python")
    assert proc.returncode == 9, proc.stderr
    (call,) = (tmp_path / "debootstrap.calls").read_text().splitlines()
    assert call.startswith("--variant=minbase --include=python3.11,python3-venv,ca-certificates bookworm "), call
    assert not _go_calls(tmp_path)


def test_the_python_image_puts_its_venv_first_and_runs_python3():
    body = BUILD.read_text().split("build_python() {", 1)[1].split("\n}\n", 1)[0]
    assert 'chroot "$dir" /usr/bin/python3.11 -m venv /opt/python' in body
    assert "/opt/python/bin/pip --version" in body
    assert "'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'" in body
    assert "'CMD [\"python3\"]'" in body and "ENTRYPOINT" not in body


def _inputs_key(directory: Path, *words: str) -> str:
    """tools/images/build.sh's inputs_hash of a directory and words (an image's cache key)."""
    import hashlib

    lines = ""
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        lines += f"{hashlib.sha256(f.read_bytes()).hexdigest()}  ./{f.relative_to(directory)}\n"
    lines += "".join(f"{w}\n" for w in words)
    return hashlib.sha256(lines.encode()).hexdigest()[:16]


@pytest.mark.parametrize("rebuild", [False, True])
def test_rebuild_builds_an_image_its_key_says_is_built_and_removes_the_one_it_replaces(tmp_path, rebuild):
    """The engine holds pause with the key of its inputs: found, unless --rebuild (a cold measurement)
    builds it again, and the image it replaced, left without a name, is removed (nothing else is)."""
    image = "registry.k8s.io/pause:3.10.1"
    key = _inputs_key(ROOT / "tools/images/pause", image)
    stub = tmp_path / "bin"
    stub.mkdir()
    state = tmp_path / "id"
    state.write_text("sha256:old")
    # An engine of one image: its id (changed by an import), its key, its size; the old id has no name left.
    (stub / "docker").write_text(
        f'#!/bin/sh\necho "$*" >> {tmp_path}/docker.calls\n'
        'case "$1 $2" in info*) exit 0 ;; "image rm") exit 0 ;;'
        f" import*) cat > /dev/null; echo sha256:new > {state}; exit 0 ;; esac\n"
        f'case "$*" in *Labels*) echo {key} ;; *Size*) echo 800000 ;; *RepoTags*) echo ;;'
        f' *.Id*) cat {state} ;; *) echo "unexpected: docker $*" >&2; exit 9 ;; esac\n'
    )
    (stub / "gcc").write_text(
        f'#!/bin/sh\necho gcc >> {tmp_path}/gcc.calls\nwhile [ "$1" != -o ]; do shift; done\n: > "$2"\n'
    )
    (stub / "strip").write_text("#!/bin/sh\n")
    for tool in ("docker", "gcc", "strip"):
        (stub / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}", "GPU_TENANCY_CACHE": str(tmp_path / "cache")}
    args = ["pause", image, *(["--rebuild"] if rebuild else [])]
    proc = subprocess.run(["bash", str(BUILD), *args], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    docker_calls = (tmp_path / "docker.calls").read_text().splitlines()
    removed = [c for c in docker_calls if c.startswith("image rm")]
    if rebuild:
        assert (tmp_path / "gcc.calls").exists(), proc.stderr
        assert re.search(rf"{re.escape(image)}: \d+ s, 0\.8 MB", proc.stderr), proc.stderr
        assert removed == ["image rm sha256:old"], docker_calls
    else:
        assert f"{image}: cached" in proc.stderr, proc.stderr
        assert not (tmp_path / "gcc.calls").exists() and not removed, docker_calls
