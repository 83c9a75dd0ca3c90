"""Figures of posviz.boundary: per-position statistics with flags and change points."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz._linalg import evenly_spaced
from posviz.boundary import ChangePoints, Outliers, PositionStatistics
from posviz.figures.layout import LINE_POINTS, f32, row_hover, sampled_note, small_multiples
from posviz.rows import RowLabels

__all__ = ["position_statistics"]

#: Curves of the per-position figure: panel title and the statistics drawn in it.
_BOUNDARY_PANELS = (
    ("row norm ‖e_p‖", ("norm",)),
    ("cosine to neighbours", ("cos_prev", "cos_next")),
    ("distance to the mean row", ("dist_to_mean",)),
    ("residual norm outside the top-k PCs", ("residual_norm",)),
)
#: Each curve in words, for the legend and the hover (the keys stay in the exports).
_CURVE_NAMES = {
    "norm": "row norm",
    "cos_prev": "cos to previous row",
    "cos_next": "cos to next row",
    "dist_to_mean": "distance to mean row",
    "residual_norm": "residual norm",
}
#: The flagging statistic whose flags a panel marks.
_PANEL_FLAGS = {
    "norm": "norm",
    "cos_prev": "neighbour_cos",
    "dist_to_mean": "dist_to_mean",
    "residual_norm": "residual_norm",
}


def position_statistics(
    stats: PositionStatistics,
    flags: Outliers,
    changes: ChangePoints | None = None,
    *,
    labels: RowLabels | None = None,
) -> go.Figure:
    """Per-position curves with flagged positions (red) and change points (dashed lines, each
    labelled with its position and z above the first panel).

    Above `LINE_POINTS` positions the curves are drawn at evenly spaced positions (as the
    subtitle says); flagged positions and change points are always drawn at their exact place.
    Rows are drawn where `labels` put them (the table's positions; DeBERTa's buckets at their
    offsets' centres, a step midway between its two rows, named by the offsets after it).
    """
    labels = labels or RowLabels()
    panels = [p for p in _BOUNDARY_PANELS if getattr(stats, p[1][0]) is not None]
    n = len(stats.norm)
    shown = evenly_spaced(n, LINE_POINTS)
    title = f"Per-position statistics · flagged: {flags.rule}"
    if removed := stats.params["n_directions_removed"]:
        title += f" · residual outside the top {removed} PCs (rows mean-centred)"
    if len(shown) < n:
        title += f"<br><sup>{sampled_note(shown, n)}</sup>"
    fig = small_multiples(len(panels), [p[0] for p in panels], title, xaxis=labels.axis_title)
    hover, where = row_hover(labels, shown)
    for row, (_, names) in enumerate(panels, start=1):
        for name in names:
            fig.add_trace(
                go.Scatter(
                    x=labels.x(shown),
                    y=f32(getattr(stats, name)[shown]),
                    mode="lines",
                    name=_CURVE_NAMES[name],
                    showlegend=len(names) > 1,
                    hovertemplate=f"{_CURVE_NAMES[name]}<br>{where}<br>%{{y:.6g}}<extra></extra>",
                    **hover,
                ),
                row=row,
                col=1,
            )
        statistic = _PANEL_FLAGS[names[0]]
        i = flags.statistics.index(statistic)
        flagged = np.flatnonzero(flags.flagged[i])
        marks, named = row_hover(labels, flagged)
        fig.add_trace(
            go.Scatter(
                x=labels.x(flagged),
                y=f32(flags.values[i, flagged]),
                customdata=f32(flags.z[i, flagged]),
                mode="markers",
                marker={"color": "firebrick", "size": 9, "symbol": "circle-open", "line_width": 2},
                name="flagged",
                legendgroup="flagged",
                showlegend=row == 1,
                hovertemplate=f"flagged on {statistic}<br>{named}<br>%{{y:.6g}}"
                "<br>z=%{customdata:.1f}<extra></extra>",
                **marks,
            ),
            row=row,
            col=1,
        )
    if changes is not None:
        for p, z in zip(changes.positions.tolist(), changes.z.tolist(), strict=True):
            # Midway between the last row before the step and the first after it.
            x = float(np.mean(labels.x(np.array([p - 1, p]))))
            fig.add_vline(x=x, line={"dash": "dash", "color": "grey"}, row="all", col=1)
            # Drawn over the first panel only: one label per step, not one per panel.
            fig.add_annotation(
                x=x,
                y=1,
                yref="y domain",
                text=f"step at {labels.label(p)} · z {z:.1f}",
                showarrow=False,
                xanchor="left",
                yanchor="top",
                font={"size": 11, "color": "dimgrey"},
            )
    return fig
