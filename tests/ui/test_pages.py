"""posviz.ui.pages, the page registry app.py, the pages, the tests and the benchmarks read:
every file of pages/ once."""

from __future__ import annotations

from posviz.ui.pages import PAGES
from tests import ROOT


def test_the_registry_lists_every_page_once():
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pages").glob("*.py"))
    assert sorted(p.file for p in PAGES) == files
    assert len({p.title for p in PAGES}) == len(PAGES)
