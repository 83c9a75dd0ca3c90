"""posviz's tests: one folder per package of posviz/ (schemes/, io/, hub/, export/, cli/,
collection/, figures/), app/ per page under AppTest, e2e/ in a real browser; the analyses'
tests sit at the top, as their modules do."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).parents[1]
PAGES = ROOT / "pages"


def apptest(page: str = "app.py", *, timeout: float = 120) -> AppTest:
    """`page` (a path from the clone's top: "app.py", "pages/schemes.py") under AppTest, not
    yet run; `timeout` bounds each run in seconds (a busy 2-core machine needs minutes for the
    heavy pages, never the 3 s default)."""
    return AppTest.from_file(str(ROOT / page), default_timeout=timeout)
