"""Figures of posviz.probes: out-of-fold position predictions beside the controls."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz.figures.layout import base_figure, f32
from posviz.probes import ProbeReport, skill_text

__all__ = ["probe_predictions"]


def probe_predictions(report: ProbeReport) -> go.Figure:
    """Out-of-fold predicted vs true position for the table and its two controls."""
    last = report.n_positions - 1
    # Probes without position information can predict far outside the table (an unregularised
    # fit with d close to the training rows); the axis keeps the informative range readable.
    shown = (-0.25 * last, 1.25 * last)
    outside = sum(
        int(np.count_nonzero((p.predictions < shown[0]) | (p.predictions > shown[1])))
        for p in report.absolute.values()
    )
    settings = report.params
    title = (
        f"Absolute position probe ({settings['protocol']}): out-of-fold predictions of the first "
        f"of {settings['repeats']} {settings['folds']}-fold splits (seed {settings['seed']}, "
        f"{report.rows_probed})"
    )
    if outside:
        title += f"<br><sup>{outside:,} predictions outside −25%..125% of the range not shown</sup>"
    fig = base_figure(title, "true position p", "predicted position", height=520, yaxis_range=shown)
    # The legend (two rows) under the axis: above the plot it ran into the subtitle.
    fig.update_layout(
        margin={"t": 90 if outside else 60, "b": 120},
        legend={"orientation": "h", "x": 0, "yref": "container", "y": 0, "yanchor": "bottom"},
    )
    draws = report.n_control_draws
    for name, probe in report.absolute.items():
        if name == "table":
            label = f"{name} (MAE {probe.mae:.2f}, skill {skill_text(probe.skill)})"
        else:  # a control's points are its first draw; its numbers, as the page's, all draws'
            mae, skill = report.control_summary(name, "mae")[0], report.control_summary(name)[0]
            label = (
                f"{name}, 1 of {draws} draws (mean over them: MAE {mae:.2f}, "
                f"skill {skill_text(skill)})"
            )
        fig.add_scattergl(
            x=probe.positions.astype(np.int32),
            y=f32(probe.predictions),
            mode="markers",
            marker={"size": 3, "opacity": 0.6},
            name=label,
            hovertemplate=f"{name}<br>p=%{{x}}<br>predicted %{{y:.1f}}<extra></extra>",
        )
    ends = [0, last]
    fig.add_scatter(
        x=ends, y=ends, mode="lines", line={"dash": "dot", "color": "black"}, name="perfect"
    )
    chance = report.absolute["table"]
    fig.add_scatter(
        x=ends,
        y=np.full(2, chance.positions.mean(), dtype=np.float32),
        mode="lines",
        line={"dash": "dash", "color": "grey"},
        name=f"chance: the mean position (MAE {chance.chance_mae:.2f})",
    )
    return fig
