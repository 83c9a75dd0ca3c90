"""The Similarity page in AppTest: default table, a sinusoid's oracles, a ViT grid, flags."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from posviz import figures, simulate
from tests import apptest

PAGE = "pages/similarity.py"


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


#: The page's sections: tabs, of which only the open one is built.
PAIRS, OFFSETS, ONE, GRID = (
    "Position x position",
    "Similarity vs offset",
    "One position vs all",
    "2-D grid",
)


def run(table=None, section: str | None = None, **state) -> AppTest:
    at = apptest(PAGE)
    if section is not None:
        at.session_state["similarity.section"] = section
    if table is not None:
        at.session_state["posviz.table"] = table
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def test_default_table_shows_the_overview_and_the_other_sections_as_tabs():
    at = run()
    assert not at.exception
    assert [t.label for t in at.tabs] == [PAIRS, OFFSETS, ONE, GRID]
    # 1024 positions > 800 a side: a 2 x 2 block overview; the exact window waits to be opened.
    assert list(charts(at)) == ["similarity_heatmap"]
    assert "2 x 2 block" in titles(at)[0]
    # 512 x 512 cells: a picture of their colours, the cells themselves one toggle away.
    assert [t["type"] for t in charts(at)["similarity_heatmap"]["data"]] == ["image", "scatter"]
    assert figures.similarity.PICTURE_NOTE in [c.value for c in at.caption]
    at.toggle(key="similarity.exact_cells").set_value(True).run()
    assert not at.exception
    (exact,) = charts(at)["similarity_heatmap"]["data"]
    assert exact["z"]["shape"].replace(" ", "") == "512,512"
    assert figures.similarity.PICTURE_NOTE not in [c.value for c in at.caption]
    assert "Exact window: every pair of a range of positions" in [e.label for e in at.expander]
    assert any("2 x 2 block of positions" in c.value for c in at.caption)
    assert not at.metric  # the scores belong to the offset tab
    assert "Numbers" not in [e.label for e in at.expander]


def test_the_offset_tab_shows_the_profile_and_scores():
    at = run(section=OFFSETS)
    assert not at.exception
    assert list(charts(at)) == ["offset_profile"]
    assert "positions k apart" in titles(at)[0]
    assert "Numbers" in [e.label for e in at.expander]
    assert set(metrics(at)) == {
        "translation invariance",
        "monotonicity ρ",
        "falls until k",
        "similarity length (1/e)",
        "length (0)",
        "sign changes / ringing peaks",
    }
    assert all(m.help for m in at.metric)


def test_the_one_position_tab_shows_its_row():
    at = run(section=ONE)
    assert not at.exception
    assert list(charts(at)) == ["position_profile"]
    assert "of position 512 to every position" in titles(at)[0]
    # The neighbours' marks sit under the star at 1024 positions: their values are written.
    shown = [c.value for c in at.caption if c.value.startswith("Neighbours")]
    assert len(shown) == 1
    assert "(position 511: " in shown[0]
    assert "; position 513: " in shown[0]


@pytest.mark.parametrize(
    ("section", "chart"),
    [(OFFSETS, "offset_profile"), (ONE, "position_profile"), (GRID, "grid_tiles")],
)
def test_a_closed_tab_builds_nothing_until_opened(section, chart):
    at = run(simulate.vit_grid(6, 6, 32))
    assert chart not in charts(at)
    at.session_state["similarity.section"] = section
    at.run()
    assert not at.exception
    assert chart in charts(at)
    assert "similarity_heatmap" not in charts(at)


def test_a_link_opens_its_tab():
    at = apptest(PAGE)
    at.query_params["similarity.section"] = OFFSETS
    at.run()
    assert not at.exception
    assert list(charts(at)) == ["offset_profile"]
    assert at.session_state["similarity.section"] == OFFSETS


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
    at.toggle(key="similarity.exact_cells").set_value(True).run()
    heatmap = charts(at)["similarity_heatmap"]
    assert heatmap["data"][0]["z"]["shape"].replace(" ", "") == "512,512"
    assert heatmap["layout"]["xaxis"]["title"]["text"] == "position j"
    at.session_state["similarity.section"] = OFFSETS
    at.run()
    assert metrics(at)["translation invariance"] == "1.0000"
    profile = charts(at)["offset_profile"]
    mean = next(t for t in profile["data"] if t.get("name") == "mean over i")
    np.testing.assert_allclose(array(mean["y"])[[1, 10, 100]], [0.9734, 0.6800, 0.4369], atol=5e-5)


def test_vit_grid_offers_the_mosaic():
    table = simulate.vit_grid(14, 14, 64, prefix_tokens=1)
    at = run(table, section=GRID)
    assert not at.exception
    assert at.toggle(key="similarity.grid").value is True
    mosaic = charts(at)["grid_tiles"]
    assert mosaic["data"][0]["z"]["shape"].replace(" ", "") == f"{14 * 15 - 1},{14 * 15 - 1}"
    assert "14 x 14 grid" in mosaic["layout"]["title"]["text"]
    # The profiles are one click away: an expander drawn when opened.
    assert "grid_profiles" not in charts(at)
    at.session_state["similarity.grid_profiles"] = True
    at.run()
    assert [t["name"] for t in charts(at)["grid_profiles"]["data"]] == [
        "row offset, same column",
        "column offset, same row",
    ]
    # Position 98 is patch (7, 0): its grid neighbours are above, right and below.
    at = run(table, section=ONE)
    assert array(charts(at)["position_profile"]["data"][1]["x"]).tolist() == [84, 99, 112]


def test_untrimmed_vit_table_hints_and_user_grid():
    # 197 = 1 + 14^2 rows with the class token kept: no grid until the user asks for one.
    table = simulate.vit_grid(14, 14, 64)
    untrimmed = type(table).from_array(
        np.concatenate([table.prefix, table.values]), name="pos_embed", source="test"
    )
    at = run(untrimmed)
    assert not at.exception
    assert any("197 = 1 + 14²" in i.value for i in at.info)  # above the tabs: seen on any
    at.session_state["similarity.section"] = GRID
    at.run()
    assert "grid_tiles" not in charts(at)
    at.toggle(key="similarity.grid").set_value(True).run()
    assert not at.exception
    assert "grid_tiles" not in charts(at)  # no grid is made up: the user chooses one
    at.selectbox(key="similarity.grid_height").set_value(1).run()
    assert "grid_tiles" in charts(at)  # 197 is prime: a 1 x 197 strip


def test_a_sequence_is_not_a_patch_grid_and_the_page_says_how_to_declare_one():
    at = run(simulate.learned_like(1024, 32), section=GRID)
    assert not at.exception
    assert any("This table is not a patch grid" in i.value for i in at.info)
    assert any("**2-D grid** ticked" in i.value for i in at.info)
    at.toggle(key="similarity.grid").set_value(True).run()
    assert at.selectbox(key="similarity.grid_height").value is None  # not 32 x 32
    assert "grid_tiles" not in charts(at)


def test_euclidean_and_flags():
    table = simulate.learned_like(300, 32)
    at = run(table, **{"posviz.flags": {"sha256": table.sha256, "positions": [0, 299], "rule": ""}})
    at.radio(key="similarity.metric").set_value("euclidean").run()
    assert not at.exception
    heatmap = charts(at)["similarity_heatmap"]
    assert heatmap["layout"]["coloraxis"]["colorbar"]["title"]["text"] == "euclidean"
    # 300 x 300 cells: a picture, said so under it.
    assert [t["type"] for t in heatmap["data"][:2]] == ["image", "scatter"]
    assert figures.similarity.PICTURE_NOTE in [c.value for c in at.caption]
    marks = [t for t in heatmap["data"] if t.get("name") == "flagged positions"]
    assert len(marks) == 2
    at.session_state["similarity.section"] = OFFSETS
    at.run()
    assert any("use cosine similarity" in c.value for c in at.caption)


@pytest.mark.parametrize("position", [0, 299])
def test_position_slider_moves_the_profile(position):
    at = run(simulate.learned_like(300, 32), section=ONE)
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


def test_a_map_of_few_cells_is_a_heatmap_without_the_picture_note_or_toggle():
    at = run(simulate.learned_like(200, 32))
    assert not at.exception
    (heatmap,) = charts(at)["similarity_heatmap"]["data"]
    assert heatmap["type"] == "heatmap"
    assert figures.similarity.PICTURE_NOTE not in [c.value for c in at.caption]
    assert "Exact values on hover" not in [t.label for t in at.toggle]


def test_a_large_mosaic_is_a_picture_until_its_cells_are_asked_for():
    at = run(simulate.vit_grid(24, 24, 16), section=GRID)  # 599 x 599 mosaic cells
    assert not at.exception
    assert charts(at)["grid_tiles"]["data"][0]["type"] == "image"
    assert figures.similarity.PICTURE_NOTE in [c.value for c in at.caption]
    at.toggle(key="similarity.grid_exact_cells").set_value(True).run()
    assert not at.exception
    (mosaic,) = charts(at)["grid_tiles"]["data"]
    assert mosaic["z"]["shape"].replace(" ", "") == "599,599"


def test_monotonicity_says_which_end_is_which():
    at = run(simulate.learned_like(300, 32), section="Similarity vs offset")
    assert not at.exception
    assert any("−1 = similarity falls with every step" in c.value for c in at.caption)
