"""Figures of posviz.compare: two tables overlaid, side by side, and their principal angles."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from posviz.compare import Comparison
from posviz.figures.layout import (
    DIVERGING,
    PIXEL_CELLS,
    TEMPLATE,
    base_figure,
    center_label,
    escape,
    f32,
    log_axis,
)
from posviz.offsets import OffsetProfile
from posviz.rows import RowLabels
from posviz.similarity import SimilarityMap
from posviz.spectrum import Spectrum

__all__ = [
    "comparison_angles",
    "cumulative_overlay",
    "offset_overlay",
    "similarity_pair",
    "spectra_overlay",
]


def spectra_overlay(spectra: dict[str, Spectrum]) -> go.Figure:
    """Each table's explained variance per component, overlaid on log axes (scale-free).

    Drawn down to float32 resolution: a share σ_k²/Σσ² squares the Spectrum page's span of
    singular values (down to 10⁻²¹ for a float64 sinusoid), and below σ_1·√min(n, d)·ε₃₂ a
    value cannot be told from the rounding of a float32 checkpoint, which most tables are.
    """
    center = next(iter(spectra.values())).params["center"]
    fig = base_figure(
        f"Explained variance per component ({center_label(center)}; "
        "drawn down to float32 resolution)",
        "component k",
        "share of variance",
    )
    eps = np.finfo(np.float32).eps
    ks, shares = [], []
    for name, s in spectra.items():
        name = escape(name)
        floor = max(s.floor, s.singular_values[0] * np.sqrt(min(s.shape)) * eps)
        shown = s.singular_values >= floor
        k = np.arange(1, len(shown) + 1)[shown]
        ks.append(k)
        shares.append(s.explained_variance[shown])
        fig.add_scatter(
            x=k,
            y=f32(shares[-1]),
            mode="lines",
            name=name,
            hovertemplate=f"{name}<br>k=%{{x}}<br>%{{y:.4g}}<extra></extra>",
        )
    fig.update_xaxes(**log_axis(np.concatenate(ks)))
    fig.update_yaxes(**log_axis(np.concatenate(shares)))
    return fig


def cumulative_overlay(spectra: dict[str, Spectrum]) -> go.Figure:
    """Each table's cumulative explained variance, overlaid, with k at 90% marked."""
    center = next(iter(spectra.values())).params["center"]
    fig = base_figure(
        f"Cumulative explained variance ({center_label(center)})",
        "number of components k",
        "share of variance",
        yaxis_range=[0, 1.02],
    )
    fig.update_xaxes(**log_axis(np.arange(1, max(len(s.cumulative) for s in spectra.values()) + 1)))
    for name, s in spectra.items():
        name, k90 = escape(name), s.k_at(0.9)
        fig.add_scatter(
            x=np.arange(1, len(s.cumulative) + 1),
            y=f32(s.cumulative),
            mode="lines",
            name=f"{name} (90% at k={k90})",
            hovertemplate=f"{name}<br>k=%{{x}}<br>%{{y:.4f}}<extra></extra>",
        )
    fig.add_hline(y=0.9, line={"dash": "dot", "color": "grey"})
    return fig


def offset_overlay(profiles: dict[str, OffsetProfile]) -> go.Figure:
    """Mean similarity s(i, i+k) against offset k for each table, overlaid."""
    first = next(iter(profiles.values()))
    metric, center = first.params["metric"], center_label(first.params["center"])
    fig = base_figure(
        f"Mean {metric} similarity against offset ({center})",
        "offset k (positions)",
        f"mean {metric} s(i, i+k)",
    )
    for name, p in profiles.items():
        name = escape(name)
        fig.add_scatter(
            x=p.offsets,
            y=f32(p.mean),
            mode="lines",
            name=name,
            hovertemplate=f"{name}<br>k=%{{x}}<br>%{{y:.4f}}<extra></extra>",
        )
    return fig


def similarity_pair(
    maps: dict[str, SimilarityMap],
    *,
    difference: bool,
    labels: tuple[RowLabels, RowLabels] | None = None,
) -> go.Figure:
    """Two similarity maps on one colour scale, and optionally (second - first) beside them.

    Row p of each is drawn at ``labels[i].positions(p)``, its table's position (the difference
    at the first table's); a DeBERTa table's ticks and hovers name each bucket's offsets.
    """
    labels = labels or (RowLabels(), RowLabels())
    names, pair = [escape(name) for name in maps], list(maps.values())
    metric, block = pair[0].params["metric"], max(m.block for m in pair)
    center = center_label(pair[0].params["center"])
    titles = [*names, f"{names[1]} − {names[0]}"] if difference else names
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles, horizontal_spacing=0.06)
    blocks = f"; block means of {block} x {block} positions" if block > 1 else ""
    fig.update_layout(
        template=TEMPLATE,
        title=f"{metric} similarity between positions ({center}){blocks}",
        margin={"l": 60, "r": 20, "t": 80, "b": 110},
        height=500,
    )
    low = min(float(m.values.min()) for m in pair)
    high = max(float(m.values.max()) for m in pair)
    if metric == "euclidean":
        shared = {"colorscale": "Viridis", "cmin": low, "cmax": high}
    else:
        reach = max(abs(low), abs(high))
        shared = {"colorscale": DIVERGING, "cmin": -reach, "cmax": reach}
    colorbar = {"orientation": "h", "y": -0.22, "yanchor": "top", "len": 0.45, "thickness": 12}
    title = {"side": "top", "text": f"{metric} similarity"}
    fig.update_layout(coloraxis={**shared, "colorbar": {**colorbar, "x": 0.3, "title": title}})
    for col, (name, m, rows) in enumerate(zip(names, pair, labels, strict=True), start=1):
        fig.add_heatmap(
            x=f32(rows.positions(m.col_positions)),
            y=f32(rows.positions(m.row_positions)),
            z=f32(m.values),
            zsmooth=PIXEL_CELLS,
            coloraxis="coloraxis",
            name=name,
            hovertemplate=f"{name}<br>i=%{{y}}, j=%{{x}}<br>s=%{{z:.4f}}<extra></extra>",
            row=1,
            col=col,
        )
    if difference:
        delta = pair[1].values - pair[0].values
        reach = float(np.abs(delta).max()) or 1.0
        fig.update_layout(
            coloraxis2={
                "colorscale": DIVERGING,
                "cmin": -reach,
                "cmax": reach,
                "colorbar": {
                    **colorbar,
                    "x": 0.84,
                    "len": 0.3,
                    "title": {"side": "top", "text": f"difference ({names[1]} − {names[0]})"},
                },
            }
        )
        fig.add_heatmap(
            x=f32(labels[0].positions(pair[0].col_positions)),
            y=f32(labels[0].positions(pair[0].row_positions)),
            z=f32(delta),
            zsmooth=PIXEL_CELLS,
            coloraxis="coloraxis2",
            name="difference",
            hovertemplate="i=%{y}, j=%{x}<br>Δs=%{z:.4f}<extra></extra>",
            row=1,
            col=3,
        )
    fig.update_yaxes(autorange="reversed", title_text=labels[0].cell_title("i"), col=1)
    fig.update_yaxes(autorange="reversed")
    # Each map on its table's rows; the difference on the first table's.
    for col, rows in enumerate([*labels, labels[0]][: len(titles)], start=1):
        fig.update_xaxes(title_text=rows.cell_title("j"), col=col)
        if rows.bucketed:
            fig.update_xaxes(labelalias=rows.aliases(), col=col)
            fig.update_yaxes(labelalias=rows.aliases(), col=col)
    return fig


def comparison_angles(c: Comparison) -> go.Figure:
    """Principal angles between the top-k components over positions of two tables."""
    degrees = c.degrees
    fig = base_figure(
        f"Principal angles between the top-{len(degrees)} PC subspaces over positions "
        f"({center_label(c.params['center'])})",
        "angle (smallest first)",
        "angle (degrees)",
        yaxis_range=[0, 92],
    )
    fig.add_bar(
        x=np.arange(1, len(degrees) + 1),
        y=f32(degrees),
        name="principal angle",
        hovertemplate="angle %{x}<br>%{y:.3f}°<extra></extra>",
    )
    return fig
