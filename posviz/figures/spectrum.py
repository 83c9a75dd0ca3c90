"""Figures of posviz.spectrum: singular values, explained variance, reconstruction error."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz.figures.layout import MARKER_POINTS, base_figure, center_label, f32, log_axis
from posviz.spectrum import THRESHOLDS, Spectrum

__all__ = ["explained_variance", "reconstruction_error", "singular_values"]


def singular_values(s: Spectrum) -> go.Figure:
    """Singular values on a log axis, the Gavish-Donoho noise threshold, the resolution floor."""
    k = np.arange(1, len(s.singular_values) + 1)
    resolved = s.singular_values >= s.floor
    fig = base_figure(
        f"Singular values ({center_label(s.params['center'])})",
        "component k",
        "singular value σ<sub>k</sub>",
    )
    fig.add_scatter(
        x=k[resolved],
        y=f32(s.singular_values[resolved]),
        mode="lines+markers" if resolved.sum() <= MARKER_POINTS else "lines",
        marker={"size": 3},
        name="σ<sub>k</sub>",
        hovertemplate="k=%{x}<br>σ=%{y:.6g}<extra></extra>",
    )
    # Rounding noise of the Gram route: shown, but plainly marked as such.
    unresolved = np.maximum(s.singular_values[~resolved], s.floor * 1e-3)
    if unresolved.size:
        fig.add_scatter(
            x=k[~resolved],
            y=f32(unresolved),
            mode="markers",
            marker={"size": 3, "color": "lightgrey"},
            name=f"below resolution floor {s.floor:.2g}",
            hovertemplate="k=%{x}<br>σ < %{customdata:.2g} (not resolved)<extra></extra>",
            customdata=np.full(int((~resolved).sum()), s.floor, dtype=np.float32),
        )
    fig.update_yaxes(**log_axis(np.r_[s.singular_values[resolved], unresolved, s.noise_cut]))
    # A trace, not add_hline's annotation: on a log axis that annotation's y is read as
    # log10(y) and stretches the range by decades. Drawn where the count cuts: at the floor
    # when the threshold lies below it (an exactly low-rank table's median is rounding noise).
    cut = s.noise_cut
    fig.add_scatter(
        x=[1, len(k)],
        y=np.full(2, cut, dtype=np.float32),
        mode="lines",
        line={"dash": "dash", "color": "firebrick"},
        name=f"noise threshold (Gavish & Donoho): {s.n_above_noise} above",
        hovertemplate=f"ω(β)·median σ = {s.noise_threshold:.4g}"
        + (f" (below the floor {s.floor:.2g})" if cut > s.noise_threshold else "")
        + "<extra></extra>",
    )
    return fig


def explained_variance(s: Spectrum) -> go.Figure:
    """Cumulative explained variance with k at each threshold marked."""
    cumulative = s.cumulative
    k = np.arange(1, len(cumulative) + 1)
    fig = base_figure(
        f"Cumulative explained variance ({center_label(s.params['center'])})",
        "number of components k",
        "share of variance",
        yaxis_range=[0, 1.02],
    )
    fig.add_scatter(
        x=k,
        y=f32(cumulative),
        mode="lines",
        name="cumulative",
        hovertemplate="k=%{x}<br>%{y:.4f}<extra></extra>",
    )
    ks = [s.k_at(t) for t in THRESHOLDS]
    fig.add_scatter(
        x=ks,
        y=f32(cumulative[np.array(ks) - 1]),
        mode="markers+text",
        text=[f"{t:.0%}: k={kt}" for t, kt in zip(THRESHOLDS, ks, strict=True)],
        textposition="bottom right",
        marker={"size": 8, "color": "firebrick"},
        name="k at threshold",
        hovertemplate="k=%{x}<br>%{y:.4f}<extra></extra>",
    )
    fig.update_xaxes(**log_axis(k))
    return fig


def reconstruction_error(s: Spectrum) -> go.Figure:
    """Relative Frobenius error of the best rank-k approximation, k = 0..r."""
    error = s.reconstruction_error
    fig = base_figure(
        "Relative reconstruction error of the best rank-k approximation "
        f"({center_label(s.params['center'])})",
        "rank k",
        "‖X − X<sub>k</sub>‖<sub>F</sub> / ‖X‖<sub>F</sub>",
    )
    positive = error > 0
    fig.add_scatter(
        x=np.arange(len(error))[positive],
        y=f32(error[positive]),
        mode="lines",
        name="relative error",
        hovertemplate="k=%{x}<br>%{y:.4g}<extra></extra>",
    )
    fig.update_yaxes(**log_axis(error[positive]))
    return fig
