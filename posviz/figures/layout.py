"""What every figure shares: template, colour scales, the base layout, downsampling."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

TEMPLATE = "plotly_white"
#: Diverging scale for similarities (centred at 0 by the caller via zmid).
DIVERGING = "RdBu_r"
#: Similarity maps (up to 800 x 800 cells) are drawn as one image pixel per cell, scaled
#: without smoothing: the picture of plotly's default per-cell rectangles, drawn in about half
#: the browser time.
PIXEL_CELLS = "fast"


def center_label(center: bool) -> str:
    """How titles name the centring choice."""
    return "rows mean-centred" if center else "uncentred"


def escape_label(text: str) -> str:
    """`text` (a file name, a tensor or a user's label) as literal text in a Plotly figure.

    Plotly renders a subset of HTML in titles, legends, hovers and annotations, including
    ``<a href>`` and ``<span style>``: a label could otherwise fetch from another host.

    >>> escape_label("<b>step1</b> & more")
    '&lt;b&gt;step1&lt;/b&gt; &amp; more'
    """
    return html.escape(str(text), quote=False)


def f32(values: np.ndarray) -> np.ndarray:
    """`values` as float32: typed arrays on the wire, half of float64's bytes, no visible loss."""
    return np.asarray(values, dtype=np.float32)


def base_figure(title: str, xaxis: str, yaxis: str, **layout: object) -> go.Figure:
    """An empty figure in the house layout: template, title, axis titles, legend on top."""
    fig = go.Figure()
    fig.update_layout(
        template=TEMPLATE,
        title=title,
        xaxis_title=xaxis,
        yaxis_title=yaxis,
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        **layout,
    )
    return fig


#: Points drawn per line over position (keeps a 50k-row table's figures near 1 MB). Lines
#: this short are drawn as SVG, whose set-up in Chromium is several times cheaper than WebGL's
#: (benchmarks/README.md); WebGL pays off only for markers by the thousand (probe predictions).
LINE_POINTS = 8192
#: SVG markers drawn on a line at most: each marker is a DOM element, so past a few hundred
#: they cost more browser time than the rest of the chart (benchmarks/split.py); longer lines
#: are drawn as lines, or with markers at evenly spaced points.
MARKER_POINTS = 256


def small_multiples(k: int, titles: list[str], title: str) -> go.Figure:
    """`k` panels stacked over a shared position axis."""
    fig = make_subplots(
        rows=k, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.2 / k
    )
    fig.update_layout(
        template=TEMPLATE,
        title=title,
        height=120 + 140 * k,
        margin={"l": 60, "r": 20, "t": 80, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    fig.update_xaxes(title_text="position p", row=k, col=1)
    return fig


def sampled_note(shown: np.ndarray, n: int) -> str:
    """How a figure names its downsampling, or "" when every position is drawn."""
    return f"{len(shown):,} of {n:,} positions, evenly spaced" if len(shown) < n else ""
