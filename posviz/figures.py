"""Plotly figures: results in, go.Figure out; nothing computed beyond what display needs.

Arrays go to the browser as float32 (plotly sends numpy arrays as typed binary; float64 would
double the message for digits no screen shows). Titles state every choice that changed the
numbers (centring, metric, trimmed rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative, sample_colorscale
from plotly.subplots import make_subplots

from posviz.boundary import ChangePoints, Outliers, PositionStatistics
from posviz.collection import Collection
from posviz.compare import Comparison
from posviz.components import PrincipalComponents, SinusoidFits, SubspaceLikeness
from posviz.probes import ProbeReport
from posviz.similarity import GridSimilarity, OffsetProfile, OffsetScores, SimilarityMap
from posviz.spectrum import THRESHOLDS, Spectrum

__all__ = [
    "STEP_METRICS",
    "centring",
    "cka_map",
    "collection_colours",
    "collection_cumulative",
    "collection_offsets",
    "comparison_angles",
    "cumulative_overlay",
    "even_positions",
    "explained_variance",
    "grid_profiles",
    "grid_tiles",
    "metrics_over_step",
    "mosaic_pair",
    "offset_overlay",
    "offset_profile",
    "pc_path",
    "pc_trajectories",
    "periodogram",
    "position_profile",
    "position_statistics",
    "principal_angles",
    "probe_predictions",
    "reconstruction_error",
    "similarity_grid",
    "similarity_heatmap",
    "similarity_pair",
    "singular_values",
    "sinusoid_fits",
    "spectra_overlay",
]

TEMPLATE = "plotly_white"
#: Diverging scale for similarities (centred at 0 by the caller via zmid).
DIVERGING = "RdBu_r"
#: Similarity maps (up to 800 x 800 cells) are drawn as one image pixel per cell, scaled
#: without smoothing: the picture of plotly's default per-cell rectangles, drawn in about half
#: the browser time.
PIXEL_CELLS = "fast"


def centring(center: bool) -> str:
    """How titles name the centring choice."""
    return "rows mean-centred" if center else "uncentred"


def _f32(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def _figure(title: str, xaxis: str, yaxis: str, **layout: object) -> go.Figure:
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


# --- spectrum -------------------------------------------------------------------------------


def singular_values(s: Spectrum) -> go.Figure:
    """Singular values on a log axis, the Gavish-Donoho noise threshold, the resolution floor."""
    k = np.arange(1, len(s.singular_values) + 1)
    resolved = s.singular_values >= s.floor
    fig = _figure(
        f"Singular values ({centring(s.centered)})",
        "component k",
        "singular value σ_k",
        yaxis_type="log",
    )
    fig.add_scatter(
        x=k[resolved],
        y=_f32(s.singular_values[resolved]),
        mode="lines+markers",
        marker={"size": 3},
        name="σ_k",
        hovertemplate="k=%{x}<br>σ=%{y:.6g}<extra></extra>",
    )
    if not resolved.all():
        # Rounding noise of the Gram route: shown, but plainly marked as such.
        fig.add_scatter(
            x=k[~resolved],
            y=_f32(np.maximum(s.singular_values[~resolved], s.floor * 1e-3)),
            mode="markers",
            marker={"size": 3, "color": "lightgrey"},
            name=f"below resolution floor {s.floor:.2g}",
            hovertemplate="k=%{x}<br>σ < %{customdata:.2g} (not resolved)<extra></extra>",
            customdata=np.full(int((~resolved).sum()), s.floor, dtype=np.float32),
        )
    # A trace, not add_hline's annotation: on a log axis that annotation's y is read as
    # log10(y) and stretches the range by decades. Drawn where the count cuts: at the floor
    # when the threshold lies below it (an exactly low-rank table's median is rounding noise).
    cut = max(s.noise_threshold, s.floor)
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
    fig = _figure(
        f"Cumulative explained variance ({centring(s.centered)})",
        "number of components k",
        "share of variance",
        yaxis_range=[0, 1.02],
    )
    fig.add_scatter(
        x=k,
        y=_f32(cumulative),
        mode="lines",
        name="cumulative",
        hovertemplate="k=%{x}<br>%{y:.4f}<extra></extra>",
    )
    ks = [s.k_at(t) for t in THRESHOLDS]
    fig.add_scatter(
        x=ks,
        y=_f32(cumulative[np.array(ks) - 1]),
        mode="markers+text",
        text=[f"{t:.0%}: k={kt}" for t, kt in zip(THRESHOLDS, ks, strict=True)],
        textposition="bottom right",
        marker={"size": 8, "color": "firebrick"},
        name="k at threshold",
        hovertemplate="k=%{x}<br>%{y:.4f}<extra></extra>",
    )
    fig.update_xaxes(type="log")
    return fig


def reconstruction_error(s: Spectrum) -> go.Figure:
    """Relative Frobenius error of the best rank-k approximation, k = 0..r."""
    error = s.reconstruction_error
    fig = _figure(
        f"Relative reconstruction error of the best rank-k approximation ({centring(s.centered)})",
        "rank k",
        "‖X − X_k‖_F / ‖X‖_F",
        yaxis_type="log",
    )
    positive = error > 0
    fig.add_scatter(
        x=np.arange(len(error))[positive],
        y=_f32(error[positive]),
        mode="lines",
        name="relative error",
        hovertemplate="k=%{x}<br>%{y:.4g}<extra></extra>",
    )
    return fig


# --- components -----------------------------------------------------------------------------

#: Points drawn of a path in PC space; longer tables are shown at evenly spaced positions.
PATH_POINTS = 5000
#: Points drawn per line over position (keeps a 50k-row table's figures near 1 MB). Lines
#: this short are drawn as SVG: 3-10x faster than WebGL's set-up in Chromium (a 6-panel figure:
#: 70 ms against 500 ms); WebGL pays off only for markers by the thousand (probe predictions).
LINE_POINTS = 8192
#: Frequency columns of the periodogram heatmap; more bins are summed in equal blocks.
PERIODOGRAM_COLUMNS = 1024


def _pc_label(pc: PrincipalComponents, c: int) -> str:
    return f"PC{c + 1} ({pc.explained_variance[c]:.1%})"


def _small_multiples(k: int, titles: list[str], title: str) -> go.Figure:
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
    fig.update_xaxes(title_text="position p", row=k, col=1)
    return fig


def _sampled(shown: np.ndarray, n: int) -> str:
    """How a figure names its downsampling, or "" when every position is drawn."""
    return f"{len(shown):,} of {n:,} positions, evenly spaced" if len(shown) < n else ""


def pc_trajectories(pc: PrincipalComponents, *, overlaid: bool) -> go.Figure:
    """Each position's projection on PC 1..k over position, overlaid or as small multiples.

    Above `LINE_POINTS` positions the lines are drawn at evenly spaced positions, as the
    subtitle says.
    """
    n, k = pc.scores.shape
    shown = even_positions(n, LINE_POINTS)
    title = f"Projection on PC 1-{k} over position ({centring(pc.centered)})"
    if len(shown) < n:
        title += f"<br><sup>{_sampled(shown, n)}</sup>"
    labels = [_pc_label(pc, c) for c in range(k)]
    if overlaid:
        fig = _figure(title, "position p", "projection (U·S)")
    else:
        fig = _small_multiples(k, labels, title)
    for c in range(k):
        fig.add_trace(
            go.Scatter(
                x=shown.astype(np.int32),
                y=_f32(pc.scores[shown, c]),
                mode="lines",
                name=labels[c],
                showlegend=overlaid,
                hovertemplate=f"PC{c + 1}<br>p=%{{x}}<br>%{{y:.4g}}<extra></extra>",
            ),
            **({} if overlaid else {"row": c + 1, "col": 1}),
        )
    return fig


def even_positions(n_positions: int, max_points: int) -> np.ndarray:
    """At most `max_points` evenly spaced positions from 0 to n - 1, both ends included."""
    if n_positions <= max_points:
        return np.arange(n_positions)
    return np.unique(np.linspace(0, n_positions - 1, max_points).round().astype(np.int64))


def pc_path(
    pc: PrincipalComponents, components: tuple[int, ...], *, max_points: int = PATH_POINTS
) -> go.Figure:
    """Positions as a path through 2 or 3 chosen PCs (1-based), coloured by position.

    Above `max_points` positions only evenly spaced ones are drawn (first and last kept); the
    subtitle says how many.
    """
    n = pc.scores.shape[0]
    shown = even_positions(n, max_points)
    axes = [f"PC{c} ({pc.explained_variance[c - 1]:.1%})" for c in components]
    note = " · ".join(filter(None, [centring(pc.centered), _sampled(shown, n)]))
    title = f"Path through {' / '.join(f'PC{c}' for c in components)}<br><sup>{note}</sup>"
    coords = [_f32(pc.scores[shown, c - 1]) for c in components]
    ends = [_f32(pc.scores[[0, n - 1], c - 1]) for c in components]
    colour = {"color": shown.astype(np.float32), "colorscale": "Viridis"}
    colorbar = {"colorbar": {"title": {"text": "position"}, "thickness": 12}}
    hover = "p=%{customdata}<br>" + "<br>".join(
        f"{a}=%{{{xyz}:.4g}}" for a, xyz in zip(axes, "xyz", strict=False)
    )
    ends_text = ["first p=0", f"last p={n - 1}"]
    if len(components) == 2:
        fig = _figure(title, axes[0], axes[1], showlegend=False)
        fig.add_scatter(
            x=coords[0],
            y=coords[1],
            mode="lines",
            line={"color": "lightgrey"},
            name="path",
            hoverinfo="skip",
        )
        fig.add_scatter(
            x=coords[0],
            y=coords[1],
            mode="markers",
            marker={"size": 5, **colour, **colorbar},
            customdata=shown,
            name="positions",
            hovertemplate=hover + "<extra></extra>",
        )
        fig.add_scatter(
            x=ends[0],
            y=ends[1],
            mode="markers+text",
            text=ends_text,
            textposition="top center",
            cliponaxis=False,
            name="first / last",
            marker={"size": 12, "color": "firebrick", "symbol": ["circle", "square"]},
        )
        return fig
    fig = _figure(title, "", "", height=500, showlegend=False)
    fig.update_layout(margin={"l": 0, "r": 0, "b": 0})
    fig.add_scatter3d(
        x=coords[0],
        y=coords[1],
        z=coords[2],
        mode="lines+markers",
        line={"width": 3, **colour, **colorbar},
        marker={"size": 2, **colour},
        customdata=shown,
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


def sinusoid_fits(pc: PrincipalComponents, fits: SinusoidFits) -> go.Figure:
    """Each PC's trajectory with its best-fitting sinusoid (dashed), R² in the panel title.

    Above `LINE_POINTS` positions the lines are drawn at evenly spaced positions, as the
    subtitle says.
    """
    n, k = pc.scores.shape
    shown = even_positions(n, LINE_POINTS)
    titles = [
        f"{_pc_label(pc, c)}: {fits.frequency[c]:.3f} cycles, R² = {fits.r2[c]:.4f}"
        for c in range(k)
    ]
    title = f"Best sinusoid a·cos(2π f p / {n} + φ) + c per PC ({centring(pc.centered)})"
    if len(shown) < n:
        title += f"<br><sup>{_sampled(shown, n)}</sup>"
    fig = _small_multiples(k, titles, title)
    for c in range(k):
        for values, name, line in (
            (pc.scores[shown, c], "projection", {"color": "steelblue"}),
            (fits.fitted[shown, c], "fitted sinusoid", {"color": "firebrick", "dash": "dash"}),
        ):
            fig.add_trace(
                go.Scatter(
                    x=shown.astype(np.int32),
                    y=_f32(values),
                    mode="lines",
                    name=name,
                    line=line,
                    legendgroup=name,
                    showlegend=c == 0,
                    hovertemplate=f"PC{c + 1} {name}<br>p=%{{x}}<br>%{{y:.4g}}<extra></extra>",
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
    fig = _figure(
        f"Periodogram of each PC: share of its sum of squares per frequency{binned}",
        "frequency (cycles over the table)",
        "principal component",
        height=200 + 30 * len(power),
    )
    fig.add_heatmap(
        x=_f32(cycles),
        y=[f"PC{c + 1}" for c in range(len(power))],
        z=_f32(power),
        colorscale="Viridis",
        zmin=0,
        colorbar={"title": {"text": "share"}},
        hovertemplate="%{y}<br>%{x:g} cycles<br>share %{z:.4f}<extra></extra>",
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def principal_angles(likeness: SubspaceLikeness) -> go.Figure:
    """cos² of each principal angle to the sinusoid basis, and the shuffled-rows chance level."""
    cos2 = np.cos(likeness.angles[::-1]) ** 2
    m = likeness.n_frequencies
    fig = _figure(
        f"Principal angles between the PC span and cos/sin(π f p / n), f = 1..{m}",
        "principal angle (smallest first)",
        "cos² of the angle",
        yaxis_range=[0, 1.05],
    )
    fig.add_bar(
        x=np.arange(1, len(cos2) + 1),
        y=_f32(cos2),
        name=f"table: mean cos² {likeness.mean_cos2:.3f}",
        hovertemplate="angle %{x}<br>cos² %{y:.4f}<extra></extra>",
    )
    chance = float(likeness.shuffled.mean())
    fig.add_scatter(
        x=[0.5, len(cos2) + 0.5],
        y=[chance, chance],
        mode="lines",
        line={"dash": "dash", "color": "firebrick"},
        name=f"shuffled rows: mean cos² {chance:.3f} "
        f"({len(likeness.shuffled)} shuffles, seed {likeness.seed})",
        hoverinfo="skip",
    )
    return fig


# --- compare and resample -------------------------------------------------------------------


def spectra_overlay(spectra: dict[str, Spectrum]) -> go.Figure:
    """Each table's explained variance per component, overlaid on log axes (scale-free)."""
    center = next(iter(spectra.values())).centered
    fig = _figure(
        f"Explained variance per component ({centring(center)})",
        "component k",
        "share of variance",
        xaxis_type="log",
        yaxis_type="log",
        yaxis_exponentformat="power",
    )
    for name, s in spectra.items():
        # Values under the resolution floor are rounding noise: not drawn.
        resolved = s.singular_values >= s.floor
        fig.add_scatter(
            x=np.arange(1, len(resolved) + 1)[resolved],
            y=_f32(s.explained_variance[resolved]),
            mode="lines",
            name=name,
            hovertemplate=f"{name}<br>k=%{{x}}<br>%{{y:.4g}}<extra></extra>",
        )
    return fig


def cumulative_overlay(spectra: dict[str, Spectrum]) -> go.Figure:
    """Each table's cumulative explained variance, overlaid, with k at 90% marked."""
    center = next(iter(spectra.values())).centered
    fig = _figure(
        f"Cumulative explained variance ({centring(center)})",
        "number of components k",
        "share of variance",
        xaxis_type="log",
        yaxis_range=[0, 1.02],
    )
    for name, s in spectra.items():
        k90 = s.k_at(0.9)
        fig.add_scatter(
            x=np.arange(1, len(s.cumulative) + 1),
            y=_f32(s.cumulative),
            mode="lines",
            name=f"{name} (90% at k={k90})",
            hovertemplate=f"{name}<br>k=%{{x}}<br>%{{y:.4f}}<extra></extra>",
        )
    fig.add_hline(y=0.9, line={"dash": "dot", "color": "grey"})
    return fig


def offset_overlay(profiles: dict[str, OffsetProfile]) -> go.Figure:
    """Mean similarity s(i, i+k) against offset k for each table, overlaid."""
    first = next(iter(profiles.values()))
    fig = _figure(
        f"Mean {first.metric} similarity against offset ({centring(first.centered)})",
        "offset k (positions)",
        f"mean {first.metric} s(i, i+k)",
    )
    for name, p in profiles.items():
        fig.add_scatter(
            x=p.offsets,
            y=_f32(p.mean),
            mode="lines",
            name=name,
            hovertemplate=f"{name}<br>k=%{{x}}<br>%{{y:.4f}}<extra></extra>",
        )
    return fig


def similarity_pair(maps: dict[str, SimilarityMap], *, difference: bool) -> go.Figure:
    """Two similarity maps on one colour scale, and optionally (second - first) beside them."""
    names, pair = list(maps), list(maps.values())
    metric, block = pair[0].metric, max(m.block for m in pair)
    titles = [*names, f"{names[1]} − {names[0]}"] if difference else names
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles, horizontal_spacing=0.06)
    blocks = f"; block means of {block} x {block} positions" if block > 1 else ""
    fig.update_layout(
        template=TEMPLATE,
        title=f"{metric} similarity between positions ({centring(pair[0].centered)}){blocks}",
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
    fig.update_layout(coloraxis={**shared, "colorbar": {**colorbar, "x": 0.3}})
    for col, (name, m) in enumerate(maps.items(), start=1):
        fig.add_heatmap(
            x=_f32(m.col_positions),
            y=_f32(m.row_positions),
            z=_f32(m.values),
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
                "colorbar": {**colorbar, "x": 0.84, "len": 0.3},
            }
        )
        fig.add_heatmap(
            x=_f32(pair[0].col_positions),
            y=_f32(pair[0].row_positions),
            z=_f32(delta),
            zsmooth=PIXEL_CELLS,
            coloraxis="coloraxis2",
            name="difference",
            hovertemplate="i=%{y}, j=%{x}<br>Δs=%{z:.4f}<extra></extra>",
            row=1,
            col=3,
        )
    fig.update_yaxes(autorange="reversed", title_text="position i", col=1)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="position j")
    return fig


def comparison_angles(c: Comparison) -> go.Figure:
    """Principal angles between the top-k components over positions of two tables."""
    degrees = np.degrees(c.principal_angles)
    fig = _figure(
        f"Principal angles between the top-{len(degrees)} PC subspaces over positions "
        f"({centring(c.centered)})",
        "angle (smallest first)",
        "angle (degrees)",
        yaxis_range=[0, 92],
    )
    fig.add_bar(
        x=np.arange(1, len(degrees) + 1),
        y=_f32(degrees),
        name="principal angle",
        hovertemplate="angle %{x}<br>%{y:.3f}°<extra></extra>",
    )
    return fig


def _mosaic(g: GridSimilarity) -> tuple[np.ndarray, np.ndarray]:
    """Tiles laid out as one image, one NaN line between tiles; and the tile centres."""
    a, b, h, w = g.tiles.shape
    padded = np.full((a, b, h + 1, w + 1), np.nan)
    padded[:, :, :h, :w] = g.tiles
    image = padded.transpose(0, 2, 1, 3).reshape(a * (h + 1), b * (w + 1))[:-1, :-1]
    return image, (np.arange(a) * (h + 1) + h / 2, np.arange(b) * (w + 1) + w / 2)


def mosaic_pair(grids: dict[str, GridSimilarity]) -> go.Figure:
    """Per-patch cosine-similarity mosaics of two grids side by side on one colour scale.

    Tile (r, c) shows the cosine of patch (r, c) with every patch; ticks name the patch of
    each tile (evenly subsampled tiles on large grids).
    """
    names, pair = list(grids), list(grids.values())
    titles = [f"{name}: {g.grid[0]} x {g.grid[1]}" for name, g in grids.items()]
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.06)
    fig.update_layout(
        template=TEMPLATE,
        title=f"Cosine similarity of each patch with all patches ({centring(pair[0].centered)})",
        margin={"l": 60, "r": 20, "t": 80, "b": 50},
        height=520,
        coloraxis={"colorscale": DIVERGING, "cmin": -1, "cmax": 1},
    )
    for col, (name, g) in enumerate(zip(names, pair, strict=True), start=1):
        image, (row_ticks, col_ticks) = _mosaic(g)
        fig.add_heatmap(
            z=_f32(image),
            coloraxis="coloraxis",
            name=name,
            hovertemplate="cos=%{z:.3f}<extra></extra>",
            row=1,
            col=col,
        )
        fig.update_xaxes(
            tickvals=col_ticks, ticktext=g.tile_cols, title_text="patch column", row=1, col=col
        )
        fig.update_yaxes(
            tickvals=row_ticks,
            ticktext=g.tile_rows,
            title_text="patch row",
            autorange="reversed",
            scaleanchor=f"x{col if col > 1 else ''}",
            row=1,
            col=col,
        )
    return fig


# --- similarity -----------------------------------------------------------------------------

_MEASURES = {"cosine": "cosine similarity", "dot": "dot product", "euclidean": "Euclidean distance"}


def _cells(m: SimilarityMap) -> str:
    """How a map's cells relate to pairs of positions, for titles."""
    if m.exact:
        return "exact"
    kind = "RMS" if m.metric == "euclidean" else "means"
    return f"{kind} of {m.block} x {m.block} blocks"


def _edge_marks(fig: go.Figure, m: SimilarityMap, highlight: Sequence[int]) -> None:
    """Flagged positions as triangles on the top (columns) and left (rows) edges of a map."""
    half = m.block / 2
    top, left = m.row_positions[0] - half, m.col_positions[0] - half
    cols = [p for p in highlight if left <= p < m.col_positions[-1] + half]
    rows = [p for p in highlight if top <= p < m.row_positions[-1] + half]
    marks = (
        (cols, [top] * len(cols), cols, "triangle-down"),
        ([left] * len(rows), rows, rows, "triangle-right"),
    )
    for x, y, flagged, symbol in marks:
        if flagged:
            fig.add_scatter(
                x=_f32(x),
                y=_f32(y),
                customdata=np.asarray(flagged, dtype=np.int32),
                mode="markers",
                marker={"symbol": symbol, "size": 9, "color": "black"},
                cliponaxis=False,
                name="flagged positions",
                legendgroup="flagged",
                showlegend=symbol == "triangle-down" or not cols,
                hovertemplate="flagged position %{customdata}<extra></extra>",
            )


def similarity_heatmap(m: SimilarityMap, *, highlight: Sequence[int] = ()) -> go.Figure:
    """Position x position map, position 0 top left; `highlight` positions marked on the edges.

    Similarities use a diverging scale centred at 0; distances a sequential one.
    """
    measure = _MEASURES[m.metric]
    fig = _figure(
        f"{measure.capitalize()} between positions ({centring(m.centered)}; {_cells(m)})",
        "position j",
        "position i",
        height=600,
    )
    similarity = m.metric != "euclidean"
    where = "i=%{y}<br>j=%{x}" if m.exact else "block centred at i=%{y}, j=%{x}"
    fig.add_heatmap(
        x=_f32(m.col_positions),
        y=_f32(m.row_positions),
        z=_f32(m.values),
        zsmooth=PIXEL_CELLS,
        colorscale=DIVERGING if similarity else "Viridis",
        zmid=0 if similarity else None,
        colorbar={"title": {"text": m.metric}},
        hovertemplate=f"{where}<br>{m.metric}=%{{z:.4f}}<extra></extra>",
        name=measure,
    )
    _edge_marks(fig, m, highlight)
    fig.update_yaxes(autorange="reversed", scaleanchor="x", constrain="domain")
    fig.update_xaxes(constrain="domain")
    return fig


def offset_profile(p: OffsetProfile, scores: OffsetScores | None = None) -> go.Figure:
    """Mean of s(i, i+k) over i against the offset k, with a ±1 std band and the lengths marked."""
    measure = _MEASURES[p.metric]
    fig = _figure(
        f"Mean {measure} of positions k apart, ±1 std over i ({centring(p.centered)})",
        "offset k",
        f"{measure} s(i, i+k)",
    )
    k = p.offsets.astype(np.int32)
    fig.add_scatter(
        x=k,
        y=_f32(p.mean + p.std),
        mode="lines",
        line={"width": 0},
        hoverinfo="skip",
        showlegend=False,
    )
    fig.add_scatter(
        x=k,
        y=_f32(p.mean - p.std),
        mode="lines",
        line={"width": 0},
        fill="tonexty",
        fillcolor="rgba(31, 119, 180, 0.25)",
        hoverinfo="skip",
        name="±1 std over i",
    )
    fig.add_scatter(
        x=k,
        y=_f32(p.mean),
        customdata=_f32(p.std),
        mode="lines",
        line={"color": "rgb(31, 119, 180)"},
        name="mean over i",
        hovertemplate="k=%{x}<br>mean=%{y:.4f}<br>std=%{customdata:.4f}<extra></extra>",
    )
    fig.add_hline(y=0, line={"color": "grey", "width": 1})
    if scores is not None:
        lengths = (
            (scores.length_half, "m(k) < ½ m(0)", "top right"),
            (scores.length_zero, "m(k) < 0", "bottom right"),
        )
        for offset, label, where in lengths:
            if offset is not None:
                fig.add_vline(
                    x=offset,
                    line={"dash": "dot", "color": "firebrick"},
                    annotation_text=f"k={offset}: {label}",
                    annotation_position=where,
                )
    return fig


def position_profile(m: SimilarityMap, *, position: int, neighbours: Sequence[int]) -> go.Figure:
    """One position's row of the map (`m` holds that single row, exact), neighbours marked."""
    measure = _MEASURES[m.metric]
    row = m.values[0]
    fig = _figure(
        f"{measure.capitalize()} of position {position} to every position ({centring(m.centered)})",
        "position j",
        f"s({position}, j)",
    )
    positions = m.col_positions.astype(np.int32)
    fig.add_scatter(
        x=positions,
        y=_f32(row),
        mode="lines",
        name=f"s({position}, j)",
        hovertemplate="j=%{x}<br>%{y:.4f}<extra></extra>",
    )
    marked = np.asarray(neighbours, dtype=np.int32)
    fig.add_scatter(
        x=marked,
        y=_f32(row[marked]),
        mode="markers",
        marker={"size": 9, "color": "darkorange"},
        name="neighbours",
        hovertemplate="neighbour j=%{x}<br>%{y:.4f}<extra></extra>",
    )
    fig.add_scatter(
        x=[position],
        y=_f32(row[[position]]),
        mode="markers",
        marker={"size": 12, "symbol": "star", "color": "firebrick"},
        name=f"position {position}",
        hovertemplate="j=%{x}<br>%{y:.4f}<extra></extra>",
    )
    return fig


def grid_tiles(g: GridSimilarity) -> go.Figure:
    """ViT Fig. 7 mosaic: tile (r, c) is the H x W image of patch (r, c)'s cosine to all patches."""
    height, width = g.grid
    n_rows, n_cols = len(g.tile_rows), len(g.tile_cols)
    mosaic, (row_ticks, col_ticks) = _mosaic(g)
    title = f"Cosine of each patch to all patches, {height} x {width} grid ({centring(g.centered)})"
    if g.subsampled:
        title += f"; {n_rows} x {n_cols} patches shown"
    # Tall: up to 24 x 24 tiles must stay legible.
    fig = _figure(title, "patch column of the tile", "patch row of the tile", height=800)
    fig.add_heatmap(
        z=_f32(mosaic),
        colorscale=DIVERGING,
        zmin=-1,
        zmax=1,
        colorbar={"title": {"text": "cosine"}},
        hovertemplate="cosine=%{z:.4f}<extra></extra>",
        hoverongaps=False,
    )
    fig.update_xaxes(
        tickvals=col_ticks,
        ticktext=[str(c) for c in g.tile_cols],
        showgrid=False,
        constrain="domain",
    )
    fig.update_yaxes(
        tickvals=row_ticks,
        ticktext=[str(r) for r in g.tile_rows],
        showgrid=False,
        autorange="reversed",
        scaleanchor="x",
        constrain="domain",
    )
    return fig


def grid_profiles(g: GridSimilarity) -> go.Figure:
    """Mean cosine of patches a given number of rows (same column) or columns (same row) apart."""
    fig = _figure(
        f"Mean cosine similarity vs patch offset on the {g.grid[0]} x {g.grid[1]} grid "
        f"({centring(g.centered)})",
        "offset (patches)",
        "mean cosine similarity",
    )
    for profile, name in (
        (g.row_profile, "row offset, same column"),
        (g.col_profile, "column offset, same row"),
    ):
        fig.add_scatter(
            x=np.arange(len(profile), dtype=np.int32),
            y=_f32(profile),
            mode="lines+markers",
            name=name,
            hovertemplate="offset %{x}<br>%{y:.4f}<extra></extra>",
        )
    return fig


# --- boundaries & probes --------------------------------------------------------------------

#: Curves of the per-position figure: panel title and the statistics drawn in it.
_BOUNDARY_PANELS = (
    ("row norm ‖e_p‖", ("norm",)),
    ("cosine to neighbours", ("cos_prev", "cos_next")),
    ("distance to the mean row", ("dist_to_mean",)),
    ("residual norm outside the top-k PCs", ("residual_norm",)),
)
#: The flagging statistic whose flags a panel marks.
_PANEL_FLAGS = {
    "norm": "norm",
    "cos_prev": "neighbour_cos",
    "dist_to_mean": "dist_to_mean",
    "residual_norm": "residual_norm",
}


def position_statistics(
    stats: PositionStatistics, flags: Outliers, changes: ChangePoints | None = None
) -> go.Figure:
    """Per-position curves with flagged positions (red) and change points (dashed lines).

    Above `LINE_POINTS` positions the curves are drawn at evenly spaced positions (as the
    subtitle says); flagged positions and change points are always drawn at their exact place.
    """
    panels = [p for p in _BOUNDARY_PANELS if getattr(stats, p[1][0]) is not None]
    n = len(stats.norm)
    shown = even_positions(n, LINE_POINTS)
    title = (
        f"Per-position statistics · flagged: |robust z| > {flags.threshold:g} in a window of "
        f"±{flags.window} positions"
    )
    if stats.top_k:
        title += f" · residual outside the top {stats.top_k} PCs (rows mean-centred)"
    if len(shown) < n:
        title += f"<br><sup>{_sampled(shown, n)}</sup>"
    fig = _small_multiples(len(panels), [p[0] for p in panels], title)
    for row, (_, names) in enumerate(panels, start=1):
        for name in names:
            fig.add_trace(
                go.Scatter(
                    x=shown.astype(np.int32),
                    y=_f32(getattr(stats, name)[shown]),
                    mode="lines",
                    name=name,
                    showlegend=len(names) > 1,
                    hovertemplate=f"{name}<br>p=%{{x}}<br>%{{y:.6g}}<extra></extra>",
                ),
                row=row,
                col=1,
            )
        statistic = _PANEL_FLAGS[names[0]]
        i = flags.statistics.index(statistic)
        where = np.flatnonzero(flags.flagged[i])
        fig.add_trace(
            go.Scatter(
                x=where.astype(np.int32),
                y=_f32(flags.values[i, where]),
                customdata=_f32(flags.z[i, where]),
                mode="markers",
                marker={"color": "firebrick", "size": 9, "symbol": "circle-open", "line_width": 2},
                name="flagged",
                legendgroup="flagged",
                showlegend=row == 1,
                hovertemplate=f"flagged on {statistic}<br>p=%{{x}}<br>%{{y:.6g}}"
                "<br>z=%{customdata:.1f}<extra></extra>",
            ),
            row=row,
            col=1,
        )
    if changes is not None:
        for p in changes.positions.tolist():
            fig.add_vline(x=p - 0.5, line={"dash": "dash", "color": "grey"}, row="all", col=1)
    return fig


def probe_predictions(report: ProbeReport) -> go.Figure:
    """Out-of-fold predicted vs true position for the table and its two controls."""
    subsample = (
        f"{report.n_rows:,} of {report.n_positions:,} rows, seeded subsample"
        if report.subsampled
        else f"all {report.n_rows:,} rows"
    )
    last = report.n_positions - 1
    # Probes without position information can predict far outside the table (an unregularised
    # fit with d close to the training rows); the axis keeps the informative range readable.
    shown = (-0.25 * last, 1.25 * last)
    outside = sum(
        int(np.count_nonzero((p.predictions < shown[0]) | (p.predictions > shown[1])))
        for p in report.absolute.values()
    )
    title = (
        f"Absolute position probe ({report.protocol}): out-of-fold predictions of the first "
        f"of {report.repeats} {report.folds}-fold splits (seed {report.seed}, {subsample})"
    )
    if outside:
        title += f"<br><sup>{outside:,} predictions outside −25%..125% of the range not shown</sup>"
    fig = _figure(title, "true position p", "predicted position", height=450, yaxis_range=shown)
    fig.update_layout(margin_t=100)  # room for the subtitle above the legend
    for name, probe in report.absolute.items():
        fig.add_scattergl(
            x=probe.positions.astype(np.int32),
            y=_f32(probe.predictions),
            mode="markers",
            marker={"size": 3, "opacity": 0.6},
            name=f"{name} (MAE {probe.mae:.2f}, skill {probe.skill:.2f})",
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


# --- collection -----------------------------------------------------------------------------

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
    return f"colour: {c.loaded[0].step.unit} order, dark = early" if c.ordered else "one per model"


def _recoloured(fig: go.Figure, c: Collection, what: str) -> go.Figure:
    """An overlay figure of the loaded tables, its lines coloured per :func:`collection_colours`."""
    for trace, colour in zip(fig.data, collection_colours(c), strict=True):
        trace.line.color = colour
    fig.update_layout(
        title=f"{fig.layout.title.text}<br><sup>{what}; {_colour_note(c)}</sup>",
        margin_t=100,
        legend={"orientation": "v", "y": 1, "x": 1.02, "yanchor": "top"},
    )
    return fig


def collection_cumulative(c: Collection) -> go.Figure:
    """Every table's cumulative explained variance, overlaid."""
    spectra = {m.label: s.spectrum for m, s in zip(c.members, c.summaries, strict=True) if s}
    return _recoloured(cumulative_overlay(spectra), c, f"{len(spectra)} tables")


def collection_offsets(c: Collection) -> go.Figure:
    """Every table's mean cosine similarity against offset, overlaid, with the 1/e level."""
    profiles = {m.label: s.profile for m, s in zip(c.members, c.summaries, strict=True) if s}
    fig = _recoloured(offset_overlay(profiles), c, "similarity length: first k below 1/e")
    fig.add_hline(y=1 / np.e, line={"dash": "dot", "color": "grey"})
    return fig


def metrics_over_step(c: Collection) -> go.Figure:
    """One panel per metric against the training step; the sinusoid panel shows its null."""
    rows = [r for r in c.records() if r["error"] is None]
    steps = np.array([r["step"] for r in rows], dtype=np.float64)
    unit = c.loaded[0].step.unit
    cols = 4
    n_rows = -(-len(STEP_METRICS) // cols)
    fig = make_subplots(
        rows=n_rows,
        cols=cols,
        subplot_titles=[m.replace("_", " ") for m in STEP_METRICS],
        vertical_spacing=0.32 / n_rows,
        horizontal_spacing=0.06,
    )
    fig.update_layout(
        template=TEMPLATE,
        title=f"Metrics over training ({centring(c.center)}), one panel each",
        height=120 + 210 * n_rows,
        margin={"l": 50, "r": 20, "t": 90, "b": 50},
        showlegend=False,
    )
    for i, metric in enumerate(STEP_METRICS):
        row, col = divmod(i, cols)
        values = np.array([np.nan if r[metric] is None else r[metric] for r in rows], float)
        fig.add_scatter(
            x=steps,
            y=_f32(values),
            mode="lines+markers",
            marker={"size": 5},
            line={"color": "rgb(31, 119, 180)"},
            text=[r["label"] for r in rows],
            name=metric,
            hovertemplate=f"%{{text}}<br>{unit} %{{x:,}}<br>{metric}=%{{y:.4g}}<extra></extra>",
            row=row + 1,
            col=col + 1,
        )
        if metric == "sinusoid_mean_cos2":
            fig.add_scatter(
                x=steps,
                y=_f32([r["shuffled_mean_cos2"] for r in rows]),
                mode="lines",
                line={"dash": "dot", "color": "grey"},
                name="shuffled rows (chance)",
                hovertemplate="shuffled rows: %{y:.4g}<extra></extra>",
                row=row + 1,
                col=col + 1,
            )
    log = steps.min() > 0 and steps.max() >= 100 * steps.min()
    fig.update_xaxes(type="log" if log else "linear")
    for col in range(1, cols + 1):
        fig.update_xaxes(title_text=unit, row=n_rows, col=col)
    return fig


def similarity_grid(c: Collection, *, cols: int = 4) -> go.Figure:
    """Every table's cosine-similarity overview, one small panel each, on one colour scale."""
    shown = [(m, s.overview) for m, s in zip(c.members, c.summaries, strict=True) if s]
    n_rows = -(-len(shown) // cols)
    fig = make_subplots(
        rows=n_rows,
        cols=cols,
        subplot_titles=[m.label for m, _ in shown],
        vertical_spacing=0.12 / n_rows,
        horizontal_spacing=0.04,
    )
    largest = max(float(np.abs(o.values).max()) for _, o in shown)
    fig.update_layout(
        template=TEMPLATE,
        title=f"Cosine similarity between positions ({centring(c.center)}; block means, at most "
        f"{max(len(o.values) for _, o in shown)} cells a side; one colour scale)",
        height=80 + 260 * n_rows,
        margin={"l": 40, "r": 20, "t": 80, "b": 30},
        coloraxis={"colorscale": DIVERGING, "cmin": -largest, "cmax": largest},
        coloraxis_colorbar={"title": {"text": "cosine"}},
    )
    for i, (m, o) in enumerate(shown):
        row, col = divmod(i, cols)
        fig.add_heatmap(
            x=_f32(o.col_positions),
            y=_f32(o.row_positions),
            z=_f32(o.values),
            coloraxis="coloraxis",
            name=m.label,
            hovertemplate=f"{m.label}<br>i≈%{{y}}, j≈%{{x}}<br>%{{z:.3f}}<extra></extra>",
            row=row + 1,
            col=col + 1,
        )
    fig.update_yaxes(autorange="reversed")
    return fig


def cka_map(c: Collection) -> go.Figure:
    """The tables placed so that distances show sqrt(2 - 2 CKA): near = similar tables."""
    fig = _figure(
        f"Tables by linear CKA on their first {c.common_positions:,} positions "
        f"({centring(c.center)})<br><sup>classical MDS of sqrt(2 − 2·CKA); the 2-D map shows "
        f"{c.map_share:.0%} of the distances' variance; {_colour_note(c)}</sup>",
        "MDS axis 1",
        "MDS axis 2",
        height=520,
    )
    fig.update_layout(margin_t=100, showlegend=False)
    if c.ordered:  # under the markers
        fig.add_scatter(
            x=_f32(c.coordinates[:, 0]),
            y=_f32(c.coordinates[:, 1]),
            mode="lines",
            line={"color": "lightgrey", "width": 1},
            hoverinfo="skip",
            name="training path",
        )
    labels = [m.label for m in c.loaded]
    fig.add_scatter(
        x=_f32(c.coordinates[:, 0]),
        y=_f32(c.coordinates[:, 1]),
        mode="markers+text",
        text=labels,
        textposition="top center",
        marker={"size": 12, "color": collection_colours(c), "line": {"width": 1, "color": "black"}},
        hovertemplate="%{text}<extra></extra>",
        name="tables",
    )
    fig.update_yaxes(scaleanchor="x")
    return fig
