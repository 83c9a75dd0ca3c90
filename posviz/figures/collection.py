"""Figures of posviz.collection: metrics over training step, overlays, CKA map."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative, sample_colorscale
from plotly.subplots import make_subplots

from posviz.collection import Collection, TableSummary
from posviz.export import column_label
from posviz.figures.compare import cumulative_overlay, offset_overlay
from posviz.figures.layout import (
    DIVERGING,
    TEMPLATE,
    base_figure,
    center_label,
    escape,
    f32,
    log_axis,
)

__all__ = [
    "cka_map",
    "collection_cumulative",
    "collection_offsets",
    "metrics_over_step",
    "similarity_grid",
]

#: Panels of :func:`metrics_over_step`: every number of a collection's metrics table.
STEP_METRICS = (
    "k50",
    "k80",
    "k90",
    "k95",
    "k99",
    "effective_rank",
    "stable_rank",
    "participation_ratio",
    "n_above_noise",
    "first_norm_ratio",
    "last_norm_ratio",
    "first_neighbour_cos",
    "last_neighbour_cos",
    "similarity_length",
    "translation_invariance",
    "sinusoid_mean_cos2",
)


def collection_colours(c: Collection) -> list[str]:
    """One colour per loaded table: sequential by step order when ordered, else qualitative."""
    n = len(c.loaded)
    if c.ordered:
        return sample_colorscale("Viridis", [i / max(n - 1, 1) * 0.9 for i in range(n)])
    palette = qualitative.Dark24 + qualitative.Light24
    return [palette[i % len(palette)] for i in range(n)]


def _colour_note(c: Collection) -> str:
    return f"colour: {c.steps[0].unit} order, dark = early" if c.ordered else "one per model"


#: Characters of a label kept in legends, panel titles and marker texts (the hover shows it
#: whole): three legend entries a row fit a chart's width.
SHORT_LABEL = 40


def short_label(label: str, *, width: int = SHORT_LABEL) -> str:
    """`label` escaped for a figure, cut in the middle to `width` characters (a step at the
    end and the run's name at the start stay).

    >>> short_label("runs/a-very-long-experiment-name/seed3/checkpoint-step120000", width=30)
    'runs/a-very-lo…oint-step120000'
    """
    if len(label) > width:
        head = (width - 1) // 2
        label = f"{label[:head]}…{label[-(width - 1 - head) :]}"
    return escape(label)


def _step_colour_bar(c: Collection) -> go.Scatter:
    """The one legend of an ordered collection's overlays: a colour bar of the steps."""
    colours = collection_colours(c)
    steps = [s.value for s in c.steps]
    last = max(len(colours) - 1, 1)
    ticks = np.unique(np.linspace(0, len(colours) - 1, min(len(colours), 8)).round()).astype(int)
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        showlegend=False,
        hoverinfo="skip",
        marker={
            "color": [0],
            "colorscale": [[i / last, colour] for i, colour in enumerate(colours)]
            if len(colours) > 1
            else [[0, colours[0]], [1, colours[0]]],
            "cmin": 0,
            "cmax": last,
            "showscale": True,
            "colorbar": {
                "title": {"text": c.steps[0].unit},
                "tickvals": ticks.tolist(),
                "ticktext": [f"{steps[i]:,}" for i in ticks],
            },
        },
    )


def _recoloured(fig: go.Figure, c: Collection, what: str) -> go.Figure:
    """An overlay figure of the loaded tables, its lines coloured per :func:`collection_colours`.

    Its legend fits: an ordered collection gets one colour bar of steps (the hover names each
    line); a set gets its legend under the chart, three short labels a row.
    """
    for trace, m, colour in zip(fig.data, c.loaded, collection_colours(c), strict=True):
        trace.line.color = colour
        # The overlay named the trace after the escaped label (and a suffix): shorten the label.
        trace.name = short_label(m.label) + trace.name[len(escape(m.label)) :]
    fig.update_layout(title=f"{fig.layout.title.text}<br><sup>{what}; {_colour_note(c)}</sup>")
    fig.update_layout(margin_t=100)
    if c.ordered:
        fig.update_layout(showlegend=False)
        fig.add_trace(_step_colour_bar(c))
    else:
        rows = -(-len(c.loaded) // 3)
        fig.update_layout(
            height=(fig.layout.height or 450) + 22 * rows,
            legend={
                "orientation": "h",
                "x": 0,
                "y": -0.2,
                "yanchor": "top",
                "entrywidth": 1 / 3,
                "entrywidthmode": "fraction",
                "font": {"size": 11},
            },
        )
    return fig


def _by_label(c: Collection) -> dict[str, TableSummary]:
    """The summary of each loaded table, keyed by its label (the overlays escape it)."""
    return {m.label: s for m, s in zip(c.members, c.summaries, strict=True) if s}


def collection_cumulative(c: Collection) -> go.Figure:
    """Every table's cumulative explained variance, overlaid."""
    spectra = {label: s.spectrum for label, s in _by_label(c).items()}
    return _recoloured(cumulative_overlay(spectra), c, f"{len(spectra)} tables")


def collection_offsets(c: Collection) -> go.Figure:
    """Every table's mean cosine similarity against offset, overlaid, with the 1/e level."""
    fig = _recoloured(
        offset_overlay({label: s.profile for label, s in _by_label(c).items()}),
        c,
        "similarity length: first k below 1/e",
    )
    fig.add_hline(y=1 / np.e, line={"dash": "dot", "color": "grey"})
    return fig


def metrics_over_step(c: Collection) -> go.Figure:
    """One panel per metric against the training step; the sinusoid panel shows its null."""
    rows = [r for r in c.records() if r["error"] is None]
    steps = np.array([r["step"] for r in rows], dtype=np.float64)
    unit = c.steps[0].unit
    cols = 4
    n_rows = -(-len(STEP_METRICS) // cols)
    fig = make_subplots(
        rows=n_rows,
        cols=cols,
        subplot_titles=[column_label(m) for m in STEP_METRICS],  # as the Metrics table
        vertical_spacing=0.32 / n_rows,
        horizontal_spacing=0.06,
    )
    fig.update_layout(
        template=TEMPLATE,
        title=f"Metrics over training ({center_label(c.center)}), one panel each",
        height=120 + 210 * n_rows,
        margin={"l": 50, "r": 20, "t": 90, "b": 50},
        showlegend=False,
    )
    for i, metric in enumerate(STEP_METRICS):
        row, col = divmod(i, cols)
        values = np.array([np.nan if r[metric] is None else r[metric] for r in rows], float)
        fig.add_scatter(
            x=steps,
            y=f32(values),
            mode="lines+markers",
            marker={"size": 5},
            line={"color": "rgb(31, 119, 180)"},
            text=[escape(r["label"]) for r in rows],
            name=metric,
            hovertemplate=f"%{{text}}<br>{unit} %{{x:,}}<br>{metric}=%{{y:.4g}}<extra></extra>",
            row=row + 1,
            col=col + 1,
        )
        if metric == "sinusoid_mean_cos2":
            fig.add_scatter(
                x=steps,
                y=f32([r["shuffled_mean_cos2"] for r in rows]),
                mode="lines",
                line={"dash": "dot", "color": "grey"},
                name="shuffled rows (chance)",
                hovertemplate="shuffled rows: %{y:.4g}<extra></extra>",
                row=row + 1,
                col=col + 1,
            )
    if steps.min() > 0 and steps.max() >= 100 * steps.min():
        fig.update_xaxes(**log_axis(steps))
    for col in range(1, cols + 1):
        fig.update_xaxes(title_text=unit, row=n_rows, col=col)
    return fig


def similarity_grid(c: Collection, *, cols: int = 4) -> go.Figure:
    """Every table's cosine-similarity overview, one small panel each, on one colour scale."""
    shown = [(m.label, s.overview) for m, s in zip(c.members, c.summaries, strict=True) if s]
    n_rows = -(-len(shown) // cols)
    fig = make_subplots(
        rows=n_rows,
        cols=cols,
        subplot_titles=[short_label(label, width=32) for label, _ in shown],
        # ~60 px between rows: the next row's titles clear this row's tick labels.
        vertical_spacing=60 / (260 * n_rows),
        horizontal_spacing=0.04,
    )
    largest = max(float(np.abs(o.values).max()) for _, o in shown)
    fig.update_layout(
        template=TEMPLATE,
        title=f"Cosine similarity between positions ({center_label(c.center)}; "
        "block means, at most "
        f"{max(len(o.values) for _, o in shown)} cells a side; one colour scale)",
        height=80 + 260 * n_rows,
        margin={"l": 40, "r": 20, "t": 80, "b": 30},
        coloraxis={"colorscale": DIVERGING, "cmin": -largest, "cmax": largest},
        coloraxis_colorbar={"title": {"text": "cosine"}},
    )
    for i, (label, o) in enumerate(shown):
        row, col = divmod(i, cols)
        fig.add_heatmap(
            x=f32(o.col_positions),
            y=f32(o.row_positions),
            z=f32(o.values),
            coloraxis="coloraxis",
            name=escape(label),
            # The name by reference: a label is never part of the template's syntax.
            hovertemplate="%{fullData.name}<br>i≈%{y}, j≈%{x}<br>%{z:.3f}<extra></extra>",
            row=row + 1,
            col=col + 1,
        )
    fig.update_yaxes(autorange="reversed")
    fig.update_annotations(font_size=12)
    return fig


#: Where a marker's label may go, tried in this order: plotly's textposition and the label
#: box's offset from the marker's centre in pixels (x right, y up), as a multiple of the
#: box's own width and height (-0.5: centred) plus the marker's radius and a gap.
_PLACES = (
    ("top center", (-0.5, 0.0), (0, 1)),
    ("bottom center", (-0.5, -1.0), (0, -1)),
    ("middle right", (0.0, -0.5), (1, 0)),
    ("middle left", (-1.0, -0.5), (-1, 0)),
    ("top right", (0.0, 0.0), (1, 1)),
    ("top left", (-1.0, 0.0), (-1, 1)),
    ("bottom right", (0.0, -1.0), (1, -1)),
    ("bottom left", (-1.0, -1.0), (-1, -1)),
)
#: Pixels of a marker-label character, of a label's line, and of a marker's radius plus gap.
_CHAR, _LINE, _RADIUS = 6.6, 14.0, 8.0


def label_places(
    points: np.ndarray, labels: list[str], *, width: float = 900.0, height: float = 370.0
) -> list[str]:
    """A textposition per marker so that the labels overlap neither each other nor the
    markers where a place allows it (greedy, in the markers' order; the least overlap
    otherwise).

    `points` (n, 2) in data units, drawn with one scale on both axes into a plot of about
    `width` x `height` pixels.

    >>> label_places(np.array([[0.0, 0.0], [0.05, 0.0]]), ["step100", "step300"])
    ['top center', 'bottom center']
    """
    span = np.ptp(points, axis=0)
    scale = min(width / (span[0] or 1.0), height / (span[1] or 1.0))
    pixels = (points - points.min(axis=0)) * scale
    taken = [(x - _RADIUS, y - _RADIUS, x + _RADIUS, y + _RADIUS) for x, y in pixels]
    places = []
    for (x, y), label in zip(pixels, labels, strict=True):
        w, h = _CHAR * len(label), _LINE
        best, least = _PLACES[0][0], np.inf
        for name, (fx, fy), (dx, dy) in _PLACES:
            left, bottom = x + fx * w + dx * _RADIUS, y + fy * h + dy * _RADIUS
            box = (left, bottom, left + w, bottom + h)
            overlap = sum(_overlap(box, other) for other in taken)
            if overlap < least:
                best, least, chosen = name, overlap, box
            if overlap == 0:
                break
        places.append(best)
        taken.append(chosen)
    return places


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Area shared by two boxes (left, bottom, right, top)."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def common_prefix(labels: list[str]) -> str:
    """The start every label shares, up to its last separator (``-_/ .``), when each label
    keeps something after it; else "".

    >>> common_prefix(["simulated-run-step100", "simulated-run-step3000"])
    'simulated-run-'
    >>> common_prefix(["run-a", "run"]), common_prefix(["a"])
    ('', '')
    """
    if len(labels) < 2:
        return ""
    first, last = min(labels), max(labels)  # their common start is everyone's
    same = [a == b for a, b in zip(first, last, strict=False)] + [False]
    shared = first[: same.index(False)]
    cut = max(shared.rfind(sep) for sep in "-_/ .") + 1
    prefix = shared[:cut]
    return prefix if all(len(label) > len(prefix) for label in labels) else ""


def cka_map(c: Collection) -> go.Figure:
    """The tables placed so that distances show sqrt(2 - 2 CKA): near = similar tables."""
    labels = [m.label for m in c.loaded]
    prefix = common_prefix(labels)
    shared = f"; labels without their common start {short_label(prefix)}" if prefix else ""
    texts = [short_label(label[len(prefix) :], width=24) for label in labels]
    fig = base_figure(
        f"Tables by classic (biased) linear CKA on their first {c.common_positions:,} positions "
        f"({center_label(c.center)})<br><sup>classical MDS of sqrt(2 − 2·CKA); the 2-D map shows "
        f"{c.map_share:.0%} of the distances' variance; {_colour_note(c)}{shared}</sup>",
        "MDS axis 1",
        "MDS axis 2",
        height=520,
    )
    fig.update_layout(margin_t=100, showlegend=False)
    if c.ordered:  # under the markers
        fig.add_scatter(
            x=f32(c.coordinates[:, 0]),
            y=f32(c.coordinates[:, 1]),
            mode="lines",
            line={"color": "lightgrey", "width": 1},
            hoverinfo="skip",
            name="training path",
        )
    fig.add_scatter(
        x=f32(c.coordinates[:, 0]),
        y=f32(c.coordinates[:, 1]),
        mode="markers+text",
        text=texts,
        customdata=[escape(m.label) for m in c.loaded],
        # Placed apart: neighbouring checkpoints' labels overlapped when all sat on top.
        textposition=label_places(c.coordinates[:, :2], texts, width=900 / 1.4),
        marker={"size": 12, "color": collection_colours(c), "line": {"width": 1, "color": "black"}},
        hovertemplate="%{customdata}<extra></extra>",
        name="tables",
        cliponaxis=False,
    )
    # Room beside the outermost markers for their labels.
    low, high = c.coordinates[:, 0].min(), c.coordinates[:, 0].max()
    pad = 0.2 * (high - low) or 1.0
    fig.update_xaxes(range=[low - pad, high + pad])
    fig.update_yaxes(scaleanchor="x")
    return fig
