"""What a closed network must hold for a stack: every image (who pulls it, what for) and every
chart (version, source), read from the stack's own config (components.config.image_set).

    .venv/bin/python -m components.reports.image_list --stack dev            # table: images, charts, mirror
    .venv/bin/python -m components.reports.image_list --stack dev --refs     # exact references, one per line
    .venv/bin/python -m components.reports.image_list --stack dev --refs --pulled-by nodes | \\
        tools/lab/mirror-push.sh 172.17.0.1:5000                         # fill the mirror
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from components.config import image_set
from components.config.image_refs import ImageRef
from components.config.load import load_stack_file
from components.config.model import StackConfig
from components.config.problems import ConfigError
from components.config.stack_file import StackFileError, resolve

ROOT = Path(__file__).resolve().parents[2]
PULLED_BY = {"engine": (image_set.DOCKER_ENGINE,), "nodes": image_set.MIRRORED, "all": None}


def render(cfg: StackConfig) -> str:
    rows = [(n.puller, n.name + (f"  (tag: {n.tag_note})" if n.tag_note else ""), n.why) for n in image_set.images(cfg)]
    out = [tabulate(rows, headers=("PULLED BY", "IMAGE", "FOR"), tablefmt="plain"), ""]
    charts = [(key, s.chart.rsplit("/", 1)[-1], s.version, f"{s.kind}: {s.where}") for key, s in image_set.charts(cfg)]
    out += [tabulate(charts, headers=("charts.KEY", "CHART", "VERSION", "SOURCE"), tablefmt="plain"), ""]
    if cfg.mirror:
        host = cfg.mirror.endpoint
        out.append(f"mirror {host}: the nodes send {', '.join(image_set.mirror_registries(cfg))} through it;")
        example = next((n for n in image_set.images(cfg) if n.puller in image_set.MIRRORED and not n.tag_note), None)
        if example:
            out.append(
                f"  it keeps each under its registry, e.g. {ImageRef.parse(example.ref).in_mirror(cfg.mirror.host)}"
            )
    else:
        out.append(
            "mirror: none (the nodes pull from each image's own registry; set gpu-tenancy:mirror on a closed network)"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None, prog: str = "python -m components.reports.image_list") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--stack", default="dev", help="a stack name (its Pulumi.<stack>.yaml; default dev) or a stack file"
    )
    parser.add_argument("--refs", action="store_true", help="only the image references, one per line")
    parser.add_argument(
        "--pulled-by",
        choices=sorted(PULLED_BY),
        default="all",
        help="with --refs: the Docker engine's images (images.* keys) or the nodes' (through the mirror)",
    )
    args = parser.parse_args(argv)
    try:
        cfg = load_stack_file(resolve(args.stack, ROOT).path, secrets_set=True)
    except (StackFileError, ConfigError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    if not args.refs:
        print(render(cfg))
        return 0
    pullers = PULLED_BY[args.pulled_by]
    printed: set[str] = set()
    for n in image_set.images(cfg):
        if (pullers is None or n.puller in pullers) and n.name not in printed:
            printed.add(n.name)
            if n.tag_note:  # no exact reference to copy: said, not printed as one
                print(f"# {n.name}: its tag is {n.tag_note}", file=sys.stderr)
            else:
                print(n.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
