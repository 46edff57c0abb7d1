"""GPU quota arithmetic, shared by the stack-config validation and the CrossGuard pack.

Pure functions over plain numbers and read-only mappings (policy props are proxies with float
numbers), applying HAMi's own request defaults: a bare `nvidia.com/gpu: N` takes whole cards
(100 % cores, all memory); gpumem/gpucores alone imply one vGPU; memory defaults to the whole
card; gpumem must be an integer number of MB or HAMi ignores the request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from components.gpu.catalog import CORES_PER_CARD, GpuModel
from components.gpu.hami_annotations import RES_GPU, RES_GPUCORES, RES_GPUMEM, RES_GPUMEM_PERCENTAGE


class RequestError(ValueError):
    """A container's GPU request is malformed in a way HAMi would ignore or reject."""


@dataclass(frozen=True)
class GpuRequest:
    """One container's effective HAMi request: `gpus` vGPUs, each with `mem_mb` and `cores`."""

    gpus: int
    mem_mb: int
    cores: int

    @property
    def total_mem_mb(self) -> int:
        return self.gpus * self.mem_mb

    @property
    def total_cores(self) -> int:
        return self.gpus * self.cores


@dataclass(frozen=True)
class Quota:
    """A tenant's GPU allowance: vGPUs, MB and core-percent summed over all its pods."""

    gpus: int
    gpumem_mb: int
    gpucores: int


_SUFFIXES = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "P": Decimal(10**15), "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}  # fmt: skip
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]i?|)$")
INT32_MAX = 2**31 - 1


def quantity_value(value: object, resource: str) -> Decimal:
    """A Kubernetes quantity as a number ("20000", "20k", "10Gi", 20000.0 all parse).

    The API server and the kubernetes provider rewrite quantities to canonical form (20000 is
    stored as "20k"), so checks must read them as quantities, not as digit strings.
    """
    if isinstance(value, bool):
        raise RequestError(f"{resource} must be a quantity, got {value!r}")
    if isinstance(value, int | float):
        number = Decimal(str(value))
    elif isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if not match:
            raise RequestError(f"{resource} is not a Kubernetes quantity: {value!r}")
        try:
            base = Decimal(match.group(1))
        except InvalidOperation:
            raise RequestError(f"{resource} is not a Kubernetes quantity: {value!r}") from None
        suffix = match.group(2)
        number = base * (Decimal(10) ** int(suffix[1:]) if suffix[:1] in ("e", "E") else _SUFFIXES[suffix])
    else:
        raise RequestError(f"{resource} must be a quantity, got {value!r}")
    if number < 0:
        raise RequestError(f"{resource} must not be negative, got {value!r}")
    return number


def _quantity(value: object, resource: str) -> int:
    """Read an integer quantity the way HAMi does: a whole number that fits an int32."""
    number = quantity_value(value, resource)
    unit = " in MB (e.g. 10240 for 10 GiB)" if resource == RES_GPUMEM else ""
    if number != number.to_integral_value():
        raise RequestError(f"{resource} must be a whole number{unit}, got {value!r}")
    if number > INT32_MAX:
        raise RequestError(
            f"{resource} {value!r} is {int(number)}, more than HAMi's int32: HAMi ignores the whole request; "
            f"give a plain integer{unit}"
        )
    return int(number)


def parse_request(resources: Mapping[str, object], card: GpuModel) -> GpuRequest | None:
    """Effective request of one container from its limits (or requests) mapping; None if no GPU."""
    present = {k: resources[k] for k in (RES_GPU, RES_GPUMEM, RES_GPUMEM_PERCENTAGE, RES_GPUCORES) if k in resources}
    if not present:
        return None
    gpus = _quantity(present[RES_GPU], RES_GPU) if RES_GPU in present else 1
    if gpus == 0:
        return None
    if RES_GPUMEM in present:
        mem = _quantity(present[RES_GPUMEM], RES_GPUMEM)
    elif RES_GPUMEM_PERCENTAGE in present:
        pct = _quantity(present[RES_GPUMEM_PERCENTAGE], RES_GPUMEM_PERCENTAGE)
        if pct > 100:
            raise RequestError(f"{RES_GPUMEM_PERCENTAGE} must be 0-100, got {pct}")
        mem = card.memory_mb * pct // 100
    else:
        mem = card.memory_mb
    if RES_GPUCORES in present:
        cores = _quantity(present[RES_GPUCORES], RES_GPUCORES)
        if cores > CORES_PER_CARD:
            raise RequestError(
                f"{RES_GPUCORES} must be 0-{CORES_PER_CARD} (% of one card), got {cores}; HAMi silently clamps it"
            )
    elif RES_GPUMEM in present or RES_GPUMEM_PERCENTAGE in present:
        cores = 0
    else:
        # Only nvidia.com/gpu: HAMi's webhook makes it an exclusive card.
        cores = CORES_PER_CARD
    return GpuRequest(gpus=gpus, mem_mb=mem, cores=cores)


def single_card_violations(req: GpuRequest, card: GpuModel, cards_per_node: int) -> list[str]:
    """Why one container's request cannot be served by the tenant's cards at all (empty = fits)."""
    problems = []
    if req.mem_mb > card.memory_mb:
        problems.append(f"gpumem {req.mem_mb} MB exceeds one {card.display_name} card ({card.memory_mb} MB)")
    if req.cores > card.cores:
        problems.append(f"gpucores {req.cores} % exceeds one card ({card.cores} %)")
    if req.gpus > cards_per_node:
        problems.append(f"{req.gpus} GPUs per container exceeds the {cards_per_node} cards of one node")
    return problems


def total_usage(requests: Iterable[tuple[GpuRequest, int]]) -> Quota:
    """Sum (request, replicas) pairs into vGPUs, MB and core-percent."""
    gpus = mem = cores = 0
    for req, replicas in requests:
        gpus += req.gpus * replicas
        mem += req.total_mem_mb * replicas
        cores += req.total_cores * replicas
    return Quota(gpus=gpus, gpumem_mb=mem, gpucores=cores)


def quota_violations(usage: Quota, quota: Quota) -> list[str]:
    """Each dimension of `usage` above `quota`, as 'what: used > limit'."""
    out = []
    for label, used, limit in (
        ("GPUs", usage.gpus, quota.gpus),
        ("gpumem MB", usage.gpumem_mb, quota.gpumem_mb),
        ("gpucores %", usage.gpucores, quota.gpucores),
    ):
        if used > limit:
            out.append(f"{label} {used} > quota {limit}")
    return out


def fleet_capacity(nodes: int, cards_per_node: int, card: GpuModel) -> Quota:
    """What a tenant's whole fleet offers, in the same units as a quota."""
    cards = nodes * cards_per_node
    return Quota(gpus=cards * card.split_count, gpumem_mb=cards * card.memory_mb, gpucores=cards * card.cores)


@dataclass
class _Card:
    mem_free: int
    cores_free: int
    slots_free: int
    used: bool = False

    def takes(self, req: GpuRequest, card: GpuModel) -> bool:
        """Whether one vGPU of `req` fits on this card, with HAMi's per-card rules."""
        return (
            self.slots_free > 0
            and self.mem_free >= req.mem_mb
            and self.cores_free >= req.cores
            and not (req.cores >= card.cores and self.used)  # exclusive needs an unused card
            and not (req.cores == 0 and self.cores_free == 0)  # CardComputeUnitsExhausted
        )


def first_unplaceable(
    pods: Iterable[tuple[str, GpuRequest]], nodes: int, cards_per_node: int, card: GpuModel
) -> str | None:
    """Name of the first pod that cannot be packed onto the fleet, or None if all fit.

    First-fit decreasing by memory: each vGPU of a pod goes to a different card of one node,
    exclusive (100 % cores) requests need an unused card, as HAMi requires. A node that fills up
    is dropped from the scan, so the cost is about pods x nodes that still have room.
    """
    fleet = [
        [
            _Card(mem_free=card.memory_mb, cores_free=card.cores, slots_free=card.split_count)
            for _ in range(cards_per_node)
        ]
        for _ in range(nodes)
    ]
    ordered = sorted(pods, key=lambda p: (p[1].total_mem_mb, p[1].total_cores), reverse=True)
    for name, req in ordered:
        for i, cards in enumerate(fleet):
            fits = [c for c in cards if c.takes(req, card)]
            if len(fits) >= req.gpus:
                for c in sorted(fits, key=lambda c: (c.mem_free, c.cores_free))[: req.gpus]:
                    c.mem_free -= req.mem_mb
                    c.cores_free -= req.cores
                    c.slots_free -= 1
                    c.used = True
                if not any(c.slots_free > 0 and c.mem_free > 0 for c in cards):
                    del fleet[i]  # full: never scanned again
                break
        else:
            return name
    return None
