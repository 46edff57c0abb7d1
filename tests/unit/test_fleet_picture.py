"""The fleet picture, rendered from a known allocation and read back: every card is drawn, the
slices of each card add up to what was allocated on it, Pending pods carry HAMi's reason; from
the declared workloads of a mixed fleet and from HAMi's allocation as a tenant's API server holds
it (pods' vgpu-devices-allocated, nodes' register annotations)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from components.config.load import load_stack_file
from components.domain import hami_annotations as ha
from components.domain.catalog import GPU_MODELS
from components.reports import fleet_picture as fp
from components.reports.capacity_report import main
from tests.support.fake_kube import FakeCore
from tests.support.harness import ROOT

LAB = ROOT / "examples" / "Pulumi.mixed-lab.yaml"
SVG = "{http://www.w3.org/2000/svg}"


def drawn_ids(svg: Path) -> list[str]:
    return [el.get("id") for el in ET.parse(svg).iter() if el.get("id")]


def widths(svg: Path, prefix: str) -> dict[str, float]:
    """Width (in drawing units) of every drawn rectangle group whose id starts with `prefix`."""
    out = {}
    for el in ET.parse(svg).iter(f"{SVG}g"):
        gid = el.get("id") or ""
        if gid.startswith(prefix):
            path = el.find(f"{SVG}path")
            xs = [
                float(p.split()[0])
                for p in path.get("d").replace("M", "|").replace("L", "|").split("|")[1:]
                if p.strip()
            ]
            out[gid] = max(xs) - min(xs)
    return out


@pytest.fixture(scope="module")
def lab():
    cfg = load_stack_file(LAB)
    (t,) = cfg.tenants
    return t, cfg.cluster.name


def test_the_declared_picture_draws_every_card_and_what_each_pod_holds(lab, tmp_path):
    t, name = lab
    picture = fp.declared(t, name)
    assert len(picture.cards) == 2 * 2 + 2 * 4 == t.fleet.cards
    assert {c.model for c in picture.cards} == {"A100-80GB", "L4"}
    # the slices are the rulebook's placement: training on A100 cards only, inference on L4 only
    by_card = {c.key: c for c in picture.cards}
    for s in picture.slices:
        model = by_card[s.card].model
        if "training" in s.owner or "notebook" in s.owner:
            assert model == "A100-80GB"
        if "inference" in s.owner:
            assert model == "L4"
    assert sum(s.mem_mb for s in picture.slices) == 3 * 60000 + 10 * 10000 + 81920  # notebook: a whole A100
    # big-eval may stay Pending (failOnPending: false): said apart from the pods that must run
    assert picture.pending == []
    assert picture.optional == [
        "default/big-eval[0]: CardInsufficientMemory (4/4 nodes)",
        "default/big-eval[1]: CardInsufficientMemory (4/4 nodes)",
    ]
    svg, png = fp.render(picture, tmp_path)
    ids = drawn_ids(svg)
    assert all(f"card:{c.key}" in ids for c in picture.cards)
    assert all(f"slice:{s.card}/{s.owner}" in ids for s in picture.slices)
    assert "pending-allowed" in ids and "pending" not in ids
    # each slice's width on its card is its share of the card's memory (cards are 1 unit wide)
    drawn = widths(svg, "slice:")
    card_width = next(iter(widths(svg, "card:").values()))
    for s in picture.slices:
        share = drawn[f"slice:{s.card}/{s.owner}"] / card_width
        assert share == pytest.approx(s.mem_mb / by_card[s.card].memory_mb, abs=0.01)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text()
    assert "<image" not in text and "@import" not in text and "<text" not in text  # no fetch, no font needed


def test_the_live_picture_is_hamis_allocation(tmp_path):
    core = FakeCore()
    a100, l4 = GPU_MODELS["A100-80GB"], GPU_MODELS["L4"]
    cards = {
        "n-a100": [ha.DeviceInfo(f"GPU-a-{i}", 10, a100.memory_mb, 100, a100.hami_type, index=i) for i in range(2)],
        "n-l4": [ha.DeviceInfo(f"GPU-l-{i}", 10, l4.memory_mb, 100, l4.hami_type, index=i) for i in range(4)],
    }
    for node, devices in cards.items():
        pool = node.removeprefix("n-")
        core.add_node(
            node, labels={"gpu-tenancy/pool": pool}, annotations={ha.NODE_REGISTER: ha.encode_node_register(devices)}
        )
    held = {
        ("ml", "train-0"): [ha.ContainerDevice("GPU-a-0", 40000, 50), ha.ContainerDevice("GPU-a-1", 40000, 50)],
        ("ml", "train-1"): [ha.ContainerDevice("GPU-a-0", 30000, 30)],
        ("serving", "infer-0"): [ha.ContainerDevice("GPU-l-2", 10000, 25)],
    }
    for (ns, pod), devices in held.items():
        value = ha.encode_pod_devices([devices])
        core.add_pod(ns, pod, annotations={ha.DEVICES_ALLOCATED: value}, node="n-a100" if "train" in pod else "n-l4")
    core.add_pod("ml", "waiting", scheduler=ha.SCHEDULER_NAME)
    picture = fp.live("team-a", core)
    assert [c.key for c in picture.cards] == ["n-a100/0", "n-a100/1", "n-l4/0", "n-l4/1", "n-l4/2", "n-l4/3"]
    assert {c.pool for c in picture.cards} == {"a100", "l4"}
    assert picture.used(picture.cards[0]) == (70000, 80)  # GPU-a-0: train-0's 40000 MB + train-1's 30000
    assert picture.used(picture.cards[4]) == (10000, 25)
    assert sum(s.mem_mb for s in picture.slices) == 120000
    (pending,) = picture.pending
    assert pending.startswith("ml/waiting: ")
    svg, _ = fp.render(picture, tmp_path)
    ids = drawn_ids(svg)
    assert all(f"card:{c.key}" in ids for c in picture.cards) and "slice:n-a100/0/ml/train-1" in ids


def test_the_capacity_report_writes_the_pictures(tmp_path, capsys):
    assert main(["--stack", str(LAB), "--picture", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team-a.png", "team-a.svg"]
    assert "wrote" in capsys.readouterr().err


def test_the_docs_show_the_example_picture():
    text = (ROOT / "docs" / "pull-requests.md").read_text()
    assert "](team-a.png)" in text and (ROOT / "docs" / "team-a.png").exists()


def fleet_of(nodes: int, cards: int, workloads: int) -> fp.FleetPicture:
    """A large declared-looking picture: `workloads` workloads spread over the cards."""
    picture = fp.FleetPicture("big", "declared")
    a100 = GPU_MODELS["A100-80GB"]
    for n in range(nodes):
        for k in range(cards):
            picture.cards.append(fp.Card(f"node-{n}", "gpus", k, a100.key, a100.memory_mb, a100.cores))
    for i, card in enumerate(picture.cards[: len(picture.cards) // 2]):
        w = i % workloads
        picture.slices.append(fp.SliceOf(card.key, f"ml/w{w}-{i}", f"ml/w{w}", 40000, 50))
    picture.pending = [f"ml/w0-x{i}: CardInsufficientMemory ({nodes}/{nodes} nodes)" for i in range(40)]
    picture.optional = ["ml/batch-0: CardInsufficientMemory"]
    return picture


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_a_fleet_of_1600_cards_is_a_summary_on_one_screen_and_every_card_in_the_svg(tmp_path):
    picture = fleet_of(200, 8, 12)
    svg, png = fp.render(picture, tmp_path)
    width, height = png_size(png)
    assert width <= 1920 and height <= 1200, (width, height)  # one screen
    ids = drawn_ids(svg)
    assert sum(i.startswith("card:") for i in ids) == 1600  # the SVG keeps every card
    assert "pending" in ids and "pending-allowed" in ids


def test_the_largest_fleet_a_picture_draws_card_by_card_is_the_detail(tmp_path):
    picture = fleet_of(8, 8, 3)  # 64 cards: still every card in the PNG
    assert len(picture.cards) == fp.MAX_DETAIL_CARDS
    fig = fp._detail(picture)
    summary = fp._summary(fleet_of(9, 8, 3))
    assert "every card and slice: the SVG" not in fig.axes[0].get_title()
    assert "every card and slice: the SVG" in summary.axes[0].get_title()


@pytest.mark.parametrize("count", [3, 10, 11, 20, 21, 60])
def test_no_two_workloads_share_a_colour(count):
    colours = fp._colours(f"ml/w{i}" for i in range(count))
    assert len(colours) == count and len(set(colours.values())) == count


@pytest.mark.parametrize("draw", [fp._detail, fp._summary])
def test_the_legend_is_on_top_and_a_declared_picture_says_it_is_a_feasibility_packing(draw):
    picture = fleet_of(9, 8, 5)
    fig = draw(picture)
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert legend.y0 >= ax.get_window_extent().y1 - 1  # above the drawing, not at the bottom
    assert "feasibility packing" in ax.get_title() and "not where HAMi will put the pods" in ax.get_title()
    picture.source = "live"
    assert "feasibility" not in draw(picture).axes[0].get_title()
