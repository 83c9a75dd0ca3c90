"""Figures of posviz.offsets: similarity against the offset between positions."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz.figures.layout import base_figure, center_label, f32
from posviz.offsets import OffsetProfile, OffsetScores
from posviz.similarity import METRIC_NAMES

__all__ = ["offset_profile"]


def offset_profile(p: OffsetProfile, scores: OffsetScores | None = None) -> go.Figure:
    """Mean of s(i, i+k) over i against the offset k, with a ±1 std band and the lengths marked."""
    measure = METRIC_NAMES[p.params["metric"]]
    fig = base_figure(
        f"Mean {measure} of positions k apart, ±1 std over i ({center_label(p.params['center'])})",
        "offset k",
        f"{measure} s(i, i+k)",
    )
    # The legend in the order of the ranks below: the mean, its band, the lengths by k
    # (plotly reverses the whole legend of a figure with a filled band unless told).
    fig.update_layout(legend_traceorder="normal")
    k = p.offsets.astype(np.int32)
    fig.add_scatter(
        x=k,
        y=f32(p.mean + p.std),
        mode="lines",
        line={"width": 0},
        hoverinfo="skip",
        showlegend=False,
    )
    fig.add_scatter(
        x=k,
        y=f32(p.mean - p.std),
        mode="lines",
        line={"width": 0},
        fill="tonexty",
        fillcolor="rgba(31, 119, 180, 0.25)",
        hoverinfo="skip",
        name="±1 std over i",
    )
    fig.add_scatter(
        x=k,
        y=f32(p.mean),
        customdata=f32(p.std),
        mode="lines",
        line={"color": "rgb(31, 119, 180)"},
        name="mean over i",
        legendrank=1,
        hovertemplate="k=%{x}<br>mean=%{y:.4f}<br>std=%{customdata:.4f}<extra></extra>",
    )
    fig.add_hline(y=0, line={"color": "grey", "width": 1})
    if scores is not None:
        # Named in the legend, not beside the lines: a label beside the first line ran across
        # the second whenever the two lengths were close.
        lengths = (
            (scores.similarity_length, "m(k) < m(0)/e (similarity length)", "dot"),
            (scores.length_zero, "m(k) < 0", "dash"),
        )
        for rank, (offset, label, dash) in enumerate(lengths, start=1001):
            if offset is not None:
                fig.add_vline(
                    x=offset,
                    line={"dash": dash, "color": "firebrick"},
                    name=f"k={offset}: {label}",
                    showlegend=True,
                    legendrank=rank,  # after the band (1000), in order of k
                )
    return fig
