"""The README's stack-config table is the model's own (components.config.reference.reference_rows):
a key added to, renamed in or removed from the model fails here until the README says so."""

from __future__ import annotations

from pathlib import Path

from components.config.reference import reference_rows

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- config-table:begin -->", "<!-- config-table:end -->"


def render() -> str:
    lines = ["| key (`gpu-tenancy:...`) | default | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{key}` | {default} | {text} |" for key, default, text in reference_rows()]
    return "\n".join(lines)


def test_config_table_is_the_models():
    text = (ROOT / "README.md").read_text()
    assert BEGIN in text and END in text, f"README.md lacks the {BEGIN} ... {END} markers"
    table = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    expected = render()
    assert table == expected, f"README's config table differs from the model; it should read:\n{expected}"


if __name__ == "__main__":
    print(render())
