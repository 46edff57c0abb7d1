"""The docs hold to the code: the stack-config table is the model's own
(components.config.reference.reference_rows), so a key added to, renamed in or removed from the
model fails here until docs/config.md says so; every link between the pages leads somewhere; the
README stays a page a newcomer reads in minutes, with the two commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.config.reference import reference_rows

ROOT = Path(__file__).resolve().parents[2]
CONFIG_PAGE = ROOT / "docs" / "config.md"
BEGIN, END = "<!-- config-table:begin -->", "<!-- config-table:end -->"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
README_LINES = 200


def render() -> str:
    lines = ["| key (`gpu-tenancy:...`) | default | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{key}` | {default} | {text} |" for key, default, text in reference_rows()]
    return "\n".join(lines)


def test_config_table_is_the_models():
    text = CONFIG_PAGE.read_text()
    assert BEGIN in text and END in text, f"{CONFIG_PAGE.name} lacks the {BEGIN} ... {END} markers"
    table = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    expected = render()
    assert table == expected, f"docs/config.md's table differs from the model; it should read:\n{expected}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(page):
    broken = [
        target
        for target in LINK.findall(page.read_text())
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert not broken, f"{page.relative_to(ROOT)} links to nothing: {broken}"


def test_every_page_is_reached_from_the_readme():
    linked = {(ROOT / target).resolve() for target in LINK.findall((ROOT / "README.md").read_text())}
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"pages the README does not lead to: {orphans}"


def test_the_readme_is_short_and_shows_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES, "the README's detail belongs under docs/"
    assert "bash scripts/up-dev.sh" in text and "bash scripts/test.sh" in text


if __name__ == "__main__":
    print(render())
