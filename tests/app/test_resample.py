"""The Resample page: 1-D and 2-D results against the core, send/make-current, downloads."""

from __future__ import annotations

import functools
import json

import numpy as np
from streamlit.testing.v1 import AppTest

from posviz import pipeline, simulate
from posviz.resample import resample_grid, resample_length
from posviz.ui import cache
from tests import apptest

PAGE = "pages/resample.py"


def run(table) -> AppTest:
    at = apptest(PAGE)
    at.session_state["posviz.table"] = table
    return at.run()


def opened(at: AppTest, section: str) -> AppTest:
    """Open one of the page's tabs (only the open one is built)."""
    at.session_state["resample.section"] = section
    return at.run()


def figures(at: AppTest) -> dict[str, dict]:
    shown = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    return {fig["layout"]["title"]["text"].split(" (")[0]: fig for fig in shown}


def test_length_resampling_sends_the_core_result_to_compare():
    table = simulate.learned_like(64, 16, seed=4)
    at = run(table)
    at.number_input(key="resample.n").set_value(100)
    at.selectbox(key="resample.method").set_value("cubic")
    at.radio(key="resample.positions").set_value("scaled").run()
    assert not at.exception, at.exception
    assert "cubic to 100 rows" in at.success[0].value
    assert any("float32: splines fitted in float64" in c.value for c in at.caption)
    next(b for b in at.button if b.label == "Send to Compare").click().run()
    sent = at.session_state["posviz.second"]
    expected = resample_length(
        table.values, n_positions=100, method="cubic", positions="scaled"
    ).values
    np.testing.assert_array_equal(sent.values, expected)
    assert at.session_state["posviz.table"] is not sent  # the current table stays

    spectra = figures(at)["Explained variance per component"]
    assert [t["name"] for t in spectra["data"]] == ["original", "resampled"]
    offsets = figures(opened(at, "Similarity"))["Mean cosine similarity against offset"]["data"]
    assert [t["name"] for t in offsets] == ["original", "resampled"]
    labels = [el.proto.label for el in at.get("download_button")]
    assert {".safetensors", ".npy"} <= set(labels)


def test_tile_with_reserved_rows():
    table = simulate.learned_like(10, 8)
    at = run(table)
    at.selectbox(key="resample.method").set_value("tile").run()
    at.number_input(key="resample.reserved").set_value(2).run()
    assert not at.exception
    next(b for b in at.button if b.label == "Make current table").click().run()
    current = at.session_state["posviz.table"]
    np.testing.assert_array_equal(current.values[10:12], table.values[2:4])


def test_grid_resampling_keeps_prefix_and_shows_both_mosaics():
    table = simulate.vit_grid(6, 6, 32, prefix_tokens=2)
    at = run(table)
    at.number_input(key="resample.h").set_value(9)
    at.number_input(key="resample.w").set_value(4)
    at.checkbox(key="resample.antialias").uncheck().run()
    assert not at.exception, at.exception
    opened(at, "Similarity")
    mosaics = figures(at)["Cosine similarity of each patch with all patches"]
    assert [t["type"] for t in mosaics["data"]] == ["heatmap", "heatmap"]
    titles = [a["text"] for a in mosaics["layout"]["annotations"]]
    assert titles == ["original: 6 x 6", "resampled: 9 x 4"]
    next(b for b in at.button if b.label == "Make current table").click().run()
    current = at.session_state["posviz.table"]
    assert (current.grid, current.row_start) == ((9, 4), 2)
    np.testing.assert_array_equal(current.prefix, table.prefix)
    expected = resample_grid(table.values, (6, 6), new_grid=(9, 4), antialias=False).values
    np.testing.assert_array_equal(current.values, expected)


def test_resampled_tables_are_kept_as_objects_and_bounded(monkeypatch):
    calls = []
    monkeypatch.setattr(
        cache.pipeline._resample,
        "resample_length",
        functools.wraps(resample_length)(
            lambda *a, **k: calls.append(a) or resample_length(*a, **k)
        ),
    )
    table = simulate.learned_like(40, 8, seed=11)
    at = run(table)
    at.run()  # a rerun, e.g. after a widget, does not resample again
    assert not at.exception, at.exception
    assert len(calls) == 1

    options = {"method": "linear", "positions": "ends", "reserved": 0}
    first = cache.run(pipeline.resample_length, table, n_positions=80, **options)
    # The same object, not an unpickled copy per call: one table's bytes, not two or three.
    assert cache.run(pipeline.resample_length, table, n_positions=80, **options) is first
    assert len(calls) == 1
    for n in range(81, 81 + cache.TABLE_ENTRIES):
        cache.run(pipeline.resample_length, table, n_positions=n, **options)
    assert len(calls) == 1 + cache.TABLE_ENTRIES
    # The oldest entry was dropped: the count, not the results, bounds the memory.
    assert cache.run(pipeline.resample_length, table, n_positions=80, **options) is not first
    assert len(calls) == 2 + cache.TABLE_ENTRIES


def test_one_chart_per_tab_and_the_others_one_click_away():
    at = run(simulate.learned_like(64, 16, seed=4))
    assert not at.exception, at.exception
    labels = {tab.label for tab in at.tabs}
    assert labels == {"Spectrum", "Similarity"}
    assert list(figures(at)) == ["Explained variance per component"]  # the closed tabs: nothing
    assert not at.dataframe
    at.session_state["resample.cumulative"] = True  # its expander
    assert list(figures(at.run())) == [
        "Explained variance per component",
        "Cumulative explained variance",
    ]
    assert list(figures(opened(at, "Similarity"))) == ["Mean cosine similarity against offset"]
    at.session_state["resample.spectra_numbers"] = True
    opened(at, "Spectrum")
    assert not at.exception, at.exception
    assert len(at.dataframe) == 1  # the spectra's metrics, in their Numbers expander


def test_a_link_opens_a_tab():
    at = apptest(PAGE)
    at.session_state["posviz.table"] = simulate.vit_grid(6, 6, 32)
    at.query_params["resample.section"] = "Similarity"
    at.run()
    assert not at.exception, at.exception
    assert list(figures(at)) == ["Cosine similarity of each patch with all patches"]


def test_the_download_caption_counts_prefix_rows_in_words():
    # It read "0 prefix row(s) re-attached in front" for a table without any.
    def download_caption(at: AppTest) -> str:
        (caption,) = [c.value for c in at.caption if c.value.startswith("Tensor ")]
        return caption

    plain = download_caption(run(simulate.learned_like(64, 16, seed=0)))
    assert "no prefix rows to re-attach" in plain
    assert "(s)" not in plain
    vit = download_caption(run(simulate.vit_grid(6, 6, 32, prefix_tokens=2)))
    assert "2 prefix rows re-attached in front" in vit
    one = download_caption(run(simulate.vit_grid(6, 6, 32, prefix_tokens=1)))
    assert "1 prefix row re-attached in front" in one
