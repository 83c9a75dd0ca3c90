"""The Compare page on small tables: numbers against the core, figures by their traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from posviz import compare, simulate
from posviz.resample import resample_length

PAGE = str(Path(__file__).parents[1] / "pages/compare.py")


def run(first, second, *, maps: bool = True) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["posviz.table"] = first
    at.session_state["posviz.second"] = second
    at.session_state["compare.maps"] = maps
    return at.run()


def figures(at: AppTest) -> dict[str, dict]:
    shown = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    return {fig["layout"]["title"]["text"].split(" (")[0]: fig for fig in shown}


def test_tables_of_different_lengths_are_compared_after_resampling_the_second():
    first = simulate.learned_like(128, 32, seed=1)
    second = simulate.sinusoidal(96, 32)
    at = run(first, second)
    assert not at.exception, at.exception
    matched = resample_length(second.values, 128).values
    expected = compare.compare(first.values, matched, k=10, center=True)
    shown = {m.label: m.value for m in at.metric}
    assert shown["linear CKA"] == f"{expected.cka:.4f}"
    assert shown["Procrustes error"] == f"{expected.procrustes_error:.4f}"
    assert shown["largest principal angle"] == f"{np.degrees(expected.principal_angles).max():.2f}°"

    figs = figures(at)
    spectra = figs["Explained variance per component"]
    assert [t["name"] for t in spectra["data"]] == ["first", "second"]
    offsets = figs["Mean cosine similarity against offset"]
    assert offsets["layout"]["xaxis"]["title"]["text"] == "offset k (positions)"
    angles = figs["Principal angles between the top-10 PC subspaces over positions"]
    assert angles["data"][0]["type"] == "bar"
    heatmaps = figs["cosine similarity between positions"]["data"]
    assert [t["type"] for t in heatmaps] == ["heatmap"] * 3
    assert [t["coloraxis"] for t in heatmaps] == ["coloraxis", "coloraxis", "coloraxis2"]


def test_without_resampling_the_same_position_measures_are_withheld():
    at = run(simulate.learned_like(128, 32), simulate.sinusoidal(96, 32))
    at.toggle(key="compare.match").set_value(False).run()
    assert not at.exception
    assert not at.metric
    assert "need equal lengths" in at.info[0].value
    heatmaps = figures(at)["cosine similarity between positions"]["data"]
    assert [t["name"] for t in heatmaps] == ["first", "second"]  # no difference map


def test_a_table_against_a_rotated_copy_is_identical_by_every_measure():
    first = simulate.learned_like(100, 16, seed=2)
    q = np.linalg.qr(np.random.default_rng(0).standard_normal((16, 16)))[0]
    rotated = type(first).from_array(first.values @ q, name="rotated", source="test")
    at = run(first, rotated)
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["linear CKA"] == "1.0000"
    assert shown["Procrustes error"] == "0.0000"
    assert shown["largest principal angle"] == "0.00°"
    metrics = at.dataframe[0].value.set_index("metric")
    np.testing.assert_allclose(metrics["difference"], 0, atol=1e-6)


def test_widths_that_differ_have_no_procrustes_error():
    at = run(simulate.learned_like(64, 16), simulate.learned_like(64, 24))
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Procrustes error"] == "—"


@pytest.mark.parametrize("generator", ["sinusoidal"])
def test_second_table_loads_from_its_own_simulate_form(generator):
    at = run(simulate.learned_like(64, 16), simulate.learned_like(64, 16))
    assert "posviz.second.kind" not in [box.key for box in at.selectbox]
    at.session_state["compare.second"] = True  # the loader is drawn once its expander opens
    at.run()
    at.selectbox(key="posviz.second.kind").set_value(generator).run()
    next(n for n in at.number_input if n.label == "Positions").set_value(80)
    next(n for n in at.number_input if n.label == "Dimensions").set_value(16)
    next(b for b in at.button if b.label == "Simulate").click().run()
    assert not at.exception, at.exception
    second = at.session_state["posviz.second"]
    assert second.shape == (80, 16)
    assert second.name == "sinusoidal"
    assert at.session_state["posviz.table"].shape == (64, 16)  # the first table is untouched


def test_the_similarity_maps_are_drawn_only_when_opened():
    at = run(simulate.learned_like(128, 32), simulate.sinusoidal(96, 32), maps=False)
    assert not at.exception
    assert "cosine similarity between positions" not in figures(at)
    assert len(figures(at)) == 4  # spectra, cumulative, offsets, angles
    assert any("drawn when opened" in c.value for c in at.caption)
