"""Which tensors a model on the Hugging Face Hub holds, and one of them read by range requests.

A reference is ``hf:REPO[@REVISION][:FILE]`` (or ``hf://…``); FILE names a GGUF file of the
repo, or its quantization (``:Q4_K_M``, as llama.cpp's ``-hf`` takes it). The revision is
resolved to a commit sha first and every later read names that commit: ``config.json``, the
safetensors header(s) (two small range reads per file) or a GGUF file's header (read in growing
ranges; its metadata stands for config.json, read by `posviz.models.remote` with the few rope
factors it holds) and, once a tensor is picked, exactly its bytes.
Headers are cached per commit, tensors per (repo, commit, file, tensor), on disk and bounded in
bytes. What leaves the machine: the model id, the revision, byte ranges, and ``HF_TOKEN`` when
the server sets it. HTTP is in :mod:`posviz.hub.client`, the disk cache in
:mod:`posviz.hub.cache`. A reference is a :class:`posviz.source.HubRef`; what a model's config
says of it (its scheme, its position table) is :mod:`posviz.models.remote`'s.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote

import numpy as np

from posviz import _moved, _settings, io
from posviz.hub import client
from posviz.hub.cache import _Cache, cache_dir
from posviz.hub.client import Progress, Unreachable
from posviz.hub.model import ConfigFile, HubModel
from posviz.io._file import conversion_snippet
from posviz.io.config_json import MAX_CONFIG_BYTES, parse_config
from posviz.source import HubRef, LoadError, plain_path

__all__ = [
    "SUGGESTED_MODELS",
    "ConfigFile",
    "HubModel",
    "Unreachable",
    "cache_dir",
    "config_file",
    "enabled",
    "is_cached",
    "list_model",
    "list_model_at",
    "read_rows",
    "read_tensor",
    "rows_cached",
]

#: Model ids offered as examples in the app (names only; nothing is bundled).
SUGGESTED_MODELS = (
    "openai-community/gpt2",
    "google-bert/bert-base-uncased",
    "FacebookAI/roberta-base",
    "facebook/opt-125m",
    "google/vit-base-patch16-224",
    "EleutherAI/gpt-neo-125m",
)
#: Shards listed per model (2 range reads each).
MAX_SHARDS = 512
_COMMIT = re.compile(r"[0-9a-f]{40}")
_PICKLE_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
#: What transformers' Trainer saves beside a checkpoint's weights, in pickles too.
_TRAINING_STATE = ("training_args", "optimizer", "scheduler", "scaler", "rng_state")
#: GGUF files by precision, most precise first: the one read when a repo of GGUF files is
#: named without a file (every file holds the same position metadata; a learned table is
#: closest to the original in the most precise one).
GGUF_PRECISION = (
    "F32", "BF16", "F16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_K", "Q5_1", "Q5_0", "Q4_K_M",
    "Q4_K_S", "Q4_K", "IQ4_XS", "IQ4_NL", "Q4_1", "Q4_0", "Q3_K_L", "Q3_K_M", "Q3_K_S", "Q3_K",
    "IQ3_M", "IQ3_S", "IQ3_XS", "IQ3_XXS", "Q2_K", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M",
    "IQ1_S",
)  # fmt: skip
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


def enabled() -> bool:
    """Whether Hub access is on (``POSVIZ_HUB=off`` turns it off for air-gapped servers)."""
    return _settings.hub_enabled()


def list_model(ref: HubRef) -> HubModel:
    """Resolve `ref`'s revision to a commit and read the model's headers and config.json.

    Only the API's answer for the revision, config.json and each safetensors file's head
    travel (a repo of GGUF files, or `ref` naming one: that file's header); a commit already
    listed costs the one API request (none when offline). A GGUF model's config is empty here:
    its metadata is read as config.json by `posviz.models.remote.open_model`.

    Raises
    ------
    LoadError
        Hub access off, unknown repo/revision, gated without a token, rate limit, Hub not
        reached, pickle-only weights, or a header that fails posviz.io's checks.
    """
    _check_enabled()
    cache = _Cache()
    commit, files = _resolve(ref, cache)
    model = cache.model(ref, commit)
    if model is None:
        if files is None:
            msg = f"HF_HUB_OFFLINE is set and the headers of {ref} are not in posviz's Hub cache."
            raise LoadError(msg)
        model = _list(ref, commit, files)
        cache.put_model(model, ref)
    return model


def config_file(ref: HubRef) -> ConfigFile:
    """Resolve `ref`'s revision and read config.json alone: all a rotary or ALiBi scheme needs.

    Only the API's answer for the revision and config.json travel (offline: the config.json
    of headers listed before, from the cache). A repo of GGUF files without config.json, or
    `ref` naming one of them: the GGUF file whose metadata stands for config.json, its header
    listed (`file` names it; `posviz.models.remote.open_config` reads the metadata).

    Raises
    ------
    LoadError
        As :func:`list_model`; also when config.json is too big, too deep or not a JSON
        object (:func:`posviz.io.config_json.parse_config`). A repo without one gives an empty
        config.
    """
    _check_enabled()
    cache = _Cache()
    commit, files = _resolve(ref, cache)
    gguf = files is not None and "config.json" not in files and _gguf_file(ref, files)
    if ref.file or gguf:  # offline, the listed model says which file a quantization named
        file = _gguf_file(ref, files) if files is not None else list_model(ref).file
        return ConfigFile(ref.repo, ref.revision, commit, {}, tuple(files or ()), 0, "", file or "")
    if files is None:
        model = cache.model(ref, commit)
        if model is None or not model.config:
            msg = f"HF_HUB_OFFLINE is set and the config.json of {ref} is not in posviz's cache."
            raise LoadError(msg)
        return ConfigFile(ref.repo, ref.revision, commit, model.config, (), 0)
    if "config.json" not in files:  # nothing says the scheme: its tensors are read as tables
        return ConfigFile(ref.repo, ref.revision, commit, {}, tuple(files), 0)
    what = f"{ref}:config.json"
    url = client._file_url(ref.repo, commit, "config.json")
    data = client._get_bytes(url, what=what, limit=MAX_CONFIG_BYTES)
    config = parse_config(data, what=what)
    sha256 = hashlib.sha256(data).hexdigest()
    return ConfigFile(ref.repo, ref.revision, commit, config, tuple(files), len(data), sha256)


def list_model_at(opened: ConfigFile) -> HubModel:
    """The headers of the model whose config.json `opened` holds, at its commit: no second
    request for the revision or config.json."""
    ref = HubRef(opened.repo, opened.revision, opened.gguf)
    cache = _Cache()
    model = cache.model(ref, opened.commit)
    if model is None:
        if not opened.files:
            msg = f"HF_HUB_OFFLINE is set and the headers of {ref} are not in posviz's Hub cache."
            raise LoadError(msg)
        config = {} if opened.gguf else opened.config  # a GGUF's: its metadata, read again
        model = _list(ref, opened.commit, list(opened.files), config=config)
        cache.put_model(model, ref)
    return model


def is_cached(model: HubModel, name: str) -> bool:
    """Whether tensor `name` is in the disk cache (reading it then costs no network)."""
    return _Cache().tensor(model, name) is not None


def read_tensor(
    model: HubModel,
    name: str,
    *,
    progress: Progress | None = None,
    max_bytes: int | None = None,
) -> np.ndarray:
    """Tensor `name` of `model`, from the disk cache or by one range request for its bytes.

    Its size is checked before any request: against posviz's element limit and, when given,
    `max_bytes` (the app passes its upload limit, so no caller fetches more than an upload
    may bring). BF16 becomes float32 (exact).
    """
    if name not in model.tensors:
        msg = f"{model.label} has no tensor {name!r}; it holds: {', '.join(model.tensors)}."
        raise LoadError(msg)
    entry, file = model.entry(name), model.tensors[name]
    what = f"{model.label}:{file}: tensor '{name}'"
    io.check_entry(what, entry)
    begin, end = model.span(name)
    if max_bytes is not None and end - begin > max_bytes:
        msg = (
            f"{what} is {(end - begin) / 2**20:,.1f} MiB, above this server's upload limit of "
            f"{max_bytes / 2**20:,.0f} MiB (server.maxUploadSize); pick a smaller tensor."
        )
        raise LoadError(msg)
    cache = _Cache()
    buffer = cache.tensor(model, name)
    if buffer is None and begin == end:  # an empty tensor: no range to ask for
        buffer = bytearray()
    if buffer is None:
        url = client._file_url(model.repo, model.commit, file)
        buffer, _ = client._get_range(url, begin, end, what=what, progress=progress)
        cache.put_tensor(model, name, buffer)
    return io.entry_array(buffer, entry)


def read_rows(
    model: HubModel, name: str, start: int, stop: int, *, progress: Progress | None = None
) -> np.ndarray:
    """Rows [start, stop) of tensor `name` (along its first axis), from the disk cache or by
    one range request for exactly their bytes (a layer's query and key rows of a fused
    q/k/v tensor, without its values'). BF16 becomes float32 (exact); a GGUF's quantized rows
    are dequantized (only they)."""
    if name not in model.tensors:
        msg = f"{model.label} has no tensor {name!r}."
        raise LoadError(msg)
    entry, file = model.entry(name), model.tensors[name]
    what = f"{model.label}:{file}: tensor '{name}'"
    part = io.rows_entry(what, entry, start, stop)
    io.check_entry(what, part)
    row = io.entry_row_bytes(entry)
    first = model.span(name)[0]
    span = (first + start * row, first + stop * row)
    cache = _Cache()
    buffer = cache.tensor(model, name, span)
    if buffer is None and span[0] == span[1]:
        buffer = bytearray()
    if buffer is None:
        url = client._file_url(model.repo, model.commit, file)
        buffer, _ = client._get_range(url, *span, what=what, progress=progress)
        cache.put_tensor(model, name, buffer, span)
    return io.entry_array(buffer, part)


def rows_cached(model: HubModel, name: str, start: int, stop: int) -> bool:
    """Whether rows [start, stop) of tensor `name` are in the disk cache."""
    first, row = model.span(name)[0], io.entry_row_bytes(model.entry(name))
    return _Cache().tensor(model, name, (first + start * row, first + stop * row)) is not None


def _check_enabled() -> None:
    if not enabled():
        msg = "Hub access is off on this server (POSVIZ_HUB=off); load a file instead."
        raise LoadError(msg)


def _resolve(ref: HubRef, cache: _Cache) -> tuple[str, list[str] | None]:
    """The commit sha `ref.revision` names now and the repo's files at it (offline: the commit
    last seen, and None)."""
    if client._offline():
        commit = ref.revision if _COMMIT.fullmatch(ref.revision) else cache.ref(ref)
        if commit is None:
            msg = (
                f"HF_HUB_OFFLINE is set and {ref} was never opened on this server; open it "
                "once online, or load a file instead."
            )
            raise LoadError(msg)
        return commit, None
    url = f"{client._endpoint()}/api/models/{ref.repo}/revision/{quote(ref.revision, safe='')}"
    answer = client._get_json(url, what=str(ref), kind="revision")
    fields = answer if isinstance(answer, dict) else {}
    commit = fields.get("sha")
    if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
        msg = f"{ref}: the Hub's answer names no commit sha; is HF_ENDPOINT a Hugging Face Hub?"
        raise LoadError(msg)
    siblings = fields.get("siblings", [])
    if not isinstance(siblings, list):
        msg = f"{ref}: the Hub's answer lists the repo's files as no list; is HF_ENDPOINT a Hub?"
        raise LoadError(msg)
    names = [s.get("rfilename") for s in siblings if isinstance(s, dict)]
    files = [f for f in names if isinstance(f, str)]
    cache.put_ref(ref, commit)
    return commit, files


def _list(ref: HubRef, commit: str, files: list[str], config: dict | None = None) -> HubModel:
    """Read config.json (unless given) and the safetensors head(s) of `ref` at `commit`; a
    GGUF file's header and rope factors instead when `ref` names one, or the repo holds GGUF
    files and no safetensors."""
    safetensors = any(f.endswith(".safetensors") for f in files)
    gguf = _gguf_file(ref, files) if ref.file or not safetensors else None
    if gguf is not None:
        return _list_gguf(ref, commit, gguf)
    label = str(ref)
    found: object = config
    if config is None and "config.json" in files:
        found = client._get_json(
            client._file_url(ref.repo, commit, "config.json"), what=f"{label}:config.json"
        )
    config = found if isinstance(found, dict) else {}
    weights = _weight_files(ref, commit, files)
    # posviz.io's limits on one file's header hold for the model, summed over its shards:
    # each file within them, 512 shards could otherwise hold 33 million tensors.
    heads: dict[str, tuple[int, bytes]] = {}
    tensors: dict[str, str] = {}
    header_bytes = n_tensors = 0
    for file in weights:
        what = f"{label}:{file}"
        heads[file] = client._head(
            client._file_url(ref.repo, commit, file), what, limit=io.MAX_HEADER_BYTES - header_bytes
        )
        header_bytes += len(heads[file][1]) - 8
        entries = io.safetensors_entries(heads[file][1], heads[file][0], what)[0]
        n_tensors += len(entries)
        if n_tensors > io.MAX_TENSORS:
            msg = (
                f"{label}'s safetensors headers describe more than {io.MAX_TENSORS:,} tensors "
                f"in all (by {file}, shard {len(heads)} of {len(weights)}), the limit for one "
                "model; save the position table in a repo or file of its own."
            )
            raise LoadError(msg)
        for name in entries:
            tensors.setdefault(name, file)  # the first file wins a name two files hold
    return HubModel(ref.repo, ref.revision, commit, config, heads, tensors)


def _list_gguf(ref: HubRef, commit: str, file: str) -> HubModel:
    """A GGUF file's header by range requests (growing until it ends): the model, its config
    empty (its metadata is read as config.json by `posviz.models.remote`)."""
    url = client._file_url(ref.repo, commit, file)
    size, head, header = client._gguf_head(url, f"{ref.repo}@{ref.revision}:{file}")
    model = HubModel(
        ref.repo,
        ref.revision,
        commit,
        {},
        {file: (size, head)},
        dict.fromkeys(header.tensors, file),
        file,
    )
    # The header was just parsed and checked: the model's entries are that parse's.
    model.__dict__["_parsed"] = {file: (io.header_entries(header), header.data_start)}
    model.__dict__["gguf_header"] = header
    return model


def _gguf_file(ref: HubRef, files: list[str]) -> str | None:
    """The GGUF file of the repo `ref` names (its name, or its quantization), else the most
    precise one (`GGUF_PRECISION`); the first part of a split file; None when there is none."""
    models = [
        f for f in files if f.lower().endswith(".gguf") and plain_path(f) and "mmproj" not in f
    ]
    if ref.file and ref.file.lower().endswith(".gguf"):
        if ref.file not in files:
            msg = f"{ref} has no file {ref.file!r}; its GGUF files: {', '.join(models[:20])}."
            raise LoadError(msg)
        return ref.file
    if ref.file:
        models = [f for f in models if _quantization(f) == ref.file.upper()]
        if not models:
            msg = f"{ref}: no GGUF file of the repo is quantized as {ref.file}."
            raise LoadError(msg)
    if not models:
        return None
    first = [f for f in models if not (shard := _SHARD.search(f)) or shard[1] == "00001"]
    if not first:  # parts of a split file without the first, which holds the header
        parts = sorted({int(shard[1]) for f in models if (shard := _SHARD.search(f))})
        msg = (
            f"{ref} holds parts {', '.join(map(str, parts[:10]))} of a split GGUF but not part "
            f"1, which holds its header ({models[0]}…): the upload is incomplete; name another "
            "file or quantization."
        )
        raise LoadError(msg)
    ranked = sorted(first, key=lambda f: (_rank(f), f))
    if ref.file and len(ranked) > 1:
        msg = f"{ref}: several GGUF files match {ref.file}: {', '.join(ranked[:10])}; name one."
        raise LoadError(msg)
    return ranked[0]


def _quantization(file: str) -> str:
    """The quantization a GGUF file's name carries (``Q4_K_M``), or ""."""
    name = _SHARD.sub(".gguf", file.rsplit("/", 1)[-1]).removesuffix(".gguf").upper()
    for kind in GGUF_PRECISION:
        if re.search(rf"(^|[._-]){re.escape(kind)}$", name):
            return kind
    return ""


def _rank(file: str) -> int:
    kind = _quantization(file)
    return GGUF_PRECISION.index(kind) if kind else len(GGUF_PRECISION)


def _weight_files(ref: HubRef, commit: str, files: list[str]) -> list[str]:
    """The safetensors files holding the model: the index's shards, model.safetensors, or
    every top-level .safetensors file; pickle-only repos are refused with the way out."""
    indexes = [f for f in files if "/" not in f and f.endswith(".safetensors.index.json")]
    if "model.safetensors" in files:
        return ["model.safetensors"]
    if indexes:
        index = "model.safetensors.index.json" if len(indexes) > 1 else indexes[0]
        answer = client._get_json(client._file_url(ref.repo, commit, index), what=f"{ref}:{index}")
        weight_map = answer.get("weight_map") if isinstance(answer, dict) else None
        values = list(weight_map.values()) if isinstance(weight_map, dict) else []
        shards = sorted(set(values)) if all(isinstance(v, str) for v in values) else []
        if not shards or any(s not in files or not _weight_name(s) for s in shards):
            msg = f"{ref}:{index} is not a shard index listing the repo's .safetensors files."
            raise LoadError(msg)
        if len(shards) > MAX_SHARDS:
            msg = f"{ref} has {len(shards):,} shards, above the limit of {MAX_SHARDS}."
            raise LoadError(msg)
        return shards
    top = sorted(f for f in files if "/" not in f and _weight_name(f))
    if top:
        return top
    pickles = [f for f in files if f.endswith(_PICKLE_WEIGHTS)]
    if pickles:
        msg = (
            f"{ref} has only pickle-based weights ({', '.join(pickles[:3])}): unpickling runs "
            "whatever code the file contains, so posviz never loads pickles. Many such models "
            "have a safetensors conversion open as a pull request on the Hub: open it with its "
            f"revision, e.g. {HubRef(ref.repo, 'refs/pr/1')} (see the repo's Community tab), or "
            "convert the weights with this code, on a machine where you trust them, and load "
            "the .safetensors files it writes:"
        )
        error = LoadError(msg)
        error.snippet = conversion_snippet(_pickled_weights(pickles)[:MAX_SHARDS], ref.repo, commit)
        raise error
    msg = f"{ref} holds no .safetensors weights at its top level (files: {len(files)})."
    raise LoadError(msg)


def _pickled_weights(pickles: list[str]) -> list[str]:
    """Of a repo's pickle-based files, those its conversion converts: transformers' weights
    (``pytorch_model.bin`` or its shards), else the top-level files but a training run's state
    (``training_args.bin`` is a pickled object, not tensors; optimizer and scheduler states
    are no weights), else all of them."""
    top = sorted(f for f in pickles if "/" not in f)
    named = [f for f in top if f.startswith("pytorch_model")]
    return named or [f for f in top if not f.startswith(_TRAINING_STATE)] or sorted(pickles)


def _weight_name(file: str) -> bool:
    """A .safetensors file inside the repo (no "..", "." or empty segment leaves it)."""
    return file.endswith(".safetensors") and plain_path(file)


def __getattr__(name: str) -> object:
    return _moved.attribute(__name__, name)  # what a model's config says: posviz.models
