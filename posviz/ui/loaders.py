"""The table loader every page shares: a simulation, an upload, the team's shared folder or a
model on the Hugging Face Hub, read into a session slot; a refusal keeps the table there."""

from __future__ import annotations

import inspect
from pathlib import Path, PurePosixPath
from typing import Any

import streamlit as st

from posviz import _settings, hub, io, models, simulate
from posviz.embedding import MIN_POSITIONS, Embedding, LoadError, numpy_dtype_name
from posviz.io import datadir
from posviz.models import remote, weights
from posviz.models.remote import no_table_reason
from posviz.schemes.relative import relative_table_name
from posviz.source import Cut, HubRef, SharedFile, Source, Upload
from posviz.ui import pages, state
from posviz.ui.text import literal, show_refusal


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
    if upload is None:
        return
    try:
        infos, reason = state.once_per_upload(upload, f"{slot}.upload.listed", _list_upload)
    except LoadError as error:
        show_refusal(error)
        if upload.name.lower().endswith(".json"):  # a config.json: where it is read
            schemes = pages.page("schemes")
            st.page_link(
                schemes.file, label="Schemes page: upload the config.json there", icon=schemes.icon
            )
        return
    if reason:
        st.warning(literal(reason), icon=":material/info:")
    data = upload.getvalue()
    # Named in the link by its name, which cannot carry the file.
    _pick_and_load(Upload(upload.name, data), data, upload.name, slot=slot, key=slot, infos=infos)


def _list_upload(data: bytes, name: str) -> tuple[list[io.TensorInfo], str]:
    """An upload's tensors from its header, and what a GGUF's position metadata says of it
    ("" when nothing): read once per upload (`state.once_per_upload`). A file with no tensor
    usable as a table is refused with the precise reason."""
    infos = io.list_tensors(data, name)
    if not any(info.table_shape is not None for info in infos):
        io.load(data, name)  # raises the precise reason (1-D, object dtype, ...)
    return infos, _gguf_reason(data, name) if name.lower().endswith(".gguf") else ""


def _gguf_reason(source: bytes | Path, label: str) -> str:
    """What a GGUF's metadata says when it names a scheme other than a learned table, or why
    it cannot be read (its tensors can still be picked by name); "" when nothing."""
    try:
        model = weights.open_gguf(source, label=label)
    except LoadError as error:
        return f"Its position metadata is refused ({error}); its tensors can still be loaded."
    return no_table_reason(label, model.config, model.tensors, where="GGUF metadata") or ""


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
        checkpoint = weights.folder_checkpoint(root, path, relative)
        # As for a model on the Hub: a config.json that names another scheme says so.
        reason = checkpoint and no_table_reason(relative, checkpoint.config, checkpoint.tensors)
    except LoadError as error:
        show_refusal(error)
        return
    if reason:
        st.warning(literal(reason), icon=":material/info:")
    infos = None
    if relative.lower().endswith(".gguf"):
        try:
            infos, said = _shared_gguf(path, relative, _version(path))
        except LoadError as error:
            show_refusal(error)
            return
        if said:
            st.warning(literal(said), icon=":material/info:")
    _pick_and_load(
        SharedFile(relative),
        checkpoint or path,
        relative,
        slot=slot,
        key=f"{slot}.shared",
        infos=infos,
    )


def _version(path: Path) -> tuple[int, int]:
    """A file's size and modification time: which version of it a cache entry read."""
    found = path.stat()
    return found.st_size, found.st_mtime_ns


@st.cache_data(max_entries=16, show_spinner="Reading the GGUF's header…")
def _shared_gguf(
    path: Path, relative: str, version: tuple[int, int]
) -> tuple[list[io.TensorInfo], str]:
    """A shared GGUF's tensors and what its metadata says (`_gguf_reason`), read once per
    `version` of the file: its header (a vocabulary of 150,000 strings is 10 MB) was parsed
    twice on every run of the page. `version` is only the cache's key."""
    return io.list_tensors(path, relative), _gguf_reason(path, relative)


def _sharded(root: Path, files: list[str]) -> list[str]:
    """`files` with each sharded checkpoint's shards replaced by its index, as a folder of
    one is read (`posviz.models.weights.weights_in`: model.safetensors first)."""
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
        checkpoint = weights.folder_checkpoint(root, path, relative)
    except LoadError as error:
        show_refusal(error)
        return None
    if checkpoint is None:
        st.error(f"{literal(relative)}: its config.json is not inside the shared folder.")
    return checkpoint


#: What the loader lists tensors of: a file, a checkpoint read with its config.json, a Hub model.
_Listed = io.Input | weights.LocalCheckpoint | hub.HubModel

#: Bytes of opened models kept, shared by all sessions. A model's heads are at most
#: io.MAX_HEADER_BYTES (8 MiB) together, its config.json usually a few kB: a few dozen models.
HUB_MODELS_SIZE = "256MB"


@st.cache_data(
    ttl=600,
    max_entries=64,
    max_size=HUB_MODELS_SIZE,
    show_spinner="Reading the model's headers from the Hub…",
)
def _hub_model(ref: HubRef) -> hub.HubModel:
    # Cached for a while: every rerun draws all tabs, and resolving a branch costs a request.
    return remote.open_model(ref)


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
        # A repo of GGUF files may name one: REPO:FILE.gguf or REPO:QUANT.
        named = HubRef.parse(repo)
        model = _hub_model(HubRef(named.repo, revision, named.file))
    except LoadError as error:
        st.session_state[f"{slot}.hub.failed"] = (opened, error)
        _hub_failed(repo, revision, error)
        return
    if reason := remote.why_no_table(model):
        st.warning(literal(reason), icon=":material/info:")
    label = f"{model.label} (commit {model.commit[:12]})"
    _pick_and_load(model.ref.at(model.commit), model, label, slot=slot, key=f"{slot}.hub")


def _hub_failed(repo: str, revision: str, error: LoadError) -> None:
    """Why the model could not be opened. An unreachable Hub: what the user typed, what
    happened and what they can do now, the cause one click away."""
    if not isinstance(error, hub.Unreachable):
        show_refusal(error)
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
    source: Source,
    listed: _Listed,
    filename: str,
    *,
    slot: str,
    key: str,
    infos: list[io.TensorInfo] | None = None,
) -> None:
    """List the tensors of `source` (`listed`: a file, a checkpoint with its config.json, or a
    model on the Hub; `infos` when already listed), let the user pick one and trim its rows,
    then load it into `slot` (the table keeps `source`, which names it in the URL: see
    `state.set_table`). Widget keys start with `key`, so two loaders can be on one page."""
    import pandas as pd

    remote_model = isinstance(listed, hub.HubModel)
    try:
        if isinstance(listed, hub.HubModel):
            infos = listed.infos
        elif infos is None:
            local = listed.path if isinstance(listed, weights.LocalCheckpoint) else listed
            infos = io.list_tensors(local, filename)
        usable = [info for info in infos if info.table_shape is not None]
        if not usable:
            _read(source, listed, Cut())  # raises the precise reason (1-D, object dtype, ...)
    except LoadError as error:
        show_refusal(error)  # a pickle from the shared folder: its conversion
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
    config = listed.config if isinstance(listed, hub.HubModel | weights.LocalCheckpoint) else {}
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
        allowed = _travel_note(listed, name) if isinstance(listed, hub.HubModel) else True
        clicked = st.form_submit_button("Load", type="primary", disabled=not allowed)
    # A file with one candidate loads at once, with the form's defaults, once per file; a
    # model on the Hub waits for its click (the note above says what will travel).
    seen = (filename, name, info.shape, len(listed) if isinstance(listed, bytes) else listed)
    automatic = (
        not remote_model and len(usable) == 1 and st.session_state.get(f"{key}.loaded") != seen
    )
    if not (clicked or automatic):
        return
    st.session_state[f"{key}.loaded"] = seen
    whole = (start, stop) == (trim.row_start, n_rows)
    cut = Cut(name, int(start), int(stop), trim.grid if as_grid and whole else None)
    try:
        table = _read(source, listed, cut)
    except LoadError as error:
        show_refusal(error)
        return
    state.set_table(table, slot)
    st.success(f"Loaded {literal(table.name)} ({table.describe_rows()}).")


def _read(source: Source, listed: _Listed, cut: Cut) -> Embedding:
    """The one loader's table of `source`, its headers already read (`listed`: a model on the
    Hub is not opened again, its tensor fetched under a progress bar)."""
    if not isinstance(listed, hub.HubModel):
        return models.load(source, cut)
    bar = st.progress(0.0, text="Fetching from the Hub…")
    shown = [-1]

    def progress(done: int, total: int) -> None:
        percent = 100 * done // total
        if percent != shown[0]:  # one message per percent, not per network chunk
            shown[0] = percent
            bar.progress(percent / 100, text=f"{_size(done)} of {_size(total)}")

    try:
        return remote.load_model(listed, cut, progress=progress, max_bytes=state.upload_limit())
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
