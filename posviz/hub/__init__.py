"""Which tensors a model on the Hugging Face Hub holds, and one of them read by range requests.

A reference is ``hf:REPO[@REVISION]`` (or ``hf://REPO[@REVISION]``). The revision is resolved
to a commit sha first and every later read names that commit: ``config.json``, the safetensors
header(s) (two small range reads per file) and, once a tensor is picked, exactly its bytes.
Headers are cached per commit, tensors per (repo, commit, file, tensor), on disk and bounded in
bytes. What leaves the machine: the model id, the revision, byte ranges, and ``HF_TOKEN`` when
the server sets it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

import numpy as np
from huggingface_hub import constants

from posviz import io
from posviz.embedding import Embedding, LoadError

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "SUGGESTED_MODELS",
    "HubModel",
    "Reference",
    "enabled",
    "is_cached",
    "is_hub_ref",
    "load",
    "load_model",
    "open_model",
    "parse_ref",
    "read_tensor",
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
#: Seconds without a byte from the Hub before a request is given up.
TIMEOUT = 10.0
#: Slowest transfer accepted after the first TIMEOUT seconds: a server that trickles bytes
#: just under TIMEOUT apart is given up too, instead of holding the page for hours.
MIN_BYTES_PER_SECOND = 20_000
#: JSON files read whole (config.json, the shard index, the API's answer) are refused above this.
MAX_JSON_BYTES = 16 * 2**20
#: Shards listed per model (2 range reads each).
MAX_SHARDS = 512
#: Default of POSVIZ_HUB_CACHE_SIZE.
DEFAULT_CACHE_SIZE = "1GB"
#: Progress callback: (bytes received, bytes expected).
Progress = Callable[[int, int], None]

_CHUNK = 2**16
_REPO = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")
_REVISION = re.compile(r"[\w.][\w./-]{0,199}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_PICKLE_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


@dataclass(frozen=True)
class Reference:
    """A model on the Hub: repo id and revision (branch, tag, ``refs/pr/N`` or commit)."""

    repo: str
    revision: str = "main"

    def __str__(self) -> str:
        return f"hf:{self.repo}@{self.revision}"


@dataclass(frozen=True)
class HubModel:
    """What posviz knows of a model at one commit, from its headers and config.json only.

    Attributes
    ----------
    repo, revision : str
        As the user named them.
    commit : str
        The 40-hex commit sha the revision resolved to; every file was read at it.
    config : dict
        The model's config.json (empty if it has none).
    heads : dict of str to (int, bytes)
        Per safetensors file: its size and its head (8-byte length and JSON header).
    tensors : dict of str to str
        Tensor name -> the file holding it.
    """

    repo: str
    revision: str
    commit: str
    config: dict
    heads: dict[str, tuple[int, bytes]]
    tensors: dict[str, str]

    @property
    def label(self) -> str:
        return str(Reference(self.repo, self.revision))

    @property
    def infos(self) -> list[io.TensorInfo]:
        """The tensors, as :func:`posviz.io.list_tensors` lists a file's."""
        entries = {name: self.entry(name) for name in self.tensors}
        return [io.TensorInfo(k, tuple(e["shape"]), e["dtype"]) for k, e in entries.items()]

    def entry(self, name: str) -> dict:
        """The checked header entry of tensor `name` (dtype, shape, data_offsets)."""
        return self._file(self.tensors[name])[0][name]

    def span(self, name: str) -> tuple[int, int]:
        """(begin, end) of tensor `name`'s bytes in its file."""
        entries, start = self._file(self.tensors[name])
        begin, end = entries[name]["data_offsets"]
        return start + begin, start + end

    def file_size(self, name: str) -> int:
        """Bytes of the file holding tensor `name`."""
        return self.heads[self.tensors[name]][0]

    def source(self, name: str) -> str:
        """Where tensor `name` comes from, precisely enough to cite and reproduce."""
        return f"{self.label} · commit {self.commit} · {self.tensors[name]}"

    def no_table_reason(self) -> str | None:
        """Why this model has no learned absolute position table, when config.json says so and
        no tensor is named like one."""
        if any(_position_named(name) for name in self.tensors):
            return None
        scheme = position_scheme(self.config)
        if scheme is None:
            return None
        return (
            f"{self.label} has no learned absolute position table: its config.json says it "
            f"uses {scheme}. posviz analyses position tables; pick another model, or any 2-D "
            "tensor by name if you want to look at it anyway."
        )

    def _file(self, file: str) -> tuple[dict[str, dict], int]:
        return self._parsed[file]

    @cached_property
    def _parsed(self) -> dict[str, tuple[dict[str, dict], int]]:
        """Each file's checked entries and data start (posviz.io's checks, once per model)."""
        return {
            file: io.safetensors_entries(head, size, f"{self.label}:{file}")
            for file, (size, head) in self.heads.items()
        }


def enabled() -> bool:
    """Whether Hub access is on (``POSVIZ_HUB=off`` turns it off for air-gapped servers)."""
    return os.environ.get("POSVIZ_HUB", "on").strip().lower() not in {"off", "0", "false", "no"}


def is_hub_ref(text: str) -> bool:
    """Whether `text` names a model on the Hub (``hf:REPO[@REV]`` or ``hf://REPO[@REV]``).

    >>> is_hub_ref("hf:openai-community/gpt2"), is_hub_ref("gpt2.safetensors")
    (True, False)
    """
    return text.startswith("hf:")


def parse_ref(text: str) -> Reference:
    """The repo and revision `text` names; a bare repo id is accepted too.

    >>> parse_ref("hf://EleutherAI/pythia-70m@step3000")
    Reference(repo='EleutherAI/pythia-70m', revision='step3000')
    >>> parse_ref("hf:gpt2")
    Reference(repo='gpt2', revision='main')
    """
    body = text.removeprefix("hf://") if text.startswith("hf://") else text.removeprefix("hf:")
    repo, _, revision = body.strip().partition("@")
    revision = revision or "main"
    if not _REPO.fullmatch(repo) or ".." in repo or "--" in repo:
        msg = (
            f"{text!r} is not a model id: write hf:NAMESPACE/NAME or hf:NAME, optionally "
            "followed by @REVISION (e.g. hf:openai-community/gpt2@main)."
        )
        raise LoadError(msg)
    if not _REVISION.fullmatch(revision) or ".." in revision:
        msg = f"{revision!r} is not a revision: give a branch, a tag, refs/pr/N or a commit sha."
        raise LoadError(msg)
    return Reference(repo, revision)


def open_model(repo: str, revision: str = "main") -> HubModel:
    """Resolve `revision` to a commit and read the model's headers and config.json.

    Only the API's answer for the revision, config.json and each safetensors file's head
    travel; a commit already listed costs the one API request (none when offline).

    Raises
    ------
    LoadError
        Hub access off, unknown repo/revision, gated without a token, rate limit, Hub not
        reached, pickle-only weights, or a header that fails posviz.io's checks.
    """
    ref = parse_ref(f"hf:{repo}@{revision}")
    _check_enabled()
    cache = _Cache()
    commit, files = _resolve(ref, cache)
    model = cache.model(ref, commit)
    if model is None:
        if files is None:
            msg = f"HF_HUB_OFFLINE is set and the headers of {ref} are not in posviz's Hub cache."
            raise LoadError(msg)
        model = _list(ref, commit, files)
        cache.put_model(model)
    return model


def is_cached(model: HubModel, name: str) -> bool:
    """Whether tensor `name` is in the disk cache (reading it then costs no network)."""
    return _Cache().tensor(model, name) is not None


def read_tensor(model: HubModel, name: str, *, progress: Progress | None = None) -> np.ndarray:
    """Tensor `name` of `model`, from the disk cache or by one range request for its bytes.

    Its size is checked before any request. BF16 becomes float32 (exact).
    """
    if name not in model.tensors:
        msg = f"{model.label} has no tensor {name!r}; it holds: {', '.join(model.tensors)}."
        raise LoadError(msg)
    entry, file = model.entry(name), model.tensors[name]
    what = f"{model.label}:{file}: tensor '{name}'"
    io.check_safetensors_tensor(what, entry)
    cache = _Cache()
    buffer = cache.tensor(model, name)
    begin, end = model.span(name)
    if buffer is None and begin == end:  # an empty tensor: no range to ask for
        buffer = bytearray()
    if buffer is None:
        url = _file_url(model.repo, model.commit, file)
        buffer, _ = _get_range(url, begin, end, what=what, progress=progress)
        cache.put_tensor(model, name, buffer)
    return io.safetensors_array(buffer, entry)


def load_model(
    model: HubModel,
    *,
    tensor: str | None = None,
    row_start: int = 0,
    row_stop: int | None = None,
    grid: tuple[int, int] | None = None,
    progress: Progress | None = None,
) -> Embedding:
    """Read one tensor of an opened model into an :class:`Embedding` (as posviz.io.load)."""
    name = tensor if tensor is not None else _choose(model)
    array = read_tensor(model, name, progress=progress)
    return io.table_from(
        array,
        name=name,
        source=model.source(name),
        dtype=model.entry(name)["dtype"],
        row_start=row_start,
        row_stop=row_stop,
        grid=grid,
    )


def load(
    ref: str,
    *,
    tensor: str | None = None,
    row_start: int = 0,
    row_stop: int | None = None,
    grid: tuple[int, int] | None = None,
) -> Embedding:
    """Read a position table of the model `ref` names (``hf:REPO[@REV]``), as posviz.io.load.

    By default the tensor :func:`posviz.io.detect_position_tensor` picks.

    Raises
    ------
    LoadError
        As :func:`open_model`; also when no tensor is clearly the position table (the
        candidates are listed, or config.json's rotary/ALiBi/relative scheme is named).
    """
    parsed = parse_ref(ref)
    model = open_model(parsed.repo, parsed.revision)
    return load_model(model, tensor=tensor, row_start=row_start, row_stop=row_stop, grid=grid)


def position_scheme(config: dict) -> str | None:
    """The position scheme config.json names when it is not a learned absolute table.

    >>> position_scheme({"model_type": "llama", "rope_theta": 500000.0})
    'rotary embeddings (rope_theta)'
    >>> position_scheme({"model_type": "gpt2", "n_positions": 1024}) is None
    True
    """
    kind = config.get("position_embedding_type")
    rotary = [
        k for k in ("rope_theta", "rotary_dim", "rotary_pct", "rotary_emb_base") if k in config
    ]
    if kind == "rotary" or rotary or config.get("rope_scaling"):
        return f"rotary embeddings ({(rotary or ['position_embedding_type: rotary'])[0]})"
    attn = config.get("attn_config")
    if config.get("alibi") is True or (isinstance(attn, dict) and attn.get("alibi") is True):
        return "ALiBi attention biases (alibi: true)"
    if config.get("model_type") == "bloom":
        return "ALiBi attention biases (model_type: bloom)"
    if "relative_attention_num_buckets" in config:
        return "relative position buckets (relative_attention_num_buckets)"
    if kind in ("relative_key", "relative_key_query"):
        return f"relative position embeddings (position_embedding_type: {kind})"
    if config.get("relative_attention") is True and config.get("position_biased_input") is False:
        return "relative attention (relative_attention: true, position_biased_input: false)"
    return None


# --- choosing ------------------------------------------------------------------------------


def _position_named(name: str) -> bool:
    return bool(io.POSITION_NAMES.intersection(re.split(r"[./:]", name)))


def _choose(model: HubModel) -> str:
    """The tensor `load` reads when none is named, or the reason there is none."""
    reason = model.no_table_reason()
    if reason:
        raise LoadError(reason)
    return io.choose_tensor(model.infos, model.label)


# --- listing -------------------------------------------------------------------------------


def _check_enabled() -> None:
    if not enabled():
        msg = "Hub access is off on this server (POSVIZ_HUB=off); load a file instead."
        raise LoadError(msg)


def _offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE", "")
    return constants.HF_HUB_OFFLINE or flag.strip().upper() in {"1", "ON", "YES", "TRUE"}


def _endpoint() -> str:
    # Read at each call (the client reads HF_ENDPOINT once, at import).
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _file_url(repo: str, commit: str, file: str) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo, file, revision=commit, endpoint=_endpoint())


def _resolve(ref: Reference, cache: _Cache) -> tuple[str, list[str] | None]:
    """The commit sha `ref.revision` names now and the repo's files at it (offline: the commit
    last seen, and None)."""
    if _offline():
        commit = ref.revision if _COMMIT.fullmatch(ref.revision) else cache.ref(ref)
        if commit is None:
            msg = (
                f"HF_HUB_OFFLINE is set and {ref} was never opened on this server; open it "
                "once online, or load a file instead."
            )
            raise LoadError(msg)
        return commit, None
    url = f"{_endpoint()}/api/models/{ref.repo}/revision/{quote(ref.revision, safe='')}"
    answer = _get_json(url, what=str(ref), kind="revision")
    commit = answer.get("sha") if isinstance(answer, dict) else None
    if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
        msg = f"{ref}: the Hub's answer names no commit sha; is HF_ENDPOINT a Hugging Face Hub?"
        raise LoadError(msg)
    siblings = answer.get("siblings")
    names = [s.get("rfilename") for s in siblings if isinstance(s, dict)] if siblings else []
    files = [f for f in names if isinstance(f, str)]
    cache.put_ref(ref, commit)
    return commit, files


def _list(ref: Reference, commit: str, files: list[str]) -> HubModel:
    """Read config.json and the safetensors head(s) of `ref` at `commit`."""
    label = str(ref)
    config = {}
    if "config.json" in files:
        config = _get_json(_file_url(ref.repo, commit, "config.json"), what=f"{label}:config.json")
        if not isinstance(config, dict):
            config = {}
    weights = _weight_files(ref, commit, files)
    heads = {file: _head(_file_url(ref.repo, commit, file), f"{label}:{file}") for file in weights}
    tensors: dict[str, str] = {}
    for file in weights:
        for name in io.safetensors_entries(heads[file][1], heads[file][0], label)[0]:
            tensors.setdefault(name, file)  # the first file wins a name two files hold
    return HubModel(ref.repo, ref.revision, commit, config, heads, tensors)


def _weight_files(ref: Reference, commit: str, files: list[str]) -> list[str]:
    """The safetensors files holding the model: the index's shards, model.safetensors, or
    every top-level .safetensors file; pickle-only repos are refused with the way out."""
    indexes = [f for f in files if "/" not in f and f.endswith(".safetensors.index.json")]
    if "model.safetensors" in files:
        return ["model.safetensors"]
    if indexes:
        index = "model.safetensors.index.json" if len(indexes) > 1 else indexes[0]
        answer = _get_json(_file_url(ref.repo, commit, index), what=f"{ref}:{index}")
        weight_map = answer.get("weight_map") if isinstance(answer, dict) else None
        shards = sorted(set(weight_map.values())) if isinstance(weight_map, dict) else []
        if not shards or any(s not in files or not str(s).endswith(".safetensors") for s in shards):
            msg = f"{ref}:{index} is not a shard index listing the repo's .safetensors files."
            raise LoadError(msg)
        if len(shards) > MAX_SHARDS:
            msg = f"{ref} has {len(shards):,} shards, above the limit of {MAX_SHARDS}."
            raise LoadError(msg)
        return shards
    top = sorted(f for f in files if "/" not in f and f.endswith(".safetensors"))
    if top:
        return top
    pickles = [f for f in files if f.endswith(_PICKLE_WEIGHTS)]
    if pickles:
        msg = (
            f"{ref} has only pickle-based weights ({', '.join(pickles[:3])}): unpickling runs "
            "whatever code the file contains, so posviz never loads pickles. Many such models "
            "have a safetensors conversion open as a pull request on the Hub: open it with its "
            f"revision, e.g. hf:{ref.repo}@refs/pr/1 (see the repo's Community tab), or convert "
            "the file locally (torch.load(..., weights_only=True) then safetensors' save_file) "
            "and upload the .safetensors file."
        )
        raise LoadError(msg)
    msg = f"{ref} holds no .safetensors weights at its top level (files: {len(files)})."
    raise LoadError(msg)


def _head(url: str, what: str) -> tuple[int, bytes]:
    """A safetensors file's size and head: its 8-byte length, then exactly that much JSON."""
    first, size = _get_range(url, 0, 8, what=what)
    (n,) = struct.unpack("<Q", first)
    if n > io.MAX_HEADER_BYTES or 8 + n > size:
        msg = (
            f"{what} is not safetensors or is truncated: its header claims {n:,} bytes in a "
            f"file of {size:,} (limit {io.MAX_HEADER_BYTES:,})."
        )
        raise LoadError(msg)
    rest, _ = _get_range(url, 8, 8 + n, what=what)
    head = bytes(first + rest)
    io.safetensors_entries(head, size, what)  # refuses a lying header before it is kept
    return size, head


# --- HTTP ----------------------------------------------------------------------------------


@contextmanager
def _request(url: str, headers: dict[str, str], what: str) -> Iterator[httpx2.Response]:
    """A streamed GET through the Hub client's session (proxies, HF_TOKEN, user agent), with
    every failure turned into a LoadError that says what to do."""
    # The HTTP client loads with the first request, not with the app: every first open of a
    # page would pay for its import.
    import httpx2
    from huggingface_hub.utils import build_hf_headers, get_session

    host = urlsplit(url).netloc
    headers = build_hf_headers() | {"Accept-Encoding": "identity"} | headers
    try:
        with get_session().stream(
            "GET", url, headers=headers, timeout=TIMEOUT, follow_redirects=True
        ) as response:
            _check_status(response, what)
            yield response
    except httpx2.TimeoutException as exc:
        msg = (
            f"{what}: the Hub at {host} did not answer within {TIMEOUT:g} s; it is slow or "
            "unreachable from this server. Try again later, or set HF_ENDPOINT to a mirror."
        )
        raise LoadError(msg) from exc
    except httpx2.RemoteProtocolError as exc:
        msg = f"{what}: the Hub at {host} cut the answer short ({exc}); try again."
        raise LoadError(msg) from exc
    except httpx2.TransportError as exc:
        msg = (
            f"{what}: the Hub at {host} could not be reached from this server "
            f"({type(exc).__name__}: {exc}). Check its network or proxy, or set HF_ENDPOINT."
        )
        raise LoadError(msg) from exc


def _check_status(response: httpx2.Response, what: str) -> None:
    status = response.status_code
    if status < 400:
        return
    code = response.headers.get("X-Error-Code", "")
    if code == "GatedRepo" or status in (401, 403):
        msg = (
            f"{what}: the Hub refused access ({status}): the model is gated or private. Accept "
            "its terms on the Hub with an account, then set HF_TOKEN on the server to a token "
            "of that account (it is read on the server only, never shown or exported)."
        )
    elif status == 404 and code == "RevisionNotFound":
        msg = f"{what}: no such revision; give a branch, a tag, refs/pr/N or a commit sha."
    elif status == 404 and code == "EntryNotFound":
        msg = f"{what}: no such file in the repo at this revision."
    elif status == 404:
        msg = f"{what}: no such model on the Hub; check the id (NAMESPACE/NAME) and its spelling."
    elif status == 429:
        msg = (
            f"{what}: the Hub's rate limit was reached (429); wait a minute and try again, or "
            "set HF_TOKEN on the server for a higher limit."
        )
    else:
        msg = f"{what}: the Hub answered HTTP {status}; try again later."
    raise LoadError(msg)


def _get_json(url: str, *, what: str, kind: str = "file") -> object:
    """A small JSON file read whole, refused beyond MAX_JSON_BYTES without buffering it."""
    with _request(url, {}, what) as response:
        body = bytearray()
        for chunk in response.iter_bytes(_CHUNK):
            body += chunk
            if len(body) > MAX_JSON_BYTES:
                msg = f"{what}: the Hub's {kind} answer exceeds {MAX_JSON_BYTES:,} bytes; refused."
                raise LoadError(msg)
    try:
        return json.loads(body)
    except ValueError as exc:
        msg = f"{what}: the Hub's {kind} answer is not JSON ({exc})."
        raise LoadError(msg) from exc


def _get_range(
    url: str, begin: int, end: int, *, what: str, progress: Progress | None = None
) -> tuple[bytearray, int]:
    """Bytes [begin, end) of a file by one range request, and the file's size.

    A server that ignores the range (200 with the whole file) is refused before its body is
    read; more or fewer bytes than asked are refused too.
    """
    nbytes = end - begin
    with _request(url, {"Range": f"bytes={begin}-{end - 1}"}, what) as response:
        if response.status_code != 206:
            sent = response.headers.get("Content-Length", "unknown")
            msg = (
                f"{what}: the server ignored the byte range posviz asked for and began sending "
                f"the whole file ({sent} bytes); posviz stopped reading. Use a Hub endpoint "
                "that supports HTTP range requests (HF_ENDPOINT)."
            )
            raise LoadError(msg)
        match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", response.headers.get("Content-Range", ""))
        if not match or (int(match[1]), int(match[2]) + 1) != (begin, end):
            msg = f"{what}: the server answered another byte range than asked; refused."
            raise LoadError(msg)
        buffer = bytearray(nbytes)
        done = 0
        deadline = time.monotonic() + TIMEOUT + nbytes / MIN_BYTES_PER_SECOND
        import httpx2  # loaded by _request already

        # A connection closed early is reported below, with how much arrived.
        with suppress(httpx2.RemoteProtocolError, httpx2.ReadError):
            for chunk in response.iter_bytes():  # as they arrive: progress and the deadline
                if done + len(chunk) > nbytes:
                    msg = f"{what}: the server sent more bytes than the range asked; refused."
                    raise LoadError(msg)
                buffer[done : done + len(chunk)] = chunk
                done += len(chunk)
                if time.monotonic() > deadline and done < nbytes:
                    msg = (
                        f"{what}: the Hub at {urlsplit(url).netloc} is sending too slowly "
                        f"({done:,} of {nbytes:,} bytes so far); posviz gave up. Try again later."
                    )
                    raise LoadError(msg)
                if progress is not None:
                    progress(done, nbytes)
    if done < nbytes:
        msg = f"{what}: the Hub's answer was cut off after {done:,} of {nbytes:,} bytes; try again."
        raise LoadError(msg)
    return buffer, int(match[3])


# --- disk cache ----------------------------------------------------------------------------


def cache_dir() -> Path:
    """POSVIZ_HUB_CACHE, else posviz/hub under the user's cache directory."""
    if os.environ.get("POSVIZ_HUB_CACHE"):
        return Path(os.environ["POSVIZ_HUB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "posviz" / "hub"


def cache_limit() -> int:
    """POSVIZ_HUB_CACHE_SIZE in bytes."""
    return parse_size(os.environ.get("POSVIZ_HUB_CACHE_SIZE", DEFAULT_CACHE_SIZE))


def parse_size(text: str) -> int:
    """Bytes in a size like ``1GB``, ``250MB``, ``64kB`` or ``0`` (decimal units).

    >>> parse_size("250MB"), parse_size("1.5GB"), parse_size("0")
    (250000000, 1500000000, 0)
    """
    text = text.strip().upper()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?B?)", text)
    if not match:
        msg = f"POSVIZ_HUB_CACHE_SIZE={text!r} is not a size like 500MB or 1GB."
        raise LoadError(msg)
    return int(float(match[1]) * _UNITS[match[2] if match[2] in _UNITS else match[2] + "B"])


class _Cache:
    """Files under cache_dir(): refs/ (revision -> commit and file list), heads/ (per commit),
    tensors/ (raw bytes). Least recently used files go first once the total passes the limit;
    a broken or unwritable cache only costs network, never a wrong table."""

    def __init__(self) -> None:
        self.root = cache_dir()
        self.limit = cache_limit()

    def ref(self, ref: Reference) -> str | None:
        record = self._read_json("refs", ref.repo, ref.revision)
        return record.get("commit") if isinstance(record, dict) else None

    def put_ref(self, ref: Reference, commit: str) -> None:
        self._write("refs", json.dumps({"commit": commit}).encode(), ref.repo, ref.revision)

    def model(self, ref: Reference, commit: str) -> HubModel | None:
        record = self._read_json("heads", ref.repo, commit)
        if not isinstance(record, dict):
            return None
        try:
            heads = {f: (size, base64.b64decode(h)) for f, (size, h) in record["heads"].items()}
            model = HubModel(
                ref.repo, ref.revision, commit, record["config"], heads, record["tensors"]
            )
            model.infos  # noqa: B018 -- the cached heads pass posviz.io's checks again
        except (KeyError, TypeError, ValueError):  # LoadError included
            return None
        return model

    def put_model(self, model: HubModel) -> None:
        heads = {f: (size, base64.b64encode(h).decode()) for f, (size, h) in model.heads.items()}
        record = {"config": model.config, "heads": heads, "tensors": model.tensors}
        self._write("heads", json.dumps(record).encode(), model.repo, model.commit)

    def tensor(self, model: HubModel, name: str) -> bytearray | None:
        begin, end = model.span(name)
        path = self._path("tensors", model.repo, model.commit, model.tensors[name], name)
        try:
            if path.stat().st_size != end - begin:
                return None
            buffer = bytearray(path.read_bytes())
            os.utime(path)  # recently used
        except OSError:
            return None
        return buffer

    def put_tensor(self, model: HubModel, name: str, buffer: bytearray) -> None:
        self._write("tensors", buffer, model.repo, model.commit, model.tensors[name], name)

    def _path(self, kind: str, *key: str) -> Path:
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()
        return self.root / kind / digest

    def _read_json(self, kind: str, *key: str) -> object:
        try:
            return json.loads(self._path(kind, *key).read_bytes())
        except (OSError, ValueError):
            return None

    def _write(self, kind: str, data: bytes | bytearray, *key: str) -> None:
        if len(data) > self.limit:
            return
        path = self._path(kind, *key)
        with suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.partial")
            partial.write_bytes(data)
            os.replace(partial, path)
            self._evict()

    def _evict(self) -> None:
        files = []
        for path in self.root.glob("*/*"):
            with suppress(OSError):
                stat = path.stat()
                files.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total <= self.limit:
                break
            with suppress(OSError):
                path.unlink()
                total -= size
