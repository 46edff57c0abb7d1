"""The README's offline block (`## Offline, no Docker`), as the commands a newcomer types: the
docs tier runs its tool lines in-process, the newcomer's test runs every line in a fresh copy."""

from __future__ import annotations

from tests.support.harness import ROOT


def offline_block() -> list[str]:
    """Each command line of the block's ```bash fence, its comment dropped."""
    text = (ROOT / "README.md").read_text().split("## Offline, no Docker", 1)[1].split("```bash", 1)[1]
    return [line.split("#", 1)[0].strip() for line in text.split("```", 1)[0].splitlines() if line.strip()]
