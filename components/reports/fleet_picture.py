"""A picture of a tenant's fleet: every card, by pool and node, its memory and its cores split
into the slices of the pods that hold them (coloured by workload), and the Pending pods with
HAMi's reason beside it. From the stack's declared workloads (the rulebook's placement, what
`up` and the pack expect) or, with `--live`, from HAMi's own allocation in the tenant (the
cards HAMi registered on each node, the slices its pods' annotations record).

Drawn with matplotlib into a self-contained SVG (fonts as paths, nothing fetched when viewed)
and a PNG for a PR comment. Each card is an SVG group `card:<node>/<index>`, each slice
`slice:<node>/<index>/<namespace>/<pod>` (its memory; `:cores` after it, its cores), so a reader
(or a test) finds every card and slice by name. Above MAX_DETAIL_CARDS cards the PNG is a summary
a person reads on one screen (per pool, what each workload holds; per node, how full it is); the
SVG keeps every card. A declared picture says what it is: the rulebook's feasibility packing, not
where HAMi will put the pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.config.model import TenantConfig
from components.domain import hami_annotations as ha
from components.domain.names import FAIL_ON_PENDING_ANNOTATION
from components.domain.rules import place_all
from components.kube import hami_reasons
from components.kube.client import get_json

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

# Above this many cards, slices are drawn without their pod names (they would not be legible),
# and the PNG is the summary (the SVG keeps every card).
MAX_LABEL_CARDS = MAX_DETAIL_CARDS = 64
# Nodes per row of the summary's node strip.
STRIP_NODES = 50
DECLARED_CAPTION = (
    "placement: the rulebook's feasibility packing (largest pod first, first node that takes it), "
    "not where HAMi will put the pods (the stack runs its spread policy)"
)


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
    # Pending pods of workloads allowed to stay Pending (failOnPending: false), said apart.
    optional: list[str] = field(default_factory=list)

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
        line = f"{namespaces.get(p.demand, 'default')}/{p.name.split(' ', 1)[-1]}: {reasons}"
        (picture.optional if p.allowed else picture.pending).append(line)
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
            optional = (meta.get("annotations") or {}).get(FAIL_ON_PENDING_ANNOTATION) == "false"
            (picture.optional if optional else picture.pending).append(f"{owner}: {reason.text}")
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
    """Draw the picture into `<out>/<tenant>.svg` (every card) and `.png` (every card, or above
    MAX_DETAIL_CARDS the summary); returns both paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "path"  # text as paths: the SVG needs no font to show
    matplotlib.rcParams["svg.hashsalt"] = "gpu-tenancy"  # stable ids, so the file is reproducible
    out.mkdir(parents=True, exist_ok=True)
    svg, png = out / f"{picture.tenant}.svg", out / f"{picture.tenant}.png"
    detail = _detail(picture)
    detail.savefig(svg, bbox_inches="tight", metadata={"Date": None})
    if len(picture.cards) > MAX_DETAIL_CARDS:
        plt.close(detail)
        summary = _summary(picture)
        summary.savefig(png, bbox_inches="tight", dpi=110)
        plt.close(summary)
    else:
        detail.savefig(png, bbox_inches="tight", dpi=110)
        plt.close(detail)
    return svg, png


def _title(picture: FleetPicture, what: str) -> str:
    source = "declared workloads" if picture.source == "declared" else "HAMi's allocation"
    cards = f"{len(picture.cards)} card{'s' if len(picture.cards) != 1 else ''}"
    lines = [f"{picture.tenant}, {cards}: {what}; {source}"]
    if picture.source == "declared":
        lines.append(DECLARED_CAPTION)
    return "\n".join(lines)


def _legend_on_top(ax: Any, colours: dict[str, Any]) -> None:
    from matplotlib.patches import Rectangle

    handles = [Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    if handles:
        ax.legend(
            handles, list(colours), loc="lower left", bbox_to_anchor=(0, 1.0), ncol=min(6, len(handles)),
            fontsize=6, frameon=False,
        )  # fmt: skip


def _pending_text(picture: FleetPicture, limit: int = 30) -> list[tuple[str, str, str]]:
    """(text, colour, SVG id) blocks: the Pending pods that must run (red, `pending`), and those
    allowed to stay Pending (grey, `pending-allowed`)."""
    blocks = []
    for lines, head, colour, gid in (
        (picture.pending, "Pending (HAMi's reason):", "#a00", "pending"),
        (picture.optional, "Pending, allowed to stay Pending (failOnPending: false):", "#666", "pending-allowed"),
    ):
        if lines:
            more = f"\n... and {len(lines) - limit} more" if len(lines) > limit else ""
            blocks.append((head + "\n" + "\n".join(lines[:limit]) + more, colour, gid))
    return blocks


def _detail(picture: FleetPicture) -> Any:
    """Every card, by pool and node, its memory and cores split into the slices that hold them."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    nodes: list[tuple[str, str, list[Card]]] = []
    for card in picture.cards:
        if not nodes or nodes[-1][0] != card.node:
            nodes.append((card.node, card.pool, []))
        nodes[-1][2].append(card)
    per_row = max((len(cards) for _, _, cards in nodes), default=1)
    listed = min(len(picture.pending), 30) + min(len(picture.optional), 30)
    width = max(8.0, 1.6 * per_row + 3.5)
    height = 1.6 + 0.55 * len(nodes) + 0.22 * listed
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
    top = len(nodes) - 0.5
    for text, colour, gid in _pending_text(picture):
        ax.text(per_row * 1.15 + 0.2, top, text, va="top", fontsize=6, color=colour, gid=gid)
        top -= 0.22 * (text.count("\n") + 2)
    ax.set_xlim(-0.1, per_row * 1.15 + (4.5 if listed else 0.1))
    ax.set_ylim(-0.3, len(nodes))
    ax.axis("off")
    _legend_on_top(ax, colours)
    rows = -(-len(colours) // 6)
    ax.set_title(_title(picture, "memory (upper bar) and cores (lower bar) of each pod"), fontsize=9, pad=8 + 11 * rows)
    return fig


def _summary(picture: FleetPicture) -> Any:
    """A fleet too large to show card by card, on one screen: per pool, the memory and the cores
    each workload holds (one bar each); per node, how full its memory is (a strip of squares,
    STRIP_NODES to a row); the Pending pods as in the detail."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    pools: dict[str, list[Card]] = {}
    for card in picture.cards:
        pools.setdefault(card.pool, []).append(card)
    node_used: dict[str, int] = {}
    node_total: dict[str, int] = {}
    for card in picture.cards:
        node_total[card.node] = node_total.get(card.node, 0) + card.memory_mb
    card_pool = {c.key: c.pool for c in picture.cards}
    held: dict[str, dict[str, tuple[int, int]]] = {pool: {} for pool in pools}
    for s in picture.slices:
        mem, cores = held[card_pool[s.card]].get(s.workload, (0, 0))
        held[card_pool[s.card]][s.workload] = (mem + s.mem_mb, cores + s.cores)
        node = s.card.rsplit("/", 1)[0]
        node_used[node] = node_used.get(node, 0) + s.mem_mb
    colours = _colours(s.workload for s in picture.slices)
    strip_rows = {pool: -(-len(dict.fromkeys(c.node for c in cards)) // STRIP_NODES) for pool, cards in pools.items()}
    rows = sum(1.7 + 0.35 * n for n in strip_rows.values())
    listed = min(len(picture.pending), 30) + min(len(picture.optional), 30)
    fig, ax = plt.subplots(figsize=(12, 1.8 + 0.55 * rows + 0.16 * listed))
    cmap = plt.get_cmap("Greys")
    y = rows
    for pool, cards in pools.items():
        nodes = list(dict.fromkeys(c.node for c in cards))
        mem_total = sum(c.memory_mb for c in cards)
        cores_total = sum(c.cores for c in cards)
        used = held[pool]
        mem_used = sum(m for m, _ in used.values())
        models = ", ".join(dict.fromkeys(c.model for c in cards))
        ax.text(0, y - 0.15, f"{pool}: {len(nodes):,} nodes, {len(cards):,} cards ({models}); "
                f"memory {mem_used:,} of {mem_total:,} MB ({100 * mem_used / mem_total:.0f} %)",
                fontsize=8, va="bottom")  # fmt: skip
        for k, (total, pick) in enumerate(((mem_total, 0), (cores_total, 1))):
            bar_y = y - 0.55 - 0.45 * k
            ax.add_patch(Rectangle((0, bar_y), 10, 0.35, facecolor="#f2f2f2", edgecolor="#555", linewidth=0.5))
            left = 0.0
            for workload, amounts in used.items():
                w = 10 * amounts[pick] / total if total else 0
                gid = f"share:{pool}/{workload}" + (":cores" if pick else "")
                ax.add_patch(
                    Rectangle(
                        (left, bar_y), w, 0.35, facecolor=colours[workload], edgecolor="white", linewidth=0.3, gid=gid
                    )
                )
                left += w
            ax.text(10.1, bar_y + 0.17, "memory" if pick == 0 else "cores", fontsize=6, va="center")
        strip_y = y - 1.4
        for n, node in enumerate(nodes):
            fill = node_used.get(node, 0) / node_total[node]
            col, line = n % STRIP_NODES, n // STRIP_NODES
            ax.add_patch(Rectangle((col * 0.2, strip_y - 0.35 * line), 0.17, 0.28, facecolor=cmap(0.1 + 0.85 * fill),
                                   edgecolor="none", gid=f"node:{node}"))  # fmt: skip
        ax.text(STRIP_NODES * 0.2 + 0.1, strip_y + 0.14, "each node: how full its memory is (white empty, black full)",
                fontsize=6, va="center")  # fmt: skip
        y -= 1.7 + 0.35 * strip_rows[pool]
    top = y - 0.2
    for text, colour, gid in _pending_text(picture):
        ax.text(0, top, text, va="top", fontsize=6, color=colour, gid=gid)
        top -= 0.16 * (text.count("\n") + 2)
    ax.set_xlim(-0.1, STRIP_NODES * 0.2 + 4)
    ax.set_ylim(min(top, y) - 0.2, rows + 0.1)
    ax.axis("off")
    _legend_on_top(ax, colours)
    legend_rows = -(-len(colours) // 6)
    what = "summary per pool and node (every card and slice: the SVG)"
    ax.set_title(_title(picture, what), fontsize=9, pad=8 + 11 * legend_rows)
    return fig


def _colours(workloads: Iterable[str]) -> dict[str, Any]:
    """A colour per workload, in order of first appearance, never two alike: matplotlib's
    qualitative tab10 (then tab20) while they last, beyond that hues spread evenly around the
    wheel, at two lightnesses."""
    import colorsys

    import matplotlib

    names = list(dict.fromkeys(workloads))
    if len(names) <= 10:
        palette = list(matplotlib.colormaps["tab10"].colors)
    elif len(names) <= 20:
        palette = list(matplotlib.colormaps["tab20"].colors)
    else:
        palette = [colorsys.hsv_to_rgb(i / len(names), 0.65, 0.9 if i % 2 else 0.65) for i in range(len(names))]
    return {name: palette[i] for i, name in enumerate(names)}


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
