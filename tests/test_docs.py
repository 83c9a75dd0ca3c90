"""The README and docs/ render as written: every pipe table has its header row."""

from __future__ import annotations

import re

import pytest

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
