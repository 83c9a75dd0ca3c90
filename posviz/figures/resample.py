"""Figures of posviz.resample: a grid table's similarity mosaic before and after."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from posviz.figures.layout import DIVERGING, TEMPLATE, center_label, escape, f32
from posviz.figures.similarity import grid_mosaic
from posviz.similarity import GridSimilarity

__all__ = ["mosaic_pair"]


def mosaic_pair(grids: dict[str, GridSimilarity]) -> go.Figure:
    """Per-patch cosine-similarity mosaics of two grids side by side on one colour scale.

    Tile (r, c) shows the cosine of patch (r, c) with every patch; ticks name the patch of
    each tile (evenly subsampled tiles on large grids).
    """
    names, pair = [escape(name) for name in grids], list(grids.values())
    titles = [f"{name}: {g.grid[0]} x {g.grid[1]}" for name, g in zip(names, pair, strict=True)]
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.06)
    fig.update_layout(
        template=TEMPLATE,
        title="Cosine similarity of each patch with all patches "
        f"({center_label(pair[0].params['center'])})",
        margin={"l": 60, "r": 20, "t": 80, "b": 50},
        height=520,
        coloraxis={
            "colorscale": DIVERGING,
            "cmin": -1,
            "cmax": 1,
            "colorbar": {"title": {"text": "cosine"}},
        },
    )
    for col, (name, g) in enumerate(zip(names, pair, strict=True), start=1):
        image, (row_ticks, col_ticks) = grid_mosaic(g)
        fig.add_heatmap(
            z=f32(image),
            coloraxis="coloraxis",
            name=name,
            hovertemplate="cos=%{z:.3f}<extra></extra>",
            row=1,
            col=col,
        )
        fig.update_xaxes(
            tickvals=col_ticks, ticktext=g.tile_cols, title_text="patch column", row=1, col=col
        )
        fig.update_yaxes(
            tickvals=row_ticks,
            ticktext=g.tile_rows,
            title_text="patch row",
            autorange="reversed",
            scaleanchor=f"x{col if col > 1 else ''}",
            row=1,
            col=col,
        )
    return fig
