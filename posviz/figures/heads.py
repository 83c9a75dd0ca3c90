"""Figures of posviz.heads: every head at once (heads x offset, heads x pair), one head's
kernel, attention pattern and profile, a rotary head's usage, B_h(Δ), numbers beside their null."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz.depth import DepthHeads
from posviz.figures.layout import DIVERGING, PIXEL_CELLS, base_figure, escape, f32, log_axis
from posviz.heads import LABELS, PATTERN_NUMBERS, ROTARY_NUMBERS, PatternHeads, RotaryHeads

__all__ = [
    "decays",
    "depth_map",
    "head_names",
    "kernel_map",
    "numbers_vs_null",
    "offset_profile",
    "offsets_overview",
    "usage_overview",
    "usage_profile",
]

#: Cells a side of a kernel or pattern map drawn exactly; above, block means (as Similarity).
MAX_SIDE = 800
#: Offsets either side of 0 in the heads x offset overview (a previous-token head's one column
#: stays a few pixels wide).
OVERVIEW_OFFSETS = 64
#: Each band's colour on the heads x pairs map (posviz.schemes.rotary.BANDS).
BAND_COLOURS = {
    "kept": "#2b8cbe",
    "blended": "#fdae6b",
    "divided": "#e6550d",
    "rescaled": "#756bb1",
}


def head_names(result: PatternHeads | RotaryHeads) -> list[str]:
    """``h3`` or ``h3 · previous-token``: each head as its axis names it."""
    return [f"h{h}" + (f" · {label}" if label else "") for h, label in enumerate(result.labels)]


def _block_means(values: np.ndarray, side: int) -> tuple[np.ndarray, np.ndarray]:
    """`values` (n x n) as means of blocks, at most `side` a side, and each block's first row."""
    n = len(values)
    if n <= side:
        return values, np.arange(n)
    edges = np.linspace(0, n, side + 1).round().astype(int)
    rows = np.add.reduceat(values, edges[:-1], axis=0) / np.diff(edges)[:, None]
    blocks = np.add.reduceat(rows, edges[:-1], axis=1) / np.diff(edges)[None, :]
    return blocks, edges[:-1]


def offsets_overview(result: PatternHeads, *, model: str = "") -> go.Figure:
    """Every head's offset profile m_h(Δ) as one row of a heads x offset map (Δ = i − j,
    positive looking back), |Δ| up to `OVERVIEW_OFFSETS`. Each row is centred on its mean and
    scaled by its largest deviation, so a quiet head's shape shows beside a loud one's (the
    hover gives m itself)."""
    n = result.n_positions
    shown = (np.abs(result.offsets) <= OVERVIEW_OFFSETS) & np.isfinite(result.offset_profile[0])
    what = {"learned": "positional kernel", "alibi": "ALiBi bias", "relative_bias": "T5 bias"}
    fig = base_figure(
        f"{escape(model)} — each head's {what[result.kind]} by offset (mean over the pairs at Δ)",
        "offset Δ = query − key (positions; positive: keys behind)",
        "head",
    )
    profile = result.offset_profile[:, shown]
    centred = profile - profile.mean(axis=1, keepdims=True)
    largest = np.abs(centred).max(axis=1, keepdims=True)
    scaled = np.divide(centred, largest, out=np.zeros_like(centred), where=largest > 0)
    fig.add_trace(
        go.Heatmap(
            z=f32(scaled),
            x=result.offsets[shown],
            y=head_names(result),
            customdata=f32(profile),
            colorscale=DIVERGING,
            zmid=0,
            zmin=-1,
            zmax=1,
            colorbar={"title": "m_h(Δ), per head:<br>centred, ÷ largest"},
            hovertemplate="%{y}<br>Δ = %{x}<br>m = %{customdata:.4g}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    if n - 1 > OVERVIEW_OFFSETS:
        fig.add_annotation(
            text=f"|Δ| ≤ {OVERVIEW_OFFSETS} of {n - 1} shown",
            xref="paper", yref="paper", x=1, y=-0.12, showarrow=False,
        )  # fmt: skip
    return fig


def kernel_map(result: PatternHeads, head: int, *, attention: bool = False) -> go.Figure:
    """Head `head`'s kernel K_h(i, j), or the attention pattern of it alone (each row sums to
    1; blank ahead of a causal query); exact up to `MAX_SIDE` a side, block means above."""
    n = result.n_positions
    values = result.attention(head) if attention else result.kernel(head)
    if attention and result.causal:
        values = np.where(np.tril(np.ones((n, n), bool)), values, np.nan)
    shown, starts = _block_means(values, MAX_SIDE)
    exact = len(shown) == n
    name = head_names(result)[head]
    title = (
        f"{name}: attention on position alone (softmax over "
        + ("keys j ≤ i)" if result.causal else "all keys)")
        if attention
        else f"{name}: positional kernel K(i, j) = q(x_i)·k(x_j)·scale"
    )
    if not exact:
        title += f" — block means, {len(shown)} blocks a side"
    fig = base_figure(title, "key position j", "query position i")
    fig.add_trace(
        go.Heatmap(
            z=f32(shown),
            x=starts,
            y=starts,
            colorscale="Viridis" if attention else DIVERGING,
            zmid=None if attention else 0,
            zsmooth=PIXEL_CELLS if exact else False,
            colorbar={"title": "A" if attention else "K"},
            hovertemplate="i = %{y}, j = %{x}<br>%{z:.4g}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", scaleanchor="x", constrain="domain")
    fig.update_xaxes(constrain="domain")
    return fig


def offset_profile(result: PatternHeads, head: int) -> go.Figure:
    """Head `head`'s offset profile m_h(Δ) over every offset its queries see."""
    seen = np.isfinite(result.offset_profile[head])
    fig = base_figure(
        f"{head_names(result)[head]}: mean of the kernel at each offset",
        "offset Δ = query − key",
        "m_h(Δ)",
    )
    fig.add_trace(
        go.Scatter(
            x=result.offsets[seen], y=f32(result.offset_profile[head, seen]), mode="lines",
            name="m_h(Δ)",
        )
    )  # fmt: skip
    return fig


def usage_overview(result: RotaryHeads, *, model: str = "") -> go.Figure:
    """Every head's usage share u_h(k) / Σ u_h over the pairs, by wavelength (fastest left),
    with the bands of the rule at its context above the map and the fast / slow limits."""
    f = result.frequencies
    n_pairs = len(f.inv_freq)
    fig = base_figure(
        f"{escape(model)} — each head's usage of each frequency pair (share of Σ_k u_h(k))",
        "pair k (wavelength in positions; fastest left)",
        "head",
    )
    pairs = np.arange(n_pairs)
    labels = [f"{k} · λ {w:,.3g}" for k, w in enumerate(f.wavelengths)]
    fig.add_trace(
        go.Heatmap(
            z=f32(result.usage_share),
            x=pairs,
            y=head_names(result),
            colorscale="Viridis",
            colorbar={"title": "share"},
            customdata=np.broadcast_to(np.array(labels, dtype=object), result.usage.shape),
            hovertemplate="%{y}<br>pair %{customdata}<br>share %{z:.3g}<extra></extra>",
        )
    )
    for band, colour in BAND_COLOURS.items():
        inside = np.flatnonzero(f.band == band)
        if inside.size:
            fig.add_shape(
                type="rect", xref="x", yref="paper", x0=inside[0] - 0.5, x1=inside[-1] + 0.5,
                y0=1.0, y1=1.04, fillcolor=colour, line_width=0,
            )  # fmt: skip
            fig.add_annotation(
                text=band, x=(inside[0] + inside[-1]) / 2, xref="x", y=1.045, yref="paper",
                yanchor="bottom", showarrow=False, font={"size": 11},
            )  # fmt: skip
    fast_limit = result.params.get("fast_wavelength", 10.0)
    original = f.spec.pretraining_context
    for limit, words in ((fast_limit, f"λ < {fast_limit:g}"), (original, f"λ > {original}")):
        if limit and (f.wavelengths < limit).any() and (f.wavelengths > limit).any():
            x = float(np.interp(np.log(limit), np.log(f.wavelengths), pairs))
            fig.add_vline(x=x, line_dash="dot", line_color="white", annotation_text=words)
    tick = max(1, n_pairs // 8)
    fig.update_xaxes(
        tickvals=pairs[::tick], ticktext=[f"{k}<br>{f.wavelengths[k]:,.3g}" for k in pairs[::tick]]
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(margin={"t": 90})
    return fig


def usage_profile(result: RotaryHeads, head: int) -> go.Figure:
    """Head `head`'s usage u_h(k) against wavelength: on the stored weights and with the
    norms' gains folded in."""
    f = result.frequencies
    fig = base_figure(
        f"{head_names(result)[head]}: usage of each pair (kv head {result.kv_head[head]})",
        "wavelength (positions per turn)",
        "u_h(k)",
    )
    for values, name in (
        (result.usage, "stored weights"),
        (result.usage_folded, "gains folded in"),
    ):
        fig.add_trace(
            go.Scatter(x=f.wavelengths, y=f32(values[head]), mode="lines+markers", name=name)
        )
    fig.update_xaxes(**log_axis(f.wavelengths))
    return fig


def decays(result: RotaryHeads) -> go.Figure:
    """Every head's content-free positional term B_h(Δ) against distance (log axis)."""
    fig = base_figure(
        "B_h(Δ) = Σ_k u_h(k) cos(θ_k Δ) / Σ_k u_h(k): each head's usage-weighted similarity decay",
        "distance Δ (positions)",
        "B_h(Δ)",
    )
    x = np.maximum(result.distances, 1)
    for h, name in enumerate(head_names(result)):
        fig.add_trace(go.Scatter(x=x, y=f32(result.decay[h]), mode="lines", name=name))
    fig.update_xaxes(**log_axis(x))
    return fig


def numbers_vs_null(result: PatternHeads | RotaryHeads, name: str) -> go.Figure:
    """One number per head beside its null: the null's range over every head and draw shaded,
    its 95th percentile dashed, and the label threshold that number carries (if any)."""
    words = {**PATTERN_NUMBERS, **ROTARY_NUMBERS}[name]
    fig = base_figure(f"{name}: {words}", "head", name)
    heads = head_names(result)
    values = result.numbers[name]
    if name in result.null and result.null[name].size:
        null = result.null[name]
        fig.add_hrect(
            y0=float(np.nanmin(null)), y1=float(np.nanmax(null)), fillcolor="grey", opacity=0.2,
            line_width=0, annotation_text="null: min to max over heads and draws",
        )  # fmt: skip
        fig.add_hline(y=float(np.nanquantile(null, 0.95)), line_dash="dash", line_color="grey")
    for label, (number, threshold) in LABELS.items():
        if number == name:
            fig.add_hline(y=threshold, line_dash="dot", line_color="#d62728",
                          annotation_text=f"“{label}” at ≥ {threshold:g}")  # fmt: skip
    fig.add_trace(go.Scatter(x=heads, y=f32(values), mode="markers", marker={"size": 9}, name=name))
    fig.update_xaxes(type="category")
    return fig


def depth_map(found: DepthHeads, name: str, *, model: str = "") -> go.Figure:
    """Layers x heads of per-head number `name` (a row per layer read, a column per head),
    each labelled head ringed and named, each layer's null max in the hover."""
    values = found.map(name)
    labels = found.label_map()
    nulls = found.null_max(name)
    layers, heads = found.indices, np.arange(found.n_heads)
    definition = found.definitions.get(name, name)
    fig = base_figure(
        f"{escape(model)} — {escape(name)} of every head, by layer"
        f"<br><sup>{escape(definition)}; ringed: a labelled head</sup>",
        "head",
        "layer",
        showlegend=True,
    )
    fig.update_layout(margin={"t": 80, "b": 90}, legend={"yanchor": "top", "y": -0.18, "x": 0})
    null_text = np.array([[f"{v:.4g}" if np.isfinite(v) else "none"] * len(heads) for v in nulls])
    fig.add_trace(
        go.Heatmap(
            z=f32(values),
            x=heads,
            y=layers,
            customdata=np.dstack([labels, null_text]) if len(layers) else None,
            colorscale="Viridis",
            colorbar={"title": escape(name)},
            hovertemplate="layer %{y}, head %{x}<br>" + escape(name) + " = %{z:.4g}"
            "<br>%{customdata[0]}<br>the layer's null max %{customdata[1]}<extra></extra>",
        )
    )
    for label in dict.fromkeys(label for label in labels.ravel() if label):
        rows, cols = np.nonzero(labels == label)
        fig.add_trace(
            go.Scatter(
                x=cols, y=[layers[r] for r in rows], mode="markers", name=label,
                marker={"symbol": "circle-open", "size": 14, "line": {"width": 2}},
                hovertemplate="layer %{y}, head %{x}: " + label + "<extra></extra>",
            )
        )  # fmt: skip
    fig.update_yaxes(autorange="reversed", dtick=1 if len(layers) <= 48 else None)
    fig.update_xaxes(dtick=1 if len(heads) <= 48 else None)
    return fig
