"""How a lab node container runs: the one description WorkerNode gives the Docker provider and
the test tier and benchmarks give `docker create`/`docker start`, so what is tested is what the
stack starts. Files a node needs before it boots are written into it between the two, as the
Docker provider writes its uploads.

A node runs systemd as PID 1 (kubeadm starts and restarts the kubelet through it), nested
containerd and privileged pods, so it is privileged with its own cgroup namespace; /run and /tmp
are tmpfs as systemd expects; /var (containerd's snapshots, the kubelet's state) is a volume,
because overlayfs cannot nest on the container's own overlay root. That volume is anonymous, as
kind makes it: made with its container from the image's /var, kept across a restart, removed with
the container. A named volume would outlive a replaced node, and the new one would boot on the old
one's kubelet checkpoints, containerd store and etcd data.
"""

from __future__ import annotations

import io
import posixpath
import subprocess
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass

# The host's kernel modules, read-only: kube-proxy and the CNI plugins load what they need.
MODULES_PATH = "/lib/modules"
# The node's state, on an anonymous volume of its own (above).
VAR_PATH = "/var"


def files_archive(files: Iterable[tuple[str, str]], mode: int = 0o644, owner: int = 0) -> bytes:
    """(absolute path, content) pairs as a tar stream rooted at `/`, each file of `mode` owned by
    `owner` (uid and gid), for `docker cp - ID:/`: what the Docker provider's uploads write.
    Missing parent directories are made by Docker as it extracts."""
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, content in files:
            data = content.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), mode, owner, owner, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass(frozen=True)
class NodeContainer:
    name: str
    image: str
    # A memory cap in MiB (None: none). The kubelet still reports the host's memory (cgroup v1).
    memory_mib: int | None = None

    privileged: bool = True
    security_opts: tuple[str, ...] = ("seccomp=unconfined", "apparmor=unconfined")
    tmpfs: tuple[str, ...] = ("/tmp", "/run")
    cgroupns_mode: str = "private"
    envs: tuple[str, ...] = ("container=docker",)
    # systemd as PID 1 halts cleanly on this signal (SIGTERM makes it re-execute itself).
    stop_signal: str = "SIGRTMIN+3"
    # (absolute path, content) written into the container before it starts (the stack passes them
    # as the Docker provider's uploads): configuration its services read at boot, such as the
    # container runtime's registry hosts. Never under a tmpfs mount, which would hide them.
    files: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for path, _ in self.files:
            clean = posixpath.normpath(path)
            if not path.startswith("/") or clean != path:
                raise ValueError(f"{self.name}: file {path!r}: expected an absolute, normalised path")
            hidden = [t for t in self.tmpfs if clean == t or clean.startswith(t.rstrip("/") + "/")]
            if hidden:
                raise ValueError(f"{self.name}: file {path}: under the tmpfs {hidden[0]}, mounted over it at start")
        paths = [path for path, _ in self.files]
        if len(set(paths)) != len(paths):
            raise ValueError(f"{self.name}: a file is given twice: {sorted(p for p in paths if paths.count(p) > 1)}")

    def docker_run_args(self, network: str) -> list[str]:
        """`docker run` arguments (after `run`) for this node on a Docker network, detached. A node
        with files is started by `start` instead: `docker run` cannot write them first."""
        if self.files:
            raise ValueError(f"{self.name}: a node with files is started by NodeContainer.start, not docker run")
        return ["--detach", *self.docker_create_args(network)]

    def docker_create_args(self, network: str) -> list[str]:
        """`docker create` arguments (after `create`) for this node on a Docker network."""
        args = ["--name", self.name, "--hostname", self.name, "--network", network]
        if self.privileged:
            args.append("--privileged")
        for opt in self.security_opts:
            args += ["--security-opt", opt]
        for path in self.tmpfs:
            args += ["--tmpfs", path]
        args += ["--cgroupns", self.cgroupns_mode, "--stop-signal", self.stop_signal]
        for env in self.envs:
            args += ["--env", env]
        args += ["--volume", VAR_PATH, "--volume", f"{MODULES_PATH}:{MODULES_PATH}:ro"]
        if self.memory_mib is not None:
            args += ["--memory", f"{self.memory_mib}m", "--memory-swap", f"{self.memory_mib}m"]
        return [*args, self.image]

    def files_archive(self) -> bytes:
        """The files as a tar stream rooted at `/` (root-owned, mode 0644), for `docker cp - ID:/`."""
        return files_archive(self.files)

    def start(self, network: str, docker: str = "docker", timeout: float = 300) -> str:
        """Create the container, copy its files in, start it: what the Docker provider does with
        uploads. Returns the container's ID; a container that fails to get its files or to start
        is removed (by ID) before the error is raised."""

        def run(*args: str, stdin: bytes | None = None) -> str:
            proc = subprocess.run([docker, *args], input=stdin, capture_output=True, timeout=timeout)
            if proc.returncode != 0:
                err = proc.stderr.decode(errors="replace").strip()
                raise RuntimeError(f"{docker} {args[0]} for {self.name} exited {proc.returncode}: {err}")
            return proc.stdout.decode().strip()

        cid = run("create", *self.docker_create_args(network))
        try:
            if self.files:
                run("cp", "-", f"{cid}:/", stdin=self.files_archive())
            run("start", cid)
        except BaseException:
            subprocess.run([docker, "rm", "--force", "--volumes", cid], capture_output=True, timeout=timeout)
            raise
        return cid
