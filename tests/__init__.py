"""posviz's tests: a test module per module of posviz/, tests/<package>/test_<module>.py
(tests/test_architecture.py holds it), so one folder per package (schemes/, io/, hub/,
export/, cli/, collection/, figures/, models/, examples/, ui/) and the analyses' tests at the
top, as their modules are; app/ per page under AppTest, e2e/ in a real browser."""

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
