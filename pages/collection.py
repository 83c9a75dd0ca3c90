"""Collection: many tables side by side, a model zoo or one model's checkpoints over training."""

import fnmatch
import itertools
import os
from dataclasses import replace
from pathlib import Path, PurePosixPath

import streamlit as st

from posviz import datadir, export, figures, hub, io, simulate
from posviz.collection import (
    MAX_TABLES,
    METRIC_DEFINITIONS,
    Member,
    member,
    members_table,
    order,
)
from posviz.embedding import LoadError
from posviz.report import build_collection_report
from posviz.similarity import MAX_SIDE, METRIC
from posviz.ui import cache, widgets
from posviz.ui.text import literal

#: The session's members (list of Member) and the version of its label editor.
MEMBERS, EDITOR = "posviz.collection", "posviz.collection.editor"


def add(new: list[Member]) -> None:
    """Append members (a table already held under the same label is skipped), up to 32."""
    members = st.session_state[MEMBERS]
    held = {(m.label, m.table.sha256 if m.table else None) for m in members}
    fresh = [m for m in new if (m.label, m.table.sha256 if m.table else None) not in held]
    room = MAX_TABLES - len(members)
    if len(fresh) > room:
        st.warning(
            f"A collection holds at most {MAX_TABLES} tables: {len(fresh) - room} not added."
        )
    st.session_state[MEMBERS] = list(order(members + fresh[:room]))
    st.session_state[EDITOR] += 1


def loading_options(key: str) -> tuple[str | None, int]:
    """The tensor name (blank: detected) and leading rows to drop, for every file of a batch."""
    left, right = st.columns(2)
    tensor = left.text_input("Tensor (blank: detected by name and shape)", key=f"{key}.tensor")
    drop = right.number_input("Drop leading rows", 0, 4096, 0, key=f"{key}.drop")
    return tensor.strip() or None, int(drop)


def from_uploads() -> None:
    files = st.file_uploader(
        "Position tables or checkpoints",
        accept_multiple_files=True,
        key="collection.upload",
        help=f"{io.ACCEPTED_FORMATS}. Labels are the file names; a step in a name "
        "(step1000, checkpoint-2000, epoch3, -1k) orders the collection.",
    )
    tensor, drop = loading_options("collection.upload")
    if files and st.button(f"Add {len(files)} uploaded files", key="collection.upload.add"):
        add(
            [
                member(
                    _stem(f.name),
                    lambda f=f: io.load(f.getvalue(), f.name, tensor=tensor, row_start=drop),
                )
                for f in files
            ]
        )


def _stem(name: str) -> str:
    path = PurePosixPath(name)
    return str(path.with_suffix("")) if path.suffix.lower() in datadir.EXTENSIONS else name


@st.cache_data(ttl=60, show_spinner="Listing the shared folder…")
def _shared_files(root: Path) -> list[str]:
    return datadir.list_files(root)


def from_shared_folder(root: Path) -> None:
    try:
        files = _shared_files(root)
    except LoadError as error:
        st.error(f"POSVIZ_DATA_DIR: {literal(error)}", icon=":material/error:")
        return
    folders = sorted({str(PurePosixPath(f).parent) for f in files})
    left, right = st.columns(2)
    folder = left.selectbox("Subfolder", folders, key="collection.shared.folder")
    pattern = right.text_input("Files matching", "*", key="collection.shared.pattern")
    matches = [
        f
        for f in files
        if PurePosixPath(f).is_relative_to(folder)
        and fnmatch.fnmatch(PurePosixPath(f).name, pattern)
    ]
    tensor, drop = loading_options("collection.shared")
    st.caption(f"{len(matches)} matching files under {literal(folder)} (subfolders included).")
    if matches and st.button(f"Add {len(matches)} files", key="collection.shared.add"):
        add(
            [
                member(
                    _stem(f),
                    lambda f=f: io.load(datadir.resolve(root, f), f, tensor=tensor, row_start=drop),
                )
                for f in matches
            ]
        )


def from_simulations() -> None:
    kinds = [k for k in simulate.GENERATORS if k != "2-D grid (ViT)"]
    kind = st.selectbox(
        "Generator", kinds, index=kinds.index("learned-like"), key="collection.sim.kind"
    )
    left, middle, right = st.columns(3)
    lengths = left.text_input("Positions (comma-separated)", "512", key="collection.sim.n")
    seeds = middle.text_input("Seeds (comma-separated)", "0, 1, 2", key="collection.sim.seeds")
    d_model = right.number_input("Dimensions", 4, 8192, 256, step=4, key="collection.sim.d")
    if st.button("Add simulations", key="collection.sim.add"):
        try:
            ns = [int(v) for v in lengths.split(",") if v.strip()]
            seed_list = [int(v) for v in seeds.split(",") if v.strip()]
        except ValueError:
            st.error("Positions and seeds are whole numbers separated by commas, e.g. 256, 512.")
            return
        generator = simulate.GENERATORS[kind]
        if kind == "sinusoidal":  # deterministic: a seed changes nothing
            seed_list = [None]
        add(
            [
                member(
                    f"{kind} n={n}" + ("" if seed is None else f" seed={seed}"),
                    lambda n=n, seed=seed: generator(
                        n, d_model, **({} if seed is None else {"seed": seed})
                    ),
                )
                for n, seed in itertools.product(ns, seed_list)
            ]
        )


def from_hub() -> None:
    """Model ids and revisions, each read as the Data page's Hub tab reads one."""
    refs = st.text_area(
        "Model ids, one per line (REPO or REPO@REVISION)",
        placeholder="openai-community/gpt2\nEleutherAI/pythia-70m@step1000",
        key="collection.hub.refs",
    )
    left, right = st.columns(2)
    repo = left.text_input("…or one repo", key="collection.hub.repo")
    revisions = right.text_input(
        "at these revisions (comma-separated)",
        placeholder="step1000, step2000, step4000",
        key="collection.hub.revisions",
    )
    lines = [line.strip() for line in refs.splitlines() if line.strip()]
    if repo.strip():
        lines += [f"{repo.strip()}@{r.strip()}" for r in revisions.split(",") if r.strip()]
    if lines and st.button(f"Add {len(lines)} models", key="collection.hub.add"):
        add(
            [
                member(
                    line,
                    lambda line=line: hub.load(line if hub.is_hub_ref(line) else f"hf:{line}"),
                )
                for line in lines
            ]
        )


def edit_members() -> list[Member]:
    """The members as an editable table: labels can be changed, rows removed."""
    members = st.session_state[MEMBERS]
    frame = members_table(members)
    frame.insert(0, "keep", True)  # the editor's remove box
    edited = st.data_editor(
        frame,
        hide_index=True,
        width="stretch",
        disabled=["step", "table", "status"],
        key=f"collection.editor.{st.session_state[EDITOR]}",
        column_config={"step": st.column_config.NumberColumn(help="Read from the label.")},
    )
    members = [
        replace(m, label=str(label).strip() or m.label)
        for m, label in zip(members, edited["label"], strict=True)
    ]
    if not edited["keep"].all():
        st.session_state[MEMBERS] = [m for m, k in zip(members, edited["keep"], strict=True) if k]
        st.session_state[EDITOR] += 1
        st.rerun()
    st.session_state[MEMBERS] = members
    return members


def show(members: list[Member], loaded: list[Member]) -> None:
    """The collection's numbers and charts (a function: st.stop would end app.py's sidebar)."""
    center = widgets.center_toggle()
    progress = st.progress(0.0)
    for i, m in enumerate(loaded):
        text = f"Analysing {literal(m.label)} ({i + 1} of {len(loaded)})…"
        progress.progress(i / len(loaded), text=text)
        cache.table_summary(m.table, center=center)
    progress.empty()
    result = cache.collection(
        tuple(m.label for m in members),
        tuple(m.table for m in members),
        tuple(m.error for m in members),
        center=center,
    )
    settings = result.settings()
    held = sorted({m.table.values.dtype.name for m in loaded})
    st.caption(
        result.describe()
        + f"; the collection holds {result.nbytes / 2**20:.1f} MiB of tables ({', '.join(held)})."
    )
    for m in result.members:
        if m.error:
            refusal = f"**{literal(m.label)}** was refused: {literal(m.error)}"
            st.warning(refusal, icon=":material/block:")

    st.subheader("Metrics")
    widgets.show_numbers(result.table(), name="collection_metrics", settings=settings)
    with st.expander("Definitions"):
        st.markdown("\n".join(f"- **{k}**: {v}" for k, v in METRIC_DEFINITIONS.items()))

    if result.ordered:
        st.subheader("Over training")
        widgets.show_figure(
            figures.collection.metrics_over_step(result),
            name="collection_over_step",
            settings=settings,
        )

    st.subheader("Spectra and offset profiles")
    left, right = st.columns(2)
    with left:
        widgets.show_figure(
            figures.collection.collection_cumulative(result),
            name="collection_cumulative",
            settings=settings,
        )
    with right:
        widgets.show_figure(
            figures.collection.collection_offsets(result),
            name="collection_offsets",
            settings=settings,
        )

    st.subheader("Similarity maps")
    widgets.show_figure(
        figures.collection.similarity_grid(result), name="collection_similarity", settings=settings
    )

    st.subheader("One table at a time" + (" through training" if result.ordered else ""))
    labels = [m.label for m in result.loaded]
    label = st.select_slider("Table", labels, key="collection.walk") if result.ordered else None
    label = label or st.selectbox("Table", labels, key="collection.pick")
    table = result.loaded[labels.index(label)].table
    spectrum = result.summary(label).spectrum  # computed for the metrics table already
    left, right = st.columns(2)
    with left:
        overview = cache.similarity_map(table, metric=METRIC, center=center, max_side=MAX_SIDE)
        widgets.show_figure(
            figures.similarity.similarity_heatmap(overview),
            name="collection_heatmap",
            settings=export.export_settings(table, **overview.settings(), label=label),
        )
    with right:
        widgets.show_figure(
            figures.spectrum.singular_values(spectrum),
            name="collection_spectrum",
            settings=export.export_settings(table, **spectrum.settings(), label=label),
        )

    st.subheader("Map of the tables")
    widgets.show_figure(
        figures.collection.cka_map(result), name="collection_cka_map", settings=settings
    )
    st.caption(
        f"Linear CKA compares the tables on their common positions: the first "
        f"{result.common_positions:,} rows of each (the shortest table's length), any widths. "
        "Distances are sqrt(2 − 2·CKA): 0 for tables equal up to rotation and scale."
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


st.title("Collection")
st.caption(
    f"2 to {MAX_TABLES} tables side by side: a set of models, or one model's checkpoints. When "
    "every label names a step (step1000, checkpoint-2000, global_step300, epoch3, run-1k), the "
    "tables are ordered by it and the over-training views appear."
)
st.session_state.setdefault(MEMBERS, [])
st.session_state.setdefault(EDITOR, 0)
shared = os.environ.get("POSVIZ_DATA_DIR")
sources = {"Upload files": from_uploads, "Simulate": from_simulations}
if shared:
    sources["Shared folder"] = lambda: from_shared_folder(Path(shared))
if hub.enabled():  # POSVIZ_HUB=off: no tab
    sources["Hugging Face Hub"] = from_hub
with st.expander("Add tables", expanded=len(st.session_state[MEMBERS]) < 2, icon=":material/add:"):
    for tab, source in zip(st.tabs(list(sources)), sources.values(), strict=True):
        with tab:
            source()

members = edit_members()
if st.session_state[MEMBERS] and st.button("Remove all", key="collection.clear"):
    st.session_state[MEMBERS] = []
    st.session_state[EDITOR] += 1
    st.rerun()


loaded = [m for m in members if m.table is not None]
if len(loaded) < 2:
    st.info("Add at least two loadable tables to compare them.")
else:
    show(members, loaded)
