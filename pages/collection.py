"""Collection: many tables side by side, a model zoo or one model's checkpoints over training."""

import math
from collections.abc import Callable
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from posviz import _params, export, figures, hub, io, pipeline, simulate
from posviz._settings import data_dir
from posviz.collection import DEFINITIONS, MAX_TABLES, Collection, Member, gather, members_table
from posviz.embedding import LoadError
from posviz.report import build_collection_report
from posviz.schemes.presets import preset_rotary_table, preset_rotary_width, rotary_presets
from posviz.schemes.rotary import rotary_table
from posviz.ui import cache, inputs, loaders, state, widgets
from posviz.ui.text import literal, show_refusal

BUDGET, RUN = _params.defaults(gather.gather), _params.defaults(gather.example_run)
#: The widgets' bounds, as the functions they feed declare them.
DROP = _params.bounds_of(gather.file_request)["row_start"]
ROWS = _params.bounds_of(rotary_table)["positions"]


def add(requests: list[gather.Request]) -> bool:
    """Add the requested tables if they fit the budgets; else say which budget, loading none."""
    try:
        state.add_to_collection(requests)
    except LoadError as error:
        st.error(literal(error), icon=":material/block:")
        return False
    return True


def loading_options(key: str) -> tuple[str | None, int]:
    """The tensor name (blank: detected) and leading rows to drop, for every file of a batch."""
    left, right = st.columns(2)
    tensor = left.text_input(
        "Tensor (blank: detected by name and shape)", key=f"{key}.tensor", max_chars=500
    )
    drop = inputs.number("Drop leading rows", DROP, 0, key=f"{key}.drop", where=right, link=False)
    return tensor.strip() or None, drop


def from_uploads() -> None:
    files = st.file_uploader(
        "Position tables or checkpoints",
        accept_multiple_files=True,
        key="collection.upload",
        # The collection's own budget, not the server's 1 GiB: the uploader says one limit.
        max_upload_size=math.ceil(BUDGET["max_bytes"] / 2**20),
        help=f"{io.ACCEPTED_FORMATS}. Labels are the file names; a step in a name "
        "(step1000, checkpoint-2000, epoch3, -1k) orders the collection.",
    )
    tensor, drop = loading_options("collection.upload")
    if files and st.button(f"Add {len(files)} uploaded files", key="collection.upload.add"):
        add(
            [
                gather.file_request(
                    gather.stem(f.name), f.getvalue(), f.name, tensor=tensor, row_start=drop
                )
                for f in files
            ]
        )


def from_shared_folder(root: Path) -> None:
    try:
        files = loaders.shared_files(root)
    except LoadError as error:
        st.error(f"POSVIZ_DATA_DIR: {literal(error)}", icon=":material/error:")
        return
    left, right = st.columns(2)
    folder = left.selectbox("Subfolder", gather.folders(files), key="collection.shared.folder")
    pattern = right.text_input(
        "Files matching", "*", key="collection.shared.pattern", max_chars=gather.MAX_PATTERN
    )
    matches = gather.matching(files, folder, pattern)
    tensor, drop = loading_options("collection.shared")
    st.caption(f"{len(matches)} matching files under {literal(folder)} (subfolders included).")
    if matches and st.button(
        f"Add {len(matches)} files",
        key="collection.shared.add",
        disabled=len(matches) > MAX_TABLES,  # each costs a header read before the count check
        help=f"A collection holds at most {MAX_TABLES} tables: narrow the pattern."
        if len(matches) > MAX_TABLES
        else None,
    ):
        add([gather.shared_request(root, f, tensor=tensor, row_start=drop) for f in matches])


def from_simulations() -> None:
    kinds = [k for k in simulate.GENERATORS if k != "2-D grid (ViT)"]
    kind = st.selectbox(
        "Generator", kinds, index=kinds.index("learned-like"), key="collection.sim.kind"
    )
    left, middle, right = st.columns(3)
    lengths = left.text_input(
        "Positions (comma-separated)", "512", key="collection.sim.n", max_chars=200
    )
    seeds = middle.text_input(
        "Seeds (comma-separated)", "0, 1, 2", key="collection.sim.seeds", max_chars=200
    )
    width = simulate.PARAMETERS["d_model"]
    d_model = inputs.number(
        width.label,
        _params.Bound(width.low, width.high),
        256,
        step=4,
        key="collection.sim.d",
        where=right,
        link=False,
    )
    if st.button("Add simulations", key="collection.sim.add"):
        try:
            ns, seed_list = (
                gather.parse_numbers(text, p.label, low=p.low, high=p.high)
                for text, p in (
                    (lengths, simulate.PARAMETERS["n_positions"]),
                    (seeds, simulate.PARAMETERS["seed"]),
                )
            )
        except ValueError as error:
            st.error(literal(error))
            return
        add(gather.simulation_requests(kind, ns, seed_list, d_model=d_model))


def from_schemes() -> None:
    """Rotary position tables of known models, as the Schemes page opens them."""
    chosen = st.multiselect("Rotary models", rotary_presets(), key="collection.schemes.models")
    rows = inputs.number("Positions (rows)", ROWS, 1024, key="collection.schemes.rows", link=False)
    if chosen and st.button(f"Add {len(chosen)} rotary tables", key="collection.schemes.add"):
        add(
            [
                gather.Request(
                    name,
                    nbytes=rows * preset_rotary_width(name) * 8,  # float64
                    load=lambda name=name: preset_rotary_table(name, positions=rows),
                )
                for name in chosen
            ]
        )


def from_hub() -> None:
    """Model ids and revisions, each read as the Data page's Hub tab reads one."""
    refs = st.text_area(
        "Model ids, one per line (REPO or REPO@REVISION)",
        placeholder="openai-community/gpt2\nEleutherAI/pythia-70m@step1000",
        key="collection.hub.refs",
        max_chars=4000,
    )
    left, right = st.columns(2)
    repo = left.text_input("…or one repo", key="collection.hub.repo", max_chars=200)
    revisions = right.text_input(
        "at these revisions (comma-separated)",
        placeholder="step1000, step2000, step4000",
        key="collection.hub.revisions",
        max_chars=2000,
    )
    try:
        lines = gather.hub_lines(refs, repo, revisions)
    except ValueError as error:
        st.error(literal(error))
        return
    if lines and st.button(f"Add {len(lines)} models", key="collection.hub.add"):
        add([gather.hub_request(line, max_bytes=state.upload_limit()) for line in lines])


def edit_members(members: list[Member]) -> list[Member]:
    """The members as an editable table: labels can be changed, rows removed."""
    edited = st.data_editor(
        members_table(members),
        hide_index=True,
        width="stretch",
        height=35 * min(len(members) + 1, 7) + 3,  # scrolls beyond 6 rows: the charts stay near
        disabled=["step", "table", "status"],
        key=f"collection.editor.{state.editor_version()}",
        column_config={
            "keep": st.column_config.CheckboxColumn(help="Untick to remove the table."),
            "label": st.column_config.TextColumn(pinned=True),
            "step": st.column_config.TextColumn(help="Read from the label; - for none."),
        },
    )
    kept = gather.edited(members, edited["label"], edited["keep"])
    if len(kept) < len(members):
        state.set_collection(kept)
        st.rerun()
    state.set_collection(kept, redraw=False)
    return kept


def example() -> None:
    """The one-click example, offered while the collection cannot show anything yet."""
    if st.button(
        "Try an example: a simulated training run",
        key="collection.example",
        type="primary",
        icon=":material/play_arrow:",
        help=f"One learned-like table ({RUN['n_positions']} x {RUN['d_model']}, seed "
        f"{RUN['seed']}) at {len(RUN['steps'])} training steps: its noise falls and its end "
        "rows move apart as training goes on.",
    ) and add(gather.example_run()):
        st.rerun()


def show(members: list[Member], loaded: list[Member]) -> None:
    """The collection's numbers and charts (a function: st.stop would end app.py's sidebar)."""
    left, right = st.columns([1, 3], vertical_alignment="center")
    with left:
        center = widgets.center_toggle()
    progress = st.progress(0.0)
    for i, m in enumerate(loaded):
        text = f"Analysing {literal(m.label)} ({i + 1} of {len(loaded)})…"
        progress.progress(i / len(loaded), text=text)
        cache.run(pipeline.table_summary, m.table, center=center)
    progress.empty()
    result = cache.collection(
        tuple(m.label for m in members),
        tuple(m.table for m in members),
        tuple(m.error for m in members),
        center=center,
    )
    settings = result.header()
    held = sorted({m.table.values.dtype.name for m in loaded})
    right.caption(
        result.describe()
        + f"; the collection holds {result.nbytes / 2**20:.1f} MiB of tables ({', '.join(held)})."
    )
    for m in result.members:
        if m.error:
            lead = f"**{literal(m.label)}** was refused: "
            show_refusal(m.error, lead=lead, say=st.warning, icon=":material/block:")

    def draw(build: Callable[[Collection], go.Figure], name: str) -> None:
        widgets.show_figure(
            cache.figure(build, result, digest=result.digest), name=name, settings=settings
        )

    metrics, over, spectra, offsets, maps, one, cka = widgets.page_tabs("collection")
    with metrics:
        if metrics.open:
            widgets.show_numbers(
                result.to_frame(),
                name="collection_metrics",
                settings=settings,
                shown=result.shown_table(),
                pinned="label",
            )
            with st.expander("Definitions"):
                st.markdown("\n".join(f"- **{k}**: {v}" for k, v in DEFINITIONS.items()))
    with over:
        if over.open and result.ordered:
            draw(figures.collection.metrics_over_step, "collection_over_step")
        elif over.open:
            st.info(
                "Over training needs a step in every loaded table's label (step1000, "
                "checkpoint-2000, epoch3, run-1k); edit the labels above to add them.",
                icon=":material/info:",
            )
    with spectra:
        if spectra.open:
            draw(figures.collection.collection_cumulative, "collection_cumulative")
    with offsets:
        if offsets.open:
            draw(figures.collection.collection_offsets, "collection_offsets")
    with maps:
        if maps.open:
            draw(figures.collection.similarity_grid, "collection_similarity")
    with one:
        if one.open:
            one_table(result, center=center)
    with cka:
        if cka.open:
            draw(figures.collection.cka_map, "collection_cka_map")
            st.caption(
                f"Linear CKA compares the tables on their common positions: the first "
                f"{result.common_positions:,} rows of each (the shortest table's length), any "
                "widths. Distances are sqrt(2 − 2·CKA): 0 for tables equal up to rotation and "
                "scale. The estimator is the classic (biased) one: unrelated tables score above "
                "0, more so the wider they are for their length; the Compare page gives the "
                "debiased CKA and a permutation null for a pair."
            )
            with st.expander("CKA between every pair"):
                widgets.show_numbers(result.cka_table(), name="collection_cka", settings=settings)

    st.download_button(
        "Collection report (HTML)",
        data=lambda: build_collection_report(result),
        file_name="posviz-collection-report.html",
        mime="text/html",
        key="download.collection.report",
        icon=":material/summarize:",
    )


#: The height of the spectrum chart (base_figure's), which the map beside it takes.
SIDE_BY_SIDE = 450


def one_table(result: Collection, *, center: bool) -> None:
    """One table's similarity map and spectrum, picked (walked through training) by label."""
    labels = [m.label for m in result.loaded]
    label = st.select_slider("Table", labels, key="collection.walk") if result.ordered else None
    label = label or st.selectbox("Table", labels, key="collection.pick")
    table = result.loaded[labels.index(label)].table
    spectrum = result.summary(label).spectrum  # computed for the metrics table already
    overview = cache.run(pipeline.similarity_map, table, center=center)
    left, right = st.columns(2)
    with left:
        widgets.show_figure(
            cache.figure(
                figures.similarity.similarity_heatmap,
                overview,
                labels=table.labels,
                height=SIDE_BY_SIDE,  # the spectrum's: their export buttons line up
            ),
            name="collection_heatmap",
            settings={**export.header(overview, table), "label": label},
        )
    with right:
        widgets.show_figure(
            cache.figure(figures.spectrum.singular_values, spectrum),
            name="collection_spectrum",
            settings={**export.header(spectrum, table), "label": label},
        )


st.title("Collection")
st.caption(
    f"2 to {MAX_TABLES} tables side by side: a set of models, or one model's checkpoints. When "
    "every label names a step (step1000, checkpoint-2000, global_step300, epoch3, run-1k), the "
    "tables are ordered by it and the over-training views appear."
)
members = state.collection()
shared = data_dir()
sources = {"Upload files": from_uploads, "Simulate": from_simulations}
sources["Rotary schemes"] = from_schemes
if shared:
    sources["Shared folder"] = lambda: from_shared_folder(Path(shared))
if hub.enabled():  # POSVIZ_HUB=off: no tab
    sources["Hugging Face Hub"] = from_hub
with st.expander("Add tables", expanded=len(members) < 2, icon=":material/add:"):
    st.caption(
        f"A collection holds at most {BUDGET['max_tables']} tables and "
        f"{BUDGET['max_bytes'] / 2**20:,.0f} MiB of them; the collections of everyone on this "
        f"server together {BUDGET['max_server_bytes'] / 2**20:,.0f} MiB. Sizes are read from "
        "the files' headers first: a request over a budget loads nothing."
    )
    for tab, source in zip(st.tabs(list(sources)), sources.values(), strict=True):
        with tab:
            source()

members = state.collection()
if members:
    members = edit_members(members)
    if st.button("Remove all", key="collection.clear"):
        state.set_collection([])
        st.rerun()

loaded = [m for m in members if m.table is not None]
if len(loaded) < 2:
    st.info("Add at least two loadable tables to compare them, or try the example.")
    example()
else:
    show(members, loaded)
