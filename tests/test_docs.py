"""The README and docs/ render as written: every pipe table has its header row; the README
names every page and command."""

from __future__ import annotations

import argparse
import re

import pytest

from posviz.cli import build_parser
from posviz.examples import EXAMPLES
from posviz.schemes.presets import PRESETS
from posviz.ui import pages
from tests import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")


def tables(text: str) -> list[list[str]]:
    """The runs of lines that start with a pipe, outside code blocks."""
    runs: list[list[str]] = []
    fenced, run = False, []
    for line in text.splitlines():
        fenced ^= line.startswith("```")
        if line.startswith("|") and not fenced:
            run.append(line)
            continue
        if run:
            runs.append(run)
        run = []
    return [*runs, run] if run else runs


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_table_has_a_header_row(path):
    # Formerly: the README's Formats table began with its separator and rendered as raw pipes.
    for table in tables(path.read_text()):
        assert len(table) >= 2, (path.name, table)
        assert SEPARATOR.match(table[1]), (path.name, table[:2])
        assert not SEPARATOR.match(table[0]), (path.name, table[0])
        width = table[1].count("|")
        assert table[0].count("|") == width, (path.name, table[0])


# --- the README names what the app and the command offer (issue 44 item 1) ----------------

README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    """The README's text under ``## title``, up to the next heading of that level."""
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_names_every_page_of_the_navigation():
    # app.py draws its navigation from the page registry: one row of the Pages table each.
    assert "for p in pages.PAGES]" in (ROOT / "app.py").read_text()
    rows = [line.split("|")[1].strip() for line in tables(section("Pages"))[0][2:]]
    assert rows == [p.title for p in pages.PAGES]  # in the sidebar's order


def test_the_readme_names_every_command():
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name in commands.choices:
        assert re.search(rf"^    posviz {name} ", section("Command line"), re.M), name
    assert "--layers" in section("Command line")


def test_the_readme_says_where_the_shared_folder_and_the_known_and_shipped_models_are():
    # Formerly the shared folder was named only under Deployment, the presets nowhere.
    before = README.split("\n## Deployment\n")[0]
    assert "`POSVIZ_DATA_DIR`" in before
    named = re.findall(r"preset:([\w.-]+/[\w.-]+\w)", README)
    assert named
    assert set(named) <= set(PRESETS)
    shipped = re.findall(r"example:([\w.-]+\w)", README)
    assert shipped
    assert set(shipped) <= set(EXAMPLES)
