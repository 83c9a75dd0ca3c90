"""figures.similarity: heatmaps and profiles of similarity maps, and maps too large for cells
drawn as pictures whose pixels are the colours the heatmap would paint."""

from __future__ import annotations

import base64
import io

import numpy as np
import plotly.colors
import pytest
from PIL import Image

from posviz import figures
from posviz.figures.similarity import PICTURE_CELLS
from posviz.similarity import grid_similarity, similarity_map
from posviz.simulate import learned_like, vit_grid


def decoded(source: str) -> np.ndarray:
    """The RGBA pixels of a PNG data URI."""
    png = base64.b64decode(source.removeprefix("data:image/png;base64,"))
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(int)


def painted(values: np.ndarray, scale: str, cmin: float, cmax: float) -> np.ndarray:
    """The RGB a heatmap paints for `values`, by plotly's own colour-scale sampling (values
    beyond the range take its end colours)."""
    where = np.clip((values - cmin) / (cmax - cmin), 0.0, 1.0)
    colours = plotly.colors.sample_colorscale(scale, where.tolist())
    return np.array([plotly.colors.unlabel_rgb(c) for c in colours])


#: Cells whose colours are checked (plotly's sampling is slow): random, and every corner.
CHECKED = np.random.default_rng(0).integers(0, 515, size=(2000, 2))


@pytest.fixture(scope="module")
def learned() -> np.ndarray:
    return learned_like(300, 48, seed=2).values


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_a_large_map_asked_as_a_picture_is_the_colours_its_heatmap_paints(metric):
    m = similarity_map(learned_like(1030, 32, seed=0).values, metric=metric, center=True)
    assert m.values.size > PICTURE_CELLS  # 515 x 515 block means, the last block shorter
    exact = figures.similarity.similarity_heatmap(m, highlight=[3])
    fig = figures.similarity.similarity_heatmap(m, highlight=[3], picture=True)
    # By default the cells themselves, float32; asked, a picture and no cell values at all.
    assert exact.data[0].type == "heatmap"
    np.testing.assert_array_equal(exact.data[0].z, m.values.astype(np.float32))
    picture, colour_bar = fig.data[:2]
    assert (picture.type, colour_bar.type) == ("image", "scatter")
    assert "heatmap" not in [t.type for t in fig.data]
    assert "%{z" not in picture.hovertemplate
    assert "Exact values on hover" in picture.hovertemplate
    assert len(fig.to_json()) < len(exact.to_json()) / 2  # smooth maps compress further
    # One colour axis for both: a similarity centred at 0, a distance from its min to its max.
    axis = fig.layout.coloraxis
    assert axis == exact.layout.coloraxis
    assert colour_bar.marker.coloraxis == "coloraxis"
    if metric == "cosine":
        largest = np.abs(m.values).max()
        assert (axis.cmin, axis.cmax) == (-largest, largest)
        scale = "RdBu_r"
    else:
        assert (axis.cmin, axis.cmax) == (m.values.min(), m.values.max())
        scale = "Viridis"
    # Each pixel is the colour plotly paints for its cell, to the rounding of 8 bits.
    pixels = decoded(picture.source)
    assert pixels.shape == (*m.values.shape, 4)
    assert np.all(pixels[..., 3] == 255)
    rows, cols = [*CHECKED[:, 0], 0, 514], [*CHECKED[:, 1], 514, 0]
    expected = painted(m.values[rows, cols], scale, axis.cmin, axis.cmax)
    assert np.abs(pixels[rows, cols, :3] - expected).max() <= 1
    # Pixels on the block centres' grid: x0, then one block on.
    assert (picture.x0, picture.dx) == (m.col_positions[0], m.block)
    assert (picture.y0, picture.dy) == (m.row_positions[0], m.block)
    assert [t.name for t in fig.data[2:]] == ["flagged positions"] * 2


def test_a_map_of_at_most_picture_cells_is_always_a_heatmap():
    m = similarity_map(learned_like(256, 16, seed=0).values)
    assert m.values.size == PICTURE_CELLS
    fig = figures.similarity.similarity_heatmap(m, picture=True)
    assert [t.type for t in fig.data] == ["heatmap"]


def test_a_large_mosaic_asked_as_a_picture_has_its_gaps_transparent():
    g = grid_similarity(learned_like(24 * 24, 16, seed=0).values, grid=(24, 24))
    mosaic, _ = figures.similarity.grid_mosaic(g)
    assert mosaic.size > PICTURE_CELLS
    assert [t.type for t in figures.similarity.grid_tiles(g).data] == ["heatmap"]
    picture, _ = figures.similarity.grid_tiles(g, picture=True).data
    pixels = decoded(picture.source)
    gaps = np.isnan(mosaic)
    assert gaps.any()
    assert np.all(pixels[..., 3][gaps] == 0)
    assert np.all(pixels[..., 3][~gaps] == 255)
    cells = np.flatnonzero(~gaps)[::50]
    expected = painted(mosaic.ravel()[cells], "RdBu_r", -1.0, 1.0)
    assert np.abs(pixels[..., :3].reshape(-1, 3)[cells] - expected).max() <= 1


def test_a_square_maps_colour_bar_sits_under_it():
    # Formerly: at the figure's right edge, far from a map narrower than the page.
    fig = figures.similarity.similarity_heatmap(similarity_map(learned_like(64, 16).values))
    bar = fig.layout.coloraxis.colorbar
    assert (bar.orientation, bar.x, bar.xanchor, bar.yref) == ("h", 0.5, "center", "container")


def test_heatmap_figure(learned):
    m = similarity_map(learned, metric="cosine", center=True, max_side=100)
    fig = figures.similarity.similarity_heatmap(m, highlight=[0, 150, 5000])
    heat = fig.data[0]
    assert heat.type == "heatmap"
    assert heat.z.shape == (100, 100)
    assert heat.z.dtype == np.float32
    largest = np.abs(m.values).max()  # the diverging scale is centred at 0
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (-largest, largest)
    assert fig.layout.xaxis.title.text == "position j"
    assert fig.layout.yaxis.title.text == "position i"
    assert fig.layout.title.text.endswith("(rows mean-centred; means of 3 x 3 blocks)")
    marks = [t for t in fig.data if t.name == "flagged positions"]
    # 5000 is outside the table: only 0 and 150 are marked, on both edges.
    assert [t.customdata.tolist() for t in marks] == [[0, 150], [0, 150]]
    assert len(fig.to_json()) < 5e6


def test_position_figure(learned):
    row = similarity_map(learned, rows=(7, 8), max_side=300, center=False)
    fig = figures.similarity.position_profile(row, position=7, neighbours=[6, 8])
    assert len(fig.data[0].y) == 300
    assert fig.data[1].x.tolist() == [6, 8]
    assert fig.data[2].y[0] == pytest.approx(1.0)


def test_grid_figures():
    g = grid_similarity(vit_grid(4, 5, 16).values, grid=(4, 5), center=False)
    fig = figures.similarity.grid_tiles(g)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (4 * 5 - 1, 5 * 6 - 1)  # 4 x 5 tiles of 4 x 5 cells, one-cell gaps
    np.testing.assert_allclose(z[:4, :5], g.tiles[0, 0], rtol=1e-6)
    assert np.isnan(z[4]).all()
    assert list(fig.layout.xaxis.ticktext) == ["0", "1", "2", "3", "4"]
    fig = figures.similarity.grid_profiles(g)
    assert [len(t.y) for t in fig.data] == [4, 5]
