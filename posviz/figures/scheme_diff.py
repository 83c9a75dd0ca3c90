"""Figures of two sources of a model's rotary positions compared (posviz.schemes.diff): each
pair's relative inv_freq difference, and the angle error over positions."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz.figures.layout import LINE_POINTS, base_figure, escape, f32, log_axis
from posviz.schemes.diff import ANGLE_LIMIT, SchemeDiff

__all__ = ["angle_error", "pair_differences"]

#: Where a difference of exactly 0 is drawn on a log axis (below anything float64 resolves).
_FLOOR = 1e-18


def _line(fig: go.Figure, y: float, text: str, colour: str) -> None:
    """A dashed level on the log y axis, labelled (plotly places annotations on a log axis in
    log10 units, so the label is placed by hand)."""
    fig.add_hline(y=y, line_dash="dash", line_color=colour)
    fig.add_annotation(
        x=0, xref="paper", y=np.log10(y), text=text, showarrow=False,
        xanchor="left", yanchor="bottom", font={"color": colour},
    )  # fmt: skip


def _zeros_note(fig: go.Figure, values: np.ndarray) -> None:
    """Say where exact zeros are drawn, when there are any (a log axis has no 0)."""
    if np.any(values == 0):
        fig.add_annotation(
            x=1, xref="paper", y=np.log10(_FLOOR), text="exactly equal: drawn at 10⁻¹⁸",
            showarrow=False, xanchor="right", yanchor="bottom", font={"color": "grey"},
        )  # fmt: skip


def pair_differences(d: SchemeDiff) -> go.Figure:
    """Each pair's |a − b| / max(|a|, |b|) of inv_freq (log axis; exact zeros drawn at 1e-18),
    the tolerance as a line, the pairs past it red."""
    tolerance = d.params["tolerance"]
    fig = base_figure(
        f"inv_freq per pair: {escape(d.a.label)} against {escape(d.b.label)}",
        "pair i",
        "relative difference |a − b| / max(|a|, |b|)",
    )
    if d.relative_difference is None:
        fig.add_annotation(
            text=f"The widths differ ({d.a.n_pairs} and {d.b.n_pairs} pairs): not compared.",
            showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
        )  # fmt: skip
        return fig
    shown = np.maximum(d.relative_difference, _FLOOR)
    pairs = np.arange(len(shown))
    past = d.relative_difference > tolerance
    fig.add_trace(
        go.Scatter(
            x=pairs,
            y=f32(shown),
            mode="markers+lines",
            marker={"color": np.where(past, "#d62728", "#1f77b4").tolist(), "size": 6},
            line={"color": "#cccccc", "width": 1},
            name="relative difference",
            hovertemplate="pair %{x}: %{y:.3g}<extra></extra>",
        )
    )
    _line(fig, tolerance, f"tolerance {tolerance:g}", "grey")
    _zeros_note(fig, d.relative_difference)
    fig.update_yaxes(**log_axis(np.r_[shown, tolerance]))
    return fig


def angle_error(d: SchemeDiff) -> go.Figure:
    """The largest angle error over pairs at each position (radians, wrapped to [0, π]; log
    axis), the 0.01 rad line and the first position past it marked."""
    positions, errors = d.positions, d.angle_error
    if len(positions) > LINE_POINTS:  # the largest error within each drawn point's span
        edges = np.linspace(0, len(positions), LINE_POINTS + 1).astype(int)
        errors = np.maximum.reduceat(errors, edges[:-1])
        positions = positions[edges[:-1]]
    fig = base_figure(
        "Angle error over positions (largest over pairs)",
        "position m",
        "|angle_a − angle_b| (radians)",
    )
    shown = np.maximum(errors, _FLOOR)
    fig.add_trace(
        go.Scatter(
            x=positions,
            y=f32(shown),
            mode="lines",
            name="angle error",
            hovertemplate="position %{x}: %{y:.3g} rad<extra></extra>",
        )
    )
    _line(fig, ANGLE_LIMIT, f"{ANGLE_LIMIT} rad", "#d62728")
    if d.first_position_over_0_01_rad is not None:
        fig.add_vline(
            x=d.first_position_over_0_01_rad, line_dash="dot", line_color="#d62728",
            annotation_text=f"first past: {d.first_position_over_0_01_rad:,}",
            annotation_position="top right",
        )  # fmt: skip
    _zeros_note(fig, errors)
    fig.update_yaxes(**log_axis(np.r_[shown, ANGLE_LIMIT]))
    return fig
