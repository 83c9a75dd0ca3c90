"""Schemes: a model's position scheme from its config.json: rotary frequencies and scaling,
ALiBi slopes, T5 buckets and bias; a rotary table or DeBERTa's relative table opened as the
current table."""

from pathlib import Path

import streamlit as st

from posviz import export, figures
from posviz._params import Refused
from posviz._settings import data_dir
from posviz.embedding import LoadError
from posviz.rows import row_offsets
from posviz.schemes import alibi, weights
from posviz.schemes.config import KINDS, position_scheme
from posviz.schemes.presets import PRESETS, rotary_presets
from posviz.schemes.record import (
    INV_FREQ_TOLERANCE,
    PRESET,
    checkpoint_provenance,
    config_provenance,
    is_decoder_bias,
    read_config,
)
from posviz.schemes.rotary import (
    BANDS,
    MAX_TABLE_POSITIONS,
    inv_freq_difference,
    rotary_table,
)
from posviz.ui import cache, state, widgets
from posviz.ui import schemes as reads
from posviz.ui.text import literal

SOURCES = ["Known models", "Hub model", "config.json"]
SHARED = data_dir()  # the team's checkpoints, with their config.json
if SHARED:
    SOURCES.append("Shared folder")
#: Where the model's weights are, to read what a learned scheme stores: in words.
WEIGHTS = {"Hub model": "from the Hub", "Shared folder": "from the checkpoint"}


st.title("Position schemes")
st.caption(
    "Which positions a model encodes and how, from its config.json alone (formulas as Hugging "
    "Face transformers computes them, in float64; see docs/schemes.md)."
)
source = st.segmented_control("Scheme of", SOURCES, default=SOURCES[0], key="schemes.source")
opened = None  # the model whose weights hold a learned scheme (Hub, or shared folder)
if source == "Hub model":
    with st.form("schemes.hub"):
        left, right = st.columns([3, 1])
        repo = left.text_input(
            "Model id", placeholder="meta-llama/Llama-3.1-8B", key="schemes.repo"
        )
        revision = right.text_input("Revision", "main", key="schemes.revision")
        if st.form_submit_button("Open", type="primary"):
            reads.set_hub_model(repo, revision)
    st.caption(
        "Only the model id and config.json travel (and, when asked, the few tensors "
        "a learned scheme needs)."
    )
    named = reads.hub_model()
    if named is None:
        st.stop()
    try:
        opened = reads.hub_config(*named)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        st.stop()
    config, origin, label = opened.config, opened.source, named[0]
    provenance = config_provenance(opened.at_commit, opened.sha256)
elif source == "Shared folder":
    # Checkpoints saved with their config.json beside them (the config is read, then only the
    # tensors a scheme needs).
    opened = widgets.shared_checkpoint(Path(SHARED), key="schemes.shared")
    if opened is None:
        st.stop()
    config, provenance = opened.config, checkpoint_provenance(opened)
    origin = label = opened.label
elif source == "config.json":
    upload = st.file_uploader("A model's config.json", type=["json"], key="schemes.upload")
    if upload is None:
        st.stop()
    try:
        config, provenance, _ = read_config(upload.name, upload.getvalue())
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        st.stop()
    origin = label = f"uploaded {upload.name}"
else:
    name = st.selectbox("Model", list(PRESETS), key="schemes.preset")
    config, provenance, _ = read_config(PRESET + name)
    origin, label = f"{name} (config.json excerpt built into posviz)", name

try:
    scheme = position_scheme(config)
except LoadError as error:
    st.error(literal(error), icon=":material/error:")
    st.stop()
st.markdown(f"**{scheme.kind.replace('_', ' ')}**: {KINDS[scheme.kind]} ({literal(scheme.reason)})")
for warning in scheme.warnings:
    st.warning(literal(warning), icon=":material/warning:")

if scheme.kind == "rotary":
    specs = {spec.layer_type: spec for spec in scheme.rotary}
    layer = st.selectbox("Layer type", list(specs), key="schemes.layer") if len(specs) > 1 else None
    spec = specs[layer] if layer else scheme.rotary[0]
    default_context = spec.context or spec.original_context or 4096
    context = st.number_input(
        "Sequence length the rule is applied at",
        1,
        10**8,
        default_context,
        key="schemes.context",
        help="Dynamic NTK raises its base beyond max_position_embeddings; LongRoPE uses its long "
        "factors beyond the original context.",
    )
    f = cache.rotary_frequencies(spec, context=int(context))
    columns = st.columns(5)
    layout = "adjacent (interleaved)" if spec.interleaved else "j with j + d/2 (rotate_half)"
    columns[0].metric(
        "rotary width",
        spec.rotary_dim,
        help=f"Rotating columns of q and k: {spec.n_pairs} pairs, {layout}",
    )
    base = f.base_applied
    columns[1].metric(
        "base θ",
        f"{base:,.0f}" if base.is_integer() else f"{base:,.6g}",
        help=f"rope_theta {spec.base:g}",
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
    if opened is not None and st.toggle(
        "Check a stored inv_freq buffer",
        key="schemes.inv_freq",
        help="Old conversions store rotary_emb.inv_freq, sometimes wrongly. Reads the "
        "safetensors headers, then only that buffer.",
    ):
        try:
            stored = reads.stored_inv_freq(opened)
        except LoadError as error:
            st.error(literal(error), icon=":material/error:")
            st.stop()
        if stored is None:
            st.info("The checkpoint stores no inv_freq buffer (the usual case).")
        else:
            name, values = stored
            difference = inv_freq_difference(values, f)
            text = (
                f"{literal(name)}: largest relative difference from config.json's {difference:.3g}"
            )
            if difference <= INV_FREQ_TOLERANCE:
                st.success(text + " (matches).", icon=":material/check:")
            else:
                st.error(text + ": it does not match; trust config.json.", icon=":material/error:")
    labels = ["Frequency ladder", "Bands", "Similarity decay"]
    rule_figure = figures.schemes.RULE_FIGURES.get(spec.rope_type)  # a tab only some rules have
    labels += [rule_figure[0]] if rule_figure else []
    labels += ["Numbers"]
    tabs = dict(
        zip(labels, widgets.tabs_drawn_when_open(labels, key="schemes.section"), strict=True)
    )
    rule = {**provenance, "layer_type": spec.layer_type}  # the rule's place in config.json
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
            d = cache.rotary_decay(spec, context=int(context))
            widgets.show_figure(
                figures.schemes.decay(d, f), name="decay", settings=export.header(d, rule)
            )
            with widgets.expander_drawn_when_open("Numbers", key="schemes.decay_numbers") as shown:
                if shown:
                    widgets.show_numbers(
                        d.to_frame(), name="rotary_decay", settings=export.header(d, rule)
                    )
    if rule_figure:
        title, build = rule_figure
        with tabs[title]:
            if tabs[title].open:
                widgets.show_figure(build(spec), name=build.__name__, settings=settings)
    with tabs["Numbers"]:
        if tabs["Numbers"].open:
            numbers = f.to_frame()
            widgets.show_numbers(numbers, name="rotary_frequencies", settings=settings)

    st.subheader("Rotary position table")
    st.caption(
        "Row m is [cos(mθ) | sin(mθ)] (transformers' rotate_half layout, without the attention "
        "factor), with θ as applied at the sequence length above. Opened as the current table, "
        "every page analyses it (Compare it with a learned table, add it to the Collection)."
    )
    default_rows = min(spec.pretraining_context or MAX_TABLE_POSITIONS, MAX_TABLE_POSITIONS)
    rows = st.number_input(
        "Positions (rows)", 10, MAX_TABLE_POSITIONS, default_rows, key="schemes.rows"
    )
    if st.button("Open the rotary table", type="primary", icon=":material/table:"):
        table = rotary_table(f, positions=int(rows), source=origin)
        state.set_table(table)
        st.success(
            f"{literal(table.name)}, {rows:,} x {spec.rotary_dim}, is now the current "
            "table: every page analyses it.",
            icon=":material/check:",
        )

elif scheme.kind == "alibi":
    spec = scheme.alibi
    distance = st.number_input(
        "Largest distance",
        alibi.DISTANCES.low,
        alibi.DISTANCES.high,
        min(scheme.context or 2048, 8192),
        key="schemes.distance",
    )
    try:
        b = cache.alibi_bias(
            spec.n_heads, alibi_bias_max=spec.alibi_bias_max, max_distance=int(distance)
        )
    except Refused as error:  # heads x distances above the budget of one result
        st.error(literal(error), icon=":material/error:")
        st.stop()
    st.caption(
        f"{spec.n_heads} heads; slopes by the ALiBi paper's recursion (BLOOM's "
        "build_alibi_tensor, MPT's gen_slopes with alibi_bias_max "
        f"{spec.alibi_bias_max:g})."
    )
    settings = export.header(b, provenance)
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

elif scheme.kind == "relative_bias":
    spec = scheme.relative_bias
    try:
        layouts = cache.bucket_layouts(spec)
    except LoadError as error:  # buckets or a distance out of bounds
        st.error(literal(error), icon=":material/error:")
        st.stop()
    settings = export.header(layouts, provenance)
    widgets.show_figure(figures.schemes.t5_buckets(layouts), name="t5_buckets", settings=settings)
    with widgets.expander_drawn_when_open("Numbers", key="schemes.bucket_numbers") as shown:
        if shown:
            widgets.show_numbers(layouts.to_frame(), name="t5_buckets", settings=settings)
    if opened is None:
        st.info(
            "The learned bias is in the model's weights: open the model from the Hub or the "
            "shared folder to see each head's bias (only its bias tensors are read).",
            icon=":material/info:",
        )
    elif st.toggle(f"Read the bias tensors {WEIGHTS[source]}", key="schemes.read_bias"):
        try:
            tensors = reads.bias_tensors(opened, spec)
        except LoadError as error:
            st.error(literal(error), icon=":material/error:")
            st.stop()
        name = st.selectbox("Tensor", list(tensors), key="schemes.tensor")
        r = cache.relative_bias(
            tensors[name], bidirectional=not is_decoder_bias(name), max_distance=spec.max_distance
        )
        settings = export.header(r, {**provenance, "tensor": name})
        widgets.show_figure(
            figures.schemes.t5_bias(r, name=name), name="t5_bias", settings=settings
        )
        with widgets.expander_drawn_when_open("Numbers", key="schemes.bias_numbers") as shown:
            if shown:
                widgets.show_numbers(r.to_frame(), name="relative_bias", settings=settings)

elif scheme.kind == "relative_table":
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
    ) as shown:
        if shown:
            st.dataframe(
                {
                    "row": range(len(offsets.first)),
                    "bucket": [r - spec.span for r in range(len(offsets.first))],
                    "offsets q − k": offsets.text(),
                },
                hide_index=True,
                width="stretch",
            )
    if opened is None:
        st.info(
            "The table is in the model's weights: open the model from the Hub or the shared "
            "folder to analyse it.",
            icon=":material/info:",
        )
    elif st.button("Open rel_embeddings as the current table", type="primary"):
        try:
            table, span = weights.relative_embeddings(opened)
        except LoadError as error:
            st.error(literal(error), icon=":material/error:")
            st.stop()
        state.set_table(table)
        st.success(
            f"{literal(table.name)} is now the current table (rows are buckets "
            f"{span[0]} … {span[1]}; {table.row_offsets.describe()}).",
            icon=":material/check:",
        )
else:
    st.info(KINDS[scheme.kind][0].upper() + KINDS[scheme.kind][1:] + ".", icon=":material/info:")
    if scheme.kind == "learned_absolute":
        st.caption("Load the model's table on the Data page; every page analyses it.")
    if scheme.kind == "sinusoidal" and scheme.width and scheme.context:
        n = min(scheme.context, MAX_TABLE_POSITIONS)
        options = {"n_positions": n, "d_model": scheme.width}
        if st.button(f"Open the sinusoidal table ({n:,} x {scheme.width})", type="primary"):
            state.set_simulated("sinusoidal", options)
            st.success("The sinusoidal table is now the current table.", icon=":material/check:")

with widgets.expander_drawn_when_open("Overlay several rotary models", key="schemes.overlay") as o:
    if o:
        others = [name for name in rotary_presets() if name != label]
        chosen = st.multiselect("Models", others, default=others[:3], key="schemes.chosen")
        # Each model's config.json is its provenance, with the label and layer type it gives.
        models = {}
        if scheme.kind == "rotary":
            models[label] = (spec, {**provenance, "model": label, "layer_type": spec.layer_type})
        for name in chosen:
            _, where, _ = read_config(PRESET + name)
            first = position_scheme(PRESETS[name]).rotary[0]
            models[name] = (first, {**where, "model": name, "layer_type": first.layer_type})
        if models:
            overlay = cache.rotary_overlay({name: s for name, (s, _) in models.items()})
            settings = export.header(overlay, *(where for _, where in models.values()))
            widgets.show_figure(
                figures.schemes.ladders_overlay(overlay.frequencies),
                name="ladders_overlay",
                settings=settings,
            )
            widgets.show_figure(
                figures.schemes.decays_overlay(overlay.decays),
                name="decays_overlay",
                settings=settings,
            )
            widgets.show_numbers(overlay.to_frame(), name="ladders_overlay", settings=settings)
            widgets.show_numbers(overlay.decay_table(), name="decays_overlay", settings=settings)
