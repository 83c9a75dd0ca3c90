"""Heads: how each attention head reads position, from the query and key weights alone: every
layer at once (layers x heads), and one layer in detail; of a model shipped with posviz, an
upload, the shared folder, or a model on the Hub."""

from pathlib import Path

import streamlit as st

from posviz import depth, export, figures, hub
from posviz._params import Bound, Refused, bounds_of
from posviz._settings import data_dir
from posviz.examples import EXAMPLES
from posviz.heads import LABELS, PATTERN_NUMBERS, ROTARY_NUMBERS, learned_heads
from posviz.models.attention import NoHeadsView, Opened
from posviz.schemes.rotary import rotary_frequencies
from posviz.source import HubRef
from posviz.ui import heads as models
from posviz.ui import inputs, state, widgets
from posviz.ui.text import literal

SUGGESTED = ("openai-community/gpt2", "google-bert/bert-base-uncased", "meta-llama/Llama-3.1-8B")

st.title("Attention heads")
st.caption(
    "How each attention head reads position, from the layer's weights alone: no text, no "
    "forward pass. Only the query and key rows, their norms and (for a learned table) the "
    "position table are read. Every number is shown beside its null: the same computation with "
    "the layer's query and key rows permuted across heads (docs/heads.md)."
)


def _pick_model() -> models.Shown:
    """Where the model comes from; the model shown (the one before, while a choice fails)."""
    current = models.shown()
    origin = state.current().origin
    sources = ["Example", "Upload"]
    shared = data_dir()
    if shared:
        sources.append("Shared folder")
    if hub.enabled():
        sources.append("Hub model")
    if isinstance(origin, HubRef):  # the current table came from a model on the Hub
        sources.append("The current table's model")
    default = current.kind if current.kind in sources else sources[0]
    source = st.segmented_control("Model from", sources, default=default, key="heads.source")
    if source == "Example":
        names = list(EXAMPLES)
        now = current.text.removeprefix("example:")
        name = st.selectbox(
            "Model shipped with posviz",
            names,
            index=names.index(now) if now in names else 0,
            format_func=lambda n: EXAMPLES[n].title,
            key="heads.example",
        )
        return models.example(name)
    if source == "Upload":
        files = st.file_uploader(
            f"Upload a model: {models.UPLOAD_HELP}",
            type=["json", "safetensors", "gguf"],
            accept_multiple_files=True,
            key="heads.upload",
            help="Read on this server only. The files are kept while this page shows them.",
        )
        return models.uploaded(files) if files else current
    if source == "Shared folder" and shared:
        return models.pick_shared(Path(shared))
    if source == "The current table's model" and isinstance(origin, HubRef):
        return models.from_hub(origin.repo, origin.revision, origin.file)
    if source == "Hub model":
        with st.form("heads.hub"):
            left, right = st.columns([3, 1])
            repo = left.text_input("Model id", placeholder=SUGGESTED[0], key="heads.repo")
            revision = right.text_input("Revision", "main", key="heads.revision")
            if st.form_submit_button("Open", type="primary"):
                models.set_hub_model(repo, revision)
        named = models.hub_model()
        if named is None:
            st.info(
                "Name a model, e.g. " + ", ".join(f"`{m}`" for m in SUGGESTED) + " (a repo of "
                "GGUF files as REPO:Q8_0). Its config.json and headers are read first; the page "
                "then says how many bytes travel before they do.",
                icon=":material/info:",
            )
            return current
        repo, _, file = named[0].partition(":")
        return models.from_hub(repo, named[1], file or None)
    return current


def _settings(first: depth.DepthPlan) -> dict:
    """The null's draws and seed, and the kind's own setting, for every layer alike."""
    params: dict = {}
    plan = first.plans[0]
    with st.expander("Settings", icon=":material/tune:"):
        left, middle, right = st.columns(3)
        # Every kind's step shares these settings and bounds (posviz.heads: DRAWS, SEED, ...).
        draws = inputs.setting(
            learned_heads,
            "n_draws",
            "Null draws",
            key="heads.draws",
            help="Each draw permutes the layer's query rows, and its key rows, across heads. "
            "0: no null, no labels.",
            where=left,
        )
        seed = inputs.setting(learned_heads, "seed", "Seed", key="heads.seed", where=middle)
        params |= {"n_draws": draws, "seed": seed}
        if plan.kind == "rotary" and plan.rotary is not None:
            spec = plan.rotary
            default_context = spec.context or spec.original_context or 4096
            context = inputs.setting(
                rotary_frequencies,
                "context",
                "Sequence length the rule is applied at",
                default=default_context,
                key="heads.context",
                where=right,
            )
            if context != default_context:
                params["context"] = context
        elif plan.kind == "learned":
            high = bounds_of(learned_heads)["n_positions"].high
            available = plan.n_positions or high  # the table's, at most MAX_POSITIONS
            n = inputs.setting(
                learned_heads,
                "n_positions",
                "Positions",
                high=available,
                default=available,
                key="heads.positions",
                where=right,
            )
            if n != available:
                params["n_positions"] = n
    return params


def _depth(shown: models.Shown, found: depth.DepthPlan, params: dict) -> depth.DepthHeads | None:
    """Every layer asked, read one at a time; their maps and labels over depth."""
    run = models.depth_run(shown.model, found, params)
    if found.to_fetch > models.ASK_BYTES and not run.asked:
        st.warning(
            f"Reading these {len(found.plans)} layers fetches {models.size(found.to_fetch)} "
            "from the Hub (their query and key rows), more than "
            f"{models.size(models.ASK_BYTES)}. Name fewer layers above, or:",
            icon=":material/cloud_download:",
        )
        st.button(
            f"Fetch {models.size(found.to_fetch)}", key="heads.fetch", on_click=models.resume,
            args=(run,), type="primary",
        )  # fmt: skip
        return None
    models.read_depth(found, run, params)
    total = len(found.plans)
    if run.error:
        st.error(
            f"Reading stopped at layer {len(run.numbers) + 1}/{total}: {literal(run.error)} The "
            "layers read before are shown.",
            icon=":material/error:",
        )
    if run.stopped and len(run.numbers) < total:
        st.info(
            f"Stopped after {len(run.numbers)} of {total} layers; every byte fetched stays "
            "in the cache.",
            icon=":material/pause:",
        )
        st.button(
            f"Read the other {total - len(run.numbers)} layers", key="heads.resume",
            on_click=models.resume, args=(run,),
        )  # fmt: skip
    if not run.numbers:
        return None
    result = run.result(found)
    settings = depth.layers_record(result, run.records)
    model_name = found.model
    tabs = dict(
        zip(
            labels := ["Layers x heads", "Labels over depth", "Numbers"],
            widgets.tabs_drawn_when_open(labels, key="heads.depth"),
            strict=True,
        )
    )
    definitions = result.definitions
    with tabs["Layers x heads"]:
        if tabs["Layers x heads"].open:
            # Opens on the number the first label reads (previous-token, high-frequency).
            first = next(n for n, _ in LABELS.values() if n in definitions)
            name = st.selectbox(
                "Number",
                list(definitions),
                index=list(definitions).index(first),
                key="heads.number",
                bind="query-params",
                help="; ".join(f"{k}: {v}" for k, v in definitions.items()),
            )
            widgets.show_figure(
                figures.heads.depth_map(result, name, model=model_name),
                name="heads_depth_map",
                settings=settings,
            )
    with tabs["Labels over depth"]:
        if tabs["Labels over depth"].open:
            widgets.show_figure(
                figures.heads.depth_labels(result), name="heads_depth_labels", settings=settings
            )
    with tabs["Numbers"]:
        if tabs["Numbers"].open:
            st.caption(
                "One row per layer and head; each number's null max is its layer's largest "
                "null draw over heads. The downloads carry every layer's record as `posviz "
                "heads --layers … --json` prints it (without the kernels' rows) and the depth "
                "summary: `posviz rerun` recomputes every number."
            )
            frame = result.to_frame()
            widgets.show_numbers(
                frame, name="heads_depth", settings=settings, pinned="layer",
                shown=models.beside_null(frame, by="layer"), blank=models.NULL_NOTE,
            )  # fmt: skip
    return result


def _plan(opened: Opened, layers: str) -> depth.DepthPlan:
    """The layers named planned; every layer when the text names none the model has."""
    try:
        return depth.plan_depth(opened, layers)
    except NoHeadsView:
        raise
    except Refused as error:
        st.error(f"{literal(error)} The default layers are read instead.", icon=":material/error:")
        return depth.plan_depth(opened, models.default_layers(opened))


def _page() -> None:
    """The model, its layers across depth, then one layer in detail."""
    shown = _pick_model()
    example = EXAMPLES.get(shown.text.removeprefix("example:"))
    if example is not None and example.simulated:
        st.info(f"**Simulated model.** {literal(example.about)}", icon=":material/science:")
    elif shown.about:
        st.caption(shown.about)
    opened = models.opened(shown.model)
    layers = st.text_input(
        "Layers",
        models.default_layers(opened),
        key="heads.layers",
        bind="query-params",
        help=f"Which layers the depth view reads: {depth.LAYERS_SYNTAX} (0-based).",
    )
    try:
        found = _plan(opened, layers)
    except NoHeadsView as error:
        st.info(literal(error), icon=":material/info:")
        return
    except Refused as error:
        st.error(literal(error), icon=":material/error:")
        return
    travel = (
        f"{models.size(found.to_fetch)} to fetch from the Hub"
        if found.to_fetch
        else ("nothing to fetch (cached)" if found.remote else "read from the checkpoint")
    )
    quantization = found.plans[0].quantization
    quantized = f"; quantization {quantization}" if quantization else ""
    skipped = (
        f"; without a per-head view: layers {', '.join(map(str, found.skipped))}"
        if found.skipped
        else ""
    )
    st.caption(
        f"{literal(found.model)}: {found.family}, {found.kind.replace('_', ' ')}; "
        f"{len(found.plans)} of {found.n_layers or '?'} layers, their query and key rows "
        f"{models.size(found.nbytes)} ({travel}){quantized}{skipped}."
    )
    if not found.cache_holds:
        st.warning(
            f"This server's Hub cache holds less than these layers' {models.size(found.nbytes)}: "
            "a second run, or one read on after a stop, fetches again what it let go.",
            icon=":material/cached:",
        )
    params = _settings(found)
    try:
        for each in found.plans:  # the work the heads would take, before a weight is read
            depth.check_heads(each, **params)
    except Refused as error:
        st.error(literal(error), icon=":material/error:")
        return

    st.subheader("Across depth")
    result = _depth(shown, found, params)

    st.subheader("One layer")
    count = found.n_layers or (max(found.layers) + 1)
    left, right = st.columns([1, 3], vertical_alignment="bottom")
    index = inputs.number(
        "Layer",
        Bound(0, count - 1),
        0,
        key="heads.layer",
        help="Heat map cells cannot be clicked: name the layer here.",
        where=left,
    )
    if result is not None:
        found_labels = [
            f"{n.layer} ({sum(bool(label) for label in n.labels)})"
            for n in result.layers
            if any(n.labels)
        ]
        right.caption(
            "Layers with labelled heads (how many): " + (", ".join(found_labels) or "none")
        )
    _layer(shown, int(index), params)


def _layer(shown: models.Shown, index: int, params: dict) -> None:
    """Layer `index`'s heads: today's per-layer view."""
    model = shown.model
    try:
        plan = models.plan(model, index)
    except NoHeadsView as error:
        st.info(literal(error), icon=":material/info:")
        return
    except Refused as error:
        st.error(literal(error), icon=":material/error:")
        return
    opened = models.opened(model)
    waiting = sum(r.nbytes for r in plan.reads if opened.remote and not opened.cached(r))
    travel = (
        f"{models.size(waiting)} travel from the Hub"
        if waiting
        else ("nothing travels (cached)" if opened.remote else "read from the checkpoint")
    )
    st.caption(
        f"Layer {plan.layer} of {literal(opened.label)}: {plan.family}, "
        f"{plan.kind.replace('_', ' ')}; "
        f"{len(plan.reads)} tensors, {models.size(plan.nbytes)} ({travel})."
    )
    try:
        depth.check_heads(plan, **params)  # before a weight is read
        layer = models.layer(model, index)
        result = models.heads(layer, **params)
    except Refused as error:
        st.error(literal(error), icon=":material/error:")
        return
    settings = export.header(result, layer.provenance())

    columns = st.columns(4)
    columns[0].metric("heads", plan.n_heads, help=f"{plan.n_kv_heads} key/value heads")
    columns[1].metric("head dim", plan.head_dim)
    labelled = [label for label in result.labels if label]
    columns[2].metric(
        "labelled heads", len(labelled), help="Beyond every null draw and the threshold"
    )
    if opened.remote:
        columns[3].metric("fetched", models.size(layer.bytes_fetched), help="0: from the cache")
    else:
        columns[3].metric("read", models.size(plan.nbytes), help="From the checkpoint on disk")
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
                key="heads.null_number",
                help="; ".join(f"{k}: {v}" for k, v in numbers.items()),
            )
            widgets.show_figure(
                figures.heads.numbers_vs_null(result, name), name="heads_null", settings=settings
            )
            frame = result.to_frame()
            widgets.show_numbers(
                frame, name="heads", settings=settings, pinned="head",
                shown=models.beside_null(frame), blank=models.NULL_NOTE,
            )  # fmt: skip


def _pick_head(names: list[str]) -> int:
    """The head the One head tab draws (one widget key on every kind of layer)."""
    return st.selectbox("Head", range(len(names)), format_func=names.__getitem__, key="heads.head")


# A function, not st.stop(): app.py draws the sidebar card after the page.
_page()
