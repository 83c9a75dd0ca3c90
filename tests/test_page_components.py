"""The Components page draws the core's numbers for the loaded table and reacts to its widgets."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from posviz import simulate
from posviz.components import fit_sinusoids, principal_components, sinusoid_likeness
from posviz.embedding import MIN_POSITIONS

PAGE = str(Path(__file__).parents[1] / "pages/components.py")


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def titled(at: AppTest, start: str) -> list[dict]:
    return [fig for fig in charts(at) if fig["layout"]["title"]["text"].startswith(start)]


def decode(values: dict | list) -> np.ndarray:
    """A trace's array as plotly sent it: a typed base64 buffer or a plain list."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
    return np.asarray(values)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.fixture(scope="module")
def sinusoidal():
    table = simulate.sinusoidal(256, 128)
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["posviz.table"] = table
    return table, at.run()


def test_page_shows_projections_paths_fits_and_likeness(sinusoidal):
    table, at = sinusoidal
    assert not at.exception, at.exception
    assert not at.error
    assert at.title[0].value == "Components"
    assert len(charts(at)) == 5  # the 3-D path waits for its toggle
    pc = principal_components(table.values, k=6)
    (trajectories,) = titled(at, "Projection on PC 1-6 over position")
    assert [trace["type"] for trace in trajectories["data"]] == ["scatter"] * 6
    np.testing.assert_allclose(decode(trajectories["data"][1]["y"]), pc.scores[:, 1], rtol=1e-6)
    assert trajectories["data"][0]["name"] == f"PC1 ({pc.explained_variance[0]:.1%})"
    paths = titled(at, "Path through PC1")
    assert [fig["data"][0]["type"] for fig in paths] == ["scatter"]
    assert any("one click away" in caption.value for caption in at.caption)
    fits = fit_sinusoids(pc)
    assert metrics(at)["Median R² of the top-k fits"] == f"{np.median(fits.r2):.4f}"
    assert float(metrics(at)["Median R² of the top-k fits"]) > 0.99
    likeness = sinusoid_likeness(pc, n_frequencies=8, n_shuffles=20, seed=0)
    assert metrics(at)["Mean cos², table"] == f"{likeness.mean_cos2:.4f}"
    frame = at.dataframe[0].value
    np.testing.assert_allclose(frame["frequency_cycles"], fits.frequency)
    np.testing.assert_allclose(frame["r2"], fits.r2)


def test_the_3d_path_is_drawn_when_asked_for(sinusoidal):
    table, at = sinusoidal
    at.toggle(key="components.show_3d").set_value(True).run()
    assert not at.exception, at.exception
    (solid,) = titled(at, "Path through PC1 / PC2 / PC3")
    assert [trace["type"] for trace in solid["data"]] == ["scatter3d", "scatter3d"]
    pc = principal_components(table.values, k=6)
    np.testing.assert_allclose(decode(solid["data"][0]["z"]), pc.scores[:, 2], rtol=1e-6)
    assert len(charts(at)) == 6
    at.toggle(key="components.show_3d").set_value(False).run()


def test_widgets_change_k_layout_and_the_control_seed(sinusoidal):
    table, at = sinusoidal
    at.number_input(key="components.seed").set_value(5).run()
    pc = principal_components(table.values, k=6)
    reseeded = sinusoid_likeness(pc, n_frequencies=8, n_shuffles=20, seed=5)
    assert metrics(at)["Mean cos², shuffled rows"] == f"{reseeded.shuffled.mean():.4f}"
    at.radio(key="components.layout").set_value("overlaid").run()
    (trajectories,) = titled(at, "Projection on PC 1-6 over position")
    assert all(trace["showlegend"] for trace in trajectories["data"])
    at.number_input(key="components.k").set_value(2).run()
    assert not at.exception, at.exception
    assert len(charts(at)) == 5  # no 3-D path with two components
    assert "The 3-D path needs k >= 3 components." in [info.value for info in at.info]
    (trajectories,) = titled(at, "Projection on PC 1-2 over position")
    assert len(trajectories["data"]) == 2


def test_uncentred_choice_is_stated_in_titles():
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["posviz.table"] = simulate.gaussian(64, 16, seed=1)
    at.run()
    at.toggle(key="posviz.center").set_value(False).run()
    assert not at.exception, at.exception
    titles = [fig["layout"]["title"]["text"] for fig in charts(at)]
    assert "Projection on PC 1-6 over position (uncentred)" in titles


def test_tiny_and_grid_tables_do_not_break_the_page():
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["posviz.table"] = simulate.gaussian(MIN_POSITIONS, 4, seed=0)
    at.run()
    assert not at.exception, at.exception
    titles = [fig["layout"]["title"]["text"] for fig in charts(at)]
    assert any("sinusoid" in title.lower() for title in titles), titles
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["posviz.table"] = simulate.vit_grid(6, 6, 32)
    at.run()
    assert not at.exception, at.exception
    assert any("row-major" in caption.value for caption in at.caption)


def test_long_tables_state_the_drawing_rule():
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["posviz.table"] = simulate.learned_like(6000, 8, seed=0)
    at.run()
    assert not at.exception, at.exception
    assert any("at most 5,000 positions per path" in c.value for c in at.caption)
    (flat,) = titled(at, "Path through PC1 / PC2<")
    assert len(decode(flat["data"][0]["x"])) == 5000  # the line through the path
    assert "coloured marks at 256 of them" in flat["layout"]["title"]["text"]
