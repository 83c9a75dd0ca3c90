"""figures.resample: a grid table's similarity mosaic before and after resampling, side by side
on one cosine scale, each tile named by its patch."""

from __future__ import annotations

import numpy as np

from posviz import figures, resample, simulate
from posviz.figures.similarity import grid_mosaic
from posviz.similarity import grid_similarity


def test_the_two_mosaics_are_each_grids_cells_on_one_cosine_scale():
    table = simulate.vit_grid(4, 5, 16)
    after = resample.resample_grid(table.values, table.grid, new_grid=(6, 3))
    grids = {
        "before": grid_similarity(table.values, grid=table.grid),
        "after": grid_similarity(after.values, grid=(6, 3)),
    }
    fig = figures.resample.mosaic_pair(grids)
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]
    for trace, g in zip(fig.data, grids.values(), strict=True):
        image, _ = grid_mosaic(g)
        np.testing.assert_array_equal(trace.z, image.astype(np.float32))  # gaps NaN in both
        assert trace.coloraxis == "coloraxis"
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (-1, 1)
    assert fig.layout.coloraxis.colorbar.title.text == "cosine"
    assert [a.text for a in fig.layout.annotations] == ["before: 4 x 5", "after: 6 x 3"]
    assert fig.layout.title.text.endswith("(rows mean-centred)")


def test_each_tile_is_named_by_its_patch_and_rows_run_down():
    grids = {
        name: grid_similarity(simulate.vit_grid(*grid, 8).values, grid=grid, center=False)
        for name, grid in {"a": (3, 4), "b": (5, 2)}.items()
    }
    fig = figures.resample.mosaic_pair(grids)
    assert list(fig.layout.xaxis.ticktext) == [0, 1, 2, 3]
    assert list(fig.layout.yaxis2.ticktext) == [0, 1, 2, 3, 4]
    assert fig.layout.yaxis.autorange == fig.layout.yaxis2.autorange == "reversed"
    assert fig.layout.yaxis2.scaleanchor == "x2"  # square cells in the right-hand mosaic
    assert fig.layout.title.text.endswith("(uncentred)")
