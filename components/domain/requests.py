"""Requests and quota: from container resources to HAMi's effective requests, and what a
tenant's demands use against its budget.

- A container's request follows HAMi's own defaults: a bare `nvidia.com/gpu: N` takes whole
  cards (100 % cores, all memory); gpumem/gpucores alone imply one vGPU; memory defaults to the
  whole card; gpumem must be a whole number of MB that fits an int32, or HAMi ignores it.
  Quantities are read with the Kubernetes client's own parser (the API server stores 20000 as
  "20k").
- Card types: a pod may name the types it uses or avoids (`CardTypes`, HAMi's matching); in a
  fleet of several models its request is read per model (memory defaults to the whole card it
  lands on, a percentage is of that card), and its quota counts it on the largest card it may
  land on: HAMi charges what the card it lands on gives, never more.
- Quota: every demand counts at its peak, replicas plus the pods its rollout surges
  (gpu.rollouts); replicas unknown at preview count as one (the caller reports them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity

from components.domain.catalog import CORES_PER_CARD, GpuModel
from components.domain.hami_annotations import (
    NOUSE_GPU_TYPE,
    RES_GPU,
    RES_GPUCORES,
    RES_GPUMEM,
    RES_GPUMEM_PERCENTAGE,
    USE_GPU_TYPE,
)

GPU_RESOURCES = (RES_GPU, RES_GPUMEM, RES_GPUMEM_PERCENTAGE, RES_GPUCORES)
INT32_MAX = 2**31 - 1


class RequestError(ValueError):
    """A container's GPU request is malformed in a way HAMi would ignore or reject."""

    def __init__(self, resource: str, message: str):
        self.resource = resource
        super().__init__(message)


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
    """A GPU allowance (or usage): vGPUs, MB and core-percent summed over pods."""

    gpus: int
    gpumem_mb: int
    gpucores: int

    def __add__(self, other: Quota) -> Quota:
        return Quota(self.gpus + other.gpus, self.gpumem_mb + other.gpumem_mb, self.gpucores + other.gpucores)

    def __sub__(self, other: Quota) -> Quota:
        return Quota(self.gpus - other.gpus, self.gpumem_mb - other.gpumem_mb, self.gpucores - other.gpucores)

    def times(self, n: int) -> Quota:
        return Quota(self.gpus * n, self.gpumem_mb * n, self.gpucores * n)


NO_GPU = Quota(0, 0, 0)


def quantity_value(value: object, resource: str) -> Decimal:
    """A Kubernetes quantity as a number ("20000", "20k", "10Gi", 20000.0), as the API reads it."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise RequestError(resource, f"{resource} must be a quantity, got {value!r}")
    try:
        number = parse_quantity(value)
    except (ValueError, ArithmeticError):
        raise RequestError(resource, f"{resource} is not a Kubernetes quantity: {value!r}") from None
    if not number.is_finite():
        raise RequestError(resource, f"{resource} is not a Kubernetes quantity: {value!r}")
    if number < 0:
        raise RequestError(resource, f"{resource} must not be negative, got {value!r}")
    return number


def _whole(value: object, resource: str) -> int:
    """An integer quantity the way HAMi reads it: a whole number that fits an int32."""
    number = quantity_value(value, resource)
    unit = " in MB (e.g. 10240 for 10 GiB)" if resource == RES_GPUMEM else ""
    if number != number.to_integral_value():
        raise RequestError(resource, f"{resource} must be a whole number{unit}, got {value!r}")
    if number > INT32_MAX:
        raise RequestError(
            resource,
            f"{resource} {value!r} is {int(number)}, more than HAMi's int32: HAMi ignores the whole request; "
            f"give a plain integer{unit}",
        )
    return int(number)


def parse_request(resources: Mapping[str, object], card: GpuModel) -> GpuRequest | None:
    """Effective request of one container from its limits (or requests); None if no GPU."""
    present = {k: resources[k] for k in GPU_RESOURCES if k in resources}
    if not present:
        return None
    gpus = _whole(present[RES_GPU], RES_GPU) if RES_GPU in present else 1
    if gpus == 0:
        return None
    if RES_GPUMEM in present:
        mem = _whole(present[RES_GPUMEM], RES_GPUMEM)
    elif RES_GPUMEM_PERCENTAGE in present:
        pct = _whole(present[RES_GPUMEM_PERCENTAGE], RES_GPUMEM_PERCENTAGE)
        if pct > 100:
            raise RequestError(RES_GPUMEM_PERCENTAGE, f"{RES_GPUMEM_PERCENTAGE} must be 0-100, got {pct}")
        mem = card.memory_mb * pct // 100
    else:
        mem = card.memory_mb
    if RES_GPUCORES in present:
        cores = _whole(present[RES_GPUCORES], RES_GPUCORES)
        if cores > CORES_PER_CARD:
            raise RequestError(
                RES_GPUCORES,
                f"{RES_GPUCORES} must be 0-{CORES_PER_CARD} (% of one card), got {cores}; HAMi silently clamps it",
            )
    elif RES_GPUMEM in present or RES_GPUMEM_PERCENTAGE in present:
        cores = 0
    else:
        # Only nvidia.com/gpu: HAMi's webhook makes it an exclusive card.
        cores = CORES_PER_CARD
    return GpuRequest(gpus=gpus, mem_mb=mem, cores=cores)


@dataclass(frozen=True)
class PodRequest:
    """The GPU containers of one pod (named), each with its effective request."""

    containers: tuple[tuple[str, GpuRequest], ...]

    @property
    def total(self) -> Quota:
        gpus = sum(r.gpus for _, r in self.containers)
        mem = sum(r.total_mem_mb for _, r in self.containers)
        cores = sum(r.total_cores for _, r in self.containers)
        return Quota(gpus, mem, cores)


def pod_request(containers: Iterable[tuple[str, Mapping[str, object]]], card: GpuModel) -> PodRequest:
    """A pod's GPU containers from (name, limits-or-requests) pairs; RequestError names the container."""
    found = []
    for name, resources in containers:
        try:
            req = parse_request(resources, card)
        except RequestError as exc:
            raise RequestError(exc.resource, f"container {name}: {exc}") from None
        if req is not None:
            found.append((name, req))
    return PodRequest(tuple(found))


def _entries(text: str | None) -> tuple[str, ...] | None:
    """A comma list as HAMi 2.10.0 reads it: entries trimmed, empty ones dropped; none left = unset."""
    if text is None:
        return None
    return tuple(e.strip() for e in text.split(",") if e.strip()) or None


@dataclass(frozen=True)
class CardTypes:
    """A pod's `nvidia.com/use-gputype` and `nvidia.com/nouse-gputype`, matched as HAMi 2.10.0's
    CheckType (pkg/device/devices.go; the stack runs that extender): each a comma list, an entry
    matching a card whose type contains it (case-insensitive); a card is allowed when some `use`
    entry matches (or there is none) and no `nouse` entry does. HAMi 2.8.3 did not trim entries
    and let an empty one match every card."""

    use: tuple[str, ...] | None = None
    nouse: tuple[str, ...] | None = None

    @classmethod
    def of(cls, use: str | None = None, nouse: str | None = None) -> CardTypes:
        return cls(_entries(use), _entries(nouse))

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, object]) -> CardTypes:
        use, nouse = annotations.get(USE_GPU_TYPE), annotations.get(NOUSE_GPU_TYPE)
        return cls.of(use if isinstance(use, str) else None, nouse if isinstance(nouse, str) else None)

    def allows(self, card: GpuModel) -> bool:
        kind = card.hami_type.upper()
        if self.use is not None and not any(u.upper() in kind for u in self.use):
            return False
        return not (self.nouse is not None and any(n.upper() in kind for n in self.nouse))

    def __str__(self) -> str:
        said = [f"{a} {','.join(v)!r}" for a, v in ((USE_GPU_TYPE, self.use), (NOUSE_GPU_TYPE, self.nouse)) if v]
        return " and ".join(said) or "any card type"


ANY_CARD = CardTypes()


@dataclass(frozen=True)
class Demand:
    """One workload as the rules see it: a pod shape times its replicas, plus the pods its
    rollout holds above them (the surge, gpu.rollouts): quota and fit count the peak.

    `pod` is what the quota counts; `on_cards` (from `demand`) is the pod as each card model of the
    fleet its types allow would see it (None: the same pod on any card)."""

    name: str
    pod: PodRequest
    replicas: int = 1
    # False: declared as allowed to stay Pending (`failOnPending: false`): left out of the fit.
    must_fit: bool = True
    # Totals an object declares instead of a pod shape (a kind the rules cannot count): quota only.
    declared: Quota | None = None
    surge: int = 0
    on_cards: Mapping[str, PodRequest] | None = None
    types: CardTypes = ANY_CARD

    def pod_on(self, card: GpuModel) -> PodRequest | None:
        """The pod as a node of `card`s reads it; None when its card types exclude that model."""
        if self.on_cards is None:
            return self.pod if self.types.allows(card) else None
        return self.on_cards.get(card.key)

    @property
    def peak(self) -> int:
        return self.replicas + self.surge

    @property
    def counted(self) -> str:
        """How many pods it counts for, as a message says it: `x3` or `x3 +1 surge`."""
        return f"x{self.replicas}" + (f" +{self.surge} surge" if self.surge else "")

    @property
    def usage(self) -> Quota:
        return (self.declared if self.declared is not None else self.pod.total).times(self.peak)


def demand(
    name: str,
    containers: Iterable[tuple[str, Mapping[str, object]]],
    cards: Iterable[GpuModel],
    types: CardTypes = ANY_CARD,
    replicas: int = 1,
    must_fit: bool = True,
    surge: int = 0,
) -> Demand:
    """A workload's demand on a fleet of `cards` (its models): its pod read on each model its
    types allow, and counted against the quota on the one that gives it the most (memory, then
    cores). When no model is allowed the pod is read on the largest card: it stays Pending
    (CardTypeMismatch) and still counts. RequestError names the container."""
    containers = list(containers)
    models = list(dict.fromkeys(cards))
    on_cards = {m.key: pod_request(containers, m) for m in models if types.allows(m)}
    if on_cards:
        pod = max(on_cards.values(), key=lambda p: (p.total.gpumem_mb, p.total.gpucores))
    else:
        pod = pod_request(containers, max(models, key=lambda m: m.memory_mb))
    return Demand(name, pod, replicas, must_fit, surge=surge, on_cards=on_cards, types=types)


def total_usage(demands: Iterable[Demand]) -> Quota:
    return total_of(d.usage for d in demands)


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


def budget_shares(budget: Quota, declared: Mapping[str, Quota], shared: str = "default") -> dict[str, Quota]:
    """Split a tenant's one GPU budget over its namespaces, never multiplying it: each namespace
    gets what its declared workloads use, and `shared` gets the rest (its own workloads and
    whatever the team runs there by hand). The shares add up to the budget exactly."""
    shares = {ns: use for ns, use in declared.items() if ns != shared}
    shares[shared] = budget - total_of(shares.values())
    return dict(sorted(shares.items()))


def total_of(quotas: Iterable[Quota]) -> Quota:
    total = NO_GPU
    for q in quotas:
        total = total + q
    return total
