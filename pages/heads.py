"""Heads: how each attention head of one layer reads position, from the layer's query and key
weights alone (a model by name on the Hub, or a checkpoint in the shared folder)."""

from pathlib import Path

import streamlit as st

from posviz import export, figures, hub
from posviz._params import bounds_of, defaults
from posviz._settings import data_dir
from posviz.embedding import LoadError
from posviz.heads import LABELS, PATTERN_NUMBERS, ROTARY_NUMBERS, learned_heads
from posviz.models.attention import LAYERS, NoHeadsView
from posviz.schemes.rotary import rotary_frequencies
from posviz.source import HubRef
from posviz.ui import heads as cache
from posviz.ui import loaders, state, widgets
from posviz.ui import schemes as scheme_cache
from posviz.ui.text import literal

SUGGESTED = ("openai-community/gpt2", "google-bert/bert-base-uncased", "meta-llama/Llama-3.1-8B")
DEFAULTS = defaults(learned_heads)
#: Every kind's step shares these bounds (posviz.heads: DRAWS, POSITIONS, SEED).
BOUNDS = bounds_of(learned_heads)
CONTEXT = bounds_of(rotary_frequencies)["context"]

st.title("Attention heads")
st.caption(
    "How each attention head of one layer reads position, from that layer's weights alone: "
    "no text, no forward pass. Only the layer's query and key rows, its norms and (for a "
    "learned table) the position table are read. Every number is shown beside its null: the "
    "same computation with the layer's query and key rows permuted across heads (docs/heads.md)."
)


def _page() -> None:
    """The model, its layer, then the heads' charts and numbers; returns while one is missing."""
    table = state.current()
    origin = table.origin
    sources = ["Hub model"] if hub.enabled() else []
    if isinstance(origin, HubRef):  # the current table came from a model on the Hub
        sources.insert(0, "The current table's model")
    shared = data_dir()
    if shared:
        sources.append("Shared folder")
    if not sources:
        st.info("Hub access is off and no shared folder is set: no model to read.")
        return
    source = st.segmented_control("Model", sources, default=sources[0], key="heads.source")
    model = None
    try:
        if source == "The current table's model" and isinstance(origin, HubRef):
            st.caption(f"{literal(origin.repo)} at commit {origin.revision[:12]}")
            model = scheme_cache.hub_config(origin)
        elif source == "Hub model":
            with st.form("heads.hub"):
                left, right = st.columns([3, 1])
                repo = left.text_input("Model id", placeholder=SUGGESTED[0], key="heads.repo")
                revision = right.text_input("Revision", "main", key="heads.revision")
                if st.form_submit_button("Open", type="primary"):
                    cache.set_hub_model(repo, revision)
            named = cache.hub_model()
            if named is None:
                st.info(
                    "Name a model, e.g. " + ", ".join(f"`{m}`" for m in SUGGESTED) + ". Its "
                    "config.json and safetensors headers are read first; the page then says how "
                    "many bytes of the layer travel before they do.",
                    icon=":material/info:",
                )
                return
            model = scheme_cache.hub_config(HubRef(*named))
        elif source == "Shared folder":
            model = loaders.shared_checkpoint(Path(shared), key="heads.shared", sharded=True)
            if model is None:
                return
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return

    index = st.number_input(
        "Layer",
        LAYERS.low,
        LAYERS.high,
        0,
        key="heads.layer",
        help="Layer 0 by default; any layer on request.",
    )
    try:
        plan = cache.plan(model, int(index))
    except NoHeadsView as error:
        st.info(literal(error), icon=":material/info:")
        return
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return
    opened = cache.opened(model)
    waiting = sum(r.nbytes for r in plan.reads if opened.remote and not opened.cached(r))
    travel = (
        f"{cache.size(waiting)} travel from the Hub"
        if waiting
        else ("nothing travels (cached)" if opened.remote else "read from the checkpoint")
    )
    st.caption(
        f"Layer {plan.layer} of {literal(opened.label)}: {plan.family}, "
        f"{plan.kind.replace('_', ' ')}; "
        f"{len(plan.reads)} tensors, {cache.size(plan.nbytes)} ({travel})."
    )
    try:
        layer = cache.layer(model, int(index))
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return

    params = {}
    with st.expander("Settings", icon=":material/tune:"):
        left, middle, right = st.columns(3)
        draws = left.number_input(
            "Null draws", BOUNDS["n_draws"].low, BOUNDS["n_draws"].high, DEFAULTS["n_draws"],
            key="heads.draws",
            help="Each draw permutes the layer's query rows, and its key rows, across heads. "
            "0: no null, no labels.",
        )  # fmt: skip
        seed = middle.number_input(
            "Seed", BOUNDS["seed"].low, BOUNDS["seed"].high, DEFAULTS["seed"], key="heads.seed"
        )
        params |= {"n_draws": int(draws), "seed": int(seed)}
        if plan.kind == "rotary":
            spec = plan.rotary
            default_context = spec.context or spec.original_context or 4096
            context = right.number_input(
                "Sequence length the rule is applied at",
                CONTEXT.low,
                CONTEXT.high,
                default_context,
                key="heads.context",
            )
            if context != default_context:
                params["context"] = int(context)
        elif plan.kind == "learned":
            low, high = BOUNDS["n_positions"].low, BOUNDS["n_positions"].high
            available = min(len(layer.positions), high)
            n = right.number_input("Positions", low, available, available, key="heads.positions")
            if n != available:
                params["n_positions"] = int(n)
    result = cache.heads(layer, **params)
    settings = export.header(result, layer.provenance())

    columns = st.columns(4)
    columns[0].metric("heads", plan.n_heads, help=f"{plan.n_kv_heads} key/value heads")
    columns[1].metric("head dim", plan.head_dim)
    labelled = [label for label in result.labels if label]
    columns[2].metric(
        "labelled heads", len(labelled), help="Beyond every null draw and the threshold"
    )
    if opened.remote:
        columns[3].metric("fetched", cache.size(layer.bytes_fetched), help="0: from the cache")
    else:
        columns[3].metric("read", cache.size(plan.nbytes), help="From the checkpoint on disk")
    for note in plan.notes:
        st.caption(literal(note))
    thresholds = "; ".join(
        f"“{label}”: {name} ≥ {threshold:g}"
        for label, (name, threshold) in LABELS.items()
        if name in result.numbers
    )
    st.caption(
        f"A head is labelled only when its number is above every null draw of every head and at "
        f"least: {thresholds}."
    )

    model_name = opened.label
    heads = figures.heads.head_names(result)
    if plan.kind == "rotary":
        labels = ["Heads x pairs", "One head", "B(Δ)", "Numbers"]
        tabs = dict(
            zip(labels, widgets.tabs_drawn_when_open(labels, key="heads.section"), strict=True)
        )
        with tabs["Heads x pairs"]:
            if tabs["Heads x pairs"].open:
                widgets.show_figure(
                    figures.heads.usage_overview(result, model=model_name),
                    name="heads_usage",
                    settings=settings,
                )
        with tabs["One head"]:
            if tabs["One head"].open:
                head = _pick_head(heads)
                widgets.show_figure(
                    figures.heads.usage_profile(result, head), name="heads_usage_profile",
                    settings=settings,
                )  # fmt: skip
        with tabs["B(Δ)"]:
            if tabs["B(Δ)"].open:
                widgets.show_figure(
                    figures.heads.decays(result), name="heads_decay", settings=settings
                )
        numbers = ROTARY_NUMBERS
    else:
        labels = ["Heads x offset", "One head", "Numbers"]
        tabs = dict(
            zip(labels, widgets.tabs_drawn_when_open(labels, key="heads.section"), strict=True)
        )
        with tabs["Heads x offset"]:
            if tabs["Heads x offset"].open:
                widgets.show_figure(
                    figures.heads.offsets_overview(result, model=model_name),
                    name="heads_offsets",
                    settings=settings,
                )
        with tabs["One head"]:
            if tabs["One head"].open:
                head = _pick_head(heads)
                widgets.show_figure(
                    figures.heads.kernel_map(result, head, attention=True),
                    name="heads_attention",
                    settings=settings,
                )
                with widgets.expander_drawn_when_open("The kernel itself", key="heads.kernel") as o:
                    if o:
                        widgets.show_figure(
                            figures.heads.kernel_map(result, head), name="heads_kernel",
                            settings=settings,
                        )  # fmt: skip
                with widgets.expander_drawn_when_open(
                    "Its offset profile", key="heads.profile"
                ) as o:
                    if o:
                        widgets.show_figure(
                            figures.heads.offset_profile(result, head), name="heads_profile",
                            settings=settings,
                        )  # fmt: skip
        numbers = PATTERN_NUMBERS
    with tabs["Numbers"]:
        if tabs["Numbers"].open:
            name = st.selectbox(
                "Number",
                list(numbers),
                key="heads.number",
                help="; ".join(f"{k}: {v}" for k, v in numbers.items()),
            )
            widgets.show_figure(
                figures.heads.numbers_vs_null(result, name), name="heads_null", settings=settings
            )
            widgets.show_numbers(result.to_frame(), name="heads", settings=settings)


def _pick_head(names: list[str]) -> int:
    """The head the One head tab draws (one widget key on every kind of layer)."""
    return st.selectbox("Head", range(len(names)), format_func=names.__getitem__, key="heads.head")


# A function, not st.stop(): app.py draws the sidebar card after the page.
_page()
