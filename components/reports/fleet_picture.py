"""A picture of a tenant's fleet: every card, by pool and node, its memory and its cores split
into the slices of the pods that hold them (coloured by workload), and the Pending pods with
HAMi's reason beside it. From the stack's declared workloads (the rulebook's placement, what
`up` and the pack expect) or, with `--live`, from HAMi's own allocation in the tenant (the
cards HAMi registered on each node, the slices its pods' annotations record).

Drawn with matplotlib into a self-contained SVG (fonts as paths, nothing fetched when viewed)
and a PNG for a PR comment. Each card is an SVG group `card:<node>/<index>`, each slice
`slice:<node>/<index>/<namespace>/<pod>` (its memory; `:cores` after it, its cores), so a reader
(or a test) finds every card and slice by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.config.model import TenantConfig
from components.domain import hami_annotations as ha
from components.domain.rules import place_all
from components.kube import hami_reasons
from components.kube.client import get_json

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

# Above this many cards, slices are drawn without their pod names (they would not be legible).
MAX_LABEL_CARDS = 64


@dataclass(frozen=True)
class Card:
    node: str
    pool: str
    index: int
    model: str
    memory_mb: int
    cores: int

    @property
    def key(self) -> str:
        return f"{self.node}/{self.index}"


@dataclass(frozen=True)
class SliceOf:
    """What one pod holds on one card: `owner` is namespace/pod, `workload` what colours it."""

    card: str  # Card.key
    owner: str
    workload: str
    mem_mb: int
    cores: int


@dataclass
class FleetPicture:
    tenant: str
    source: str  # "declared" or "live"
    cards: list[Card] = field(default_factory=list)
    slices: list[SliceOf] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # "owner: HAMi's reason"

    def by_card(self) -> dict[str, list[SliceOf]]:
        """The slices of each card (Card.key), in the order they were taken."""
        out: dict[str, list[SliceOf]] = {}
        for s in self.slices:
            out.setdefault(s.card, []).append(s)
        return out

    def used(self, card: Card) -> tuple[int, int]:
        held = self.by_card().get(card.key, [])
        return sum(s.mem_mb for s in held), sum(s.cores for s in held)


def _node_names(t: TenantConfig, lab: str) -> dict[str, list[str]]:
    """Per GPU pool, its nodes' names (an external pool's machines name themselves: pool-i)."""
    names = {}
    for pool in t.gpu_pools:
        names[pool.name] = t.node_names(lab, pool) or [f"{pool.name}-{i}" for i in range(pool.nodes)]
    return names


def declared(t: TenantConfig, lab: str) -> FleetPicture:
    """The stack's workloads placed by the rulebook on the tenant's fleet, pod by pod."""
    fleet = t.fleet
    demands = t.demands()
    placement = place_all(demands, fleet)
    names = _node_names(t, lab)
    picture = FleetPicture(t.name, "declared")
    node_name: list[str] = []
    for g in fleet.groups:
        for i in range(g.nodes):
            node = names[g.name][i]
            node_name.append(node)
            for k in range(g.cards_per_node):
                picture.cards.append(Card(node, g.name, k, g.model.key, g.model.memory_mb, g.model.cores))
    namespaces = {d.name: w.namespace for d, w in zip(demands, t.workloads, strict=True)}
    for s in placement.slices:
        workload = s.pod.rsplit("[", 1)[0]
        owner = f"{namespaces.get(workload, 'default')}/{s.pod.split(' ', 1)[-1]}"  # namespace/name[k]
        picture.slices.append(SliceOf(f"{node_name[s.node]}/{s.card}", owner, workload, s.mem_mb, s.cores))
    for p in placement.pending:
        reasons = ", ".join(f"{code} ({n}/{fleet.nodes} nodes)" for code, n in p.reasons) or "no card refuses it"
        picture.pending.append(f"{namespaces.get(p.demand, 'default')}/{p.name.split(' ', 1)[-1]}: {reasons}")
    return picture


def live(tenant: str, core: CoreV1Api) -> FleetPicture:
    """HAMi's allocation as the tenant's API server holds it: the cards HAMi reads on each node
    (its register annotation), the slices its pods record (`hami.io/vgpu-devices-allocated`), the
    Pending pods HAMi schedules with HAMi's reason."""
    picture = FleetPicture(tenant, "live")
    by_uuid: dict[str, Card] = {}
    for node in get_json(core.list_node).get("items") or []:
        meta = node["metadata"]
        value = (meta.get("annotations") or {}).get(ha.NODE_REGISTER)
        if not value:
            continue
        try:
            devices = ha.decode_node_register(value)
        except ha.AnnotationFormatError:
            continue
        pool = (meta.get("labels") or {}).get("gpu-tenancy/pool", "")
        for d in devices:
            card = Card(meta["name"], pool, d.index, d.type, d.devmem, d.devcore)
            picture.cards.append(card)
            by_uuid[d.id] = card
    for pod in get_json(core.list_pod_for_all_namespaces).get("items") or []:
        meta = pod["metadata"]
        owner = f"{meta['namespace']}/{meta['name']}"
        held = ha.pod_allocation(pod)
        for d in held:
            card = by_uuid.get(d.uuid)
            if card is not None:
                picture.slices.append(SliceOf(card.key, owner, _workload_of(meta), d.usedmem, d.usedcores))
        spec = pod.get("spec") or {}
        if not held and not spec.get("nodeName") and spec.get("schedulerName") == ha.SCHEDULER_NAME:
            reason = hami_reasons.pending_reason(core, meta["namespace"], meta["name"])
            picture.pending.append(f"{owner}: {reason.text}")
    return picture


def _workload_of(meta: Mapping[str, Any]) -> str:
    """What colours a live pod: the stack's workload label, else its controller, else the pod."""
    labels = meta.get("labels") or {}
    if "gpu-tenancy/workload" in labels:
        return f"{meta['namespace']}/{labels['gpu-tenancy/workload']}"
    refs = meta.get("ownerReferences") or []
    if refs:
        name = refs[0]["name"]
        if refs[0].get("kind") == "ReplicaSet" and "pod-template-hash" in labels:
            name = name.removesuffix(f"-{labels['pod-template-hash']}")
        return f"{meta['namespace']}/{name}"
    return f"{meta['namespace']}/{meta['name']}"


def render(picture: FleetPicture, out: Path) -> tuple[Path, Path]:
    """Draw the picture into `<out>/<tenant>.svg` and `.png`; returns both paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    matplotlib.rcParams["svg.fonttype"] = "path"  # text as paths: the SVG needs no font to show
    matplotlib.rcParams["svg.hashsalt"] = "gpu-tenancy"  # stable ids, so the file is reproducible
    nodes: list[tuple[str, str, list[Card]]] = []
    for card in picture.cards:
        if not nodes or nodes[-1][0] != card.node:
            nodes.append((card.node, card.pool, []))
        nodes[-1][2].append(card)
    per_row = max((len(cards) for _, _, cards in nodes), default=1)
    width = max(8.0, 1.6 * per_row + 3.5)
    height = 1.2 + 0.55 * len(nodes) + 0.22 * min(len(picture.pending), 30)
    fig, ax = plt.subplots(figsize=(width, height))
    colours = _colours(s.workload for s in picture.slices)
    held = picture.by_card()
    label = len(picture.cards) <= MAX_LABEL_CARDS
    for row, (node, pool, cards) in enumerate(nodes):
        y = len(nodes) - 1 - row
        ax.text(-0.1, y + 0.2, f"{pool}: {node}", ha="right", va="center", fontsize=7)
        for card in cards:
            x = card.index * 1.15
            group = f"card:{card.key}"
            ax.add_patch(Rectangle((x, y), 1, 0.4, facecolor="#f2f2f2", edgecolor="#555", linewidth=0.6, gid=group))
            ax.text(x + 0.5, y + 0.45, f"{card.model} {card.memory_mb:,} MB", ha="center", fontsize=5, color="#333")
            _bars(ax, held.get(card.key, []), card, x, y, colours, label, Rectangle)
    if picture.pending:
        shown = picture.pending[:30]
        more = f"\n… and {len(picture.pending) - 30} more" if len(picture.pending) > 30 else ""
        ax.text(
            per_row * 1.15 + 0.2,
            len(nodes) - 0.5,
            "Pending (HAMi's reason):\n" + "\n".join(shown) + more,
            va="top",
            fontsize=6,
            color="#a00",
            gid="pending",
        )
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    if handles:
        ax.legend(handles, list(colours), loc="upper left", bbox_to_anchor=(0, -0.02), ncol=4, fontsize=6)
    ax.set_xlim(-0.1, per_row * 1.15 + (4.5 if picture.pending else 0.1))
    ax.set_ylim(-0.3, len(nodes))
    ax.axis("off")
    source = "declared workloads (the rulebook's placement)" if picture.source == "declared" else "HAMi's allocation"
    cards = f"{len(picture.cards)} card{'s' if len(picture.cards) != 1 else ''}"
    ax.set_title(
        f"{picture.tenant}, {cards}: memory (upper bar) and cores (lower bar) of each pod; {source}", fontsize=9
    )
    out.mkdir(parents=True, exist_ok=True)
    svg, png = out / f"{picture.tenant}.svg", out / f"{picture.tenant}.png"
    fig.savefig(svg, bbox_inches="tight", metadata={"Date": None})
    fig.savefig(png, bbox_inches="tight", dpi=110)
    plt.close(fig)
    return svg, png


def _colours(workloads: Iterable[str]) -> dict[str, Any]:
    """A colour per workload: a qualitative palette (matplotlib's tab10), in order of first appearance."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"].colors
    names = list(dict.fromkeys(workloads))
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def _bars(ax: Any, held: list[SliceOf], card: Card, x: float, y: float, colours: dict, label: bool, rect: Any) -> None:
    """A card's two bars: memory (upper half) and cores (lower half), one segment per slice it holds."""
    for part, (top, total, amount) in enumerate(
        ((y + 0.2, card.memory_mb, lambda s: s.mem_mb), (y, card.cores, lambda s: s.cores))
    ):
        left = x
        for s in held:
            width = amount(s) / total if total else 0
            if width <= 0:
                continue
            gid = f"slice:{card.key}/{s.owner}" + ("" if part == 0 else ":cores")
            ax.add_patch(
                rect((left, top), width, 0.2, facecolor=colours[s.workload], edgecolor="white", linewidth=0.3, gid=gid)
            )
            if label and part == 0 and width > 0.18:
                ax.text(left + width / 2, top + 0.1, s.owner.split("/", 1)[-1], ha="center", va="center", fontsize=4)
            left += width


def render_all(pictures: Sequence[FleetPicture], out: Path) -> list[Path]:
    paths: list[Path] = []
    for p in pictures:
        paths += render(p, out)
    return paths
