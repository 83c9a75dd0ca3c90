"""The Boundaries & probes page: flags, shared flag state, the one-click trim, probe numbers."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from posviz import boundary, pipeline, probes, simulate
from posviz._params import defaults
from posviz.embedding import Embedding
from posviz.ui import cache
from tests import apptest
from tests.app.test_pages import smallest

PAGE = "pages/boundaries.py"


#: The page's sections, as tabs of which only the open one is built.
SECTIONS = ["Positions", "Tables", "Probes"]


def run(table: Embedding, *, section: str | None = None) -> AppTest:
    at = apptest(PAGE)
    at.session_state["posviz.table"] = table
    if section:
        at.session_state["boundaries.section"] = section
    return at.run()


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


@pytest.mark.slow
def test_flags_curves_and_probes_on_a_learned_like_table():
    table = simulate.learned_like(256, 64, seed=1)
    at = run(table)
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Flagged positions"] == "2"
    assert at.session_state["posviz.flags"]["sha256"] == table.sha256
    assert at.session_state["posviz.flags"]["positions"] == [0, 255]
    (curves,) = charts(at)
    assert "|robust z| > 8 in a window of ±16" in curves["layout"]["title"]["text"]
    assert [t["name"] for t in curves["data"] if t["mode"] == "lines"] == [
        "row norm",
        "cos to previous row",
        "cos to next row",
        "distance to mean row",
    ]
    assert any(
        m.value == "**Flagged** (|robust z| > 8 in a window of ±16 positions): 0, 255"
        for m in at.markdown
    )
    at.session_state["boundaries.section"] = "Probes"
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    (predictions,) = charts(at)
    assert predictions["layout"]["xaxis"]["title"]["text"] == "true position p"
    # The table's absolute probe beats its controls, and the controls are shown beside it.
    mae, spread = map(float, metrics["Absolute MAE (positions)"].split(" ± "))
    assert mae < 25
    assert spread > 0
    chance = [c.value for c in at.caption if c.value.startswith("chance ")]
    assert " · row-shuffled: skill " in chance[0]
    assert " · Gaussian: skill " in chance[0]
    # Each control's skill is the legend's, written the same way (issue 44: -0.001 vs 0.000).
    legend = " ".join(trace["name"] for trace in predictions["data"])
    for control in ("row-shuffled", "Gaussian"):
        said = re.search(rf"{control}: skill (\S+) ", chance[0]).group(1)
        assert f"skill {said})" in legend, (said, legend)
    assert any(c.value.startswith("row-shuffled: ") for c in at.caption)  # R²
    assert any(c.value.startswith("chance 0.5 · row-shuffled: ") for c in at.caption)
    assert any("Seed 0; 5-fold cross-validation on all 256 rows" in c.value for c in at.caption)


@pytest.mark.parametrize("section", SECTIONS)
def test_the_flags_reach_the_similarity_page_whichever_tab_is_open(section):
    # The Similarity page marks the flagged positions: they are shared on every run, not only
    # while the chart that shows them is open.
    at = run(simulate.learned_like(256, 64, seed=1), section=section)
    assert at.session_state["posviz.flags"]["positions"] == [0, 255]
    at.number_input(key="boundaries.threshold").set_value(2.0).run()
    assert not at.exception
    flagged = at.session_state["posviz.flags"]["positions"]
    assert len(flagged) > 2
    assert {m.label: m.value for m in at.metric}["Flagged positions"] == str(len(flagged))


def test_reserved_rows_are_named_and_trimmed_for_every_page():
    source = simulate.learned_like(66, 32, seed=0).values.copy()
    source[1] = 0.0  # RoBERTa: padding row 1 is zero, rows 0-1 are reserved
    table = Embedding.from_array(
        source, name="roberta.embeddings.position_embeddings.weight", source="roberta.npy"
    )
    at = run(table)
    assert not at.exception
    assert "Rows 0-1 look reserved" in at.warning[0].value
    at.button(key="boundaries.trim_go").click().run()
    assert not at.exception
    trimmed = at.session_state["posviz.table"]
    assert trimmed.row_start == 2
    assert trimmed.describe_rows() == "rows 2-65 of 66 (2 leading rows trimmed)"
    np.testing.assert_array_equal(trimmed.values, source[2:])
    np.testing.assert_array_equal(trimmed.prefix, source[:2])
    assert at.session_state["posviz.flags"]["sha256"] == trimmed.sha256
    assert "rows 2-65 of 66" in at.caption[0].value


def test_a_long_table_is_probed_on_a_stated_subsample():
    at = apptest(PAGE)
    at.session_state["posviz.table"] = simulate.sinusoidal(3000, 16)
    at.session_state["probes.max_rows"] = 500
    at.session_state["boundaries.section"] = "Probes"
    at.run()
    assert not at.exception
    assert any("a seeded random subsample of 500 of 3,000 rows" in c.value for c in at.caption)
    mae = {m.label: m.value for m in at.metric}["Absolute MAE (positions)"]
    assert float(mae.split(" ± ")[0]) < 1
    assert any("chance" in c.value and "skill" in c.value for c in at.caption)
    protocol = [c.value for c in at.caption if "nested ridge" in c.value]
    assert protocol
    assert "inner cross-validation" in protocol[0]
    # Formerly one 250-word paragraph: now its steps, numbered.
    steps = protocol[0].split("\n")[1:]
    assert [step[:3] for step in steps] == ["1. ", "2. ", "3. ", "4. "]
    assert steps[1].startswith("2. Absolute probe (nested ridge)")


@pytest.mark.parametrize("section", ["Positions", "Tables"])
def test_the_probes_wait_until_their_tab_is_opened(monkeypatch, section):
    def refuse(*args, **kwargs):
        msg = "probes ran before they were asked for"
        raise AssertionError(msg)

    monkeypatch.setitem(cache._CACHED, pipeline.probe_with_controls, refuse)
    at = run(simulate.learned_like(64, 16, seed=0), section=section)
    assert not at.exception, at.exception
    assert "Absolute MAE (positions)" not in [m.label for m in at.metric]
    assert all("true position p" not in json.dumps(chart["layout"]) for chart in charts(at))
    assert [tab.label for tab in at.tabs] == SECTIONS


def test_a_closed_tab_builds_nothing_and_opening_it_shows_it():
    at = run(simulate.learned_like(128, 32, seed=0))
    assert not at.exception
    assert len(charts(at)) == 1  # the position statistics
    assert not at.dataframe  # the tables are in their own tab
    at.session_state["boundaries.section"] = "Tables"
    at.run()
    assert not at.exception
    assert not charts(at)
    assert [h.value for h in at.subheader] == [
        "Flagged positions",
        "Change points",
        "Near the boundaries",
    ]
    # The smooth table has no change point (the old test found one in its wiggles): said in
    # words, so two tables.
    assert len(at.dataframe) == 2
    assert any(m.value.startswith("None found (no step") for m in at.markdown)
    assert any(c.value.startswith("Steps on norm: at each boundary") for c in at.caption)


def test_the_tables_name_statistics_by_labels_and_the_files_by_keys(downloads):
    at = run(simulate.learned_like(128, 32, seed=0), section="Tables")
    assert not at.exception
    named = [d.value for d in at.dataframe if "statistic" in d.value]
    assert len(named) == 2  # the flagged positions and the boundary summary
    for shown in named:
        assert "neighbour cos" in set(shown["statistic"])
        assert not any("_" in name for name in shown["statistic"])
    assert "statistic,first_8" in downloads["boundary_summary.csv"]()
    assert "\nneighbour_cos," in downloads["boundary_summary.csv"]()


def test_the_tables_tab_says_none_in_words_once():
    # Formerly "None: none found (…)" for the change points, and an empty table of flags.
    at = run(simulate.sinusoidal(128, 32), section="Tables")
    assert not at.exception, at.exception
    said = [m.value for m in at.markdown]
    assert "None found (no step stands out of the curve's own wiggles)." in said
    assert "No position flagged (|robust z| > 8 in a window of ±16 positions)." in said
    assert not any("None:" in text or "none found" in text for text in said)
    assert [list(d.value.columns) for d in at.dataframe] == [
        ["statistic", "first 8", "middle", "last 8"]
    ]  # the boundary summary only


# The Tables tab of this table: flagged positions and the boundary summary; no change point,
# so "None" in words instead of an empty table.
@pytest.mark.parametrize(("section", "tables", "plots"), [("Tables", 2, 0), ("Probes", 1, 1)])
def test_a_link_opens_its_tab(section, tables, plots):
    at = apptest(PAGE)
    at.session_state["posviz.table"] = simulate.learned_like(64, 16, seed=0)
    at.query_params["boundaries.section"] = section
    at.run()
    assert not at.exception
    assert (len(at.dataframe), len(charts(at))) == (tables, plots)
    if section == "Tables":
        assert any(m.value.startswith("None found (no step") for m in at.markdown)
    assert at.query_params["boundaries.section"] == section


def test_widgets_start_at_the_cores_defaults_fitted_to_the_table():
    at = run(simulate.learned_like(20, 8, seed=0), section="Probes")
    assert not at.exception
    core = {
        **defaults(boundary.outliers),
        **defaults(boundary.boundary_summary),
        **defaults(boundary.change_points),
    }
    values = {key: at.number_input(key=f"boundaries.{key}").value for key in ("window", "edge")}
    # The window: half the table; the boundary size: the signature's.
    assert values == {"window": 10, "edge": core["boundary_size"]}
    assert at.number_input(key="boundaries.threshold").value == core["threshold"]
    assert at.number_input(key="boundaries.max_changes").value == core["max_changes"]
    assert at.number_input(key="boundaries.min_size").value == 10
    assert at.selectbox(key="boundaries.change_statistic").value == core["statistic"]
    probe = defaults(probes.probe_with_controls)
    assert at.number_input(key="probes.seed").value == probe["seed"]
    assert at.number_input(key="probes.max_rows").value == probe["max_rows"]
    assert at.number_input(key="probes.n_pairs").value == probe["n_pairs"]
    assert at.number_input(key="probes.repeats").value == probe["repeats"]
    assert at.selectbox(key="probes.protocol").value == probe["protocol"]


@pytest.mark.parametrize("kind", ["random", "constant", "grid"])
@pytest.mark.parametrize("section", SECTIONS[1:])
def test_every_tab_runs_on_the_smallest_table(section, kind):
    # test_pages runs the tab open at first; the short tables reach the others here.
    at = run(smallest(kind), section=section)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def test_the_probe_settings_keep_their_values_while_another_tab_is_open():
    at = run(simulate.learned_like(64, 16, seed=0))
    at.session_state["boundaries.section"] = "Probes"
    at.run()
    at.number_input(key="probes.max_rows").set_value(40)
    at.selectbox(key="probes.protocol").set_value("linear")
    at.run()
    for section in ("Tables", "Tables", "Probes"):  # twice: AppTest resends the last tree
        at.session_state["boundaries.section"] = section
        at.run()
        assert not at.exception, at.exception
        assert [tab.label for tab in at.tabs if tab.children] == [section]
    assert at.number_input(key="probes.max_rows").value == 40
    assert at.selectbox(key="probes.protocol").value == "linear"
    assert any("subsample of 40 of 64 rows" in c.value for c in at.caption)


def test_the_probes_say_the_gaussian_control_is_reused_on_screen_and_in_exports(downloads):
    at = run(simulate.learned_like(64, 16, seed=0), section="Probes")
    assert not at.exception
    assert any(probes.GAUSSIAN_REUSE in c.value for c in at.caption)
    csv = downloads["probes.csv"]()
    notes = next(line for line in csv.splitlines() if line.startswith("# notes: "))
    assert probes.GAUSSIAN_REUSE in json.loads(notes.removeprefix("# notes: "))[-1]


def test_the_settings_caption_names_statistics_as_the_tables_do():
    # Above the tabs it read "on any of norm, neighbour_cos, dist_to_mean", the tables below
    # "neighbour cos", "dist to mean"; the settings' choice of curve read as keys too.
    at = run(simulate.learned_like(128, 32, seed=0))
    assert not at.exception
    (stated,) = [c.value for c in at.caption if c.value.startswith("Flagged:")]
    assert "on any of norm, neighbour cos, dist to mean." in stated
    assert "_" not in stated
    (curve,) = [s for s in at.selectbox if s.key == "boundaries.change_statistic"]
    assert "neighbour cos" in curve.options
