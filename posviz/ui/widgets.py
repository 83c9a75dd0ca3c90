"""Widgets every page shares: the table loader, the centring toggle, figures and numbers with
their export buttons, and the captions that state what was analysed."""

from __future__ import annotations

import gc
import html
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
import streamlit as st

from posviz import _settings, compare, export, figures, hub, io, quantization, simulate
from posviz._params import defaults
from posviz.embedding import MIN_POSITIONS, Embedding, LoadError, numpy_dtype_name
from posviz.export.screen import on_screen
from posviz.hub.config import no_table_reason
from posviz.io import datadir
from posviz.schemes import weights
from posviz.schemes.relative import relative_table_name
from posviz.spectrum import Spectrum, spectrum
from posviz.ui import cache, pages, state
from posviz.ui.text import literal

if TYPE_CHECKING:
    import pandas as pd

#: The centring every core function defaults to (one default: `center: bool = True`).
CENTER = defaults(spectrum)["center"]


def center_toggle() -> bool:
    """The centring choice, shared by every page that offers it and kept across page switches."""
    return st.toggle(
        "Mean-centre rows",
        value=CENTER,
        key="posviz.center",
        persist_state="session",
        bind="query-params",
        help="Subtract the mean row (the average position vector) before analysing: PCA. "
        "Without it the first component is mostly the mean row.",
    )


def table_caption(table: Embedding) -> None:
    """State which table and which rows the results below are about."""
    st.caption(
        f"**{literal(table.name)}** {table.shape[0]} x {table.shape[1]} · "
        f"{table.describe_rows()} · {literal(table.source)}"
    )


def link_notices() -> None:
    """Before the page: open the tables the URL names, say above the page what a link could
    not reopen, and name the tables in the URL (a page switch drops them from it)."""
    state.current()
    if any(key.startswith(state.PREFIX[state.SECOND]) for key in st.query_params):
        state.current(state.SECOND)
    for text in state.notices():
        st.warning(text, icon=":material/link_off:")
    state.sync_url()


def glossary() -> None:
    """The glossary in the sidebar, on every page: one line per word the pages use."""
    from posviz.glossary import TOPICS

    with st.sidebar.popover("Glossary", icon=":material/menu_book:", width="stretch"):
        for topic, terms in TOPICS.items():
            st.markdown(f"**{topic}**")
            st.markdown(
                "\n".join(f"- **{literal(term)}**: {literal(line)}" for term, line in terms.items())
            )


def sidebar_card() -> None:
    """The current matrix in the sidebar: name, shape, dtype, source."""
    table = state.current()
    with st.sidebar.container(border=True):
        st.markdown(f"**Current table** {literal(table.name)}")
        st.markdown(
            f"{table.shape[0]:,} positions x {table.shape[1]:,} dims · stored as "
            f"{literal(table.dtype)}  \n{table.describe_rows()}"
        )
        st.caption(literal(table.source))
        center = st.session_state.get("posviz.center", CENTER)
        made = (table.sha256, center)
        if st.button(
            "Report (HTML)",
            key="make.report",
            icon=":material/summarize:",
            help="Every analysis of this table on one standalone page that opens offline "
            f"({'rows mean-centred' if center else 'uncentred'}, seed 0). What the pages "
            "already computed is reused.",
        ):
            bar = st.progress(0.0)
            page = _report(table, center=center, progress=_progress_bar(bar, "Report"))
            bar.empty()
            st.session_state[REPORT] = (made, page)
        kept = st.session_state.get(REPORT)
        if kept and kept[0] == made:
            st.download_button(
                "Download the report",
                data=lambda: kept[1],  # sent when clicked, not with every rerun
                file_name=f"posviz-report-{table.sha256[:8]}.html",
                mime="text/html",
                key="download.report",
                icon=":material/download:",
                on_click="ignore",
            )


#: The last report made in this session: ((sha256, center), its HTML).
REPORT = "posviz.report"


def _progress_bar(bar: Any, work: str) -> Callable[[str, int, int], None]:
    """A `progress(step, done, total)` that moves `bar` and names the step and what is left."""

    def told(step: str, done: int, total: int) -> None:
        left = total - done - 1
        bar.progress(
            done / total,
            text=f"{work}: {step} (step {done + 1} of {total}"
            + (f", {left} more after it)" if left else ", the last)"),
        )

    return told


def _report(
    table: Embedding, *, center: bool, progress: Callable[[str, int, int], None] | None = None
) -> str:
    """The report, or a page saying why it could not be made (a failure in one analysis must
    not take the page down); every step asked of the session's cache first."""
    from posviz.report import build_report  # on click: it loads pandas and every analysis

    try:
        return build_report(table, center=center, run=cache.run, progress=progress)
    except Exception as error:  # whatever failed, the downloaded file says so
        return (
            "<!doctype html><meta charset='utf-8'><title>posviz report failed</title>"
            f"<h1>The report of {html.escape(table.name)} could not be made</h1>"
            f"<p>{html.escape(type(error).__name__)}: {html.escape(str(error))}</p>"
            "<p>The app's pages still work; please report this with the table's shape "
            f"{table.shape[0]} x {table.shape[1]}.</p>"
        )


@contextmanager
def expander_drawn_when_open(label: str, *, key: str, icon: str | None = None) -> Iterator[bool]:
    """An expander whose contents are built and sent to the browser only while it is open.

    Yields whether it is open: opening it reruns the page, which then draws the contents.
    """
    with st.expander(label, key=key, icon=icon, on_change="rerun") as box:
        yield bool(box.open)  # None only for an expander that tracks no state: never here


def tabs_drawn_when_open(labels: list[str], *, key: str) -> Sequence[Any]:
    """Tabs of which only the open one is built and sent to the browser.

    Guard each tab's contents with ``if tab.open:``. Switching tabs reruns the page (its
    results come from the cache); the open tab is kept in the URL (``?key=label``), so a link
    opens it again.
    """
    return st.tabs(labels, key=key, on_change="rerun", bind="query-params")


def page_tabs(name: str) -> Sequence[Any]:
    """The tabs of page `name` as the page registry lists them, drawn when open; the open tab
    is kept under ``<name>.section`` (and in the URL)."""
    return tabs_drawn_when_open(list(pages.page(name).tabs), key=f"{name}.section")


def show_figure(fig: go.Figure, *, name: str, settings: dict[str, Any]) -> None:
    """Draw `fig` full width, with downloads as standalone HTML, PNG and SVG.

    Files are built only when a download is clicked. PNG/SVG need a Chromium for kaleido;
    without one those buttons say so and the rest keeps working.
    """
    st.plotly_chart(fig, width="stretch", key=f"chart.{name}")
    browser = figures.export.static_image_browser()
    with st.popover("Export figure", icon=":material/download:"):
        st.download_button(
            "Interactive HTML (opens offline)",
            data=lambda: figures.export.figure_html(fig, settings),
            file_name=f"{name}.html",
            mime="text/html",
            key=f"download.{name}.html",
        )
        for fmt, mime in (("png", "image/png"), ("svg", "image/svg+xml")):
            st.download_button(
                fmt.upper(),
                data=partial(_render, fig, fmt, settings),
                file_name=f"{name}.{fmt}",
                mime=mime,
                key=f"download.{name}.{fmt}",
                disabled=browser is None,
                help=None
                if browser
                else "PNG/SVG need Chromium (set BROWSER_PATH); the HTML export works without it.",
            )


def show_spectra(spectra: dict[str, Spectrum], *, page: str, settings: dict[str, Any]) -> None:
    """Two tables' spectra: variance per component drawn; the cumulative shares and the
    metrics side by side one click away (built when opened)."""
    show_figure(
        cache.figure(figures.compare.spectra_overlay, spectra),
        name=f"{page}_spectra",
        settings=settings,
    )
    with expander_drawn_when_open(
        "Cumulative explained variance", key=f"{page}.cumulative"
    ) as opened:
        if opened:
            show_figure(
                cache.figure(figures.compare.cumulative_overlay, spectra),
                name=f"{page}_cumulative",
                settings=settings,
            )
    with expander_drawn_when_open(
        "Numbers: the spectra's metrics side by side", key=f"{page}.spectra_numbers"
    ) as opened:
        if opened:
            show_numbers(
                compare.metrics_table(*spectra.values()), name=f"{page}_metrics", settings=settings
            )


@st.cache_resource
def _kaleido_server() -> None:
    """Start kaleido's browser once per server process, not once per image (its start-up is
    most of an image's time; benchmarks/exports.py)."""
    import kaleido  # only on the first image export

    kaleido.start_sync_server(silence_warnings=True)


def _render(fig: go.Figure, fmt: str, settings: dict[str, Any]) -> bytes:
    _kaleido_server()
    return figures.export.figure_image(fig, fmt, settings=settings)


#: What a blank cell of a table of numbers means, unless the table says more.
BLANK = "A blank cell: not defined for that row."


def _significant(value: float) -> float:
    """`value` to six significant digits (NaN and infinities as they are)."""
    return float(f"{value:.6g}")


def show_numbers(
    frame: pd.DataFrame,
    *,
    name: str,
    settings: dict[str, Any],
    shown: pd.DataFrame | None = None,
    pinned: str | None = None,
    blank: str = BLANK,
) -> None:
    """Show a table of numbers, headed by labels, with CSV and JSON downloads that carry
    `settings` and the columns' keys.

    `shown` is drawn instead of `frame` when the screen needs text where the files keep
    numbers (a "-" for a missing step); column `pinned` stays in view when scrolling sideways.
    Positions are shown and exported as the table's (:func:`posviz.export.labelled`). On
    screen, float64 rounding noise reads 0 (:func:`posviz.export.screen.on_screen`) and a
    missing value is a blank cell, which `blank` explains under the table.
    """
    frame = export.labelled(frame, settings)
    shown = None if shown is None else export.labelled(shown, settings)
    config: dict[str, Any] = {}
    if pinned:
        config[export.column_label(pinned)] = st.column_config.Column(pinned=True)
    screen = on_screen(frame if shown is None else shown)
    for key in ("statistic", "metric"):  # rows named by a key, read as labels too
        if key in screen:
            screen = screen.assign(**{key: screen[key].map(export.column_label)})
            # Each row is its own quantity (a count beside a threshold of 7e-8): one number of
            # decimals per column cannot serve them all. Six significant digits each, written
            # as they are ("%g": 2, 134.913, 4.35709e-08); the downloads keep every digit.
            floats = [c for c in screen.columns if screen[c].dtype.kind == "f"]
            screen = screen.assign(**{c: screen[c].map(_significant) for c in floats})
            config |= {
                export.column_label(c): st.column_config.NumberColumn(format="%g") for c in floats
            }
    st.dataframe(
        screen.rename(columns=export.column_label),
        hide_index=True,
        width="stretch",
        column_config=config or None,
        placeholder="",  # not "None"
    )
    if screen.isna().to_numpy().any():
        st.caption(blank)
    # Side by side: in two half-width columns the JSON button stood mid-page, a gap apart.
    buttons = st.container(horizontal=True, gap="small")
    buttons.download_button(
        "CSV",
        data=lambda: export.to_csv(frame, settings),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"download.{name}.csv",
        icon=":material/download:",
    )
    buttons.download_button(
        "JSON",
        data=lambda: export.to_json(frame, settings),
        file_name=f"{name}.json",
        mime="application/json",
        key=f"download.{name}.json",
        icon=":material/download:",
    )


# --- loading --------------------------------------------------------------------------------


def table_loader(slot: str = state.PRIMARY) -> None:
    """Load a table into `slot` by simulation, upload, from the Hugging Face Hub (unless
    POSVIZ_HUB=off) or (when POSVIZ_DATA_DIR is set) from the team's shared folder; a refusal
    keeps the table there."""
    shared = _settings.data_dir()
    names = ["Simulate", "Upload a file", *(["Hub"] if hub.enabled() else [])]
    names += ["Shared folder"] if shared else []
    # Keyed, so the open tab stays open when a load rewrites the URL (an unkeyed tab set
    # falls back to its first tab then, hiding the loader the user was using).
    tabs = dict(zip(names, st.tabs(names, key=f"{slot}.source", on_change="rerun"), strict=True))
    with tabs["Simulate"]:
        _simulate_form(slot)
    with tabs["Upload a file"]:
        _upload(slot)
    if "Hub" in tabs:
        with tabs["Hub"]:
            _hub(slot)
    if shared:
        with tabs["Shared folder"]:
            _shared_folder(slot, Path(shared))


def _simulate_form(slot: str) -> None:
    # Opened on the loaded table's generator and options when it was simulated.
    made, given = state.simulation(slot) or (None, {})
    kinds = list(simulate.GENERATORS)
    kind = st.selectbox(
        "Generator", kinds, index=kinds.index(made) if made else 0, key=f"{slot}.kind"
    )
    if kind != made:
        given = {}
    with st.form(f"{slot}.simulate"):
        left, right = st.columns(2)
        options: dict[str, Any] = {}

        # One input per argument of the generator, at its default: the signature is the one
        # place a default lives; the bounds are the link parser's (simulate.PARAMETERS).
        arguments = inspect.signature(simulate.GENERATORS[kind]).parameters.values()
        for i, argument in enumerate(arguments):
            p = simulate.PARAMETERS[argument.name]
            style: dict[str, Any] = {"step": 4} if argument.name == "d_model" else {}
            if isinstance(argument.default, float):
                style = {"format": "%g"}
            value = type(argument.default)(given.get(argument.name, argument.default))
            options[argument.name] = (left, right)[i % 2].number_input(
                p.label, p.low, p.high, value, **style
            )
        if st.form_submit_button("Simulate", type="primary"):
            try:
                state.set_simulated(kind, options, slot)
            except ValueError as error:  # LoadError included: sizes out of range
                st.error(literal(error))
            else:
                st.success(f"Simulated {kind}.")


def _upload(slot: str) -> None:
    upload = st.file_uploader(
        "A position table or checkpoint",
        key=f"{slot}.upload",
        help="safetensors, gguf, npy, npz, csv/tsv/txt. Pickle-based files (.pt, .bin, .ckpt) are "
        "refused: convert them to safetensors first.",
    )
    if upload is not None:
        data = upload.getvalue()
        if upload.name.lower().endswith(".gguf"):
            _gguf_reason(data, upload.name)
        origin = {"upload": upload.name}  # named in the link, which cannot carry the file
        _pick_and_load(data, upload.name, slot=slot, key=slot, origin=origin)


def _gguf_reason(source: bytes | Path, label: str) -> None:
    """Say so when a GGUF's metadata names a scheme other than a learned table (its tensors
    can still be picked by name); a file posviz refuses is said by the loader below."""
    try:
        model = weights.open_gguf(source, label=label)
        reason = no_table_reason(label, model.config, model.tensors, where="GGUF metadata")
    except LoadError:
        return
    if reason:
        st.warning(literal(reason), icon=":material/info:")


@st.cache_data(ttl=60, show_spinner="Listing the shared folder…")
def shared_files(root: Path) -> list[str]:
    # Cached briefly: every rerun of the Data page draws all tabs, and a network mount is slow.
    return datadir.list_files(root)


def _shared_folder(slot: str, root: Path) -> None:
    """Pick a file of the read-only folder the server mounts; it is read from disk, lazily."""
    try:
        files = shared_files(root)
    except LoadError as error:
        st.error(f"POSVIZ_DATA_DIR: {literal(error)}", icon=":material/error:")
        return
    note = f" (listing stops at {datadir.MAX_FILES:,})" if len(files) == datadir.MAX_FILES else ""
    relative = st.selectbox(
        f"File in the shared folder: {len(files):,} loadable{note}",
        files,
        index=None,
        placeholder="Choose a file",
        key=f"{slot}.shared.file",
        help="The folder the server mounts (POSVIZ_DATA_DIR), listed again every minute. "
        "Only the chosen tensor's bytes are read.",
    )
    if relative is None:
        return
    try:
        path = datadir.resolve(root, relative)
        checkpoint = state.folder_checkpoint(root, path, relative)
        # As for a model on the Hub: a config.json that names another scheme says so.
        reason = checkpoint and no_table_reason(relative, checkpoint.config, checkpoint.tensors)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return
    if reason:
        st.warning(literal(reason), icon=":material/info:")
    if relative.lower().endswith(".gguf"):
        _gguf_reason(path, relative)
    _pick_and_load(
        checkpoint or path, relative, slot=slot, key=f"{slot}.shared", origin={"shared": relative}
    )


def _sharded(root: Path, files: list[str]) -> list[str]:
    """`files` with each sharded checkpoint's shards replaced by its index, as a folder of
    one is read (`posviz.schemes.weights.weights_in`: model.safetensors first)."""
    offered: list[str] = []
    folders: dict[str, str | None] = {}
    for relative in files:
        folder = str(PurePosixPath(relative).parent)
        if folder not in folders:
            try:
                found = weights.weights_in(root / folder)
            except LoadError:
                found = None
            index = (
                str(PurePosixPath(folder) / found.name)
                if found is not None and found.name.endswith(io.INDEX_SUFFIX)
                else None
            )
            folders[folder] = index
            if index:
                offered.append(index)
        if not folders[folder]:
            offered.append(relative)
    return offered


def shared_checkpoint(
    root: Path, *, key: str, sharded: bool = False
) -> weights.LocalCheckpoint | weights.LocalGGUF | None:
    """Pick a safetensors checkpoint of the shared folder that has its config.json beside it,
    or a GGUF file (its metadata stands for config.json); None until one is picked (or when it
    is refused: the page says why). `sharded`: a folder of shards is offered as its index
    (model.safetensors.index.json), read as one model."""
    try:
        files = shared_files(root)
    except LoadError as error:
        st.error(f"POSVIZ_DATA_DIR: {literal(error)}", icon=":material/error:")
        return None
    found = [f for f in files if f.lower().endswith(".gguf") or weights.config_beside(root / f)]
    if sharded:
        found = _sharded(root, found)
    relative = st.selectbox(
        f"Checkpoint with its config.json, or GGUF file: {len(found):,} in the shared folder",
        found,
        index=None,
        placeholder="Choose a checkpoint",
        key=key,
        help="A model folder as save_pretrained leaves it (config.json beside "
        "model.safetensors"
        + (", or the shards its model.safetensors.index.json lists)" if sharded else ")")
        + ", or a .gguf file.",
    )
    if relative is None:
        return None
    try:
        path = datadir.resolve(root, relative)
        if relative.lower().endswith(".gguf"):
            return weights.open_gguf(path, label=relative)
        checkpoint = state.folder_checkpoint(root, path, relative)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return None
    if checkpoint is None:
        st.error(f"{literal(relative)}: its config.json is not inside the shared folder.")
    return checkpoint


#: What the loader lists and loads: a file, a checkpoint read with its config.json, a Hub model.
_Loadable = io.Source | weights.LocalCheckpoint | hub.HubModel

#: Bytes of opened models kept, shared by all sessions. A model's heads are at most
#: io.MAX_HEADER_BYTES (8 MiB) together, its config.json usually a few kB: a few dozen models.
HUB_MODELS_SIZE = "256MB"


@st.cache_data(
    ttl=600,
    max_entries=64,
    max_size=HUB_MODELS_SIZE,
    show_spinner="Reading the model's headers from the Hub…",
)
def _hub_model(repo: str, revision: str) -> hub.HubModel:
    # Cached for a while: every rerun draws all tabs, and resolving a branch costs a request.
    # A repo of GGUF files may name one: REPO:FILE.gguf or REPO:QUANT.
    repo, _, file = repo.partition(":")
    return hub.open_model(repo, revision, file or None)


def _hub(slot: str) -> None:
    """Open a model on the Hub by name; its headers are listed and only the picked tensor
    travels."""
    st.caption(
        "A model on the Hugging Face Hub, by name. Only the model id, the revision and byte "
        "ranges (config.json, the safetensors headers, the tensor you pick) are requested; "
        "nothing you loaded or uploaded leaves this server. Suggested: "
        + ", ".join(f"`{name}`" for name in hub.SUGGESTED_MODELS)
    )
    with st.form(f"{slot}.hub"):
        left, right = st.columns([3, 1])
        repo = left.text_input(
            "Model id",
            placeholder="openai-community/gpt2",
            key=f"{slot}.hub.repo",
            help="In a repo of GGUF files, add :FILE.gguf or :QUANT (e.g. :Q8_0) to pick one; "
            "else the most precise file is read.",
        )
        revision = right.text_input(
            "Revision",
            "main",
            key=f"{slot}.hub.revision",
            help="A branch, a tag, refs/pr/N or a commit sha.",
        )
        if st.form_submit_button("Open", type="primary"):
            st.session_state[f"{slot}.hub.opened"] = (repo.strip(), revision.strip() or "main")
            st.session_state.pop(f"{slot}.hub.failed", None)
    opened = st.session_state.get(f"{slot}.hub.opened")
    if not opened or not opened[0]:
        return
    # A failure is not cached by Streamlit: kept here, it is shown again on every rerun
    # without asking the Hub again, until Open is pressed.
    failed = st.session_state.get(f"{slot}.hub.failed")
    repo, revision = opened
    if failed is not None and failed[0] == opened:
        _hub_failed(repo, revision, failed[1])
        return
    try:
        model = _hub_model(repo, revision)
    except LoadError as error:
        st.session_state[f"{slot}.hub.failed"] = (opened, error)
        _hub_failed(repo, revision, error)
        return
    if reason := model.no_table_reason():
        st.warning(literal(reason), icon=":material/info:")
    _pick_and_load(
        model,
        f"{model.label} (commit {model.commit[:12]})",
        slot=slot,
        key=f"{slot}.hub",
        origin=state.hub_origin(model.repo, model.commit, model.file),
    )


def _hub_failed(repo: str, revision: str, error: LoadError) -> None:
    """Why the model could not be opened. An unreachable Hub: what the user typed, what
    happened and what they can do now, the cause one click away."""
    if not isinstance(error, hub.Unreachable):
        st.error(literal(error), icon=":material/error:")
        return
    shared = _settings.data_dir() is not None
    instead = "the **Upload a file** tab" + (" or the **Shared folder** tab" if shared else "")
    st.error(
        f"You asked for the model **{literal(repo)}** at revision **{literal(revision)}**. "
        f"The Hugging Face Hub ({literal(error.host)}) could not be reached from this server, "
        "so nothing was loaded and the current table stays. To use this model now, get its "
        f"`model.safetensors` file another way and open it on {instead}; or try again later.",
        icon=":material/cloud_off:",
    )
    with st.expander("Technical detail"):
        st.code(f"{error}\n{error.detail}", language=None, wrap_lines=True)


def _pick_and_load(
    source: _Loadable, filename: str, *, slot: str, key: str, origin: dict[str, str]
) -> None:
    """List `source`'s tensors (a file, a checkpoint with its config.json, or a model on the
    Hub), let the user pick one and trim its rows, then load it into `slot`, its `origin`
    named in the URL (see `state.set_table`). Widget keys start with `key`, so two loaders
    can be on one page."""
    import pandas as pd

    remote = isinstance(source, hub.HubModel)
    try:
        if isinstance(source, hub.HubModel):
            infos = source.infos
        else:
            local = source.path if isinstance(source, weights.LocalCheckpoint) else source
            infos = io.list_tensors(local, filename)
        usable = [info for info in infos if info.table_shape is not None]
        if not usable:
            _read(source, filename, {})  # raises the precise reason (1-D, object dtype, ...)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return
    st.markdown(
        f"**{literal(filename)}** holds {len(infos)} tensor{'s' * (len(infos) > 1)}, "
        f"{len(usable)} usable as a table:"
    )
    st.dataframe(
        pd.DataFrame(
            [
                {"tensor": i.name, "shape": str(i.shape), "dtype": numpy_dtype_name(i.dtype)}
                for i in infos
            ]
        ),
        hide_index=True,
    )
    names = [info.name for info in usable]
    config = source.config if isinstance(source, hub.HubModel | weights.LocalCheckpoint) else {}
    # A relative-attention model's table of relative positions first, as its loaders open it.
    detected = relative_table_name(config, names) or io.detect_position_tensor(infos)
    name = st.selectbox(
        "Tensor",
        names,
        index=names.index(detected) if detected in names else 0,
        key=f"{key}.tensor",
        help="Auto-detected by name and shape; pick any other 2-D tensor.",
    )
    info = usable[names.index(name)]
    trim = io.suggest_trim(info.name, info.shape)
    if trim.reason:
        st.info(trim.reason, icon=":material/content_cut:")
    assert info.table_shape is not None  # `usable` holds the tensors that are tables
    n_rows = info.table_shape[0]
    with st.form(f"{key}.rows"):
        left, right, grid = st.columns(3)
        start = left.number_input("First row", 0, n_rows - MIN_POSITIONS, trim.row_start)
        stop = right.number_input("Stop row (exclusive)", MIN_POSITIONS, n_rows, n_rows)
        as_grid = grid.checkbox(
            f"2-D grid {trim.grid[0]} x {trim.grid[1]}" if trim.grid else "2-D grid",
            value=trim.grid is not None,
            disabled=trim.grid is None,
        )
        allowed = _travel_note(source, name) if isinstance(source, hub.HubModel) else True
        clicked = st.form_submit_button("Load", type="primary", disabled=not allowed)
    # A file with one candidate loads at once, with the form's defaults, once per file; a
    # model on the Hub waits for its click (the note above says what will travel).
    seen = (filename, name, info.shape, len(source) if isinstance(source, bytes) else source)
    automatic = not remote and len(usable) == 1 and st.session_state.get(f"{key}.loaded") != seen
    if not (clicked or automatic):
        return
    st.session_state[f"{key}.loaded"] = seen
    options = {
        "tensor": name,
        "row_start": int(start),
        "row_stop": int(stop),
        "grid": trim.grid if as_grid and (start, stop) == (trim.row_start, n_rows) else None,
    }
    try:
        table = _read(source, filename, options)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return
    state.set_table(table, slot, origin)
    st.success(f"Loaded {literal(table.name)} ({table.describe_rows()}).")


def _read(source: _Loadable, filename: str, options: dict[str, Any]) -> Embedding:
    """io.load for a file; a checkpoint as its config.json says (DeBERTa's relative table with
    its positions); for a model on the Hub, the tensor fetched under a progress bar."""
    if isinstance(source, weights.LocalCheckpoint):
        return weights.load_checkpoint(source, **options)
    if not isinstance(source, hub.HubModel):
        return io.load(source, filename, **options)
    bar = st.progress(0.0, text="Fetching from the Hub…")
    shown = [-1]

    def progress(done: int, total: int) -> None:
        percent = 100 * done // total
        if percent != shown[0]:  # one message per percent, not per network chunk
            shown[0] = percent
            bar.progress(percent / 100, text=f"{_size(done)} of {_size(total)}")

    try:
        return hub.load_model(source, progress=progress, max_bytes=state.upload_limit(), **options)
    finally:
        bar.empty()


def _travel_note(model: hub.HubModel, name: str) -> bool:
    """Say what fetching tensor `name` will cost; False when it is above the upload limit."""
    nbytes = model.span(name)[1] - model.span(name)[0]
    limit = state.upload_limit()
    if nbytes > limit:
        st.error(
            f"{literal(name)} is {nbytes / 2**20:,.1f} MiB, above this server's upload limit of "
            f"{limit / 2**20:,.0f} MiB (server.maxUploadSize); pick a smaller tensor.",
            icon=":material/error:",
        )
        return False
    if hub.is_cached(model, name):
        st.caption(f"{_size(nbytes)}, already in this server's Hub cache: nothing travels.")
    else:
        st.caption(
            f"{_size(nbytes)} of a {_size(model.file_size(name))} file will travel "
            f"({literal(model.tensors[name])} at commit {model.commit[:12]})."
        )
    return True


def _size(nbytes: int) -> str:
    return f"{nbytes / 1e6:.2f} MB" if nbytes >= 10**5 else f"{nbytes / 1e3:.1f} kB"


@st.cache_resource(show_spinner=False)
def freeze_imports() -> None:
    """Once per server process, after the app's imports: move them out of the collector's walk.

    Streamlit runs a full garbage collection after every script run (runner.postScriptGC, kept:
    it frees what sessions leave behind). Everything imported by then (Streamlit, plotly,
    scipy, posviz) lives as long as the server; frozen, those objects are no longer scanned,
    so that collection walks only what runs create. Called by app.py, not on import, so that
    importing this module (tests, notebooks) freezes nothing.
    """
    gc.freeze()


def quantization_note(table: Embedding, *, center: bool) -> None:
    """For a table stored quantized (a GGUF's Q8_0, Q4_K, …): its quantization named, and its
    error against the original when the second table (Compare page) is that original."""
    if not quantization.is_quantized(table.dtype):
        return
    original = state.current(state.SECOND)
    if original.shape != table.shape or original.sha256 == table.sha256:
        st.info(
            f"This table was stored as **{literal(table.dtype)}** (GGML quantization) and "
            "dequantized by gguf's dequantize. Load the original (the model's safetensors "
            "table) as the second table on the Compare page to see the quantization's error "
            "here.",
            icon=":material/compress:",
        )
        return
    e = cache.quantization_error(table, original, center=center)
    st.info(
        f"**Quantization {literal(table.dtype)}** against the second table "
        f"({literal(original.name)}, {literal(original.dtype)}): relative error "
        f"‖Q − O‖/‖O‖ = **{e.relative_error:.3g}** (rounding the original to float16 would "
        f"give {e.float16_relative_error:.3g}, to bfloat16 {e.bfloat16_relative_error:.3g}); "
        f"largest error of one value {e.max_abs_error:.3g}; the first "
        f"{len(e.singular_values)} singular values move by at most "
        f"{e.singular_value_change:.3g} of σ₁.",
        icon=":material/compress:",
    )
    settings = export.header(e, table, original)
    with expander_drawn_when_open("Quantization error: numbers", key="spectrum.quantization") as o:
        if o:
            show_numbers(e.to_frame(), name="quantization_error", settings=settings)
