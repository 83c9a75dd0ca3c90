"""Figures of position schemes: rotary frequency ladders, bands, decay curves, dynamic NTK's
base, LongRoPE's factors, each layer's encoding and mrope's axes, ALiBi's slopes and biases,
T5's buckets and bias heatmap."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from posviz.figures.layout import (
    DIVERGING,
    base_figure,
    escape,
    f32,
    log_axis,
    plain,
    readable,
    small_multiples,
    superscript,
)
from posviz.schemes._values import given
from posviz.schemes.alibi import FALLS, AlibiBias
from posviz.schemes.layers import MROPE_AXES, LayerTable, Mrope
from posviz.schemes.relative import BucketLayouts, RelativeBias
from posviz.schemes.rotary import RotaryDecay, RotaryFrequencies, RotarySpec, dynamic_base_curve

__all__ = [
    "BAND_COLOURS",
    "RULE_FIGURES",
    "alibi_bias",
    "alibi_slopes",
    "bands",
    "decay",
    "decays_overlay",
    "dynamic_base",
    "frequency_ladder",
    "ladders_overlay",
    "layer_strip",
    "longrope_factors",
    "mrope_pairs",
    "t5_bias",
    "t5_buckets",
]

#: One colour per band of a scaling rule (posviz.schemes.rotary.BANDS).
BAND_COLOURS = {
    "kept": "#1f77b4",
    "blended": "#ff7f0e",
    "divided": "#d62728",
    "unrotated": "#7f7f7f",
}
#: Heads drawn as lines at most (the rest are in the heatmap and the numbers).
MAX_HEAD_LINES = 32


def _context_lines(fig: go.Figure, f: RotaryFrequencies, *, horizontal: bool) -> None:
    """Mark the original and the extended context on a log axis (as a wavelength or a
    distance)."""
    spec = f.spec
    marks = {}
    if spec.original_context:
        marks[f"original context {spec.original_context:,}"] = spec.original_context
    if f.context:
        marks[f"context {f.context:,}"] = f.context
    for (label, value), dash in zip(marks.items(), ("dot", "dash"), strict=False):
        # Both axes marked are logarithmic, where plotly places annotations in log10 units.
        if horizontal:
            fig.add_hline(y=value, line_dash=dash, line_color="grey")
            fig.add_annotation(
                x=0, xref="paper", y=np.log10(value), text=label, showarrow=False,
                xanchor="left", yanchor="bottom", font={"color": "grey"},
            )  # fmt: skip
        else:
            fig.add_vline(x=value, line_dash=dash, line_color="grey")
            fig.add_annotation(
                x=np.log10(value), y=1, yref="paper", text=label, showarrow=False,
                xanchor="right", yanchor="bottom", font={"color": "grey"},
            )  # fmt: skip


def frequency_ladder(f: RotaryFrequencies) -> go.Figure:
    """Wavelength 2π/θᵢ of each rotating pair (log axis), unscaled and as the rule applies it;
    markers coloured by band, the original and extended contexts marked. Pairs that do not
    rotate (θ = 0: proportional's unrotated part) have no wavelength and are left out."""
    spec = f.spec
    title = (
        f"Frequency ladder: {spec.rope_type}, θ = {spec.base:g}, {spec.n_pairs} pairs"
        + (f" ({spec.rotating_pairs} rotate)" if spec.rotating_pairs is not None else "")
        + (f", factor {spec.factor:g}" if spec.rope_type != "default" else "")
        + (f" ({escape(spec.layer_type)})" if spec.layer_type != "all" else "")
    )
    fig = base_figure(title, "pair i", "wavelength 2π/θᵢ (positions)")
    contexts = [c for c in (spec.original_context, f.context) if c]  # marked by _context_lines
    fig.update_yaxes(**log_axis(np.r_[f.wavelengths_unscaled, f.wavelengths, contexts]))
    rotating = np.isfinite(f.wavelengths_unscaled)
    pairs = np.arange(spec.n_pairs)
    fig.add_trace(
        go.Scatter(
            x=pairs[rotating],
            y=f32(f.wavelengths_unscaled[rotating]),
            mode="lines",
            name="unscaled",
            line={"color": "grey"},
        )
    )
    for band, colour in BAND_COLOURS.items():
        chosen = (f.band == band) & rotating
        if chosen.any():
            fig.add_trace(
                go.Scatter(
                    x=pairs[chosen],
                    y=f32(f.wavelengths[chosen]),
                    mode="markers",
                    name=f"scaled: {band} ({int(chosen.sum())})",
                    marker={"color": colour, "size": 6},
                )
            )
    _context_lines(fig, f, horizontal=True)
    return fig


def bands(f: RotaryFrequencies) -> go.Figure:
    """Each pair's division θ/θ' (unscaled over applied; log axis) at the length the rule is
    applied at, coloured by band, with the factor marked: 1 kept, the factor or more divided."""
    spec = f.spec
    fig = base_figure(
        f"Division of each pair's frequency by the {spec.rope_type} rule at length "
        f"{f.context or 0:,}",
        "pair i",
        "division θᵢ / θᵢ' (unscaled over applied)",
    )
    rotating = ~np.isnan(f.division)
    # Divisions span a decade or two: label the powers of two and the factor, not only decades.
    top = max(float(np.max(f.division[rotating], initial=1.0)), spec.factor)
    powers = [2.0**k for k in range(int(np.ceil(np.log2(top))) + 1)]
    near = [p for p in powers if p != spec.factor and abs(np.log2(p / spec.factor)) < 0.4]
    ticks = sorted(set(powers) - set(near) | {spec.factor})  # 32 would crowd factor 40
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    pairs = np.arange(spec.n_pairs)
    # Markers, not bars: a kept pair (division 1) stays visible on the log axis.
    fig.add_trace(
        go.Scatter(
            x=pairs[rotating],
            y=f32(f.division[rotating]),
            mode="lines+markers",
            line={"color": "lightgrey"},
            marker={"color": [BAND_COLOURS[b] for b in f.band[rotating]], "size": 7},
            name="pairs",
            hovertext=list(f.band[rotating]),
        )
    )
    if spec.factor != 1:
        fig.add_hline(y=spec.factor, line_dash="dash", line_color=BAND_COLOURS["divided"])
        fig.add_annotation(
            x=0, xref="paper", y=np.log10(spec.factor), text=f"factor {spec.factor:g}",
            showarrow=False, xanchor="left", yanchor="bottom",
            font={"color": BAND_COLOURS["divided"]},
        )  # fmt: skip
    return fig


def decay(d: RotaryDecay, f: RotaryFrequencies) -> go.Figure:
    """Content-free similarity B(Δ) and RoFormer's relative upper bound against distance (log
    axis), before and after scaling, in two panels."""
    fig = small_multiples(
        2,
        ["B(Δ) = meanᵢ cos(Δθᵢ)", "RoFormer's relative upper bound (2/d)·Σⱼ|Sⱼ|"],
        "How fast the rotary scheme alone decays with distance",
    )
    x = np.maximum(d.distances, 1)  # Δ = 0 (B = 1) sits at 1 on the log axis
    for row, (unscaled, scaled) in enumerate(
        [(d.similarity_unscaled, d.similarity), (d.bound_unscaled, d.bound)], start=1
    ):
        for values, label, colour in (
            (unscaled, "unscaled", "grey"),
            (scaled, "scaled", BAND_COLOURS["divided"]),
        ):
            fig.add_trace(
                go.Scatter(x=x, y=f32(values), name=label, line={"color": colour},
                           showlegend=row == 1, legendgroup=label),
                row=row, col=1,
            )  # fmt: skip
    fig.update_xaxes(**log_axis(x))
    fig.update_xaxes(title_text="distance Δ (positions)", row=2, col=1)
    fig.update_layout(height=620)
    _context_lines(fig, f, horizontal=False)
    return fig


def dynamic_base(spec: RotarySpec) -> go.Figure:
    """Dynamic NTK's base against sequence length (log axes)."""
    lengths, bases = dynamic_base_curve(spec)
    context = given(spec.context, "max_position_embeddings")
    fig = base_figure(
        "Dynamic NTK: rotary base against sequence length",
        "sequence length L",
        "base",
    )
    fig.update_xaxes(**log_axis(lengths))
    fig.update_yaxes(**log_axis(bases))
    fig.add_trace(go.Scatter(x=lengths, y=bases, name="base", mode="lines"))
    fig.add_vline(x=context, line_dash="dash", line_color="grey")
    fig.add_annotation(
        x=np.log10(context), y=1, yref="paper", showarrow=False, xanchor="right",
        yanchor="bottom", text=f"max_position_embeddings {context:,}",
    )  # fmt: skip
    return fig


def longrope_factors(spec: RotarySpec) -> go.Figure:
    """LongRoPE's short and long factors per pair."""
    fig = base_figure("LongRoPE: each pair's division factor", "pair i", "factor")
    short = given(spec.short_factor, "LongRoPE's short_factor")
    long = given(spec.long_factor, "LongRoPE's long_factor")
    fig.update_yaxes(**log_axis(np.r_[short, long]))
    pairs = np.arange(spec.n_pairs)
    fig.add_trace(go.Scatter(x=pairs, y=f32(short), name="short (within the original context)"))
    fig.add_trace(go.Scatter(x=pairs, y=f32(long), name="long (beyond it)"))
    return fig


def alibi_slopes(b: AlibiBias) -> go.Figure:
    """Each head's slope (log axis), in stored head order."""
    n = len(b.slopes)
    fig = base_figure(f"ALiBi slopes, {n} heads", "head", "slope (logits per position)")
    fig.update_yaxes(**log_axis(b.slopes))
    fig.add_trace(go.Bar(x=np.arange(n), y=f32(b.slopes), name="slope"))
    return fig


#: The bias axis stops here: a key scored there weighs e⁻¹² ≈ 6·10⁻⁶ of an equally scored key
#: at distance 0, all but masked; steeper heads' lines leave the chart.
ALIBI_AXIS_FLOOR = -12


def alibi_heads(b: AlibiBias) -> np.ndarray:
    """The heads :func:`alibi_bias` draws, in head order: all, or `MAX_HEAD_LINES` of them
    evenly spread over the slopes (BLOOM's 112 heads interleave two slope ladders: evenly
    spaced head numbers would not spread the fan evenly).

    >>> from posviz.schemes.alibi import alibi_bias as bias
    >>> alibi_heads(bias(4)).tolist()
    [0, 1, 2, 3]
    >>> len(alibi_heads(bias(112)))
    32
    """
    n = len(b.slopes)
    ranks = np.unique(np.linspace(0, n - 1, min(n, MAX_HEAD_LINES)).round().astype(int))
    return np.sort(np.argsort(b.slopes, kind="stable")[ranks])


def alibi_bias(b: AlibiBias) -> go.Figure:
    """Bias against distance, one line per head (at most `MAX_HEAD_LINES`, evenly spread over
    the slopes, named in the subtitle), down to `ALIBI_AXIS_FLOOR` logits, with the falls of
    `FALLS` logits marked and labelled."""
    n = len(b.slopes)
    heads = alibi_heads(b)
    floor = ALIBI_AXIS_FLOOR
    if len(heads) < n:
        title = f"ALiBi bias against distance: {len(heads)} of {n} heads, evenly spread over "
        title += f"the slopes<br><sup>heads {', '.join(map(str, heads))}; every head's slope: "
        title += "the Slopes and Numbers tabs</sup>"
    else:
        title = f"ALiBi bias against distance, all {n} heads"
    title += (
        f"<br><sup>Axis cut at {readable(floor)} logits: a key there weighs "
        f"e{superscript(floor)} ≈ {readable(np.exp(floor), 1)} as much as an equally scored key "
        "at distance 0; steeper heads leave the chart.</sup>"
    )
    fig = base_figure(title, "distance from query back to key", "bias (logits)",
                      yaxis_range=[floor, 0.5], height=540)  # fmt: skip
    # The legend (up to 16 heads) under the axis, the subtitles above the chart.
    fig.update_layout(
        margin={"t": 110, "b": 110 if len(heads) <= 16 else 60},
        legend={"orientation": "h", "x": 0, "yref": "container", "y": 0, "yanchor": "bottom"},
    )
    step = max(1, len(b.distances) // 1024)
    for h in heads:
        fig.add_trace(
            go.Scatter(
                x=b.distances[::step],
                y=f32(b.bias[h, ::step]),
                name=f"head {h} (slope {b.slopes[h]:.3g})",
                mode="lines",
                showlegend=len(heads) <= 16,
            )
        )
    for fall in FALLS:
        fig.add_hline(
            y=-fall,
            line_dash="dot",
            line_color="grey",
            annotation_text=f"fallen by {fall} logit{'s' * (fall > 1)}: a key weighs "
            f"e{superscript(-fall)} ≈ {readable(np.exp(-fall))} as much",
            annotation_position="top right",
            annotation_font={"size": 11, "color": "grey"},
        )
    return fig


def t5_bias(r: RelativeBias, *, name: str) -> go.Figure:
    """Heatmap of a T5 bias tensor: heads by signed distance."""
    fig = base_figure(
        f"T5 relative bias: {escape(name)}", "relative position (key − query)", "head"
    )
    limit = float(np.abs(r.bias).max()) or 1.0
    fig.add_trace(
        go.Heatmap(
            x=r.relative_positions,
            y=np.arange(r.n_heads),
            z=f32(r.bias),
            colorscale=DIVERGING,
            zmid=0,
            zmin=-limit,
            zmax=limit,
            colorbar={"title": "bias"},
        )
    )
    return fig


def t5_buckets(b: BucketLayouts) -> go.Figure:
    """Bucket against signed distance, per rule (encoder, decoder), with each distance's kind
    (exact / log-spaced / saturated) in the hover."""
    fig = base_figure("T5 buckets against relative position", "relative position (key − query)",
                      "bucket")  # fmt: skip
    for label, (buckets, layout) in b.layouts.items():
        fig.add_trace(
            go.Scatter(
                x=b.relative_positions,
                y=buckets,
                name=label,
                mode="lines",
                line_shape="hv",
                hovertext=list(layout),
            )
        )
    return fig


def ladders_overlay(frequencies: dict[str, RotaryFrequencies]) -> go.Figure:
    """Several models' ladders as applied, against the pair's place in the ladder (i / pairs,
    so widths differ freely)."""
    fig = base_figure(
        "Frequency ladders as applied", "pair i / number of pairs", "wavelength 2π/θᵢ (positions)"
    )
    fig.update_yaxes(**log_axis(np.concatenate([f.wavelengths for f in frequencies.values()])))
    for label, f in frequencies.items():
        n = f.spec.n_pairs
        x = f32(np.arange(n) / n)
        fig.add_trace(go.Scatter(x=x, y=f32(f.wavelengths), name=escape(label),
                                 mode="lines+markers", marker={"size": 4}))  # fmt: skip
    return fig


def decays_overlay(decays: dict[str, RotaryDecay]) -> go.Figure:
    """Several models' content-free similarity B(Δ) as applied, on a log distance axis."""
    fig = base_figure("Content-free similarity B(Δ) as applied", "distance Δ (positions)", "B(Δ)")
    fig.update_xaxes(
        **log_axis(np.concatenate([np.maximum(d.distances, 1) for d in decays.values()]))
    )
    for label, d in decays.items():
        fig.add_trace(go.Scatter(x=np.maximum(d.distances, 1), y=f32(d.similarity),
                                 name=escape(label), mode="lines"))  # fmt: skip
    return fig


#: Colours of a strip's values, in the order they first appear in a row; what a layer lacks
#: (NoPE's rule, no window) is light grey.
STRIP_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
NONE_COLOUR = "#d9d9d9"
#: Pixels of a strip: per row, above the rows (the title), below them (the axis and its
#: title), per line of the legend.
STRIP_ROW_HEIGHT = 44
STRIP_TOP = 60
STRIP_AXIS = 70
STRIP_LEGEND_LINE = 20


def _strip(
    rows: dict[str, list[str]], *, title: str, x_title: str, noun: str, missing: set[str]
) -> go.Figure:
    """One row of coloured runs per attribute over `noun`s 0 … n − 1 (layers, pairs): each run
    of equal values one bar, its value written inside when it fits and in the hover; the
    legend under it, a column per row (one line for a single row). Values in `missing` are
    drawn grey."""
    n = len(next(iter(rows.values())))
    grouped = len(rows) > 1
    entries = max(len(set(values)) for values in rows.values())
    legend = STRIP_AXIS + STRIP_LEGEND_LINE * (entries + 1 if grouped else 1)
    fig = base_figure(title, x_title, "")
    for row, values in rows.items():
        runs: dict[str, list[tuple[int, int]]] = {}
        start = 0
        for i in range(1, n + 1):
            if i == n or values[i] != values[start]:
                runs.setdefault(values[start], []).append((start, i - 1))
                start = i
        present = [value for value in runs if value not in missing]
        for value, spans in runs.items():
            colour = (
                NONE_COLOUR
                if value in missing
                else STRIP_COLOURS[present.index(value) % len(STRIP_COLOURS)]
            )
            where = [f"{noun} {a}" if a == b else f"{noun}s {a}-{b}" for a, b in spans]
            fig.add_trace(
                go.Bar(
                    y=[row] * len(spans),
                    x=[b - a + 1 for a, b in spans],
                    base=[a - 0.5 for a, _ in spans],
                    orientation="h",
                    name=escape(value),
                    legendgroup=row if grouped else None,
                    legendgrouptitle_text=escape(row) if grouped else None,
                    marker={"color": colour, "line": {"color": "white", "width": 1}},
                    text=[escape(value)] * len(spans),
                    textposition="inside",
                    insidetextanchor="middle",
                    textangle=0,
                    hovertext=[f"{w}: {escape(row)} {escape(value)}" for w in where],
                    hoverinfo="text",
                )
            )
    fig.update_layout(
        barmode="overlay",
        bargap=0.15,
        uniformtext={"mode": "hide", "minsize": 10},
        height=STRIP_TOP + STRIP_ROW_HEIGHT * len(rows) + legend,
        # The legend under the axis, row by row: beside the strip it took half the width.
        legend={
            "orientation": "h", "x": 0, "y": 0, "xref": "container", "yref": "container",
            "yanchor": "bottom", "groupclick": "toggleitem",
        },
        margin={"l": 110, "r": 20, "t": STRIP_TOP, "b": legend},
    )  # fmt: skip
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=list(rows))
    fig.update_xaxes(range=[-0.5, n - 0.5], showgrid=False, zeroline=False)
    return fig


def layer_strip(t: LayerTable) -> go.Figure:
    """Each layer's position encoding as a strip over layers: RoPE or NoPE, rule, θ, rotary
    width, layer type, sliding window, and (when the model has them) mrope's sections and the
    attention temperature at L − 1."""
    rows: dict[str, list[str]] = {key: [] for key in ("encoding", "rule", "θ", "rotary width",
                                                      "layer type", "sliding window")}  # fmt: skip
    if t.mrope is not None:
        rows["mrope"] = []
    if t.has_temperature:
        rows["temperature"] = []  # the queries' factor at L − 1
    for layer, applied, temperature in zip(t.layers, t.base_applied, t.temperature, strict=True):
        spec = layer.rotary
        rows["encoding"].append("RoPE" if spec else "NoPE")
        rows["rule"].append(spec.rope_type if spec else "none")
        theta = "none"
        if spec:
            theta = plain(spec.base)
            theta += f" (at L: {plain(applied)})" if applied != spec.base else ""
        rows["θ"].append(theta)
        width = "none"
        if spec:
            width = f"{spec.rotary_dim} columns"
            if spec.rotating_pairs is not None:
                width += f", {spec.rotating_pairs} of {spec.n_pairs} pairs rotate"
        rows["rotary width"].append(width)
        rows["layer type"].append(layer.layer_type)
        window = layer.sliding_window
        rows["sliding window"].append("all keys" if window is None else f"{window:,} keys")
        if t.mrope is not None:
            m = layer.mrope
            rows["mrope"].append(
                "none" if m is None
                else "/".join(map(str, m.section)) + (" interleaved" if m.interleaved else "")
            )  # fmt: skip
        if t.has_temperature:
            rows["temperature"].append("none" if np.isnan(temperature) else f"{temperature:.4f}")
    context = f" at length L = {t.context:,}" if t.context else ""
    if t.has_temperature:
        context += " (temperature: the queries' factor at position L − 1)"
    return _strip(
        rows,
        title=f"Each layer's position encoding: {len(t.layers)} layers{context}",
        x_title="layer",
        noun="layer",
        missing={"none", "NoPE", "all keys"},
    )


def mrope_pairs(mrope: Mrope) -> go.Figure:
    """Which position axis (time, height, width) rotates each pair of a multimodal rope."""
    axes = mrope.axes().tolist()
    layout = "interleaved" if mrope.interleaved else "in blocks"
    sections = "/".join(map(str, mrope.section))
    fig = _strip(
        {"axis": axes},
        title=f"mrope: the position axis each pair rotates by ({sections} pairs, {layout})",
        x_title="pair i",
        noun="pair",
        missing=set(),
    )
    # One colour per axis, even when an axis has no pairs (a section of 0).
    for trace in fig.data:
        trace.marker.color = STRIP_COLOURS[MROPE_AXES.index(trace.name)]
    return fig


#: The figure a rope rule has beyond every rule's ladder, bands and decay: (tab title, builder),
#: by rope_type (posviz.schemes.rope.ROPE_RULES).
RULE_FIGURES = {
    "dynamic": ("Dynamic NTK base", dynamic_base),
    "longrope": ("LongRoPE factors", longrope_factors),
}
