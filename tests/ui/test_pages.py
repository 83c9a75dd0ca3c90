"""posviz.ui.pages, the page registry app.py, the pages, the tests and the benchmarks read:
every file of pages/ once, each page found by its file's stem, its tabs drawn by the page."""

from __future__ import annotations

import re

import pytest

from posviz.ui.pages import PAGES, page
from tests import ROOT


def test_the_registry_lists_every_page_once():
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pages").glob("*.py"))
    assert sorted(p.file for p in PAGES) == files
    assert len({p.title for p in PAGES}) == len(PAGES)


def test_a_page_is_found_by_its_files_stem_and_only_so():
    assert page("compare").file == "pages/compare.py"
    assert page("compare").title == "Compare"
    with pytest.raises(ValueError, match="not enough values"):
        page("Compare")  # a title, not a file's stem


def test_a_page_draws_the_tabs_the_registry_gives_it_and_only_then():
    drawn = {
        path.stem
        for path in (ROOT / "pages").glob("*.py")
        if f'widgets.page_tabs("{path.stem}")' in path.read_text()
    }
    assert drawn == {p.name for p in PAGES if p.tabs}
    for p in PAGES:
        assert len(set(p.tabs)) == len(p.tabs), p.name  # a tab is named once
        assert re.fullmatch(r":material/[a-z_]+:", p.icon), p.icon
