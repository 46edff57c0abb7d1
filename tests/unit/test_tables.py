"""The reports' one renderer: cells kept as worded (never read as numbers), a `|` inside a cell
escaped in Markdown, columns aligned in the text form."""

from components.reports.tables import markdown_table, text_table
from tests.support.tables import markdown_rows

ROWS = [["team-a", "007", "a|b"], ["team-b-long", "1,000", ""]]


def test_markdown_keeps_each_cell_whole():
    header, *body = markdown_rows(markdown_table(["tenant", "n", "note"], ROWS))
    assert header == ["tenant", "n", "note"]
    assert body == [["team-a", "007", "a\\|b"], ["team-b-long", "1,000", ""]]


def test_text_columns_line_up():
    lines = text_table(["tenant", "n", "note"], ROWS).splitlines()
    assert lines[0].split() == ["tenant", "n", "note"] and set(lines[1].replace(" ", "")) == {"-"}
    starts = {line.index("007" if "007" in line else "1,000") for line in lines[2:]}
    assert len(starts) == 1 and "007" in lines[2]
