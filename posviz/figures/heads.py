"""Figures of posviz.heads: every head at once (heads x offset, heads x pair), one head's
kernel, attention pattern and profile, a rotary head's usage, B_h(Δ), numbers beside their null;
and of posviz.depth: a number over layers x heads, the labels over depth beside their null."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz.depth import DepthHeads
from posviz.figures.layout import (
    DIVERGING,
    PIXEL_CELLS,
    base_figure,
    escape,
    f32,
    log_axis,
    small_multiples,
)
from posviz.heads import LABELS, PATTERN_NUMBERS, ROTARY_NUMBERS, PatternHeads, RotaryHeads

__all__ = [
    "decays",
    "depth_labels",
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


#: Numbers that are shares of a whole: drawn on one 0 … 1 scale at every depth and model.
SHARES = frozenset(
    {"attention_self", "attention_previous", "attention_first", "attention_local",
     "toeplitz_share", "fast_share", "slow_share", "nope_share"}
)  # fmt: skip
#: Numbers in positions spanning decades: coloured by their logarithm.
LOG_NUMBERS = frozenset({"weighted_wavelength", "entropy_span", "mean_distance"})
#: How the depth map marks each label's heads.
LABEL_SYMBOLS = {
    "previous-token": "triangle-left",
    "self": "circle",
    "first position": "square",
    "local": "diamond",
    "high-frequency": "star",
    "low-frequency": "x",
}


def depth_map(result: DepthHeads, name: str, *, model: str = "") -> go.Figure:
    """Per-head number `name` over layers x heads (one row per layer read), each labelled
    head marked by its label's symbol; the hover gives the number beside its layer's null
    (the largest draw over heads). Shares are drawn on 0 … 1, numbers in positions by their
    logarithm."""
    words = {**PATTERN_NUMBERS, **ROTARY_NUMBERS}[name]
    values = result.map(name)
    layers = [f"layer {i}" for i in result.indices]
    heads = [f"h{h}" for h in range(result.n_heads)]
    null = result.null_max(name)
    fig = base_figure(f"{escape(model)} — {name} by layer and head", "head", "layer")
    fig.add_annotation(
        text=escape(words.replace("`", "")), xref="paper", yref="paper", x=0, y=1.0,
        yanchor="bottom", showarrow=False, font={"size": 12, "color": "#555"},
    )  # fmt: skip
    logged = name in LOG_NUMBERS and bool((values > 0).any())
    shown = np.log10(np.where(values > 0, values, np.nan)) if logged else values
    scale: dict[str, object] = {"colorbar": {"title": name.replace("_", " ")}}
    if name in SHARES:
        scale |= {"zmin": 0.0, "zmax": 1.0}
    elif logged:
        finite = shown[np.isfinite(shown)]
        decades = np.arange(np.floor(finite.min()), np.ceil(finite.max()) + 1)
        ticks = np.log10(np.outer(10**decades, [1, 2, 5]).ravel())
        ticks = ticks[(ticks >= finite.min()) & (ticks <= finite.max())]
        scale["colorbar"] = {
            "title": f"{name.replace('_', ' ')}<br>(log scale)",
            "tickvals": ticks.tolist(),
            "ticktext": [f"{10**t:,.3g}" for t in ticks],
        }
    nulls = np.broadcast_to(null[:, None], values.shape)
    fig.add_trace(
        go.Heatmap(
            z=f32(shown),
            x=heads,
            y=layers,
            customdata=np.stack([f32(values), f32(nulls)], axis=-1),
            colorscale="Viridis",
            xgap=1,
            ygap=1,
            hovertemplate="%{y}, %{x}<br>" + name + " = %{customdata[0]:.4g}<br>"
            "its layer's null max %{customdata[1]:.4g}<extra></extra>",
            **scale,
        )
    )
    labels = result.label_map()
    for label, symbol in LABEL_SYMBOLS.items():
        rows, cols = np.nonzero(labels == label)
        if rows.size:
            fig.add_trace(
                go.Scatter(
                    x=[heads[c] for c in cols], y=[layers[r] for r in rows], mode="markers",
                    name=label, showlegend=True,
                    marker={"symbol": symbol, "size": 11, "color": "white",
                            "line": {"color": "black", "width": 1.5}},
                    hovertemplate="%{y}, %{x}: " + label + "<extra></extra>",
                )
            )  # fmt: skip
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category")
    fig.update_layout(
        height=max(320, 140 + 28 * len(layers)),
        margin={"t": 90},
        legend={"title": "labelled:", "orientation": "h", "y": -0.15, "yanchor": "top"},
    )
    return fig


def depth_labels(result: DepthHeads) -> go.Figure:
    """Each label over depth beside its null: per layer, the largest number of any head (the
    label's number), the layer's null (the largest draw of that number with query and key rows
    permuted across its heads) and the label's threshold; the heads labelled, counted on the
    markers. A head is labelled where its number is above both (with the first label that
    holds: a previous-token head is not also called local)."""
    numbers = result.definitions
    shown = [(label, n, t) for label, (n, t) in LABELS.items() if n in numbers]
    fig = small_multiples(
        len(shown),
        [f"“{label}”: {n} ≥ {t:g} and above every null draw" for label, n, t in shown],
        "The labels over depth, each beside its null",
        xaxis="layer",
    )
    x = result.indices
    counts = result.label_map()
    for row, (label, name, threshold) in enumerate(shown, start=1):
        values = result.map(name)
        largest = np.nanmax(np.where(np.isfinite(values), values, -np.inf), axis=1)
        count = (counts == label).sum(axis=1)
        first = row == 1
        fig.add_trace(
            go.Scatter(
                x=x, y=f32(largest), mode="lines+markers+text", name="largest head (red: "
                "a layer with heads so labelled, counted)", legendgroup="largest",
                text=[f"{c}" if c else "" for c in count], textposition="bottom right",
                textfont={"color": "#d62728"}, showlegend=first, line={"color": "#1f77b4"},
                marker={"color": np.where(count > 0, "#d62728", "#1f77b4"),
                        "size": np.where(count > 0, 11, 6)},
                customdata=count,
                hovertemplate="layer %{x}: largest %{y:.4g}, %{customdata} labelled"
                "<extra></extra>",
            ),
            row=row, col=1,
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=x, y=f32(result.null_max(name)), mode="lines", name="null: largest draw",
                legendgroup="null", showlegend=first, line={"color": "grey", "dash": "dash"},
                hovertemplate="layer %{x}: null max %{y:.4g}<extra></extra>",
            ),
            row=row, col=1,
        )  # fmt: skip
        fig.add_hline(y=threshold, line_dash="dot", line_color="#d62728", row=row, col=1)
        # The threshold inside the panel, clear of the title above it.
        drawn = np.concatenate([largest, result.null_max(name), [threshold, 0.0]])
        top = float(np.nanmax(drawn[np.isfinite(drawn)]))
        fig.update_yaxes(title_text=name.replace("_", " "), range=[0, top * 1.2], row=row, col=1)
    fig.update_xaxes(tickvals=x, type="linear")
    fig.update_layout(
        legend={"orientation": "h", "yanchor": "top", "y": -0.35 / len(shown), "x": 0},
        margin={"b": 90},
    )
    return fig
