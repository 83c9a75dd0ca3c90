"""The Heads page's model and its layers: where the model comes from (a model shipped with
posviz, an upload, the shared folder, the Hub), named in the URL (``heads.model``); its headers
and plan cached; every layer's heads read one layer at a time with a progress bar and a stop
button, the layers done kept in the session; one layer's weights read once for its detail.

A model is named by its source as text: ``example:NAME``, ``shared:PATH``, ``hf:REPO@COMMIT``
(``:FILE`` for a GGUF file of the repo) or ``upload:NAME``, which a link can name but not carry.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

import streamlit as st

from posviz import depth, examples, hub, pipeline
from posviz._params import Refused, refusal_text
from posviz.embedding import LoadError
from posviz.heads import PatternHeads, RotaryHeads
from posviz.io import INDEX_SUFFIX
from posviz.models import attention, weights
from posviz.source import HubRef, SharedFile, Shipped, Upload, parse_source
from posviz.ui import cache, loaders
from posviz.ui import schemes as scheme_cache
from posviz.ui.text import literal, show_refusal

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ASK_BYTES",
    "DEFAULT",
    "HUB_MODEL",
    "MODEL",
    "NULL_NOTE",
    "NULL_ROW",
    "SHARED",
    "UPLOAD_HELP",
    "DepthRun",
    "Shown",
    "beside_null",
    "default_layers",
    "depth_run",
    "example",
    "from_hub",
    "heads",
    "hub_model",
    "layer",
    "opened",
    "pick_shared",
    "plan",
    "read_depth",
    "request",
    "resume",
    "set_hub_model",
    "show",
    "shown",
    "size",
    "uploaded",
]

#: The Hub model (repo, revision) named in the Heads page's form.
HUB_MODEL = "heads.opened"
#: The URL key (and session key) naming the model shown, as its source's text.
MODEL = "heads.model"
#: The model the page opens on: a real one, shipped with posviz (no network).
DEFAULT = "all-MiniLM-L6-v2"
#: Bytes the page reads without asking first (issue 42: it asks above 1 GiB).
ASK_BYTES = 2**30
_SHOWN, _REQUESTED, _RUNS = "heads.shown", "heads.requested", "heads.runs"
#: Depth runs a session keeps (each a few numbers per head and layer).
_KEPT_RUNS = 4


def size(nbytes: int) -> str:
    """Bytes as the page says them: GB, MB, or kB below 0.1 MB."""
    if nbytes >= 10**9:
        return f"{nbytes / 1e9:,.2f} GB"
    return f"{nbytes / 1e6:,.2f} MB" if nbytes >= 10**5 else f"{nbytes / 1e3:,.1f} kB"


@dataclass(frozen=True)
class Shown:
    """A model the page can show.

    Attributes
    ----------
    text : str
        Its source as the URL names it (``example:NAME``, ``shared:PATH``, ``hf:REPO@COMMIT``,
        ``upload:NAME``).
    model : Readable
        The model opened (config.json or a GGUF's metadata; no weights yet).
    about : str
        What it is, said under the picker (markdown: a file's or repo's name made literal).
    folder : object
        An upload's files on disk, removed once nothing holds them.
    """

    text: str
    model: weights.Readable
    about: str = ""
    folder: Any = field(default=None, repr=False, compare=False)

    @property
    def kind(self) -> str:
        """Where it comes from, as the page's picker says it."""
        prefix = self.text.partition(":")[0]
        return {"example": "Example", "upload": "Upload", "shared": "Shared folder"}.get(
            prefix, "Hub model"
        )


def _example(name: str) -> Shown:
    model = attention.open_source(Shipped(name))
    found = examples.EXAMPLES.get(name)  # None: one file of a shipped model
    return Shown(str(Shipped(name)), model, found.about if found else "Shipped with posviz.")


def _shared(relative: str) -> Shown:
    model = attention.open_source(SharedFile(relative))
    return Shown(
        str(SharedFile(relative)), model, "A model of the shared folder (POSVIZ_DATA_DIR)."
    )


def _hub(ref: HubRef) -> Shown:
    model = scheme_cache.hub_config(ref)
    return Shown(model.at_commit, model, f"{literal(model.repo)} at commit {model.commit[:12]}.")


def _reopen(text: str) -> Shown:
    """The model `text` names (the URL's ``heads.model``)."""
    source = parse_source(text)
    if isinstance(source, Shipped):
        return _example(source.name)
    if isinstance(source, SharedFile):
        return _shared(source.relative)
    if isinstance(source, HubRef):
        return _hub(source)
    if isinstance(source, Upload):
        msg = f"it was made on an uploaded model ({source.name[:80]}), which a link cannot carry"
        raise LoadError(msg)
    msg = f"heads.model={text[:60]!r} names no model (example:, shared:, hf: or upload:)"
    raise LoadError(msg)


def shown() -> Shown:
    """The model the page shows: the session's; on its first run the one the URL names, else
    the default example (a link that cannot be reopened says why above it)."""
    found = st.session_state.get(_SHOWN)
    if found is not None:
        return found
    named = st.query_params.get(MODEL)
    if named:
        try:
            found = _checked(_reopen(named))
        except (Refused, ValueError) as error:
            found = _example(DEFAULT)
            show_refusal(  # with its code to run, if any, below it
                error,
                lead=f"The link's model was not opened, {literal(found.text)} is shown instead: ",
                say=st.warning,
                icon=":material/link_off:",
            )
    show(found or _example(DEFAULT))
    return st.session_state[_SHOWN]


#: Settings that belong to the model shown (its positions, one of its layers): another model
#: starts them afresh (MiniLM was analysed over 32 positions after the planted GPT-2's 32).
_PER_MODEL = ("heads.positions", "heads.layer")


def show(found: Shown) -> None:
    """Make `found` the model shown, and name it in the URL."""
    before = st.session_state.get(_SHOWN)
    if before is not None and before.text != found.text:
        for key in _PER_MODEL:
            st.session_state.pop(key, None)
            st.query_params.pop(key, None)
    st.session_state[_SHOWN] = found
    if st.query_params.get(MODEL) != found.text:
        st.query_params[MODEL] = found.text


def request(key: Any, opener: Callable[[], Shown]) -> Shown:
    """The model shown once the picker's choice `key` was opened by `opener`: opened and shown
    the first time `key` is asked; when it cannot be, the error is said (as long as the
    picker keeps that choice) and the model shown before stays."""
    asked, error = st.session_state.get(_REQUESTED, (None, None))
    if key != asked:
        try:
            found = _checked(opener())
        except attention.NoHeadsView as why:
            error = ("info", refusal_text(why))
        except (Refused, ValueError) as why:
            error = ("error", refusal_text(why))
        else:
            error = None
            show(found)
        st.session_state[_REQUESTED] = (key, error)  # (kind, the refusal as refusal_text)
    if error:
        kind, text = error
        show_refusal(
            text,
            lead="Not opened, the model below is the one shown before: ",
            say=st.info if kind == "info" else st.error,
        )
    return shown()


def _checked(found: Shown) -> Shown:
    """`found`, once its model opens and its default layers are planned: what it refuses is
    said before a view is drawn (a linked model too, which the page would otherwise open
    as the one shown and fail on)."""
    check = opened(found.model)
    depth.plan_depth(check, default_layers(check))
    return found


def example(name: str) -> Shown:
    return request(("example", name), lambda: _example(name))


#: The shared folder's picker (its path there).
SHARED = "heads.shared"


def pick_shared(root: Path) -> Shown:
    """The model shown once a checkpoint of the shared folder `root` was picked (the one shown
    picked first, when it is one of the folder's)."""
    current = shown()
    source = parse_source(current.text)
    if isinstance(source, SharedFile) and SHARED not in st.session_state:
        st.session_state[SHARED] = source.relative
    if loaders.shared_checkpoint(root, key=SHARED, sharded=True) is None:
        return current
    relative = st.session_state[SHARED]
    return request(("shared", relative), lambda: _shared(relative))


def from_hub(repo: str, revision: str, file: str | None = None) -> Shown:
    return request(("hub", repo, revision, file), lambda: _hub(HubRef(repo, revision, file)))


def default_layers(model: attention.Opened) -> str:
    """The layers the depth view reads unless told: every one; layer 0 of a model whose
    config.json does not say how many it has."""
    known = attention.n_layers_of(attention.language_model(model.config))
    return depth.ALL if known else "0"


# --- uploads ----------------------------------------------------------------------------------


class _Upload(Protocol):
    name: str
    size: int
    file_id: str

    def getvalue(self) -> bytes: ...


class _Folder:
    """An upload's files in a folder of their own, removed once no session or cache holds
    them (a new upload, the session's end)."""

    def __init__(self, files: Sequence[tuple[str, bytes]]) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="posviz-upload-"))
        weakref.finalize(self, shutil.rmtree, self.path, True)
        for name, data in files:
            (self.path / name).write_bytes(data)


#: What the uploader takes, said wherever it refuses a set of files.
UPLOAD_HELP = (
    "config.json with model.safetensors, or with model.safetensors.index.json and every shard "
    "it lists; or one .gguf file"
)


def _uploaded(files: Sequence[_Upload]) -> Shown:
    names = [f.name for f in files]
    plain = all(n == PurePosixPath(n).name and n not in (".", "..") for n in names)
    if not plain or len(set(names)) != len(names):
        msg = f"The files uploaded must have distinct plain names; give {UPLOAD_HELP}."
        raise LoadError(msg)
    lower = [n.lower() for n in names]
    ggufs = [n for n, low in zip(names, lower, strict=True) if low.endswith(".gguf")]
    index = [n for n, low in zip(names, lower, strict=True) if low.endswith(INDEX_SUFFIX)]
    tensors = [n for n, low in zip(names, lower, strict=True) if low.endswith(".safetensors")]
    gguf = len(ggufs) == len(files) == 1
    checkpoint = (
        "config.json" in names
        and len(names) == 1 + len(index) + len(tensors)  # nothing else
        and (len(index) == 1 or (not index and len(tensors) == 1))
    )
    if not (gguf or checkpoint):
        got = ", ".join(names[:6]) + (" …" if len(names) > 6 else "")
        msg = f"Uploaded {got}: give {UPLOAD_HELP}."
        raise LoadError(msg)
    folder = _Folder([(f.name, f.getvalue()) for f in files])
    weights_name = (ggufs or index or tensors)[0]
    path = folder.path / weights_name
    model: weights.Readable = (
        weights.open_gguf(path, label=weights_name)
        if gguf
        else weights.open_checkpoint(path, label=weights_name, within=folder.path.resolve())
    )
    about = f"Uploaded: {literal(', '.join(names[:6]))}" + (" …" if len(names) > 6 else "") + "."
    return Shown(str(Upload(weights_name)), model, about, folder)


def uploaded(files: Sequence[_Upload]) -> Shown:
    """The model shown once `files` (the uploader's) were opened (see :func:`request`)."""
    key = ("upload", tuple((f.name, f.size, f.file_id) for f in files))
    return request(key, lambda: _uploaded(files))


# --- cached reads -----------------------------------------------------------------------------


def set_hub_model(repo: str, revision: str) -> None:
    st.session_state[HUB_MODEL] = (repo.strip(), revision.strip() or "main")


def hub_model() -> tuple[str, str] | None:
    """The Hub model named on the Heads page's form, if any; else the one shown, when it is
    one (a link opened it): (repo, or ``repo:FILE`` for a GGUF file of it; revision)."""
    named = st.session_state.get(HUB_MODEL)
    if named and named[0]:
        return named
    current = st.session_state.get(_SHOWN)
    ref = parse_source(current.text) if current is not None else None
    if not isinstance(ref, HubRef):
        return None
    return (ref.repo + (f":{ref.file}" if ref.file else ""), ref.revision)


def _source(model: weights.Readable) -> str:
    if isinstance(model, hub.ConfigFile):
        return model.at_commit
    where = model.path if isinstance(model.path, str) else model.label  # bytes: not here
    return f"{where}:{model.sha256}"


#: Each kind of model by what it was read from (a path is an upload's own folder).
_MODELS: dict[str | type[Any], Callable[[Any], Any]] = {
    hub.ConfigFile: _source,
    weights.LocalCheckpoint: _source,
    weights.LocalGGUF: _source,
}


@st.cache_resource(ttl=600, max_entries=16, show_spinner="Reading the model's headers…",
                   hash_funcs=_MODELS)  # fmt: skip
def opened(model: weights.Readable) -> attention.Opened:
    """config.json and the safetensors headers (a Hub model at the commit it was read at)."""
    return attention.open_model(model)


@st.cache_data(ttl=600, max_entries=64, show_spinner=False, hash_funcs=_MODELS)
def plan(model: weights.Readable, layer: int) -> attention.LayerPlan:
    """What reading `layer` takes (LoadError / NoHeadsView before anything is fetched)."""
    return opened(model).plan(layer)


@st.cache_resource(max_entries=2, show_spinner="Reading the layer's query and key rows…",
                   hash_funcs=_MODELS)  # fmt: skip
def layer(model: weights.Readable, index: int) -> attention.AttentionLayer:
    """The layer's weights, read once (a second session opening it reads nothing)."""
    return attention.read_planned(opened(model), plan(model, index))


def heads(found: attention.AttentionLayer, **params: Any) -> PatternHeads | RotaryHeads:
    """The layer's heads by its kind's step (`posviz.pipeline.HEADS_STEPS`), cached
    (`posviz.ui.cache`: keyed by the layer's sha256, byte-bounded, shared by all sessions)."""
    return cache.run(pipeline.HEADS_STEPS[found.kind], found, **params)


def beside_null(frame: pd.DataFrame, *, by: str | None = None) -> pd.DataFrame:
    """A numbers table as the screen shows it: each number's null max (its layer's largest
    draw, the same for every head) as one row under the layer's heads (grouped `by` its
    layer), not as a second column beside every number, which made the table wider than the
    page; the key head only where heads share one. The downloads keep every column."""
    import pandas as pd

    nulls = [c for c in frame.columns if c.endswith("_null_max")]
    if not nulls:
        return frame
    if "kv_head" in frame and (frame["kv_head"] == frame["head"]).all():
        frame = frame.drop(columns="kv_head")  # each head its own key head: said by "head"
    parts = []
    for key, part in frame.groupby(by, sort=False) if by else [(None, frame)]:
        row = {c.removesuffix("_null_max"): part[c].iloc[0] for c in nulls}
        row["label"] = NULL_ROW
        if by:
            row[by] = key
        parts += [part.drop(columns=nulls), pd.DataFrame([row])]
    whole = pd.concat(parts, ignore_index=True)
    counts = [c for c in ("layer", "head", "kv_head") if c in whole]
    return whole.astype(dict.fromkeys(counts, "Int64"))


#: How a null row of :func:`beside_null` is labelled, and what it says.
NULL_ROW = "null: largest draw"
NULL_NOTE = (
    f"“{NULL_ROW}”: each number with the layer's query and key rows permuted across its "
    "heads, the largest value over heads and draws; a label needs its number above it."
)


# --- every layer ------------------------------------------------------------------------------


@dataclass
class DepthRun:
    """One model's layers read on this page with one set of settings: what is done so far.

    Attributes
    ----------
    numbers : list of LayerNumbers
        Each layer read, in order (a stopped run keeps those).
    records : list of dict
        Each layer's record as ``posviz heads --layer N --json`` prints it, without the
        kernels' rows (the depth export's ``layers``; `posviz rerun` recomputes each).
    stopped : bool
        Stopped by the user, or by an error (`error`).
    asked : bool
        Reading more than `ASK_BYTES` was agreed to.
    """

    numbers: list[depth.LayerNumbers] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False
    asked: bool = False
    error: str | None = None

    def result(self, found: depth.DepthPlan) -> depth.DepthHeads:
        return depth.DepthHeads(found, tuple(self.numbers))


def _without_kernels(record: dict[str, Any]) -> dict[str, Any]:
    """A layer's record without each head's kernel rows (the per-layer view exports them)."""
    heads = [{k: v for k, v in h.items() if k != "kernel"} for h in record.get("heads", [])]
    return {**record, "heads": heads}


def depth_run(model: weights.Readable, found: depth.DepthPlan, params: dict) -> DepthRun:
    """This session's run of `found`'s layers with `params` (new and empty the first time)."""
    key = (_source(model), found.layers, tuple(sorted(params.items())))
    runs: dict = st.session_state.setdefault(_RUNS, {})
    if key not in runs:
        while len(runs) >= _KEPT_RUNS:
            runs.pop(next(iter(runs)))
        runs[key] = DepthRun()
    return runs[key]


def read_depth(found: depth.DepthPlan, run: DepthRun, params: dict) -> None:
    """Read the layers of `found` that `run` has not, one at a time, with a progress bar (the
    bytes and layer K/N) and a stop button; each layer done is kept in `run` as it comes, so
    a stop (which reruns the page) or an error keeps them."""
    total = len(found.plans)
    todo = found.plans[len(run.numbers) :]
    if not todo or run.stopped:
        return
    start = len(run.numbers)
    shown = st.empty()  # the bar and the button, gone once every layer is read
    box = shown.container()
    bar = box.progress(start / total, text=f"Reading layer {start + 1}/{total}…")
    box.button("Stop", icon=":material/stop:", key="heads.stop", on_click=_stop, args=(run,),
              help="Stop after the layer being read; the layers read stay, and so does every "
              "byte fetched (a later run fetches only the rest).")  # fmt: skip
    fetched = sum(n.bytes_fetched for n in run.numbers)
    try:
        for done in depth.stream_depth(replace(found, plans=todo), run=cache.run, **params):
            run.numbers.append(depth.LayerNumbers.of(done))
            run.records.append(_without_kernels(done.record()))
            fetched += done.bytes_fetched
            k = len(run.numbers)
            travel = f"; {size(fetched)} of {size(found.to_fetch)} fetched" if found.remote else ""
            bar.progress(k / total, text=f"Layer {k}/{total} read (layer {done.index}){travel}")
    except Refused as error:
        run.stopped, run.error = True, str(error)
    shown.empty()


def _stop(run: DepthRun) -> None:
    run.stopped = True


def resume(run: DepthRun) -> None:
    """Read on: a stopped run's other layers (after an agreement to a large read, too)."""
    run.stopped, run.asked, run.error = False, True, None
