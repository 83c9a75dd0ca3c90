"""Plotly figures: results in, go.Figure out; nothing computed beyond what display needs.

Arrays go to the browser as float32 (plotly sends numpy arrays as typed binary; float64 would
double the message for digits no screen shows). Titles state every choice that changed the
numbers (centring, metric, trimmed rows).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from posviz.components import PrincipalComponents, SinusoidFits, SubspaceLikeness
from posviz.spectrum import THRESHOLDS, Spectrum

__all__ = [
    "centring",
    "even_positions",
    "explained_variance",
    "pc_path",
    "pc_trajectories",
    "periodogram",
    "principal_angles",
    "reconstruction_error",
    "singular_values",
    "sinusoid_fits",
]

TEMPLATE = "plotly_white"
#: Diverging scale for similarities (centred at 0 by the caller via zmid).
DIVERGING = "RdBu_r"


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
    """Singular values on a log axis, the Marchenko-Pastur noise edge, and the resolution floor."""
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
    fig.add_hline(
        y=s.noise_edge,
        line={"dash": "dash", "color": "firebrick"},
        annotation_text=f"noise edge (Marchenko-Pastur): {s.n_above_noise} above",
        annotation_position="top right",
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


def pc_trajectories(pc: PrincipalComponents, *, overlaid: bool) -> go.Figure:
    """Each position's projection on PC 1..k over position, overlaid or as small multiples."""
    n, k = pc.scores.shape
    title = f"Projection on PC 1-{k} over position ({centring(pc.centered)})"
    labels = [_pc_label(pc, c) for c in range(k)]
    if overlaid:
        fig = _figure(title, "position p", "projection (U·S)")
    else:
        fig = _small_multiples(k, labels, title)
    positions = np.arange(n, dtype=np.int32)
    for c in range(k):
        fig.add_trace(
            go.Scattergl(
                x=positions,
                y=_f32(pc.scores[:, c]),
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
    title says how many.
    """
    n = pc.scores.shape[0]
    shown = even_positions(n, max_points)
    axes = [f"PC{c} ({pc.explained_variance[c - 1]:.1%})" for c in components]
    sampled = f", {len(shown):,} of {n:,} positions evenly spaced" if len(shown) < n else ""
    title = f"Path of positions through {' / '.join(axes)} ({centring(pc.centered)}{sampled})"
    coords = [_f32(pc.scores[shown, c - 1]) for c in components]
    ends = [_f32(pc.scores[[0, n - 1], c - 1]) for c in components]
    colour = {"color": shown.astype(np.float32), "colorscale": "Viridis"}
    colorbar = {"colorbar": {"title": {"text": "position"}}}
    hover = "p=%{customdata}<br>" + "<br>".join(
        f"{a}=%{{{xyz}:.4g}}" for a, xyz in zip(axes, "xyz", strict=False)
    )
    ends_text = ["first p=0", f"last p={n - 1}"]
    if len(components) == 2:
        fig = _figure(title, axes[0], axes[1])
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
            name="first / last",
            marker={"size": 12, "color": "firebrick", "symbol": ["circle", "square"]},
        )
        return fig
    fig = _figure(title, "", "", height=600)
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
        scene={"xaxis_title": axes[0], "yaxis_title": axes[1], "zaxis_title": axes[2]}
    )
    return fig


def sinusoid_fits(pc: PrincipalComponents, fits: SinusoidFits) -> go.Figure:
    """Each PC's trajectory with its best-fitting sinusoid (dashed), R² in the panel title."""
    n, k = pc.scores.shape
    titles = [
        f"{_pc_label(pc, c)}: {fits.frequency[c]:.3f} cycles, R² = {fits.r2[c]:.4f}"
        for c in range(k)
    ]
    fig = _small_multiples(
        k, titles, f"Best sinusoid a·cos(2π f p / {n} + φ) + c per PC ({centring(pc.centered)})"
    )
    positions = np.arange(n, dtype=np.int32)
    for c in range(k):
        for values, name, line in (
            (pc.scores[:, c], "projection", {"color": "steelblue"}),
            (fits.fitted[:, c], "fitted sinusoid", {"color": "firebrick", "dash": "dash"}),
        ):
            fig.add_trace(
                go.Scattergl(
                    x=positions,
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
        name="table",
        hovertemplate="angle %{x}<br>cos² %{y:.4f}<extra></extra>",
    )
    fig.add_hline(
        y=float(likeness.shuffled.mean()),
        line={"dash": "dash", "color": "firebrick"},
        annotation_text=f"shuffled rows: mean cos² {likeness.shuffled.mean():.3f} "
        f"({len(likeness.shuffled)} shuffles, seed {likeness.seed})",
        annotation_position="top right",
    )
    return fig
