"""The docs hold to the code: the stack-config table is the model's own
(components.config.reference.reference_rows), so a key added to, renamed in or removed from the
model fails here until docs/config.md says so; every link between the pages leads somewhere; the
README stays a page a newcomer reads in minutes, with the two commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.config.reference import reference_rows
from tests.support.readme import offline_block

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


KEY_IN_PROSE = re.compile(
    r"`((?:tenants\[\]|teams\[\]|cluster|hami|mirror|images|charts)(?:\.[A-Za-z0-9]+(?:\[\])?)+)`"
)
PROJECT_KEY = re.compile(r"`gpu-tenancy:([A-Za-z]+)(?=[`.\s\[])")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_key_named_in_prose_is_one_the_model_accepts(page):
    """A key the docs name (`tenants[].quota.gpus`, `gpu-tenancy:hami`) is a key of the config
    model, or a section holding some: a reader who writes it as written is not refused."""
    from components.config.check import KNOWN_KEYS

    keys = [k for k, _, _ in reference_rows()]
    text = page.read_text()
    unknown = [
        key
        for key in KEY_IN_PROSE.findall(text)
        if key not in keys and not any(k.startswith((f"{key}.", f"{key}[")) for k in keys)
    ]
    unknown += [f"gpu-tenancy:{key}" for key in PROJECT_KEY.findall(text) if key not in KNOWN_KEYS]
    assert not unknown, f"{page.name} names keys the model refuses: {unknown}"


def offline_commands() -> list[list[str]]:
    """The README's offline block, as argument lists of the `gpu-tenancy` command."""
    return [line.split()[1:] for line in offline_block() if line.startswith(".venv/bin/gpu-tenancy ")]


@pytest.mark.parametrize("argv", offline_commands(), ids=lambda a: a[0])
def test_the_readme_s_offline_commands_run_as_written(argv, capsys):
    from components import cli

    assert cli.main(argv) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip()


def test_the_readme_s_offline_block_shows_every_offline_tool():
    shown = {argv[0] for argv in offline_commands()}
    assert {"check", "capacity", "plans", "images"} <= shown


OUTPUT_MARK = re.compile(r"<!-- output: gpu-tenancy (.+?) -->\n```\n(.*?)```", re.S)


def samples() -> list[tuple[str, str, str]]:
    """(page, command, block) of each sample output a page shows as a tool's own."""
    return [(page.name, command, block) for page in PAGES for command, block in OUTPUT_MARK.findall(page.read_text())]


def test_the_docs_show_sample_outputs():
    assert {command.split()[0] for _, command, _ in samples()} >= {"capacity", "plans"}


@pytest.mark.parametrize(("page", "command", "block"), samples(), ids=lambda v: str(v)[:40])
def test_every_sample_output_is_the_tool_s_own(page, command, block, capsys):
    """A sample is what the command prints today, column spacing included (after a change to a
    report, paste its new output under the page's `<!-- output: ... -->` mark)."""
    from components import cli

    assert cli.main(command.split()) == 0
    printed = capsys.readouterr().out
    strip = lambda text: [line.rstrip() for line in text.strip("\n").splitlines()]  # noqa: E731
    assert strip(block) == strip(printed), (
        f"{page}: the sample of `gpu-tenancy {command}` is stale; it prints:\n{printed}"
    )


def test_adding_a_card_model_names_every_field_and_limit_the_code_has():
    import dataclasses

    from components.config.model import MAX_CARDS_PER_NODE
    from components.domain.catalog import MOCK_PLUGIN_MAX_MB_PER_NODE, GpuModel
    from components.reports.plan_comparison import MAX_PLAN_CARDS_PER_NODE

    section = CONFIG_PAGE.read_text().split("## Adding a card model", 1)[1]
    rows = {line.split("|")[1].strip().strip("`") for line in section.splitlines() if line.startswith("| `")}
    assert rows == {f.name for f in dataclasses.fields(GpuModel)}
    assert f"{MOCK_PLUGIN_MAX_MB_PER_NODE:,} MB per node" in section
    assert (
        f"up to {MAX_PLAN_CARDS_PER_NODE}\ncards per node" in section
        or f"up to {MAX_PLAN_CARDS_PER_NODE} cards" in section
    )
    assert f"up to {MAX_CARDS_PER_NODE}." in section
