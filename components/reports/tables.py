"""The reports' one table renderer (tabulate): aligned columns for a terminal, a GitHub table
for a PR comment. Cells are strings the reports have already worded; none is read as a number."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate


def text_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return tabulate(rows, headers=columns, tablefmt="simple", disable_numparse=True)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub table; a `|` inside a cell is escaped so it cannot split the cell."""
    escaped = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    return tabulate(escaped, headers=columns, tablefmt="github", disable_numparse=True)
