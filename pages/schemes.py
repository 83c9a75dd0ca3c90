"""Schemes: a model's position scheme from its config.json: rotary frequencies and scaling,
each layer's encoding, ALiBi slopes, T5 buckets and bias; a rotary table or DeBERTa's relative
table opened as the current table; the scheme against another source of the same model's
positions (a GGUF, a config.json, a runtime's dump)."""

from collections.abc import Callable

import streamlit as st

from posviz import export, figures, pipeline
from posviz._params import Refused
from posviz._settings import data_dir
from posviz.embedding import LoadError
from posviz.models import weights
from posviz.records import is_decoder_bias
from posviz.rows import row_offsets
from posviz.schemes import alibi
from posviz.schemes.config import KINDS, Scheme
from posviz.schemes.layers import LayerTable
from posviz.schemes.presets import rotary_presets
from posviz.schemes.rotary import (
    BANDS,
    MAX_TABLE_POSITIONS,
    RotaryFrequencies,
    RotarySpec,
    default_context,
    default_positions,
    rotary_frequencies,
    rotary_table,
)
from posviz.ui import cache, context_plan, inputs, scheme_compare, schemes, state, widgets
from posviz.ui.schemes import Shown
from posviz.ui.text import literal


def describe(shown: Shown, scheme: Scheme) -> None:
    """The scheme in words, the GGUF keys it was read from (a GGUF's), and where config.json
    contradicts itself."""
    kind = scheme.kind.replace("_", " ")
    st.markdown(f"**{kind}**: {KINDS[scheme.kind]} ({literal(scheme.reason)})")
    scheme_compare.gguf_keys(shown.provenance)
    for warning in scheme.warnings:
        st.warning(literal(warning), icon=":material/warning:")


def rotary(shown: Shown, scheme: Scheme) -> RotarySpec:
    """One layer type's rule at a sequence length (its numbers, figures, each layer's
    encoding), and its position table; the rule shown."""
    specs = {spec.layer_type: spec for spec in scheme.rotary}
    schemes.follow(shown.identity, {"schemes.layer": next(iter(specs))})
    layer = st.selectbox("Layer type", list(specs), key="schemes.layer") if len(specs) > 1 else None
    spec = specs[layer] if layer else scheme.rotary[0]
    schemes.follow(
        (shown.identity, spec.layer_type),
        {"schemes.context": default_context(spec), "schemes.rows": default_positions(spec)},
    )
    context = inputs.setting(
        rotary_frequencies,
        "context",
        "Sequence length the rule is applied at",
        default=inputs.IN_STATE,
        key="schemes.context",
        help="Dynamic NTK raises its base beyond max_position_embeddings; LongRoPE uses its "
        "long factors beyond the original context.",
    )
    f = cache.run(pipeline.rotary_frequencies, spec, context=context)
    rule_numbers(f)
    layers = (
        cache.run(pipeline.layer_table, scheme.layers, context=context) if scheme.layers else None
    )
    if layers is not None:
        st.caption(literal(layers.describe()))
    schemes.inv_freq_check(shown, f)

    rule_figure = figures.schemes.RULE_FIGURES.get(spec.rope_type)  # a tab only some rules have
    labels = ["Frequency ladder", "Bands", "Similarity decay"]
    labels += [rule_figure[0]] if rule_figure else []
    labels += ["Layers"] if layers is not None else []
    labels += ["Numbers"]
    tabs = dict(
        zip(labels, widgets.tabs_drawn_when_open(labels, key="schemes.section"), strict=True)
    )
    rule = {**shown.provenance, "layer_type": spec.layer_type}  # the rule's place in config.json
    settings = export.header(f, rule)
    with tabs["Frequency ladder"]:
        if tabs["Frequency ladder"].open:
            widgets.show_figure(
                figures.schemes.frequency_ladder(f), name="frequency_ladder", settings=settings
            )
    with tabs["Bands"]:
        if tabs["Bands"].open:
            widgets.show_figure(figures.schemes.bands(f), name="bands", settings=settings)
    with tabs["Similarity decay"]:
        if tabs["Similarity decay"].open:
            decay(spec, f, context, rule)
    if rule_figure:
        title, build = rule_figure
        with tabs[title]:
            if tabs[title].open:
                widgets.show_figure(build(spec), name=build.__name__, settings=settings)
    if layers is not None:
        with tabs["Layers"]:
            if tabs["Layers"].open:
                each_layer(layers, shown)
    with tabs["Numbers"]:
        if tabs["Numbers"].open:
            widgets.show_numbers(f.to_frame(), name="rotary_frequencies", settings=settings)
    rotary_table_opener(shown, f)
    return spec


def rule_numbers(f: RotaryFrequencies) -> None:
    """The rule's numbers at its length: width, θ, factors, pairs beyond L₀, bands."""
    spec = f.spec
    columns = st.columns(5)
    layout = "adjacent (interleaved)" if spec.interleaved else "j with j + d/2 (rotate_half)"
    columns[0].metric(
        "rotary width",
        spec.rotary_dim,
        help=f"Rotating columns of q and k: {spec.n_pairs} pairs, {layout}",
    )
    columns[1].metric(
        "base θ", figures.layout.plain(f.base_applied), help=f"rope_theta {spec.base:g}"
    )
    columns[2].metric(
        "attention factor", f"{f.attention_factor:.4f}", help="Multiplies cos and sin of q and k."
    )
    columns[3].metric(
        "logit multiplier", f"{f.logit_multiplier:.4f}", help=f.logit_multiplier_source
    )
    columns[4].metric(
        "pairs beyond L₀",
        f.pairs_beyond_original_context,
        help="Pairs whose unscaled wavelength exceeds the pre-training context L₀: "
        "they never made a full turn in training.",
    )
    counts = f.band_counts()
    st.caption(" · ".join(f"{band}: {counts[band]} pairs" for band in BANDS if band in counts))


def decay(spec: RotarySpec, f: RotaryFrequencies, context: int, rule: dict) -> None:
    """Content-free similarity B(Δ) and RoFormer's bound, with their numbers."""
    d = cache.run(pipeline.rotary_decay, spec, context=context)
    settings = export.header(d, rule)
    widgets.show_figure(figures.schemes.decay(d, f), name="decay", settings=settings)
    with widgets.expander_drawn_when_open("Numbers", key="schemes.decay_numbers") as opened:
        if opened:
            widgets.show_numbers(d.to_frame(), name="rotary_decay", settings=settings)


def each_layer(layers: LayerTable, shown: Shown) -> None:
    """The per-layer map: a strip over layers, mrope's axes pair by pair, the table."""
    settings = export.header(layers, shown.provenance)
    widgets.show_figure(figures.schemes.layer_strip(layers), name="layer_strip", settings=settings)
    if layers.mrope is not None:
        with widgets.expander_drawn_when_open(
            "Which pairs carry time, height and width (mrope)", key="schemes.mrope"
        ) as opened:
            if opened:
                widgets.show_figure(
                    figures.schemes.mrope_pairs(layers.mrope), name="mrope_pairs", settings=settings
                )
    widgets.show_numbers(layers.to_frame(), name="layers", settings=settings, pinned="layer")


def rotary_table_opener(shown: Shown, f: RotaryFrequencies) -> None:
    st.subheader("Rotary position table")
    st.caption(
        "Row m is [cos(mθ) | sin(mθ)] (transformers' rotate_half layout, without the attention "
        "factor), with θ as applied at the sequence length above. Opened as the current table, "
        "every page analyses it (Compare it with a learned table, add it to the Collection)."
    )
    rows = inputs.setting(
        rotary_table, "positions", "Positions (rows)", default=inputs.IN_STATE, key="schemes.rows"
    )
    if st.button("Open the rotary table", type="primary", icon=":material/table:"):
        table = rotary_table(f, positions=rows, source=shown.origin)
        state.set_table(table)
        st.success(
            f"{literal(table.name)}, {rows:,} x {f.spec.rotary_dim}, is now the current "
            "table: every page analyses it.",
            icon=":material/check:",
        )


def alibi_slopes(shown: Shown, scheme: Scheme) -> None:
    """ALiBi's slope per head and its bias against distance."""
    spec = scheme.alibi
    schemes.follow(shown.identity, {"schemes.distance": schemes.alibi_distance(scheme)})
    distance = inputs.setting(
        alibi.alibi_bias,
        "max_distance",
        "Largest distance",
        default=inputs.IN_STATE,
        key="schemes.distance",
    )
    try:
        b = cache.run(
            pipeline.alibi_bias,
            spec.n_heads,
            alibi_bias_max=spec.alibi_bias_max,
            max_distance=int(distance),
        )
    except Refused as error:  # heads x distances above the budget of one result
        st.error(literal(error), icon=":material/error:")
        return
    st.caption(
        f"{spec.n_heads} heads; slopes by the ALiBi paper's recursion (BLOOM's "
        "build_alibi_tensor, MPT's gen_slopes with alibi_bias_max "
        f"{spec.alibi_bias_max:g})."
    )
    settings = export.header(b, shown.provenance)
    labels = ["Slopes", "Bias against distance", "Numbers"]
    slopes, bias, numbers = widgets.tabs_drawn_when_open(labels, key="schemes.alibi")
    with slopes:
        if slopes.open:
            widgets.show_figure(
                figures.schemes.alibi_slopes(b), name="alibi_slopes", settings=settings
            )
    with bias:
        if bias.open:
            widgets.show_figure(figures.schemes.alibi_bias(b), name="alibi_bias", settings=settings)
    with numbers:
        if numbers.open:
            widgets.show_numbers(b.to_frame(), name="alibi_slopes", settings=settings)


def t5_buckets(shown: Shown, scheme: Scheme) -> None:
    """T5's buckets against relative position, and each head's learned bias from the weights."""
    spec = scheme.relative_bias
    try:
        layouts = cache.run(pipeline.bucket_layouts, spec)
    except LoadError as error:  # buckets or a distance out of bounds
        st.error(literal(error), icon=":material/error:")
        return
    settings = export.header(layouts, shown.provenance)
    widgets.show_figure(figures.schemes.t5_buckets(layouts), name="t5_buckets", settings=settings)
    with widgets.expander_drawn_when_open("Numbers", key="schemes.bucket_numbers") as opened:
        if opened:
            widgets.show_numbers(layouts.to_frame(), name="t5_buckets", settings=settings)
    if shown.weights is None:
        st.info(
            "The learned bias is in the model's weights: open the model from the Hub or the "
            "shared folder to see each head's bias (only its bias tensors are read).",
            icon=":material/info:",
        )
        return
    schemes.follow(shown.identity, {"schemes.read_bias": False})
    if not st.toggle(f"Read the bias tensors {shown.weights_place}", key="schemes.read_bias"):
        return
    try:
        tensors = schemes.bias_tensors(shown.weights, spec)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return
    schemes.follow(shown.identity, {"schemes.tensor": next(iter(tensors))})
    name = st.selectbox("Tensor", list(tensors), key="schemes.tensor")
    r = cache.run(
        pipeline.relative_bias,
        tensors[name],
        bidirectional=not is_decoder_bias(name),
        max_distance=spec.max_distance,
    )
    settings = export.header(r, {**shown.provenance, "tensor": name})
    widgets.show_figure(figures.schemes.t5_bias(r, name=name), name="t5_bias", settings=settings)
    with widgets.expander_drawn_when_open("Numbers", key="schemes.bias_numbers") as opened:
        if opened:
            widgets.show_numbers(r.to_frame(), name="relative_bias", settings=settings)


def relative_table(shown: Shown, scheme: Scheme) -> None:
    """DeBERTa's table of relative positions, opened from the weights as the current table."""
    spec = scheme.relative_table
    offsets = row_offsets(
        position_buckets=spec.position_buckets, max_relative_positions=spec.max_relative_positions
    )
    st.caption(
        f"rel_embeddings has 2 · {spec.span} rows: row r is bucket r − {spec.span} of the "
        f"relative offset q − k ({offsets.describe()}; position_buckets "
        f"{spec.position_buckets}, max_relative_positions {spec.max_relative_positions}). "
        "Every page names each row by the offsets it covers."
    )
    with widgets.expander_drawn_when_open(
        "The offsets each row covers", key="schemes.row_offsets"
    ) as opened:
        if opened:
            st.dataframe(
                {
                    "row": range(len(offsets.first)),
                    "bucket": [r - spec.span for r in range(len(offsets.first))],
                    "offsets q − k": offsets.text(),
                },
                hide_index=True,
                width="stretch",
            )
    if shown.weights is None:
        st.info(
            "The table is in the model's weights: open the model from the Hub or the shared "
            "folder to analyse it.",
            icon=":material/info:",
        )
    elif st.button("Open rel_embeddings as the current table", type="primary"):
        try:
            table, span = weights.relative_embeddings(shown.weights)
        except LoadError as error:
            st.error(literal(error), icon=":material/error:")
            return
        state.set_table(table)
        st.success(
            f"{literal(table.name)} is now the current table (rows are buckets "
            f"{span[0]} … {span[1]}; {table.row_offsets.describe()}).",
            icon=":material/check:",
        )


def stored_or_none(shown: Shown, scheme: Scheme) -> None:
    """A learned table, a fixed sinusoidal one, or no position encoding: where to go next."""
    st.info(KINDS[scheme.kind][0].upper() + KINDS[scheme.kind][1:] + ".", icon=":material/info:")
    if scheme.kind == "learned_absolute":
        st.caption("Load the model's table on the Data page; every page analyses it.")
    if scheme.kind == "sinusoidal" and scheme.width and scheme.context:
        n = min(scheme.context, MAX_TABLE_POSITIONS)
        options = {"n_positions": n, "d_model": scheme.width}
        if st.button(f"Open the sinusoidal table ({n:,} x {scheme.width})", type="primary"):
            try:
                state.set_simulated("sinusoidal", options)
            except ValueError as error:  # a width beyond what one table may hold
                st.error(literal(error), icon=":material/error:")
                return
            st.success("The sinusoidal table is now the current table.", icon=":material/check:")


def overlay(shown: Shown, spec: RotarySpec | None) -> None:
    """Several rotary models' ladders and decays on one chart: this one's rule `spec` (if
    rotary) and known models'."""
    others = [name for name in rotary_presets() if name != shown.label]
    schemes.follow(shown.identity, {"schemes.chosen": others[:3]})
    chosen = st.multiselect("Models", others, key="schemes.chosen")
    # Each model's config.json is its provenance, with the label and layer type it gives.
    models = {}
    if spec is not None:
        where = {**shown.provenance, "model": shown.label, "layer_type": spec.layer_type}
        models[shown.label] = (spec, where)
    models |= schemes.preset_rules(chosen)
    if not models:
        return
    result = cache.run(pipeline.rotary_overlay, {name: s for name, (s, _) in models.items()})
    settings = export.header(result, *(where for _, where in models.values()))
    ladders = figures.schemes.ladders_overlay(result.frequencies)
    widgets.show_figure(ladders, name="ladders_overlay", settings=settings)
    widgets.show_figure(
        figures.schemes.decays_overlay(result.decays), name="decays_overlay", settings=settings
    )
    widgets.show_numbers(result.to_frame(), name="ladders_overlay", settings=settings)
    widgets.show_numbers(result.decay_table(), name="decays_overlay", settings=settings)


def compare_sources(shown: Shown) -> None:
    """This model's rotary positions (A) against a second source of them (B): another
    config.json, a GGUF, a runtime's dump; what `posviz diff A B` prints, drawn."""
    scheme_compare.draw(shown.config, shown.provenance, shown.label, shared=data_dir())


#: Each kind's section; the rotary one returns the rule it shows (the overlay draws it too).
SECTIONS: dict[str, Callable[[Shown, Scheme], RotarySpec | None]] = {
    "rotary": rotary,
    "alibi": alibi_slopes,
    "relative_bias": t5_buckets,
    "relative_table": relative_table,
}

st.title("Position schemes")
st.caption(
    "Which positions a model encodes and how, from its config.json alone (formulas as Hugging "
    "Face transformers computes them, in float64; see docs/schemes.md)."
)


def _page() -> None:
    """The chosen model's scheme, section by section; nothing until a model is chosen."""
    shown = schemes.choose_model(data_dir())
    scheme = schemes.scheme_of(shown) if shown else None
    if shown is None or scheme is None:
        return
    describe(shown, scheme)
    shown_rule = SECTIONS.get(scheme.kind, stored_or_none)(shown, scheme)
    if shown_rule is not None:
        with widgets.expander_drawn_when_open(
            "Longer context: every rope scaling rule at a target length, and its settings",
            key="schemes.plan",
        ) as o:
            if o:
                context_plan.draw(shown, scheme)
    # A model whose positions are not rotary can still be set beside rotary ones: say so.
    title = "Overlay several rotary models" if shown_rule else "Rotary models side by side"
    if shown_rule is None:
        title += " (this model's positions are not rotary: known rotary models only)"
    with widgets.expander_drawn_when_open(title, key="schemes.overlay") as o:
        if o:
            overlay(shown, shown_rule)
    with widgets.expander_drawn_when_open(
        "Compare with another source of its positions: a GGUF, a config.json, a runtime's dump",
        key="schemes.compare",
    ) as o:
        if o:
            compare_sources(shown)


# A function, not st.stop(): app.py draws the sidebar card after the page.
_page()
