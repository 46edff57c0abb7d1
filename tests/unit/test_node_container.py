"""A lab node container's files: written in as a tar stream rooted at `/` between `docker create`
and `docker start`, refused where a tmpfs would hide them, and never silently dropped."""

from __future__ import annotations

import io
import tarfile

import pytest

from components.nodes.node_container import NodeContainer

HOSTS = "/etc/containerd/certs.d/docker.io/hosts.toml"


def node(*files: tuple[str, str]) -> NodeContainer:
    return NodeContainer(name="n", image="img", memory_mib=512, files=files)


def test_the_files_are_a_tar_stream_rooted_at_slash():
    spec = node((HOSTS, 'server = "x"\n'), ("/etc/gpu-tenancy/note", "ü\n"))
    with tarfile.open(fileobj=io.BytesIO(spec.files_archive())) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {HOSTS.lstrip("/"), "etc/gpu-tenancy/note"}
        m = members[HOSTS.lstrip("/")]
        assert (m.mode, m.uid, m.gid, m.isfile()) == (0o644, 0, 0, True)
        assert tar.extractfile(m).read() == b'server = "x"\n'
        assert tar.extractfile(members["etc/gpu-tenancy/note"]).read() == "ü\n".encode()


def test_create_args_are_the_run_args_without_detach():
    plain = node()
    assert plain.docker_run_args("net") == ["--detach", *plain.docker_create_args("net")]
    assert plain.docker_create_args("net")[-1] == "img"


def test_a_node_with_files_is_not_started_by_docker_run():
    with pytest.raises(ValueError, match="started by NodeContainer.start"):
        node((HOSTS, "")).docker_run_args("net")


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/tmp/x", "under the tmpfs /tmp"),
        ("/run/containerd/x", "under the tmpfs /run"),
        ("etc/x", "absolute, normalised"),
        ("/etc/../x", "absolute, normalised"),
    ],
)
def test_a_file_a_mount_would_hide_or_a_bad_path_is_refused(path, says):
    with pytest.raises(ValueError, match=says):
        node((path, ""))


def test_a_file_given_twice_is_refused():
    with pytest.raises(ValueError, match="given twice"):
        node((HOSTS, "a"), (HOSTS, "b"))
