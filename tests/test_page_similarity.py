"""The Similarity page in AppTest: default table, a sinusoid's oracles, a ViT grid, flags."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from posviz import simulate

PAGE = str(Path(__file__).parents[1] / "pages/similarity.py")


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly figures on the page by their chart key (chart.<name>)."""
    return {
        el.proto.id.split("chart.")[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")
    }


def array(spec: dict | list) -> np.ndarray:
    """A figure array as plotly sends it: base64 typed bytes, or a plain list."""
    if isinstance(spec, list):
        return np.asarray(spec)
    return np.frombuffer(base64.b64decode(spec["bdata"]), dtype=spec["dtype"])


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def titles(at: AppTest) -> list[str]:
    return [figure["layout"]["title"]["text"] for figure in charts(at).values()]


def run(table=None, **state) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    if table is not None:
        at.session_state["posviz.table"] = table
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def test_default_table_shows_overview_profile_and_scores():
    at = run()
    assert not at.exception
    shown = titles(at)
    # 1024 positions > 800 a side: a 2 x 2 block overview; the exact window waits to be opened.
    assert any("2 x 2 block" in t for t in shown)
    assert not any("; exact)" in t for t in shown)
    assert "Exact window: every pair of a range of positions" in [e.label for e in at.expander]
    assert any("positions k apart" in t for t in shown)
    assert any("of position 512 to every position" in t for t in shown)
    assert set(metrics(at)) == {
        "translation invariance",
        "monotonicity ρ",
        "falls until k",
        "length (½)",
        "length (0)",
        "ringing",
    }
    assert all(m.help for m in at.metric)
    assert any("2 x 2 block of positions" in c.value for c in at.caption)


def test_the_exact_window_is_drawn_once_opened():
    at = run(**{"similarity.zoom": True})
    assert not at.exception
    window = charts(at)["similarity_zoom"]
    assert window["layout"]["title"]["text"].endswith("; exact)")
    assert window["data"][0]["z"]["shape"].replace(" ", "") == "256,256"
    at.number_input(key="similarity.zoom_row").set_value(100).run()
    assert not at.exception
    rows = array(charts(at)["similarity_zoom"]["data"][0]["y"])
    assert (rows[0], rows[-1]) == (100, 355)


def test_sinusoid_is_translation_invariant_with_the_formula_profile():
    at = run(simulate.sinusoidal(512, 768), **{"posviz.center": False})
    assert not at.exception
    assert metrics(at)["translation invariance"] == "1.0000"
    heatmap = next(f for f in charts(at).values() if f["data"][0]["type"] == "heatmap")
    assert heatmap["data"][0]["z"]["shape"].replace(" ", "") == "512,512"
    assert heatmap["layout"]["xaxis"]["title"]["text"] == "position j"
    profile = next(f for f in charts(at).values() if "offset k" in str(f["layout"]["xaxis"]))
    mean = next(t for t in profile["data"] if t.get("name") == "mean over i")
    np.testing.assert_allclose(array(mean["y"])[[1, 10, 100]], [0.9734, 0.6800, 0.4369], atol=5e-5)


def test_vit_grid_offers_the_mosaic():
    at = run(simulate.vit_grid(14, 14, 64, prefix_tokens=1))
    assert not at.exception
    assert at.toggle(key="similarity.grid").value is True
    figures = charts(at)
    mosaic = figures["grid_tiles"]
    assert mosaic["data"][0]["z"]["shape"].replace(" ", "") == f"{14 * 15 - 1},{14 * 15 - 1}"
    assert "14 x 14 grid" in mosaic["layout"]["title"]["text"]
    assert [t["name"] for t in figures["grid_profiles"]["data"]] == [
        "row offset, same column",
        "column offset, same row",
    ]
    # Position 98 is patch (7, 0): its grid neighbours are above, right and below.
    assert array(figures["position_profile"]["data"][1]["x"]).tolist() == [84, 99, 112]


def test_untrimmed_vit_table_hints_and_user_grid():
    # 197 = 1 + 14^2 rows with the class token kept: no grid until the user asks for one.
    table = simulate.vit_grid(14, 14, 64)
    untrimmed = type(table).from_array(
        np.concatenate([table.prefix, table.values]), name="pos_embed", source="test"
    )
    at = run(untrimmed)
    assert not at.exception
    assert any("197 = 1 + 14²" in i.value for i in at.info)
    assert "grid_tiles" not in charts(at)
    at.toggle(key="similarity.grid").set_value(True).run()
    assert not at.exception
    assert "grid_tiles" in charts(at)  # 197 is prime: a 1 x 197 strip


def test_euclidean_and_flags():
    table = simulate.learned_like(300, 32)
    at = run(table, **{"posviz.flags": {"sha256": table.sha256, "positions": [0, 299], "rule": ""}})
    at.radio(key="similarity.metric").set_value("euclidean").run()
    assert not at.exception
    heatmap = charts(at)["similarity_heatmap"]
    assert heatmap["data"][0]["colorbar"]["title"]["text"] == "euclidean"
    marks = [t for t in heatmap["data"] if t.get("name") == "flagged positions"]
    assert len(marks) == 2
    assert any("use cosine similarity" in c.value for c in at.caption)


@pytest.mark.parametrize("position", [0, 299])
def test_position_slider_moves_the_profile(position):
    at = run(simulate.learned_like(300, 32))
    at.slider(key="similarity.position").set_value(position).run()
    assert not at.exception
    figure = charts(at)["position_profile"]
    assert f"of position {position} to" in figure["layout"]["title"]["text"]


def test_flags_made_on_another_table_are_not_drawn():
    table = simulate.learned_like(300, 32)
    stale = {"sha256": simulate.gaussian(300, 32).sha256, "positions": [5], "rule": ""}
    at = run(table, **{"posviz.flags": stale})
    assert not at.exception
    heatmap = charts(at)["similarity_heatmap"]
    assert not [t for t in heatmap["data"] if t.get("name") == "flagged positions"]
