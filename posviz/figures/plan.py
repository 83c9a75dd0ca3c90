"""Figures of a context plan (`posviz.schemes.plan`): each rule's θ'/θ per pair against the
bands, and each pair's angle at the target against the largest it reached in training."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz.figures.layout import base_figure, f32, log_axis
from posviz.schemes.plan import ContextPlan

__all__ = ["RULE_COLOURS", "angles", "ratios"]

#: One colour per rule (`posviz.schemes.plan.RULES`), the same on every chart.
RULE_COLOURS = {
    "none": "#7f7f7f",
    "linear": "#d62728",
    "ntk_aware": "#2ca02c",
    "dynamic": "#17becf",
    "yarn": "#ff7f0e",
    "llama3": "#1f77b4",
    "longrope": "#9467bd",
    "critical_base": "#8c564b",
}


def _critical_line(fig: go.Figure, plan: ContextPlan) -> None:
    """Mark the critical dimension: pairs from d_extra/2 on never turned within L."""
    k = plan.critical_dimension / 2 - 0.5
    fig.add_vline(x=k, line_dash="dot", line_color="grey")
    fig.add_annotation(
        x=k, y=0, yref="paper", text=f" critical dimension {plan.critical_dimension}: "
        "pairs to the right never turned within L", showarrow=False, xanchor="left",
        yanchor="bottom", font={"color": "grey"},
    )  # fmt: skip


def _legend_below(fig: go.Figure) -> None:
    """Eight rules' names take two rows: under the chart, clear of the title and the marks."""
    fig.update_layout(
        height=560,
        legend={"orientation": "h", "yanchor": "top", "y": -0.16, "x": 0},
        margin={"b": 120},
    )


def ratios(plan: ContextPlan) -> go.Figure:
    """θ'/θ of each pair under each rule at N (log axis), with the bands: 1 unchanged, 1/s
    interpolated, between (or beyond) blended."""
    s = plan.factor
    fig = base_figure(
        f"What each rule does to each pair: θ'/θ at N = {plan.target:,} (s = {s:.4g})",
        "pair k (0: fastest)",
        "θ'/θ (rule over unscaled)",
    )
    pairs = np.arange(plan.spec.n_pairs)
    values = np.concatenate([np.array([1.0, 1 / s]), *(r.ratio for r in plan.rules)])
    fig.update_yaxes(**log_axis(values))
    if s > 1:
        fig.add_hrect(y0=1 / s, y1=1, fillcolor="#ff7f0e", opacity=0.08, line_width=0)
    for value, label in ((1.0, "unchanged: θ'/θ = 1"), (1 / s, f"interpolated: θ'/θ = 1/{s:.4g}")):
        fig.add_hline(y=value, line_dash="dash", line_color="black", line_width=1)
        fig.add_annotation(
            x=1, xref="paper", y=np.log10(value), text=label, showarrow=False,
            xanchor="right", yanchor="bottom",
        )  # fmt: skip
    for rule in plan.rules:
        fig.add_trace(
            go.Scatter(
                x=pairs, y=f32(rule.ratio), name=rule.rule, mode="lines+markers",
                line={"color": RULE_COLOURS[rule.rule], "width": 2}, marker={"size": 4},
                hovertext=list(rule.band), hovertemplate="k=%{x}: θ'/θ %{y:.4g} (%{hovertext})",
            )
        )  # fmt: skip
    _critical_line(fig, plan)
    _legend_below(fig)
    return fig


def angles(plan: ContextPlan) -> go.Figure:
    """Each pair's angle at N, N·θ'_k, under each rule against the largest it reached in
    training, L·θ_k (log axis); a pair that never turned within L (below 2π) and ends above
    its trained angle meets angles it was never trained on. Position interpolation (linear)
    lies on the training line: N·θ/s = L·θ."""
    fig = base_figure(
        f"Each pair's largest angle at N = {plan.target:,} against training (L = "
        f"{plan.original_context:,})",
        "pair k (0: fastest)",
        "largest angle (radians)",
    )
    pairs = np.arange(plan.spec.n_pairs)
    trained = plan.trained_angles
    at_target = (plan.target * r.inv_freq for r in plan.rules)
    values = np.concatenate([trained, np.array([2 * np.pi]), *at_target])
    fig.update_yaxes(**log_axis(values))
    fig.add_hline(y=2 * np.pi, line_dash="dash", line_color="black", line_width=1)
    fig.add_annotation(
        x=1, xref="paper", y=np.log10(2 * np.pi), text="one turn (2π)", showarrow=False,
        xanchor="right", yanchor="bottom",
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=pairs, y=f32(trained), name=f"training: L·θ_k (L = {plan.original_context:,})",
            line={"color": "black", "width": 5}, opacity=0.35,
        )
    )  # fmt: skip
    for rule in plan.rules:
        beyond = int(rule.beyond_trained.sum())
        fig.add_trace(
            go.Scatter(
                x=pairs, y=f32(plan.target * rule.inv_freq), mode="lines",
                name=f"{rule.rule} ({beyond} beyond)", line={"color": RULE_COLOURS[rule.rule]},
            )
        )  # fmt: skip
    _critical_line(fig, plan)
    _legend_below(fig)
    return fig
