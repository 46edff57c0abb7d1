"""Reading back the GitHub tables the reports write, cell by cell (padding stripped, `\\|` kept
inside its cell), so tests check content, not column widths."""

from __future__ import annotations

import re

SEPARATOR = re.compile(r"^\|(-+\|)+$")


def markdown_rows(text: str) -> list[list[str]]:
    """Header and data rows of the one table in `text` (the separator row checked and dropped)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert len(lines) >= 2 and SEPARATOR.match(lines[1]), f"not a GitHub table: {lines[:2]}"
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in [lines[0], *lines[2:]]]
