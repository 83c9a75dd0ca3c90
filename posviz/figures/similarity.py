"""Figures of posviz.similarity: similarity maps, one position's row, grid tiles."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from posviz.figures.layout import (
    DIVERGING,
    PIXEL_CELLS,
    base_figure,
    center_label,
    f32,
    row_hover,
)
from posviz.rows import RowLabels
from posviz.similarity import METRIC_NAMES, GridSimilarity, SimilarityMap

__all__ = [
    "PICTURE_CELLS",
    "PICTURE_NOTE",
    "grid_mosaic",
    "grid_profiles",
    "grid_tiles",
    "position_profile",
    "similarity_heatmap",
]

#: Maps with more cells than this may be sent as a picture (``picture=True``): a PNG of the
#: colours their heatmap paints, a sixth of the bytes, which the app draws several times
#: faster (benchmarks/split.py, the Similarity page); its hover has positions, not values.
PICTURE_CELLS = 256 * 256
#: What a picture's hover says instead of a value.
PICTURE_HOVER = "value: not in a picture (turn on “Exact values on hover”)"
#: What a page says under a map drawn as a picture.
PICTURE_NOTE = (
    f"More than {PICTURE_CELLS:,} cells: drawn as a picture of the colours their heatmap "
    "paints (8 bits a channel), which the browser draws several times faster; hovering it "
    "gives positions, not values. Turn on “Exact values on hover” to draw the cells "
    "themselves: hover values, and a figure download that holds them."
)


#: A square map is narrower than the page: its colour bar goes under it, centred as the map
#: is (at the right edge of the figure it stood far from the map), at the figure's bottom.
UNDER_THE_MAP = {
    "orientation": "h",
    "x": 0.5,
    "xanchor": "center",
    "yref": "container",
    "y": 0.0,
    "yanchor": "bottom",
    "lenmode": "pixels",
    "len": 320,
    "thickness": 12,
}
#: The bottom margin that holds the x axis's title and, under it, the colour bar.
UNDER_THE_MAP_MARGIN = 110


def _picture(values: np.ndarray, colorscale: str, cmin: float, cmax: float) -> str:
    """`values` as a PNG data URI of the colours a heatmap paints: the colour scale linearly
    interpolated in RGB at each value (as plotly.js does), rounded to 8 bits; NaN transparent."""
    import plotly.express as px  # its import is paid on the first picture only

    scale = plotly.colors.get_colorscale(colorscale)
    stops = [stop for stop, _ in scale]
    rgb = 255 * np.array(
        plotly.colors.convert_colors_to_same_type([c for _, c in scale], colortype="tuple")[0]
    )
    if cmax <= cmin:  # a constant map: plotly.js widens the range by ±0.5 around it
        cmin, cmax = cmin - 0.5, cmax + 0.5
    t = (values - cmin) / (cmax - cmin)
    pixels = [np.interp(t, stops, rgb[:, channel]) for channel in range(3)]
    gaps = np.isnan(values)
    if gaps.any():  # an alpha channel only where there are gaps: a quarter more bytes
        pixels.append(np.where(gaps, 0.0, 255.0))
    image = np.rint(np.nan_to_num(np.stack(pixels, axis=-1))).astype(np.uint8)
    return px.imshow(image, binary_string=True).data[0].source


def _add_cells(
    fig: go.Figure,
    values: np.ndarray,
    *,
    colours: tuple[str, float, float],
    label: str,
    name: str,
    hovertemplate: str,
    picture: bool,
    picture_hover: str,
    x: np.ndarray | None = None,
    y: np.ndarray | None = None,
    step: float = 1.0,
) -> None:
    """`values` in `colours` (colour scale, min, max; colour bar titled `label`): a heatmap of
    their float32 cells or, with `picture` and above PICTURE_CELLS, a picture of them.

    `x`, `y`: cell centres, `step` apart; by default cell indices.
    """
    colorscale, cmin, cmax = colours
    fig.update_layout(
        coloraxis={
            "colorscale": colorscale,
            "cmin": cmin,
            "cmax": cmax,
            "colorbar": {"title": {"text": label, "side": "right"}, **UNDER_THE_MAP},
        },
        margin_b=UNDER_THE_MAP_MARGIN,
    )
    if not (picture and values.size > PICTURE_CELLS):
        fig.add_heatmap(
            x=None if x is None else f32(x),
            y=None if y is None else f32(y),
            z=f32(values),
            zsmooth=PIXEL_CELLS,
            coloraxis="coloraxis",
            hovertemplate=hovertemplate + "<extra></extra>",
            hoverongaps=False,
            name=name,
        )
        return
    fig.add_image(
        source=_picture(values, colorscale, cmin, cmax),
        x0=0 if x is None else float(x[0]),
        y0=0 if y is None else float(y[0]),
        dx=step,
        dy=step,
        name=name,
        hovertemplate=picture_hover + "<extra></extra>",
    )
    # An image has no colour bar: a trace with no points draws the colour axis's.
    fig.add_scatter(
        x=[None],
        y=[None],
        mode="markers",
        marker={"coloraxis": "coloraxis", "color": [cmin]},
        showlegend=False,
        hoverinfo="skip",
    )


def _cells(m: SimilarityMap) -> str:
    """How a map's cells relate to pairs of positions, for titles."""
    if m.exact:
        return "exact"
    kind = "RMS" if m.params["metric"] == "euclidean" else "means"
    return f"{kind} of {m.block} x {m.block} blocks"


def _edge_marks(
    fig: go.Figure, m: SimilarityMap, highlight: Sequence[int], labels: RowLabels
) -> None:
    """Flagged positions (rows) as triangles on the top (columns) and left (rows) edges of a
    map, drawn at their cells ``labels.positions(row)`` and named by their labels."""
    half = m.block / 2
    top, left = m.row_positions[0] - half, m.col_positions[0] - half
    cols = [p for p in highlight if left <= p < m.col_positions[-1] + half]
    rows = [p for p in highlight if top <= p < m.row_positions[-1] + half]
    top, left = top + labels.first_position, left + labels.first_position
    marks = (
        (labels.positions(np.asarray(cols)), [top] * len(cols), cols, "triangle-down"),
        ([left] * len(rows), labels.positions(np.asarray(rows)), rows, "triangle-right"),
    )
    for x, y, flagged, symbol in marks:
        if flagged:
            fig.add_scatter(
                x=f32(x),
                y=f32(y),
                customdata=np.array(labels.text(flagged), dtype=object)
                if labels.bucketed
                else labels.positions(np.asarray(flagged)).astype(np.int32),
                mode="markers",
                marker={"symbol": symbol, "size": 9, "color": "black"},
                cliponaxis=False,
                name="flagged positions",
                legendgroup="flagged",
                showlegend=symbol == "triangle-down" or not cols,
                hovertemplate=f"flagged {'offsets' if labels.bucketed else 'position'} "
                "%{customdata}<extra></extra>",
            )


def _offset_axes(fig: go.Figure, labels: RowLabels) -> None:
    """A map of DeBERTa's buckets keeps one cell per bucket; its ticks and hovers name each
    bucket's offsets (Plotly's labelalias) instead of the bucket."""
    if labels.bucketed:
        aliases = labels.aliases()
        fig.update_xaxes(labelalias=aliases)
        fig.update_yaxes(labelalias=aliases)


def similarity_heatmap(
    m: SimilarityMap,
    *,
    highlight: Sequence[int] = (),
    picture: bool = False,
    labels: RowLabels | None = None,
    height: int = 600,
) -> go.Figure:
    """Position x position map, the first position top left; `highlight` positions (rows)
    marked on the edges. Row p is drawn at ``labels.positions(p)`` (the table's position;
    DeBERTa's bucket, whose ticks and hovers name its offsets). `height` in pixels (a map
    beside another chart takes that chart's).

    Similarities use a diverging scale centred at 0; distances a sequential one. With
    `picture`, a map of more than PICTURE_CELLS cells is sent as a picture of their colours.
    """
    labels = labels or RowLabels()
    measure = METRIC_NAMES[m.params["metric"]]
    fig = base_figure(
        f"{measure.capitalize()} between positions ({center_label(m.params['center'])}; "
        f"{_cells(m)})",
        labels.cell_title("j"),
        labels.cell_title("i"),
        height=height,
    )
    if m.params["metric"] == "euclidean":
        colours = ("Viridis", float(m.values.min()), float(m.values.max()))
    else:  # diverging, centred at 0 (plotly's zmid)
        largest = float(np.abs(m.values).max())
        colours = (DIVERGING, -largest, largest)
    where = "i=%{y}<br>j=%{x}" if m.exact else "block centred at i=%{y}, j=%{x}"
    # A picture's pixels are evenly spaced: a last, shorter block's centre is a little nearer.
    near = "i=%{y}<br>j=%{x}" if m.exact else "block centred near i=%{y}, j=%{x}"
    if labels.bucketed:  # a picture's hover gives the bucket: its offsets are on the axes
        near = near.replace("i=", "bucket i=").replace("j=", "bucket j=")
        near += "<br>(the axes name each bucket's offsets)"
    _add_cells(
        fig,
        m.values,
        colours=colours,
        label=m.params["metric"],
        name=measure,
        hovertemplate=f"{where}<br>{m.params['metric']}=%{{z:.4f}}",
        picture=picture,
        picture_hover=f"{near}<br>{PICTURE_HOVER}",
        x=labels.positions(m.col_positions),
        y=labels.positions(m.row_positions),
        step=m.block,
    )
    _edge_marks(fig, m, highlight, labels)
    fig.update_yaxes(autorange="reversed", scaleanchor="x", constrain="domain")
    fig.update_xaxes(constrain="domain")
    _offset_axes(fig, labels)
    return fig


def position_profile(
    m: SimilarityMap,
    *,
    position: int,
    neighbours: Sequence[int],
    labels: RowLabels | None = None,
) -> go.Figure:
    """One position's row of the map (`m` holds that single row, exact), neighbours marked.

    `position` and `neighbours` are rows, drawn where `labels` put them (the table's
    positions; DeBERTa's buckets at their offsets' centres, named by their offsets).
    """
    labels = labels or RowLabels()
    measure = METRIC_NAMES[m.params["metric"]]
    row = m.values[0]
    label, named = labels.label(position), labels.named(position)
    fig = base_figure(
        f"{measure.capitalize()} of {named} to every position ({center_label(m.params['center'])})",
        labels.axis_title.replace("position p", "position j"),
        f"s({label}, j)",
    )
    columns = np.asarray(m.col_positions).astype(np.int64)  # exact: one column per row
    hover, where = row_hover(labels, columns)
    where = where.replace("p=", "j=")
    fig.add_scatter(
        x=labels.x(columns),
        y=f32(row),
        mode="lines",
        name=f"s({label}, j)",
        hovertemplate=f"{where}<br>%{{y:.4f}}<extra></extra>",
        **hover,
    )
    marked = np.asarray(neighbours, dtype=np.int32)
    hover, where = row_hover(labels, marked)
    fig.add_scatter(
        x=labels.x(marked),
        y=f32(row[marked]),
        mode="markers",
        marker={"size": 9, "color": "darkorange"},
        name="neighbours",
        hovertemplate=f"neighbour {where.replace('p=', 'j=')}<br>%{{y:.4f}}<extra></extra>",
        **hover,
    )
    hover, where = row_hover(labels, np.array([position]))
    fig.add_scatter(
        x=labels.x(np.array([position])),
        y=f32(row[[position]]),
        mode="markers",
        marker={"size": 12, "symbol": "star", "color": "firebrick"},
        name=named,
        hovertemplate=f"{where.replace('p=', 'j=')}<br>%{{y:.4f}}<extra></extra>",
        **hover,
    )
    return fig


def grid_mosaic(g: GridSimilarity) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Tiles laid out as one image, one NaN line between tiles; and the tile centres."""
    a, b, h, w = g.tiles.shape
    padded = np.full((a, b, h + 1, w + 1), np.nan)
    padded[:, :, :h, :w] = g.tiles
    image = padded.transpose(0, 2, 1, 3).reshape(a * (h + 1), b * (w + 1))[:-1, :-1]
    return image, (np.arange(a) * (h + 1) + h / 2, np.arange(b) * (w + 1) + w / 2)


def grid_tiles(g: GridSimilarity, *, picture: bool = False) -> go.Figure:
    """ViT Fig. 7 mosaic: tile (r, c) is the H x W image of patch (r, c)'s cosine to all patches.

    With `picture`, a mosaic of more than PICTURE_CELLS cells is sent as a picture.
    """
    height, width = g.grid
    n_rows, n_cols = len(g.tile_rows), len(g.tile_cols)
    mosaic, (row_ticks, col_ticks) = grid_mosaic(g)
    title = (
        f"Cosine of each patch to all patches, {height} x {width} grid "
        f"({center_label(g.params['center'])})"
    )
    if g.subsampled:
        title += f"; {n_rows} x {n_cols} patches shown"
    # Tall: up to 24 x 24 tiles must stay legible.
    fig = base_figure(title, "patch column of the tile", "patch row of the tile", height=800)
    _add_cells(
        fig,
        mosaic,
        colours=(DIVERGING, -1.0, 1.0),
        label="cosine",
        name="cosine similarity",
        hovertemplate="cosine=%{z:.4f}",
        picture=picture,
        picture_hover=PICTURE_HOVER,
    )
    fig.update_xaxes(
        tickvals=col_ticks,
        ticktext=[str(c) for c in g.tile_cols],
        showgrid=False,
        constrain="domain",
    )
    fig.update_yaxes(
        tickvals=row_ticks,
        ticktext=[str(r) for r in g.tile_rows],
        showgrid=False,
        autorange="reversed",
        scaleanchor="x",
        constrain="domain",
    )
    return fig


def grid_profiles(g: GridSimilarity) -> go.Figure:
    """Mean cosine of patches a given number of rows (same column) or columns (same row) apart."""
    fig = base_figure(
        f"Mean cosine similarity vs patch offset on the {g.grid[0]} x {g.grid[1]} grid "
        f"({center_label(g.params['center'])})",
        "offset (patches)",
        "mean cosine similarity",
    )
    for profile, name in (
        (g.row_profile, "row offset, same column"),
        (g.col_profile, "column offset, same row"),
    ):
        fig.add_scatter(
            x=np.arange(len(profile), dtype=np.int32),
            y=f32(profile),
            mode="lines+markers",
            name=name,
            hovertemplate="offset %{x}<br>%{y:.4f}<extra></extra>",
        )
    return fig
