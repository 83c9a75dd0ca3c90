"""One source of numbers: for the same table and settings, a page's export equals the report's
table (and the CLI's JSON where it emits the numbers). One block per analysis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from posviz import boundary, export, probes, report
from posviz.embedding import Embedding
from posviz.ui import widgets

ROOT = Path(__file__).parents[1]


# --- boundaries and probes ------------------------------------------------------------------


def boundaries_page_exports(
    monkeypatch: pytest.MonkeyPatch, table: Embedding, *, probes_open: bool
) -> tuple[dict[str, tuple[pd.DataFrame, dict]], list[str]]:
    """Each table the Boundaries page offers for download, by export name: the frame and the
    settings its CSV carries (read back from the CSV the download button builds); and the
    page's captions."""
    exports = {}
    show_numbers = widgets.show_numbers

    def recording(frame: pd.DataFrame, *, name: str, settings: dict) -> None:
        exports[name] = (frame, export.from_csv(export.to_csv(frame, settings))[1])
        show_numbers(frame, name=name, settings=settings)

    monkeypatch.setattr(widgets, "show_numbers", recording)
    at = AppTest.from_file(str(ROOT / "pages/boundaries.py"), default_timeout=120)
    at.session_state["posviz.table"] = table
    at.session_state["probes.open"] = probes_open
    at.run()
    assert not at.exception, at.exception
    return exports, [c.value for c in at.caption]


def test_boundary_exports_are_the_reports_tables(monkeypatch):
    # A norm that steps up at position 128 (a change point) and a boosted first row (a flag).
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((256, 32))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows *= np.where(np.arange(256) < 128, 1.0, 1.3)[:, None]
    rows *= 1 + 0.02 * rng.standard_normal((256, 1))
    rows[0] *= 3.0
    table = Embedding.from_array(rows, name="wpe", source="steps.npy")
    page, captions = boundaries_page_exports(monkeypatch, table, probes_open=False)
    section = report.boundaries_section(table)
    for name, caption in [
        ("flagged_positions", "Flagged positions"),
        ("change_points", "Change points"),
        ("boundary_summary", "Boundary summary"),
    ]:
        pd.testing.assert_frame_equal(page[name][0], section.tables[caption], check_exact=True)
    assert 0 in set(page["flagged_positions"][0]["position"])
    assert page["change_points"][0]["position"].tolist() == [128]
    # The exports state the settings the report used: the core's defaults.
    settings = page["change_points"][1]
    assert (settings["window"], settings["threshold"], settings["top_k"]) == (
        boundary.WINDOW,
        boundary.THRESHOLD,
        boundary.TOP_K,
    )
    assert (settings["change_statistic"], settings["max_changes"], settings["min_segment"]) == (
        boundary.CHANGE_STATISTIC,
        boundary.MAX_CHANGES,
        boundary.MIN_SIZE,
    )
    assert page["boundary_summary"][1]["boundary_k"] == boundary.BOUNDARY_K
    assert f"window of ±{settings['window']} positions" in section.note
    # The page's statements of the procedures are the report's.
    stated = [c for c in captions if c.startswith(("Binary segmentation", "Mean over the first"))]
    assert len(stated) == 2
    assert all(text in section.note for text in stated)


def test_probe_export_is_the_reports_probe_table(monkeypatch):
    table = Embedding.from_array(
        np.random.default_rng(0).standard_normal((64, 16)), name="wpe", source="noise.npy"
    )
    page, captions = boundaries_page_exports(monkeypatch, table, probes_open=True)
    section = report.probes_section(table, seed=probes.SEED)
    frame, settings = page["probes"]
    pd.testing.assert_frame_equal(frame, section.tables["Probe results"], check_exact=True)
    assert (settings["seed"], settings["max_rows"], settings["n_pairs"]) == (
        probes.SEED,
        probes.MAX_ROWS,
        probes.N_PAIRS,
    )
    assert settings["repeated_splits"] == probes.REPEATS
    assert settings["absolute_protocol"].startswith(f"{probes.PROTOCOL}: ")
    procedure = [c for c in captions if c.startswith("Seed ")]
    assert len(procedure) == 1
    assert procedure[0] in section.note
