"""What every figure shares: template, colour scales, the base layout, downsampling."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from numpy.typing import ArrayLike
from plotly.subplots import make_subplots

from posviz.rows import RowLabels

__all__ = [
    "DIVERGING",
    "LINE_POINTS",
    "MARKER_POINTS",
    "PIXEL_CELLS",
    "TEMPLATE",
    "base_figure",
    "center_label",
    "escape",
    "f32",
    "log_axis",
    "plain",
    "readable",
    "row_hover",
    "sampled_note",
    "small_multiples",
    "superscript",
]

TEMPLATE = "plotly_white"
#: Diverging scale for similarities (centred at 0 by the caller via zmid).
DIVERGING = "RdBu_r"
#: Similarity maps (up to 800 x 800 cells) are drawn as one image pixel per cell, scaled
#: without smoothing: the picture of plotly's default per-cell rectangles, drawn in about half
#: the browser time.
PIXEL_CELLS = "fast"


def escape(text: object) -> str:
    """`text` as plotly shows it: its characters, never markup.

    plotly.js reads titles, legends, hovers, tick and marker texts as a subset of HTML
    (``<a href>``, ``<span style>``, whose CSS ``url(...)`` makes the browser fetch any host);
    with ``&``, ``<`` and ``>`` as entities it draws them as typed. Apply it to every label,
    file name and tensor name before it goes into a figure.

    Examples
    --------
    >>> escape('<a href="x">A&B</a>')
    '&lt;a href="x"&gt;A&amp;B&lt;/a&gt;'
    """
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def center_label(center: bool) -> str:
    """How titles name the centring choice."""
    return "rows mean-centred" if center else "uncentred"


def plain(value: float) -> str:
    """A number as a reader writes it: whole ones with thousands separators, others to six
    significant digits.

    >>> plain(500000.0), plain(10000.5), plain(1e-7)
    ('500,000', '10,000.5', '1e-07')
    """
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.6g}"


def f32(values: ArrayLike) -> np.ndarray:
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


def small_multiples(
    k: int, titles: list[str], title: str, *, xaxis: str = "position p"
) -> go.Figure:
    """`k` panels stacked over a shared position axis, titled `xaxis` under the last."""
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
    fig.update_xaxes(title_text=xaxis, row=k, col=1)
    return fig


def row_hover(labels: RowLabels | None, rows: np.ndarray) -> tuple[dict[str, object], str]:
    """Trace settings and the hover fragment that name `rows` of a line over position:
    ``p=%{x}`` where rows are positions; the offsets each bucket covers (as text: a range is
    not its centre) for DeBERTa's relative table."""
    if labels is None or not labels.bucketed:
        return {}, "p=%{x}"
    return {"hovertext": labels.text(rows)}, "offsets %{hovertext}"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
#: Decades on a log axis up to which the 2-9 multiples get minor ticks (beyond, they would
#: crowd into a comb: the labelled decades are enough).
_MINOR_DECADES = 10
#: Tick marks of a log axis: a ruler (its line drawn), so the unlabelled minor ticks read as
#: ticks of the labelled decades, never as minus signs beside nothing.
_TICK = {
    "ticks": "outside",
    "tickcolor": "#888",
    "ticklen": 7,
    "showline": True,
    "linecolor": "#888",
}
_MINOR_TICK = {"ticks": "outside", "tickcolor": "#aaa", "ticklen": 4, "showgrid": False}


def superscript(exponent: int) -> str:
    """`exponent` in superscript digits: ``superscript(-12)`` is ``"⁻¹²"``."""
    return str(exponent).translate(_SUPERSCRIPT)


def readable(value: float, digits: int = 2) -> str:
    """`value` to `digits` significant digits as a figure shows it: plain from 0.001 to
    10,000, else m·10ⁿ (never Python's ``4.5e-05``).

    >>> readable(0.3679), readable(4.54e-05), readable(-12.0)
    ('0.37', '4.5·10⁻⁵', '−12')
    """
    if value == 0 or 1e-3 <= abs(value) < 1e4:
        return f"{value:.{digits}g}".replace("-", "−")
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa.replace('-', '−')}·{power_of_ten(int(exponent))}"


def power_of_ten(exponent: int) -> str:
    """The label of a decade on every log axis: ``10`` with the exponent in superscript.

    >>> power_of_ten(-3), power_of_ten(0), power_of_ten(12)
    ('10⁻³', '10⁰', '10¹²')
    """
    return "10" + superscript(exponent)


def log_axis(values: np.ndarray) -> dict[str, object]:
    """Axis settings for a log axis over `values`: whole decades, every one labelled.

    One tick style on every log axis: the axis spans whole decades (from the one at or below
    the smallest value to the one at or above the largest, so even a short span shows two
    labels), each labelled 10ⁿ; up to ten decades, the 2-9 multiples get shorter, unlabelled
    ticks of the same ruler. Plotly's own log ticks label some of the 2s and 5s and skip
    decades as the axis narrows. Pass the result to `fig.update_xaxes` / `update_yaxes`.

    >>> axis = log_axis(np.array([0.02, 0.5, 30.0]))
    >>> axis["tickvals"], axis["ticktext"], axis["range"]
    ([0.01, 0.1, 1.0, 10.0, 100.0], ['10⁻²', '10⁻¹', '10⁰', '10¹', '10²'], [-2, 2])
    """
    positive = np.asarray(values, dtype=np.float64)
    positive = positive[np.isfinite(positive) & (positive > 0)]
    if positive.size == 0:
        return {"type": "log"}
    low = int(np.floor(np.log10(positive.min()) + 1e-12))
    high = int(np.ceil(np.log10(positive.max()) - 1e-12))
    high = max(high, low + 1)
    decades = range(low, high + 1)
    minor = (
        [m * 10.0**e for e in decades[:-1] for m in range(2, 10)]
        if len(decades) - 1 <= _MINOR_DECADES
        else []
    )
    return {
        "type": "log",
        "range": [low, high],
        "tickvals": [10.0**e for e in decades],
        "ticktext": [power_of_ten(e) for e in decades],
        **_TICK,
        "minor": {"tickvals": minor, **_MINOR_TICK},
    }


def sampled_note(shown: np.ndarray, n: int) -> str:
    """How a figure names its downsampling, or "" when every position is drawn."""
    return f"{len(shown):,} of {n:,} positions, evenly spaced" if len(shown) < n else ""
