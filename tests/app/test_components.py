"""The Components page draws the core's numbers for the loaded table and reacts to its widgets."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from posviz import simulate
from posviz.components import fit_sinusoids, principal_components, sinusoid_likeness
from posviz.embedding import MIN_POSITIONS
from posviz.export import column_label
from tests import apptest

PAGE = "pages/components.py"
SECTIONS = ["Over position", "Path", "Sinusoid fits", "Sinusoid span"]


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


def opened(at: AppTest, section: str) -> AppTest:
    """Open one of the page's tabs (only the open one is built)."""
    at.session_state["components.section"] = section
    return at.run()


@pytest.fixture(scope="module")
def sinusoidal():
    table = simulate.sinusoidal(256, 128)
    at = apptest(PAGE)
    at.session_state["posviz.table"] = table
    return table, at.run()


def test_page_opens_on_the_projections_over_position(sinusoidal):
    table, at = sinusoidal
    assert not at.exception, at.exception
    assert not at.error
    assert at.title[0].value == "Components"
    assert [tab.label for tab in at.tabs] == SECTIONS
    assert len(charts(at)) == 1  # the open tab's chart only
    pc = principal_components(table.values, n_components=6)
    (trajectories,) = titled(at, "Projection on PC 1-6 over position")
    assert [trace["type"] for trace in trajectories["data"]] == ["scatter"] * 6
    np.testing.assert_allclose(decode(trajectories["data"][1]["y"]), pc.scores[:, 1], rtol=1e-6)
    assert trajectories["data"][0]["name"] == f"PC1 ({pc.explained_variance[0]:.1%})"
    assert all(trace["showlegend"] for trace in trajectories["data"])  # overlaid on one axis
    assert not any(key.startswith("yaxis2") for key in trajectories["layout"])
    assert not at.metric
    assert not at.dataframe  # the projections are in the closed Numbers expander


def test_each_tab_builds_only_its_own_charts(sinusoidal):
    table, at = sinusoidal
    opened(at, "Path")
    assert not at.exception, at.exception
    paths = titled(at, "Path through PC1")
    assert [fig["data"][0]["type"] for fig in paths] == ["scatter"]
    assert len(charts(at)) == 1  # the 3-D path waits for its toggle
    assert any("one click away" in caption.value for caption in at.caption)
    assert not at.metric

    opened(at, "Sinusoid fits")
    assert not at.exception, at.exception
    (fitted,) = charts(at)  # the periodogram waits for its expander
    assert fitted["layout"]["title"]["text"].startswith("Best sinusoid")
    fits = fit_sinusoids(principal_components(table.values, n_components=6))
    assert metrics(at) == {"Median R² of the top-k fits": f"{np.median(fits.r2):.4f}"}
    assert float(metrics(at)["Median R² of the top-k fits"]) > 0.99
    (frame,) = [frame.value for frame in at.dataframe]
    np.testing.assert_allclose(frame[column_label("frequency_cycles")], fits.frequency)
    np.testing.assert_allclose(frame[column_label("r2")], fits.r2)
    assert "Periodogram: each PC's share of variance per frequency" in [
        e.label for e in at.expander
    ]

    opened(at, "Sinusoid span")
    assert not at.exception, at.exception
    (angles,) = charts(at)
    assert angles["layout"]["title"]["text"].startswith("Principal angles")
    likeness = sinusoid_likeness(
        principal_components(table.values, n_components=6), n_frequencies=8, n_shuffles=20, seed=0
    )
    assert metrics(at)["Mean cos², table"] == f"{likeness.mean_cos2:.4f}"
    assert "Median R² of the top-k fits" not in metrics(at)
    assert not at.dataframe
    opened(at, "Over position")


def test_the_periodogram_is_one_click_away(sinusoidal):
    _, at = sinusoidal
    opened(at, "Sinusoid fits")
    at.session_state["components.periodogram"] = True
    at.run()
    assert not at.exception, at.exception
    (periodogram,) = titled(at, "Periodogram of each PC")
    assert [trace["type"] for trace in periodogram["data"]] == ["heatmap"]
    assert len(charts(at)) == 2
    assert len(at.dataframe) == 2  # the fits, and the periodogram's numbers
    at.slider(key="components.max_cycles").set_value(3).run()
    (periodogram,) = titled(at, "Periodogram of each PC")
    assert decode(periodogram["data"][0]["x"]).max() == 3
    at.session_state["components.periodogram"] = False
    opened(at, "Over position")


def test_a_link_opens_a_tab():
    at = apptest(PAGE)
    at.session_state["posviz.table"] = simulate.sinusoidal(128, 32)
    at.query_params["components.section"] = "Sinusoid span"
    at.run()
    assert not at.exception, at.exception
    (angles,) = charts(at)
    assert angles["layout"]["title"]["text"].startswith("Principal angles")
    assert "Mean cos², table" in metrics(at)


def test_the_3d_path_is_drawn_when_asked_for(sinusoidal):
    table, at = sinusoidal
    opened(at, "Path")
    at.toggle(key="components.show_3d").set_value(True).run()
    assert not at.exception, at.exception
    (solid,) = titled(at, "Path through PC1 / PC2 / PC3")
    assert [trace["type"] for trace in solid["data"]] == ["scatter3d", "scatter3d"]
    pc = principal_components(table.values, n_components=6)
    np.testing.assert_allclose(decode(solid["data"][0]["z"]), pc.scores[:, 2], rtol=1e-6)
    assert len(charts(at)) == 2
    opened(at, "Over position")  # the toggle keeps its value while its tab is closed
    assert len(charts(at)) == 1
    opened(at, "Path")
    assert at.toggle(key="components.show_3d").value
    at.toggle(key="components.show_3d").set_value(False).run()
    opened(at, "Over position")


def test_widgets_change_k_layout_and_the_control_seed(sinusoidal):
    table, at = sinusoidal
    opened(at, "Sinusoid span")
    at.number_input(key="components.seed").set_value(5).run()
    pc = principal_components(table.values, n_components=6)
    reseeded = sinusoid_likeness(pc, n_frequencies=8, seed=5)
    assert metrics(at)["Mean cos², shuffled rows"] == f"{reseeded.shuffled.mean():.4f}"
    at.number_input(key="components.shuffles").set_value(30).run()
    opened(at, "Over position")
    at.radio(key="components.layout").set_value("small multiples").run()
    (trajectories,) = titled(at, "Projection on PC 1-6 over position")
    assert not any(trace["showlegend"] for trace in trajectories["data"])
    assert "yaxis6" in trajectories["layout"]  # a panel per PC
    opened(at, "Sinusoid span")  # the span's settings were kept while its tab was closed
    assert (
        at.number_input(key="components.shuffles").value,
        at.query_params["components.seed"],
    ) == (30, "5")
    at.number_input(key="components.n_components").set_value(2).run()
    assert not at.exception, at.exception
    opened(at, "Path")
    assert len(charts(at)) == 1  # no 3-D path with two components
    assert "The 3-D path needs k >= 3 components." in [info.value for info in at.info]
    opened(at, "Over position")
    assert at.radio(key="components.layout").value == "small multiples"
    (trajectories,) = titled(at, "Projection on PC 1-2 over position")
    assert len(trajectories["data"]) == 2


def test_uncentred_choice_is_stated_in_titles():
    at = apptest(PAGE)
    at.session_state["posviz.table"] = simulate.gaussian(64, 16, seed=1)
    at.run()
    at.toggle(key="posviz.center").set_value(False).run()
    assert not at.exception, at.exception
    (trajectories,) = charts(at)
    assert trajectories["layout"]["title"]["text"] == (
        "Projection on PC 1-6 over position (uncentred)"
    )
    (fitted,) = charts(opened(at, "Sinusoid fits"))
    assert fitted["layout"]["title"]["text"].endswith("per PC (uncentred)")


def test_tiny_and_grid_tables_do_not_break_the_page():
    at = apptest(PAGE)
    at.session_state["posviz.table"] = simulate.gaussian(MIN_POSITIONS, 4, seed=0)
    at.session_state["components.periodogram"] = True
    at.session_state["components.numbers"] = True
    # Run once before choosing tabs: under AppTest, a tab chosen before the first run sticks
    # after the second change.
    at.run()
    titles = []
    for section in SECTIONS:
        opened(at, section)
        assert not at.exception, (section, at.exception)
        titles += [fig["layout"]["title"]["text"] for fig in charts(at)]
    assert any("sinusoid" in title.lower() for title in titles), titles
    assert len(titles) == 5
    at = apptest(PAGE)
    at.session_state["posviz.table"] = simulate.vit_grid(6, 6, 32)
    at.run()
    assert not at.exception, at.exception
    assert any("row-major" in caption.value for caption in at.caption)


def test_long_tables_state_the_drawing_rule():
    at = apptest(PAGE)
    at.session_state["posviz.table"] = simulate.learned_like(6000, 8, seed=0)
    opened(at, "Path")
    assert not at.exception, at.exception
    assert any("at most 5,000 positions per path" in c.value for c in at.caption)
    (flat,) = titled(at, "Path through PC1 / PC2<")
    assert len(decode(flat["data"][0]["x"])) == 5000  # the line through the path
    assert "coloured marks at 256 of them" in flat["layout"]["title"]["text"]
