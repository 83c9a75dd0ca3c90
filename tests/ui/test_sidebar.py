"""posviz.ui.sidebar: the sidebar card's report reuses what the page computed and downloads; a
report that fails downloads as a page saying why."""

from __future__ import annotations

import numpy as np
from streamlit.testing.v1 import AppTest

from posviz import simulate
from posviz.embedding import MIN_DIMS, MIN_POSITIONS, Embedding


def _spectrum_page_and_card() -> None:
    """The Spectrum page's computation, then the sidebar card (app.py's order)."""
    from posviz import pipeline
    from posviz.ui import cache, sidebar, state

    cache.run(pipeline.spectrum, state.current(), center=True)
    sidebar.sidebar_card()


def test_the_report_reuses_what_the_page_computed_and_then_downloads(monkeypatch):
    import posviz.spectrum

    computed = []
    original = posviz.spectrum._tridiagonal  # once per spectrum computed
    monkeypatch.setattr(
        posviz.spectrum, "_tridiagonal", lambda *a, **k: computed.append(1) or original(*a, **k)
    )
    # An app.py AppTest loses its sidebar on a rerun; the card alone keeps it.
    at = AppTest.from_function(_spectrum_page_and_card, default_timeout=60)
    at.session_state["posviz.table"] = simulate.learned_like(97, 24, seed=5)
    at.run()
    shown = len(computed)  # 1, or 0 when an earlier test cached this table's spectrum
    assert not at.sidebar.get("download_button")  # nothing before the report is made
    at.button(key="make.report").click().run()
    assert not at.exception, at.exception
    assert len(computed) == shown, "the page's spectrum came from the cache"
    (download,) = at.sidebar.get("download_button")
    assert download.proto.label == "Download the report"


def test_a_report_that_fails_downloads_as_a_page_saying_why(monkeypatch):
    from posviz import report
    from posviz.ui import sidebar

    def fail(*args, **kwargs):
        msg = "window <b>too</b> large"
        raise ValueError(msg)

    monkeypatch.setattr(report, "build_report", fail)
    values = np.random.default_rng(0).standard_normal((MIN_POSITIONS, MIN_DIMS))
    table = Embedding.from_array(values, name="random", source="test")
    page = sidebar._report(table, center=True)
    assert "could not be made" in page
    assert "ValueError: window &lt;b&gt;too&lt;/b&gt; large" in page
