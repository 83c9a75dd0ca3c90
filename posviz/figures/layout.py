"""What every figure shares: template, colour scales, the base layout, downsampling."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from posviz.rows import RowLabels

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
#: Labelled decades on a log axis at most; beyond it every second (third, ...) is labelled.
_DECADE_LABELS = 8


def log_axis(values: np.ndarray) -> dict[str, object]:
    """Axis settings for a log axis over `values`: decades labelled, minor ticks unlabelled.

    Plotly's own log ticks label the 2s and 5s between decades as well (`2, 10, 5, 2, 1`),
    which reads as a jumble. Here the decades are labelled 1, 10, 100, 1000 and otherwise
    10⁻², 10⁴, ...; the 2-9 multiples get unlabelled minor ticks (past eight decades, every
    second or third decade is labelled and the others are the minor ticks). Pass the result to
    `fig.update_xaxes` / `update_yaxes`.

    >>> axis = log_axis(np.array([0.02, 0.5, 30.0]))
    >>> axis["tickvals"], axis["ticktext"]
    ([0.01, 0.1, 1.0, 10.0, 100.0], ['10⁻²', '10⁻¹', '1', '10', '100'])
    """
    positive = np.asarray(values, dtype=np.float64)
    positive = positive[np.isfinite(positive) & (positive > 0)]
    if positive.size == 0:
        return {"type": "log"}
    low = int(np.floor(np.log10(positive.min())))
    high = int(np.ceil(np.log10(positive.max())))
    step = -(-(high - low + 1) // _DECADE_LABELS)
    decades = range(low, high + 1)
    labelled = [e for e in decades if e % step == 0]
    # On a wide axis the 2-9 multiples would crowd into a comb: there only the unlabelled
    # decades are ticked.
    if step == 1:
        minor = [m * 10.0**e for e in decades for m in range(2, 10)]
    else:
        minor = [10.0**e for e in decades if e % step]
    return {
        "type": "log",
        "tickvals": [10.0**e for e in labelled],
        "ticktext": [
            str(10**e) if 0 <= e <= 3 else "10" + str(e).translate(_SUPERSCRIPT) for e in labelled
        ],
        "minor": {"tickvals": sorted(minor), "ticks": "outside", "ticklen": 3, "showgrid": False},
    }


def sampled_note(shown: np.ndarray, n: int) -> str:
    """How a figure names its downsampling, or "" when every position is drawn."""
    return f"{len(shown):,} of {n:,} positions, evenly spaced" if len(shown) < n else ""
