"""HAMi's node and pod annotations: every key and format in one place.

Formats follow what HAMi v2.8+ reads and writes (JSON device register, `<RFC3339>,<ns>,<pod>`
node lock, `uuid,NVIDIA,<MB>,<cores>:` per device and `;` per container). Decoders raise
AnnotationFormatError, and nothing else, on malformed input, so callers can leave foreign
values alone instead of crashing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

# Node annotations.
NODE_REGISTER = "hami.io/node-nvidia-register"
NODE_LOCK = "hami.io/mutex.lock"
# Node label the HAMi chart selects device-plugin nodes with.
GPU_NODE_LABEL = ("gpu", "on")

# Pod annotations written by HAMi.
VGPU_NODE = "hami.io/vgpu-node"
DEVICES_ALLOCATED = "hami.io/vgpu-devices-allocated"
# The same string, which the device plugin erases container by container as it allocates.
DEVICES_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
PHASE_ALLOCATING = "allocating"
PHASE_SUCCESS = "success"
PHASE_FAILED = "failed"
# Pod annotations users set to pick card types, or to avoid them (comma lists, each entry a
# case-insensitive substring of the card's type: components.domain.requests.CardTypes).
USE_GPU_TYPE = "nvidia.com/use-gputype"
NOUSE_GPU_TYPE = "nvidia.com/nouse-gputype"
# The scheduler name HAMi's webhook gives GPU pods (chart value schedulerName).
SCHEDULER_NAME = "hami-scheduler"
# A pod (or namespace) label HAMi's webhook skips.
HAMI_WEBHOOK_LABEL = ("hami.io/webhook", "ignore")

# Extended resources HAMi schedules.
RES_GPU = "nvidia.com/gpu"
RES_GPUMEM = "nvidia.com/gpumem"
RES_GPUMEM_PERCENTAGE = "nvidia.com/gpumem-percentage"
RES_GPUCORES = "nvidia.com/gpucores"
RES_PRIORITY = "nvidia.com/priority"

VENDOR_NVIDIA = "NVIDIA"
MODE_HAMI_CORE = "hami-core"
_ID_FORBIDDEN = set(",:;")


class AnnotationFormatError(ValueError):
    """A value does not have the format HAMi writes."""


@dataclass(frozen=True)
class DeviceInfo:
    """One card in the device-register annotation."""

    id: str
    count: int
    devmem: int
    devcore: int
    type: str
    index: int = 0
    numa: int = 0
    mode: str = MODE_HAMI_CORE
    health: bool = True

    def __post_init__(self) -> None:
        if not self.id or _ID_FORBIDDEN & set(self.id):
            raise AnnotationFormatError(f"device id {self.id!r} must be non-empty and free of , : ;")


def encode_node_register(devices: Iterable[DeviceInfo]) -> str:
    """Encode cards as the JSON array HAMi v2.8+ parses (key order as the device plugin writes)."""
    return json.dumps(
        [
            {
                "id": d.id,
                "index": d.index,
                "count": d.count,
                "devmem": d.devmem,
                "devcore": d.devcore,
                "type": d.type,
                "numa": d.numa,
                "mode": d.mode,
                "health": d.health,
            }
            for d in devices
        ],
        separators=(",", ":"),
    )


def _int_field(entry: Mapping[str, object], key: str, default: int | None = None) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnnotationFormatError(f"device field {key!r} must be an integer, got {value!r}")
    if value < 0:
        raise AnnotationFormatError(f"device field {key!r} must not be negative, got {value}")
    return value


def decode_node_register(value: str) -> list[DeviceInfo]:
    """Decode the JSON device register; keys match case-insensitively, as Go's decoder does."""
    try:
        raw = json.loads(value)
    except (ValueError, TypeError, RecursionError) as exc:
        raise AnnotationFormatError(f"device register is not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise AnnotationFormatError("device register must be a JSON array")
    devices = []
    for item in raw:
        if not isinstance(item, dict):
            raise AnnotationFormatError("each device must be a JSON object")
        entry = {str(k).lower(): v for k, v in item.items()}
        dev_id, dev_type, mode = entry.get("id"), entry.get("type", ""), entry.get("mode", "")
        health = entry.get("health", False)
        if not isinstance(dev_id, str) or not isinstance(dev_type, str) or not isinstance(mode, str):
            raise AnnotationFormatError("device id, type and mode must be strings")
        if not isinstance(health, bool):
            raise AnnotationFormatError("device health must be a boolean")
        devices.append(
            DeviceInfo(
                id=dev_id,
                index=_int_field(entry, "index", 0),
                count=_int_field(entry, "count", 0),
                devmem=_int_field(entry, "devmem", 0),
                devcore=_int_field(entry, "devcore", 0),
                type=dev_type,
                numa=_int_field(entry, "numa", 0),
                mode=mode,
                health=health,
            )
        )
    return devices


@dataclass(frozen=True)
class NodeLock:
    """Value of hami.io/mutex.lock; namespace/pod are None for the legacy bare-time form."""

    time: datetime
    namespace: str | None = None
    pod: str | None = None


def encode_node_lock(lock: NodeLock) -> str:
    stamp = lock.time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if lock.namespace is None or lock.pod is None:
        return stamp
    return f"{stamp},{lock.namespace},{lock.pod}"


def decode_node_lock(value: str) -> NodeLock:
    """Parse `<RFC3339>,<ns>,<pod>` (or a legacy bare RFC3339 time)."""
    if not isinstance(value, str):
        raise AnnotationFormatError("node lock must be a string")
    parts = value.split(",")
    if len(parts) not in (1, 3) or (len(parts) == 3 and not all(parts[1:])):
        raise AnnotationFormatError(f"node lock {value!r} is not '<time>,<namespace>,<pod>'")
    try:
        stamp = datetime.fromisoformat(parts[0].replace("Z", "+00:00"))
    except ValueError:
        raise AnnotationFormatError(f"node lock time {parts[0]!r} is not RFC3339") from None
    if stamp.tzinfo is None:
        raise AnnotationFormatError(f"node lock time {parts[0]!r} has no time zone")
    if len(parts) == 1:
        return NodeLock(time=stamp)
    return NodeLock(time=stamp, namespace=parts[1], pod=parts[2])


def lock_held_by(value: str, namespace: str, pod: str) -> bool:
    """True when the lock names this pod: HAMi's ReleaseNodeLock rule (suffix `,<ns>,<pod>`)."""
    lock = decode_node_lock(value)
    return lock.namespace == namespace and lock.pod == pod


@dataclass(frozen=True)
class ContainerDevice:
    """One vGPU slice in a pod's devices-to-allocate annotation."""

    uuid: str
    usedmem: int
    usedcores: int
    vendor: str = VENDOR_NVIDIA


def encode_pod_devices(containers: Iterable[Iterable[ContainerDevice]]) -> str:
    """Encode per-container device lists: `uuid,NVIDIA,<MB>,<cores>:` per device, `;` per container."""
    out = []
    for devices in containers:
        out.append("".join(f"{d.uuid},{d.vendor},{d.usedmem},{d.usedcores}:" for d in devices) + ";")
    return "".join(out)


def decode_pod_devices(value: str) -> list[list[ContainerDevice]]:
    if not isinstance(value, str):
        raise AnnotationFormatError("pod devices must be a string")
    if value and not value.endswith(";"):
        raise AnnotationFormatError("pod devices must end with ';'")
    containers: list[list[ContainerDevice]] = []
    for chunk in value.split(";")[:-1]:
        devices = []
        for dev in chunk.split(":"):
            if not dev:
                continue
            fields = dev.split(",")
            if len(fields) != 4 or not fields[0]:
                raise AnnotationFormatError(f"device {dev!r} is not 'uuid,vendor,mem,cores'")
            try:
                mem, cores = int(fields[2]), int(fields[3])
            except ValueError:
                raise AnnotationFormatError(f"device {dev!r} has non-integer mem/cores") from None
            devices.append(ContainerDevice(uuid=fields[0], vendor=fields[1], usedmem=mem, usedcores=cores))
        containers.append(devices)
    return containers


def pod_allocation(pod: Mapping[str, object]) -> list[ContainerDevice]:
    """The slices HAMi recorded on a live pod (`vgpu-devices-allocated`), every container's; none
    for a finished pod (it holds nothing) or one whose annotation does not parse."""
    status = pod.get("status") or {}
    if isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed"):
        return []
    meta = pod.get("metadata") or {}
    value = ((meta.get("annotations") if isinstance(meta, Mapping) else None) or {}).get(DEVICES_ALLOCATED)
    if not value:
        return []
    try:
        return [d for devices in decode_pod_devices(value) for d in devices]
    except AnnotationFormatError:
        return []
