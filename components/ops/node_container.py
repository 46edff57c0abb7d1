"""How a lab node container runs: the one description WorkerNode gives the Docker provider and
the test tier and benchmarks give `docker run`, so what is tested is what the stack starts.

A node runs systemd as PID 1 (kubeadm starts and restarts the kubelet through it), nested
containerd and privileged pods, so it is privileged with its own cgroup namespace; /run and /tmp
are tmpfs as systemd expects; /var (containerd's snapshots, the kubelet's state) is a volume,
because overlayfs cannot nest on the container's own overlay root.
"""

from __future__ import annotations

from dataclasses import dataclass

# The host's kernel modules, read-only: kube-proxy and the CNI plugins load what they need.
MODULES_PATH = "/lib/modules"


@dataclass(frozen=True)
class NodeContainer:
    name: str
    image: str
    # A named volume for /var (made with the container, removed with it).
    var_volume: str
    # A memory cap in MiB (None: none). The kubelet still reports the host's memory (cgroup v1).
    memory_mib: int | None = None

    privileged: bool = True
    security_opts: tuple[str, ...] = ("seccomp=unconfined", "apparmor=unconfined")
    tmpfs: tuple[str, ...] = ("/tmp", "/run")
    cgroupns_mode: str = "private"
    envs: tuple[str, ...] = ("container=docker",)
    # systemd as PID 1 halts cleanly on this signal (SIGTERM makes it re-execute itself).
    stop_signal: str = "SIGRTMIN+3"

    def docker_run_args(self, network: str) -> list[str]:
        """`docker run` arguments (after `run`) for this node on a Docker network, detached."""
        args = ["--detach", "--name", self.name, "--hostname", self.name, "--network", network]
        if self.privileged:
            args.append("--privileged")
        for opt in self.security_opts:
            args += ["--security-opt", opt]
        for path in self.tmpfs:
            args += ["--tmpfs", path]
        args += ["--cgroupns", self.cgroupns_mode, "--stop-signal", self.stop_signal]
        for env in self.envs:
            args += ["--env", env]
        args += ["--volume", f"{self.var_volume}:/var", "--volume", f"{MODULES_PATH}:{MODULES_PATH}:ro"]
        if self.memory_mib is not None:
            args += ["--memory", f"{self.memory_mib}m", "--memory-swap", f"{self.memory_mib}m"]
        return [*args, self.image]
