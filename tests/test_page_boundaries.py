"""The Boundaries & probes page: flags, shared flag state, the one-click trim, probe numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from posviz import boundary, probes, simulate
from posviz.embedding import Embedding

PAGE = str(Path(__file__).parents[1] / "pages/boundaries.py")


def run(table: Embedding, *, probes: bool = True) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["posviz.table"] = table
    at.session_state["probes.open"] = probes  # the probes run once their expander is open
    return at.run()


def test_flags_curves_and_probes_on_a_learned_like_table():
    table = simulate.learned_like(256, 64, seed=1)
    at = run(table)
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Flagged positions"] == "2"
    assert at.session_state["posviz.flags"]["sha256"] == table.sha256
    assert at.session_state["posviz.flags"]["positions"] == [0, 255]
    charts = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    curves, predictions = charts
    assert "|robust z| > 8 in a window of ±16" in curves["layout"]["title"]["text"]
    assert [t["name"] for t in curves["data"] if t["mode"] == "lines"] == [
        "norm",
        "cos_prev",
        "cos_next",
        "dist_to_mean",
    ]
    assert predictions["layout"]["xaxis"]["title"]["text"] == "true position p"
    # The table's absolute probe beats its controls, and the controls are shown beside it.
    mae, spread = map(float, metrics["Absolute MAE (positions)"].split(" ± "))
    assert mae < 25
    assert spread > 0
    chance = [c.value for c in at.caption if c.value.startswith("chance ")]
    assert " · row-shuffled: skill " in chance[0]
    assert " · Gaussian: skill " in chance[0]
    assert any(c.value.startswith("row-shuffled: ") for c in at.caption)  # R²
    assert any(c.value.startswith("chance 0.5 · row-shuffled: ") for c in at.caption)
    assert any("Seed 0; 5-fold cross-validation on all 256 rows" in c.value for c in at.caption)


def test_threshold_widget_changes_the_flags():
    at = run(simulate.learned_like(256, 64, seed=1))
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
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["posviz.table"] = simulate.sinusoidal(3000, 16)
    at.session_state["probes.max_rows"] = 500
    at.session_state["probes.open"] = True
    at.run()
    assert not at.exception
    assert any("a seeded random subsample of 500 of 3,000 rows" in c.value for c in at.caption)
    mae = {m.label: m.value for m in at.metric}["Absolute MAE (positions)"]
    assert float(mae.split(" ± ")[0]) < 1
    assert any("chance" in c.value and "skill" in c.value for c in at.caption)
    protocol = [c.value for c in at.caption if "nested ridge" in c.value]
    assert protocol
    assert "inner cross-validation" in protocol[0]


def test_the_probes_wait_until_their_expander_is_opened(monkeypatch):
    def refuse(*args, **kwargs):
        msg = "probes ran before they were asked for"
        raise AssertionError(msg)

    monkeypatch.setattr(probes, "probe_with_controls", refuse)
    at = run(simulate.learned_like(64, 16, seed=0), probes=False)
    assert not at.exception, at.exception
    assert "Absolute MAE (positions)" not in [m.label for m in at.metric]
    assert len(at.get("plotly_chart")) == 1  # the curves; no prediction chart
    assert any("run when opened" in c.value for c in at.caption)


def test_widgets_start_at_the_cores_defaults_fitted_to_the_table():
    at = run(simulate.learned_like(20, 8, seed=0))
    assert not at.exception
    values = {key: at.number_input(key=f"boundaries.{key}").value for key in ("window", "edge")}
    assert values == {"window": 10, "edge": boundary.BOUNDARY_K}  # window: half the table
    assert at.number_input(key="boundaries.threshold").value == boundary.THRESHOLD
    assert at.number_input(key="boundaries.max_changes").value == boundary.MAX_CHANGES
    assert at.number_input(key="boundaries.min_size").value == 10
    assert at.selectbox(key="boundaries.change_statistic").value == boundary.CHANGE_STATISTIC
    assert at.number_input(key="probes.seed").value == probes.SEED
    assert at.number_input(key="probes.max_rows").value == probes.MAX_ROWS
    assert at.number_input(key="probes.n_pairs").value == probes.N_PAIRS
    assert at.number_input(key="probes.repeats").value == probes.REPEATS
    assert at.selectbox(key="probes.protocol").value == probes.PROTOCOL
