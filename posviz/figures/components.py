"""Figures of posviz.components: components over position, their path, fits, periodogram."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz._linalg import evenly_spaced
from posviz.components import PrincipalComponents, SinusoidFits, SubspaceLikeness
from posviz.figures.layout import (
    LINE_POINTS,
    MARKER_POINTS,
    base_figure,
    center_label,
    f32,
    row_hover,
    sampled_note,
    small_multiples,
)
from posviz.rows import RowLabels

__all__ = [
    "PATH_POINTS",
    "pc_path",
    "pc_trajectories",
    "periodogram",
    "principal_angles",
    "sinusoid_fits",
]

#: Points drawn of a path in PC space; longer tables are shown at evenly spaced positions.
PATH_POINTS = 5000

#: Frequency columns of the periodogram heatmap; more bins are summed in equal blocks.
PERIODOGRAM_COLUMNS = 1024


def _pc_label(pc: PrincipalComponents, c: int) -> str:
    return f"PC{c + 1} ({pc.explained_variance[c]:.1%})"


def pc_trajectories(
    pc: PrincipalComponents, *, overlaid: bool, labels: RowLabels | None = None
) -> go.Figure:
    """Each position's projection on PC 1..k over position, overlaid or as small multiples.

    Above `LINE_POINTS` positions the lines are drawn at evenly spaced positions, as the
    subtitle says. Rows are drawn where `labels` put them (the table's positions; DeBERTa's
    buckets at their offsets' centres, hovers naming their offsets).
    """
    labels = labels or RowLabels()
    n, k = pc.scores.shape
    shown = evenly_spaced(n, LINE_POINTS)
    title = f"Projection on PC 1-{k} over position ({center_label(pc.params['center'])})"
    if len(shown) < n:
        title += f"<br><sup>{sampled_note(shown, n)}</sup>"
    names = [_pc_label(pc, c) for c in range(k)]
    if overlaid:
        fig = base_figure(title, labels.axis_title, "projection (U·S)")
    else:
        fig = small_multiples(k, names, title, xaxis=labels.axis_title)
    hover, where = row_hover(labels, shown)
    for c in range(k):
        fig.add_trace(
            go.Scatter(
                x=labels.x(shown),
                y=f32(pc.scores[shown, c]),
                mode="lines",
                name=names[c],
                showlegend=overlaid,
                hovertemplate=f"PC{c + 1}<br>{where}<br>%{{y:.4g}}<extra></extra>",
                **hover,
            ),
            **({} if overlaid else {"row": c + 1, "col": 1}),
        )
    return fig


def pc_path(
    pc: PrincipalComponents,
    components: tuple[int, ...],
    *,
    max_points: int = PATH_POINTS,
    labels: RowLabels | None = None,
) -> go.Figure:
    """Positions as a path through 2 or 3 chosen PCs (1-based), coloured by position.

    Above `max_points` positions only evenly spaced ones are drawn (first and last kept); the
    subtitle says how many. Rows are named as `labels` name them (the table's positions;
    DeBERTa's buckets by their offsets, coloured by bucket with the colour bar in offsets).
    """
    labels = labels or RowLabels()
    n = pc.scores.shape[0]
    shown = evenly_spaced(n, max_points)
    axes = [f"PC{c} ({pc.explained_variance[c - 1]:.1%})" for c in components]
    # The 2-D path colours evenly spaced points of its grey line: enough to read the order,
    # few enough for the browser (each marker is an SVG element).
    marked = evenly_spaced(len(shown), MARKER_POINTS if len(components) == 2 else len(shown))
    marks = f"coloured marks at {len(marked):,} of them" if len(marked) < len(shown) else ""
    center = center_label(pc.params["center"])
    note = " · ".join(filter(None, [center, sampled_note(shown, n), marks]))
    title = f"Path through {' / '.join(f'PC{c}' for c in components)}<br><sup>{note}</sup>"
    coords = [f32(pc.scores[shown, c - 1]) for c in components]
    ends = [f32(pc.scores[[0, n - 1], c - 1]) for c in components]
    named = labels.positions(shown)
    colours = named.astype(np.float32)
    colour = {"color": colours, "colorscale": "Viridis"}
    bar = {"title": {"text": "position"}, "thickness": 12}
    if labels.bucketed:  # one colour per bucket; its ticks name offsets
        bar = {"title": {"text": "offset q − k"}, "thickness": 12, "labelalias": labels.aliases()}
        named = np.array(labels.text(shown), dtype=object)
    colorbar = {"colorbar": bar}
    hover = f"{labels.hover_name}%{{customdata}}<br>" + "<br>".join(
        f"{a}=%{{{xyz}:.4g}}" for a, xyz in zip(axes, "xyz", strict=False)
    )
    ends_text = [
        f"{end} {labels.hover_name}{labels.label(r)}" for end, r in (("first", 0), ("last", n - 1))
    ]
    if len(components) == 2:
        fig = base_figure(title, axes[0], axes[1])
        # The ends' legend under the axis: above the plot it ran into the subtitle.
        fig.update_layout(
            margin={"b": 100},
            legend={"orientation": "h", "x": 0, "yref": "container", "y": 0, "yanchor": "bottom"},
        )
        fig.add_scatter(
            x=coords[0],
            y=coords[1],
            mode="lines",
            line={"color": "lightgrey"},
            customdata=named,
            name="path",
            showlegend=False,
            hovertemplate=hover + "<extra></extra>",
        )
        fig.add_scatter(
            x=coords[0][marked],
            y=coords[1][marked],
            mode="markers",
            marker={"size": 5, **colour, "color": colours[marked], **colorbar},
            customdata=named[marked],
            name="positions",
            hovertemplate=hover + "<extra></extra>",
            showlegend=False,
        )
        # The ends are named in the legend: a label beside its marker was drawn over by the
        # path it starts, wherever the path turned back past it.
        for i, symbol in enumerate(("circle", "square")):
            fig.add_scatter(
                x=ends[0][[i]],
                y=ends[1][[i]],
                mode="markers",
                name=ends_text[i],
                marker={"size": 12, "color": "firebrick", "symbol": symbol},
                cliponaxis=False,
            )
        return fig
    fig = base_figure(title, "", "", height=500, showlegend=False)
    fig.update_layout(margin={"l": 0, "r": 0, "b": 0})
    fig.add_scatter3d(
        x=coords[0],
        y=coords[1],
        z=coords[2],
        mode="lines+markers",
        line={"width": 3, **colour, **colorbar},
        marker={"size": 2, **colour},
        customdata=named,
        name="positions",
        hovertemplate=hover + "<extra></extra>",
    )
    fig.add_scatter3d(
        x=ends[0],
        y=ends[1],
        z=ends[2],
        mode="markers+text",
        text=ends_text,
        name="first / last",
        marker={"size": 6, "color": "firebrick", "symbol": ["circle", "square"]},
    )
    fig.update_layout(
        scene={
            "xaxis_title": axes[0],
            "yaxis_title": axes[1],
            "zaxis_title": axes[2],
            # Further out than plotly's default so the whole path fits a half-width column.
            "camera": {"eye": {"x": 1.7, "y": 1.7, "z": 1.1}},
        }
    )
    return fig


def sinusoid_fits(
    pc: PrincipalComponents, fits: SinusoidFits, *, labels: RowLabels | None = None
) -> go.Figure:
    """Each PC's trajectory with its best-fitting sinusoid (dashed), R² in the panel title.

    Above `LINE_POINTS` positions the lines are drawn at evenly spaced positions, as the
    subtitle says. Rows are drawn where `labels` put them (the table's positions; DeBERTa's
    buckets at their offsets' centres); the fitted formula counts p from the first row, so
    for buckets its waves are over rows, as the subtitle says.
    """
    labels = labels or RowLabels()
    n, k = pc.scores.shape
    shown = evenly_spaced(n, LINE_POINTS)
    titles = [
        f"{_pc_label(pc, c)}: {fits.frequency[c]:.3f} cycles, R² = {fits.r2[c]:.4f}"
        for c in range(k)
    ]
    center = center_label(pc.params["center"])
    title = f"Best sinusoid a·cos(2π f p / {n} + φ) + c per PC ({center})"
    notes = [sampled_note(shown, n)] if len(shown) < n else []
    if labels.bucketed:
        notes.append("p counts rows (buckets); each row drawn at its offsets' centre")
    if notes:
        title += f"<br><sup>{' · '.join(notes)}</sup>"
    fig = small_multiples(k, titles, title, xaxis=labels.axis_title)
    hover, where = row_hover(labels, shown)
    for c in range(k):
        for values, name, line in (
            (pc.scores[shown, c], "projection", {"color": "steelblue"}),
            (fits.fitted[shown, c], "fitted sinusoid", {"color": "firebrick", "dash": "dash"}),
        ):
            fig.add_trace(
                go.Scatter(
                    x=labels.x(shown),
                    y=f32(values),
                    mode="lines",
                    name=name,
                    line=line,
                    legendgroup=name,
                    showlegend=c == 0,
                    hovertemplate=f"PC{c + 1} {name}<br>{where}<br>%{{y:.4g}}<extra></extra>",
                    **hover,
                ),
                row=c + 1,
                col=1,
            )
    return fig


def periodogram(
    fits: SinusoidFits, *, max_cycles: int, columns: int = PERIODOGRAM_COLUMNS
) -> go.Figure:
    """Heatmap of each PC's share of variance per frequency, 0 to `max_cycles` cycles.

    Above `columns` frequency bins, bins are summed in equal blocks (shares add up, so each
    cell is still the share in its band), plotted at the block's centre frequency.
    """
    power = fits.power[:, : max_cycles + 1]
    block = -(-power.shape[1] // columns)
    if block > 1:
        padded = np.pad(power, ((0, 0), (0, -power.shape[1] % block)))
        power = padded.reshape(len(padded), -1, block).sum(axis=2)
    cycles = np.arange(power.shape[1]) * block + (block - 1) / 2
    binned = f", bins summed in blocks of {block}" if block > 1 else ""
    fig = base_figure(
        f"Periodogram of each PC: share of its sum of squares per frequency{binned}",
        "frequency (cycles over the table)",
        "principal component",
        height=200 + 30 * len(power),
    )
    fig.add_heatmap(
        x=f32(cycles),
        y=[f"PC{c + 1}" for c in range(len(power))],
        z=f32(power),
        colorscale="Viridis",
        zmin=0,
        colorbar={"title": {"text": "share"}},
        hovertemplate="%{y}<br>%{x:g} cycles<br>share %{z:.4f}<extra></extra>",
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def principal_angles(likeness: SubspaceLikeness) -> go.Figure:
    """cos² of each principal angle to the sinusoid basis, and the shuffled-rows chance level."""
    cos2 = likeness.cos2
    m = likeness.n_frequencies
    fig = base_figure(
        f"Principal angles between the PC span and cos/sin(π f p / n), f = 1..{m} "
        f"({center_label(likeness.params['center'])})",
        "principal angle (smallest first)",
        "cos² of the angle",
        yaxis_range=[0, 1.05],
    )
    fig.add_bar(
        x=np.arange(1, len(cos2) + 1),
        y=f32(cos2),
        name=f"table: mean cos² {likeness.mean_cos2:.3f}",
        hovertemplate="angle %{x}<br>cos² %{y:.4f}<extra></extra>",
    )
    chance = likeness.shuffled_mean
    fig.add_scatter(
        x=[0.5, len(cos2) + 0.5],
        y=[chance, chance],
        mode="lines",
        line={"dash": "dash", "color": "firebrick"},
        name=f"shuffled rows: mean cos² {chance:.3f} "
        f"({len(likeness.shuffled)} shuffles, seed {likeness.params['seed']})",
        hoverinfo="skip",
    )
    return fig
