"""The Compare page on small tables: numbers against the core, figures by their traces."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from posviz import compare, pipeline, simulate
from posviz.resample import resample_length
from posviz.ui import cache
from tests import apptest
from tests.app.test_pages import smallest

PAGE = "pages/compare.py"


#: The page's sections, as tabs of which only the open one is built.
SECTIONS = ["Spectra", "Similarity vs offset", "Similarity maps", "CKA, angles, Procrustes"]
SAME = SECTIONS[3]


def run(first, second, *, section: str | None = None, **state) -> AppTest:
    at = apptest(PAGE)
    at.session_state["posviz.table"] = first
    at.session_state["posviz.second"] = second
    if section:
        at.session_state["compare.section"] = section
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def figures(at: AppTest) -> dict[str, dict]:
    shown = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    return {fig["layout"]["title"]["text"].split(" (")[0]: fig for fig in shown}


def open_section(at: AppTest, section: str) -> dict[str, dict]:
    """Open the tab `section`, as a click does (the URL's tab gives way); the figures it
    draws."""
    at.query_params.pop("compare.section", None)  # else the URL's tab wins over the state
    at.session_state["compare.section"] = section
    at.run()
    assert not at.exception, at.exception
    return figures(at)


def test_tables_of_different_lengths_are_compared_after_resampling_the_second():
    first = simulate.learned_like(128, 32, seed=1)
    second = simulate.sinusoidal(96, 32)
    at = run(first, second, section=SAME)
    assert not at.exception, at.exception
    matched = resample_length(second.values, n_positions=128).values
    expected = compare.compare(first.values, matched, n_components=10, center=True)
    shown = {m.label: m.value for m in at.metric}
    assert shown["linear CKA (classic)"] == f"{expected.cka:.4f}"
    assert shown["linear CKA (debiased)"] == f"{expected.cka_debiased:.4f}"
    null = expected.null.summary()
    assert shown["chance level (classic)"] == f"{null['cka_null_mean']:.4f}"
    # No shuffle reached the observed CKA: the p-value is at its floor 1 / 201 and says so,
    # as the Components page's does ("0.00498" read as a measured value).
    assert null["cka_debiased_p_value"] == 1 / 201
    assert shown["p-value (200 shuffles)"] == f"≤ {1 / 201:.3g}"
    assert any("shuffled 200 times" in c.value for c in at.caption)
    assert shown["Procrustes error"] == f"{expected.procrustes_error:.4f}"
    assert shown["largest principal angle"] == f"{np.degrees(expected.principal_angles).max():.2f}°"
    (angles,) = figures(at).values()
    assert angles["layout"]["title"]["text"].startswith(
        "Principal angles between the top-10 PC subspaces over positions"
    )
    assert angles["data"][0]["type"] == "bar"

    spectra = open_section(at, "Spectra")["Explained variance per component"]
    # Each legend names its table, not only its place.
    assert [t["name"] for t in spectra["data"]] == ["first: learned_like", "second: sinusoidal"]
    overlay = open_section(at, "Similarity vs offset")["Mean cosine similarity against offset"]
    assert overlay["layout"]["xaxis"]["title"]["text"] == "offset k (positions)"
    maps = open_section(at, "Similarity maps")
    heatmaps = maps["cosine similarity between positions"]["data"]
    assert [t["type"] for t in heatmaps] == ["heatmap"] * 3
    assert [t["coloraxis"] for t in heatmaps] == ["coloraxis", "coloraxis", "coloraxis2"]


def test_without_resampling_the_same_position_measures_are_withheld():
    at = run(simulate.learned_like(128, 32), simulate.sinusoidal(96, 32), section=SAME)
    at.toggle(key="compare.match").set_value(False).run()
    assert not at.exception
    assert not at.metric
    assert "need equal lengths" in at.info[0].value
    assert not figures(at)
    maps = open_section(at, "Similarity maps")
    heatmaps = maps["cosine similarity between positions"]["data"]
    # no difference map
    assert [t["name"] for t in heatmaps] == ["first: learned_like", "second: sinusoidal"]


def test_a_table_against_a_rotated_copy_is_identical_by_every_measure():
    first = simulate.learned_like(100, 16, seed=2)
    q = np.linalg.qr(np.random.default_rng(0).standard_normal((16, 16)))[0]
    rotated = type(first).from_array(first.values @ q, name="rotated", source="test")
    at = run(first, rotated, section=SAME)
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["linear CKA (classic)"] == shown["linear CKA (debiased)"] == "1.0000"
    assert shown["Procrustes error"] == "0.0000"
    assert shown["largest principal angle"] == "0.00°"
    at.session_state["compare.spectra_numbers"] = True  # their expander
    open_section(at, "Spectra")
    (metrics,) = at.dataframe
    np.testing.assert_allclose(metrics.value.set_index("metric")["difference"], 0, atol=1e-6)


def test_widths_that_differ_have_no_procrustes_error():
    at = run(simulate.learned_like(64, 16), simulate.learned_like(64, 24), section=SAME)
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Procrustes error"] == "undefined"
    # Formerly: "—", its reason only in a tooltip.
    assert any("16 and 24 dimensions wide" in c.value for c in at.caption)


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


def test_a_closed_tab_builds_nothing_and_opening_it_shows_it():
    at = run(simulate.learned_like(128, 32), simulate.sinusoidal(96, 32))
    assert not at.exception
    assert [tab.label for tab in at.tabs] == SECTIONS
    assert list(figures(at)) == ["Explained variance per component"]  # one chart at first
    expanders = [e.label for e in at.expander]
    assert "Cumulative explained variance" in expanders
    assert "Numbers: the spectra's metrics side by side" in expanders
    assert not at.dataframe  # drawn once their expander opens
    assert not at.metric  # CKA and the angles are computed in their tab
    drawn = {
        section: list(open_section(at, section))
        for section in ("Similarity vs offset", "Similarity maps", SAME)
    }
    assert drawn == {
        "Similarity vs offset": ["Mean cosine similarity against offset"],
        "Similarity maps": ["cosine similarity between positions"],
        SAME: ["Principal angles between the top-10 PC subspaces over positions"],
    }


def test_the_cumulative_spectra_are_drawn_once_their_expander_opens():
    at = run(simulate.learned_like(64, 16), simulate.sinusoidal(64, 16))
    assert "Cumulative explained variance" not in figures(at)
    at.session_state["compare.cumulative"] = True
    at.run()
    assert not at.exception
    cumulative = figures(at)["Cumulative explained variance"]
    names = [t["name"].split(" (")[0] for t in cumulative["data"]]
    assert names == ["first: learned_like", "second: sinusoidal"]
    assert "Explained variance per component" in figures(at)


@pytest.mark.parametrize("section", SECTIONS[1:])
def test_a_link_opens_its_tab(section):
    at = apptest(PAGE)
    at.session_state["posviz.second"] = simulate.sinusoidal(1024, 64)
    at.query_params["compare.section"] = section
    at.run()
    assert not at.exception
    assert "Explained variance per component" not in figures(at)
    assert len(figures(at)) == 1
    assert at.query_params["compare.section"] == section


@pytest.mark.parametrize("kind", ["random", "constant", "grid"])
@pytest.mark.parametrize("section", SECTIONS[1:])
def test_every_tab_runs_on_the_smallest_table(section, kind):
    # test_pages runs the tab open at first; the short tables reach the others here.
    table = smallest(kind)
    at = run(table, table, section=section)
    assert not at.exception, at.exception
    # k components need a table of rank k: a degenerate table is told so.
    told = ("pick k up to", "has no variance")
    errors = [e.value for e in at.error if not any(t in e.value for t in told)]
    assert not errors, errors
    # A constant table is told why (it read "fewer than k = 2 non-zero components; pick a
    # smaller k", which no k satisfies), on every tab that compares.
    if kind == "constant" and section == SAME:
        assert any("first table has no variance" in e.value for e in at.error)


def test_the_offset_profiles_are_computed_only_in_their_tab(monkeypatch):
    def refuse(*args, **kwargs):
        msg = "offset profiles computed for a closed tab"
        raise AssertionError(msg)

    monkeypatch.setitem(cache._CACHED, pipeline.offset_profile, refuse)
    first, second = simulate.learned_like(72, 12, seed=4), simulate.sinusoidal(72, 12)
    for section in ("Spectra", "Similarity maps", SAME):
        at = run(first, second, section=section)
        assert not at.exception, (section, at.exception)
    at = run(first, second, section="Similarity vs offset")
    assert at.exception  # the patch is seen: opening the tab computes them
