"""The rulebook's verdicts: whether a tenant's demands fit its fleet as HAMi would place them,
and within its quota. The stack-config validation and the CrossGuard pack both call `judge`, so
they cannot disagree (requests and quota themselves are in `components.domain.requests`).

- A pod is placed whole on one node: each container's vGPUs on distinct cards of that node,
  containers of one pod may share a card; every GPU container, init containers included, holds
  its slice (HAMi allocates each).
- Fit: only demands that must be scheduled (`failOnPending: true`, the default) are packed; a
  workload declared with `failOnPending: false` may stay Pending, so it counts against the quota
  but is not required to fit.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from components.domain.catalog import GpuModel
from components.domain.requests import Demand, GpuRequest, PodRequest, Quota, quota_violations, total_usage

# HAMi's reason codes (pkg/device/common) for what the rules below can refuse. Spelled here
# because this layer imports nothing above it; components.kube.hami_reasons.WORDS gives their
# plain words (a test checks it knows each one).
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"  # more GPUs per container than the node has cards
CARD_TYPE_MISMATCH = "CardTypeMismatch"  # no card of the node is of a type the pod allows (use-/nouse-gputype)
CARD_TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE = "CardInsufficientCore"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT = "ExclusiveDeviceAllocateConflict"
CARD_COMPUTE_UNITS_EXHAUSTED = "CardComputeUnitsExhausted"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST = "AllocatedCardsInsufficientRequest"  # some cards fit, too few
# The order HAMi checks them in (node, then each card's Fit pipeline, then the count).
HAMI_CODE_ORDER = (
    NODE_INSUFFICIENT_DEVICE,
    CARD_TYPE_MISMATCH,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_INSUFFICIENT_MEMORY,
    CARD_INSUFFICIENT_CORE,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    CARD_COMPUTE_UNITS_EXHAUSTED,
    ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
)


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one card model: `nodes` nodes of `cards_per_node` cards (a pool, or a plan's part)."""

    model: GpuModel
    nodes: int
    cards_per_node: int
    name: str = ""

    @property
    def cards(self) -> int:
        return self.nodes * self.cards_per_node

    @property
    def capacity(self) -> Quota:
        m = self.model
        return Quota(gpus=self.cards * m.split_count, gpumem_mb=self.cards * m.memory_mb, gpucores=self.cards * m.cores)

    def describe(self) -> str:
        m = self.model
        pool = f"{self.name}: " if self.name else ""
        return f"{pool}{self.nodes} node(s) x {self.cards_per_node} {m.key}, {m.memory_mb} MB / {m.cores} % each"


@dataclass(frozen=True)
class Fleet:
    """A tenant's cards: one or more groups of nodes, each of one card model (a mixed fleet has
    several models). Nodes are taken group by group, in order."""

    groups: tuple[NodeGroup, ...]

    @classmethod
    def of(cls, model: GpuModel, nodes: int, cards_per_node: int, name: str = "") -> Fleet:
        """A fleet of one model."""
        return cls((NodeGroup(model, nodes, cards_per_node, name),))

    @property
    def nodes(self) -> int:
        return sum(g.nodes for g in self.groups)

    @property
    def cards(self) -> int:
        return sum(g.cards for g in self.groups)

    @property
    def models(self) -> tuple[GpuModel, ...]:
        return tuple(dict.fromkeys(g.model for g in self.groups))

    @property
    def capacity(self) -> Quota:
        total = Quota(0, 0, 0)
        for g in self.groups:
            total = total + g.capacity
        return total

    def describe(self) -> str:
        return "; ".join(g.describe() for g in self.groups)

    def locate(self, node: int) -> tuple[NodeGroup, int]:
        """The group of the fleet's `node`-th node, and its index within the group."""
        for g in self.groups:
            if node < g.nodes:
                return g, node
            node -= g.nodes
        raise IndexError(f"the fleet has {self.nodes} nodes, not {node}")


@dataclass(frozen=True)
class Slice:
    """One vGPU a placed pod holds: on card `card` of the fleet's `node`-th node."""

    node: int
    card: int
    pod: str
    mem_mb: int
    cores: int


def fleet_capacity(nodes: int, cards_per_node: int, card: GpuModel) -> Quota:
    return NodeGroup(card, nodes, cards_per_node).capacity


@dataclass
class _Card:
    model: GpuModel
    mem_free: int
    cores_free: int
    slots_free: int
    used: bool = False
    # The pods holding a slice of it: (pod, MB, cores).
    held: list[tuple[str, int, int]] = field(default_factory=list)

    def takes(self, req: GpuRequest) -> bool:
        """Whether one vGPU of `req` fits on this card, with HAMi's per-card rules."""
        return self.refusal(req) is None

    def refusal(self, req: GpuRequest) -> str | None:
        """HAMi's code for the first per-card check one vGPU of `req` fails here (its Fit's
        order), or None when it fits: `takes` and the Pending reasons are the same rules."""
        if self.slots_free <= 0:
            return CARD_TIME_SLICING_EXHAUSTED
        if self.mem_free < req.mem_mb:
            return CARD_INSUFFICIENT_MEMORY
        if self.cores_free < req.cores:
            return CARD_INSUFFICIENT_CORE
        if req.cores >= self.model.cores and self.used:  # exclusive needs an unused card
            return EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT
        if req.cores == 0 and self.cores_free == 0:
            return CARD_COMPUTE_UNITS_EXHAUSTED
        return None

    def take(self, req: GpuRequest, pod: str) -> None:
        self.mem_free -= req.mem_mb
        self.cores_free -= req.cores
        self.slots_free -= 1
        self.used = True
        self.held.append((pod, req.mem_mb, req.cores))

    def copy(self) -> _Card:
        return _Card(self.model, self.mem_free, self.cores_free, self.slots_free, self.used, list(self.held))


def _empty_node(group: NodeGroup) -> list[_Card]:
    m = group.model
    return [_Card(m, m.memory_mb, m.cores, m.split_count) for _ in range(group.cards_per_node)]


def _fit(d: Demand, cards: list[_Card], pod_name: str = "") -> tuple[list[_Card] | None, tuple[str, ...]]:
    """The node's cards after one pod of `d` (best fit per vGPU, container by container, as HAMi
    allocates them), or None and HAMi's codes for the container that does not fit: one code per
    refusing card, and AllocatedCardsInsufficientRequest when some cards fit but too few. The pod
    is read on the node's card model; a model its types exclude refuses it (CardTypeMismatch)."""
    pod = d.pod_on(cards[0].model)
    if any(req.gpus > len(cards) for _, req in (pod or d.pod).containers):
        return None, (NODE_INSUFFICIENT_DEVICE,)  # HAMi checks this before any card
    if pod is None:
        return None, (CARD_TYPE_MISMATCH,)
    trial, copied = cards, False  # copied at the first change: a node that refuses costs no copy
    for _, req in pod.containers:
        refusals = [c.refusal(req) for c in trial]
        fitting = [i for i, r in enumerate(refusals) if r is None]
        if len(fitting) < req.gpus:
            codes = {r for r in refusals if r is not None}
            if fitting:
                codes.add(ALLOCATED_CARDS_INSUFFICIENT_REQUEST)
            return None, tuple(c for c in HAMI_CODE_ORDER if c in codes)
        if not copied:
            trial, copied = [c.copy() for c in cards], True
        fits = [trial[i] for i in fitting]
        for c in sorted(fits, key=lambda c: (c.mem_free, c.cores_free))[: req.gpus]:
            c.take(req, pod_name)
    return trial, ()


def _place(d: Demand, cards: list[_Card], pod_name: str = "") -> bool:
    """Place every container of one pod of `d` on this node (best fit per vGPU), or change nothing."""
    trial, _ = _fit(d, cards, pod_name)
    if trial is None:
        return False
    cards[:] = trial
    return True


def _group_violations(pod: PodRequest, d: Demand, group: NodeGroup) -> list[str]:
    m = group.model
    problems = []
    for name, req in pod.containers:
        where = f"container {name}: "
        if req.mem_mb > m.memory_mb:
            problems.append(f"{where}gpumem {req.mem_mb} MB exceeds one {m.display_name} card ({m.memory_mb} MB)")
        if req.cores > m.cores:
            problems.append(f"{where}gpucores {req.cores} % exceeds one card ({m.cores} %)")
        if req.gpus > group.cards_per_node:
            problems.append(
                f"{where}{req.gpus} GPUs per container exceeds the {group.cards_per_node} cards of one node"
            )
    if not problems and not _place(d, _empty_node(group)):
        problems.append(
            f"its containers together need more than the {group.cards_per_node} card(s) of one node "
            "(a pod's containers all run on one node)"
        )
    return problems


def pod_violations(d: Demand, fleet: Fleet) -> list[str]:
    """Why one pod of `d` cannot run on any node of the fleet even when it is empty (empty = it
    can): no card of a type it allows (CardTypeMismatch), or each allowed group's reasons."""
    allowed = [(g, d.pod_on(g.model)) for g in fleet.groups]
    allowed = [(g, pod) for g, pod in allowed if pod is not None]
    if not allowed:
        kinds = ", ".join(m.hami_type for m in fleet.models)
        return [f"{d.types} allows no card of the fleet ({kinds}): HAMi leaves it Pending with {CARD_TYPE_MISMATCH}"]
    by_group = [(g, _group_violations(pod, d, g)) for g, pod in allowed]
    if any(not problems for _, problems in by_group):
        return []
    if len(by_group) == 1:
        return by_group[0][1]
    return [f"on {g.model.key} nodes{f' ({g.name})' if g.name else ''}: {p}" for g, ps in by_group for p in ps]


@dataclass(frozen=True)
class Packing:
    """Where each pod (`workload[k]`) went: the index of its node; or the first that did not fit."""

    placed: dict[str, int]
    unplaceable: str | None


class _FirstFit:
    """The one placement routine: nodes scanned in order (group by group), a pod placed whole on
    the first that takes it; a node with no card left that has both memory and a slot leaves the
    scan. `pack` and `place_all` both place through it.

    What a card holds only grows, so a card that refuses a vGPU refuses it for good, and a node
    that refuses a one-container pod (too few cards take it) refuses every later pod of the same
    demand: the next such pod starts where the last one went, and once one finds no node, every
    later pod of that demand is Pending too, without a scan. That keeps a fleet of thousands of
    nodes, half full or refusing everything, to about pods + demands x nodes. (A pod of several
    containers is scanned in full: which cards its first container takes decides what is left
    for the next, so a refusal need not last.)"""

    def __init__(self, fleet: Fleet):
        self.nodes = [_empty_node(g) for g in fleet.groups for _ in range(g.nodes)]
        self.open = list(range(len(self.nodes)))  # node indices with room, ascending
        self.placements = 0  # pods placed so far: a verdict on the fleet holds until the next one
        self._cursor: dict[int, int] = {}  # id(demand) -> the node its last pod went to
        self._refused: set[int] = set()  # id(demand) of demands no node took

    def place(self, d: Demand, pod_name: str = "") -> int | None:
        """The node index one pod of `d` went to, or None when no node in the scan takes it."""
        shapes = [d.pod, *(d.on_cards or {}).values()]
        lasting = all(len(p.containers) == 1 for p in shapes)  # its refusals hold for good
        if lasting and id(d) in self._refused:
            return None
        start = self._cursor.get(id(d), 0) if lasting else 0
        for pos in range(bisect_left(self.open, start), len(self.open)):
            index = self.open[pos]
            cards = self.nodes[index]
            if _place(d, cards, pod_name):
                if not any(c.slots_free > 0 and c.mem_free > 0 for c in cards):
                    del self.open[pos]  # full: never scanned again
                self.placements += 1
                self._cursor[id(d)] = index
                return index
        self._refused.add(id(d))  # read only for a one-container demand
        return None


def _largest_first(demands: Iterable[Demand], must_fit: bool) -> list[tuple[str, Demand]]:
    """The pods (`workload[k]`, with their demand) that must (or need not) fit, decreasing by memory."""
    pods = [(f"{d.name}[{k}]", d) for d in demands if d.must_fit == must_fit for k in range(d.peak)]
    pods.sort(key=lambda p: (p[1].pod.total.gpumem_mb, p[1].pod.total.gpucores), reverse=True)
    return pods


def pack(demands: Iterable[Demand], fleet: Fleet) -> Packing:
    """Pack the pods that must be scheduled (first-fit decreasing), up to the first that does not fit."""
    fit = _FirstFit(fleet)
    placed: dict[str, int] = {}
    for name, d in _largest_first(demands, must_fit=True):
        index = fit.place(d)
        if index is None:
            return Packing(placed, name)
        placed[name] = index
    return Packing(placed, None)


@dataclass(frozen=True)
class PendingPod:
    """A pod (`workload[k]`) no node takes, with HAMi's codes as (code, nodes reporting it),
    in HAMi's check order: what its FilteringFailed events would say."""

    name: str
    demand: str
    reasons: tuple[tuple[str, int], ...]
    # The demand is declared allowed to stay Pending (`failOnPending: false`).
    allowed: bool = False

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(code for code, _ in self.reasons)


@dataclass(frozen=True)
class Placement:
    """Every pod of the demands on a fleet: where each went, which stay Pending and why, and
    what the placed pods hold (`cards_used`: cards with at least one slice)."""

    fleet: Fleet
    placed: dict[str, int]
    pending: tuple[PendingPod, ...]
    cards_used: int
    allocated: Quota
    # Every vGPU the placed pods hold, card by card.
    slices: tuple[Slice, ...] = ()

    @property
    def pods(self) -> int:
        return len(self.placed) + len(self.pending)

    @property
    def cards(self) -> int:
        return self.fleet.cards

    @property
    def capacity(self) -> Quota:
        return self.fleet.capacity

    @property
    def unplaceable(self) -> str | None:
        """The first pod that must be scheduled and stays Pending: `pack`'s verdict."""
        return next((p.name for p in self.pending if not p.allowed), None)


def _pending_reasons(d: Demand, nodes: list[list[_Card]]) -> tuple[tuple[str, int], ...]:
    """HAMi's codes over every node, each with how many nodes report it (a node nothing was
    placed on answers as every such node of its model and size: judged once)."""
    counts: dict[str, int] = {}
    untouched: dict[tuple[str, int], tuple[str, ...]] = {}
    for cards in nodes:
        if any(c.used for c in cards):
            codes = _fit(d, cards)[1]
        else:
            key = (cards[0].model.key, len(cards))
            if key not in untouched:
                untouched[key] = _fit(d, cards)[1]
            codes = untouched[key]
        for code in codes:
            counts[code] = counts.get(code, 0) + 1
    return tuple((code, counts[code]) for code in HAMI_CODE_ORDER if code in counts)


def place_all(demands: Iterable[Demand], fleet: Fleet, progress: Callable[[int], None] | None = None) -> Placement:
    """Place every pod, going on past those that do not fit, for a plan's full picture.

    The pods that must be scheduled go first, through the same routine and in the same order as
    `pack`, so both agree on what fits; the pods allowed to stay Pending then take what is left.
    A pod no node takes gets HAMi's codes from every node as the fleet stands at that moment. (A
    node that left the scan because no card has memory and a slot left can still suit a 0 MB
    request; such a pod stays Pending with no code, as in `pack`.)
    """
    demands = list(demands)
    fit = _FirstFit(fleet)
    placed: dict[str, int] = {}
    pending: list[PendingPod] = []
    # id(demand) -> (placements when its reasons were taken, the reasons): the next Pending pod
    # of the demand shares them while nothing was placed in between.
    judged: dict[int, tuple[int, tuple[tuple[str, int], ...]]] = {}
    for must_fit in (True, False):
        for name, d in _largest_first(demands, must_fit):
            index = fit.place(d, name)
            if index is None:
                at, reasons = judged.get(id(d), (-1, ()))
                if at != fit.placements:
                    reasons = _pending_reasons(d, fit.nodes)
                    judged[id(d)] = (fit.placements, reasons)
                pending.append(PendingPod(name, d.name, reasons, allowed=not must_fit))
            else:
                placed[name] = index
            if progress is not None:
                progress(1)
    cards = [c for node in fit.nodes for c in node]
    allocated = Quota(
        gpus=sum(c.model.split_count - c.slots_free for c in cards),
        gpumem_mb=sum(c.model.memory_mb - c.mem_free for c in cards),
        gpucores=sum(c.model.cores - c.cores_free for c in cards),
    )
    slices = tuple(
        Slice(n, k, pod, mem, cores)
        for n, node in enumerate(fit.nodes)
        for k, card in enumerate(node)
        for pod, mem, cores in card.held
    )
    return Placement(fleet, placed, tuple(pending), sum(c.used for c in cards), allocated, slices)


def first_unplaceable(demands: Iterable[Demand], fleet: Fleet) -> str | None:
    """Name (`workload[k]`) of the first pod that cannot be packed onto the fleet, or None."""
    return pack(demands, fleet).unplaceable


@dataclass(frozen=True)
class Verdict:
    """What the rules say about a tenant's demands: empty lists and None = all good."""

    usage: Quota
    over_quota: list[str] = field(default_factory=list)
    unplaceable: str | None = None


def judge(demands: list[Demand], quota: Quota, fleet: Fleet) -> Verdict:
    """Quota over every demand; fit over the demands that must be scheduled."""
    usage = total_usage(demands)
    return Verdict(
        usage=usage, over_quota=quota_violations(usage, quota), unplaceable=first_unplaceable(demands, fleet)
    )
