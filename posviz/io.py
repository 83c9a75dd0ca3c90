"""Which tensors does a file hold, and how is one of them read safely as a position table.

Formats: .npy, .npz, .safetensors, and text tables (.csv, .tsv, .txt, including the Embedding
Projector's TSV). Pickle-based files (PyTorch .pt/.bin/.ckpt, .pkl, joblib, torch zips) are
refused, never unpickled. Listing reads headers only; reading takes one tensor's bytes, after
its size was checked. Every refusal is a :class:`LoadError` naming the file. A table (e.g. a
resampled one) is written back as .npy or .safetensors bytes by :func:`to_npy` and
:func:`to_safetensors`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import struct
import threading
import tokenize
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import BinaryIO, TypeVar

import numpy as np
import safetensors.numpy
from numpy.lib import format as npy_format

from posviz.embedding import MIN_DIMS, MIN_POSITIONS, Embedding, LoadError, check_elements

__all__ = [
    "ACCEPTED_FORMATS",
    "LoadError",
    "Source",
    "TensorInfo",
    "Trim",
    "choose_tensor",
    "detect_position_tensor",
    "list_tensors",
    "load",
    "read_tensor",
    "storage_dtype",
    "suggest_trim",
    "table_from",
    "to_npy",
    "to_safetensors",
    "vit_layout",
]

#: Uploaded bytes, or a path on disk.
Source = bytes | str | os.PathLike

#: What the app can read, as shown to users when a file is not one of them.
ACCEPTED_FORMATS = ".npy, .npz, .safetensors, .csv, .tsv, .txt"

#: Text is parsed in memory: larger files are refused before being read.
MAX_TEXT_BYTES = 512 * 2**20
#: A safetensors header is refused beyond these, before it is parsed: GPT-2's 148 tensors take
#: 15 KB of header (about 100 bytes each), so 8 MiB holds some 80,000 entries, and a
#: checkpoint file holds a few thousand tensors at most. Parsing time and memory grow with
#: the header's bytes and entries, so these bound both for any header they admit.
MAX_HEADER_BYTES = 8 * 2**20
MAX_TENSORS = 65_536
#: What to do about a tensor above `embedding.MAX_ELEMENTS` in a file.
_SAVE_LESS = "save only the position table."
#: Zip archives (.npz) are refused beyond these, before anything is inflated.
MAX_MEMBERS = 1000
MAX_UNZIPPED_BYTES = 2 * 2**30
#: Real tables compress less than 2:1; a member above 1 MiB that shrank more than this is a bomb.
MAX_RATIO = 100

PICKLE_SUFFIXES = frozenset({".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".joblib"})
_SUFFIX_FORMATS = {
    ".npy": "npy",
    ".npz": "npz",
    ".safetensors": "safetensors",
    ".csv": "text",
    ".tsv": "text",
    ".txt": "text",
}

#: safetensors dtype -> how its bytes are read (BF16 as raw uint16, upcast after reading).
_SAFETENSORS_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
}

#: Name components that mark a position table, across GPT-2, BERT/RoBERTa, BART/OPT, ViT/timm,
#: torchvision, CLIP/OpenCLIP and GGUF exports.
POSITION_NAMES = frozenset(
    {
        "wpe",
        "position_embeddings",
        "position_embedding",
        "pos_embed",
        "pos_embedding",
        "embed_positions",
        "position_embd",
        "pos_emb",
        "positional_embedding",
        "positional_encoding",
    }
)
_VISION_HINTS = ("pos_embed", "vision", "visual", "vit")
#: ViT row layouts, tried in this order: (prefix rows, description).
_VIT_LAYOUTS = (
    (1, "1 class token + {g}x{g} patch grid"),
    (2, "class + distillation tokens + {g}x{g} patch grid"),
    (0, "{g}x{g} patch grid, no class token"),
)

_T = TypeVar("_T")

# Failures of parsers on corrupt bytes (RuntimeError: zipfile's encrypted members).
_CORRUPT = (
    OSError,
    EOFError,
    ValueError,
    RuntimeError,
    NotImplementedError,
    zipfile.BadZipFile,
    zlib.error,
)


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file, as its header describes it (no data read).

    Attributes
    ----------
    name : str
        Tensor name, .npz member name without ``.npy``, or ``"table"`` for single-array files.
    shape : tuple of int
        Shape as stored.
    dtype : str
        dtype as stored: ``"float32"`` for numpy files, ``"BF16"`` for safetensors,
        ``"float64"`` for text.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def table_shape(self) -> tuple[int, int] | None:
        """(n_positions, d_model) after squeezing leading 1s, or None if not a table of at least
        `MIN_POSITIONS` x `MIN_DIMS`."""
        shape = self.shape
        while len(shape) > 2 and shape[0] == 1:
            shape = shape[1:]
        usable = len(shape) == 2 and shape[0] >= MIN_POSITIONS and shape[1] >= MIN_DIMS
        return shape if usable else None


@dataclass(frozen=True)
class Trim:
    """Rows to drop before analysis, as suggested from a tensor's name and shape.

    Attributes
    ----------
    row_start : int
        Leading rows that are not positions (class/distillation tokens, reserved rows).
    grid : tuple of (int, int) or None
        (height, width) when the kept rows are a square ViT patch grid.
    reason : str
        One sentence for the user; ``""`` when there is nothing to suggest.
    """

    row_start: int
    grid: tuple[int, int] | None
    reason: str


@dataclass(frozen=True)
class _File:
    """An opened source: a seekable binary file, its size, its name for messages, its format."""

    file: BinaryIO
    size: int
    label: str
    kind: str


def list_tensors(source: Source, filename: str | None = None) -> list[TensorInfo]:
    """The tensors a file holds, from its headers only (text files are scanned, not parsed).

    Parameters
    ----------
    source : bytes, str or os.PathLike
        Uploaded bytes or a path.
    filename : str, optional
        Name of the upload: its extension picks the format (magic bytes win when present).

    Raises
    ------
    LoadError
        If the file is empty, corrupt, pickle-based, an archive bomb or of an unknown format.
    """
    with _opened(source, filename) as src:
        return _run(_LISTERS[src.kind], src)


def read_tensor(source: Source, name: str, filename: str | None = None) -> np.ndarray:
    """Read one tensor, as stored except that BF16 becomes float32 and text becomes float64.

    Sizes are checked against ``embedding.MAX_ELEMENTS`` before memory is allocated, and only
    that tensor's bytes are read from a path.

    Returns
    -------
    ndarray of the stored shape
    """
    with _opened(source, filename) as src:
        return _run(_READERS[src.kind], src, name)


def load(
    source: Source,
    filename: str | None = None,
    *,
    tensor: str | None = None,
    row_start: int = 0,
    row_stop: int | None = None,
    grid: tuple[int, int] | None = None,
) -> Embedding:
    """Read a position table from a file into an :class:`Embedding`.

    Parameters
    ----------
    source, filename
        As in :func:`list_tensors`.
    tensor : str, optional
        Tensor to read. By default the one :func:`detect_position_tensor` picks, or the only
        tensor of the file.
    row_start, row_stop, grid
        Rows kept and their patch grid, as in :meth:`Embedding.from_array`.

    Raises
    ------
    LoadError
        If the file is refused, no tensor can be chosen (the candidates are listed), or the
        tensor is not a usable table.
    """
    with _opened(source, filename) as src:
        infos = _run(_LISTERS[src.kind], src)
        name = tensor if tensor is not None else choose_tensor(infos, src.label)
        array = _run(_READERS[src.kind], src, name)
    dtype = next(info.dtype for info in infos if info.name == name)
    return table_from(
        array,
        name=name,
        source=src.label,
        dtype=dtype,
        row_start=row_start,
        row_stop=row_stop,
        grid=grid,
    )


def table_from(
    array: np.ndarray,
    *,
    name: str,
    source: str,
    dtype: str,
    row_start: int = 0,
    row_stop: int | None = None,
    grid: tuple[int, int] | None = None,
) -> Embedding:
    """:meth:`Embedding.from_array` of a tensor read from `source`, whose refusals name it (also
    how posviz.hub makes a table of a fetched tensor)."""
    try:
        return Embedding.from_array(
            array,
            name=name,
            source=source,
            dtype=dtype,
            row_start=row_start,
            row_stop=row_stop,
            grid=grid,
        )
    except LoadError as exc:
        msg = f"{source}: {exc}"
        raise LoadError(msg) from exc


def detect_position_tensor(infos: list[TensorInfo]) -> str | None:
    """Name of the position table among `infos`, or None if unsure.

    A usable 2-D tensor (see :attr:`TensorInfo.table_shape`) whose dotted name has a
    component in `POSITION_NAMES` wins if it is the only one; otherwise the only usable 2-D
    tensor of the file. Two name matches (CLIP's text and vision tables) give None.

    Examples
    --------
    >>> detect_position_tensor([
    ...     TensorInfo("transformer.wte.weight", (50257, 768), "F32"),
    ...     TensorInfo("transformer.wpe.weight", (1024, 768), "F32"),
    ... ])
    'transformer.wpe.weight'
    """
    usable = [info.name for info in infos if info.table_shape is not None]
    named = [name for name in usable if POSITION_NAMES.intersection(re.split(r"[./:]", name))]
    if named:
        return named[0] if len(named) == 1 else None
    return usable[0] if len(usable) == 1 else None


def suggest_trim(name: str, shape: tuple[int, ...]) -> Trim:
    """Leading rows of a position tensor that are not positions, from its name and shape.

    Rules, in order, for a table of n rows:

    - Vision tables (stored with a leading batch axis, like ``(1, 197, 768)``, or named with
      ``pos_embed``, ``vision``, ``visual`` or ``vit``): ``1 + g*g`` rows are a class token
      and a g x g patch grid, ``2 + g*g`` class and distillation tokens (DeiT) and a grid,
      ``g*g`` a grid alone (g >= 2). Nothing else is suggested for them.
    - RoBERTa/BART/OPT reserve 2 rows for the padding offset: suggested when ``n - 2`` is a
      power of two of at least 64 (514, 1026, 2050), or when the name contains
      ``embed_positions`` and ``n - 2`` is a multiple of 64.

    Examples
    --------
    >>> suggest_trim("pos_embed", (1, 197, 768))
    Trim(row_start=1, grid=(14, 14), reason='ViT pos_embed: 1 class token + 14x14 patch grid')
    >>> suggest_trim("transformer.wpe.weight", (1024, 768)).row_start
    0
    """
    table = TensorInfo(name, tuple(shape), "").table_shape
    if table is None:
        return Trim(0, None, "")
    n = table[0]
    if len(shape) > 2 or any(hint in name.lower() for hint in _VISION_HINTS):
        return vit_layout(n) or Trim(0, None, "")
    body = n - 2
    power_of_two = body >= 64 and body & (body - 1) == 0
    if power_of_two or ("embed_positions" in name and body > 0 and body % 64 == 0):
        return Trim(2, None, f"RoBERTa/BART/OPT-style table: 2 reserved rows + {body} positions")
    return Trim(0, None, "")


def vit_layout(n_rows: int) -> Trim | None:
    """Prefix rows and a g x g patch grid (g >= 2) that make up `n_rows` rows, or None.

    Layouts are tried in the order class token, class and distillation tokens, no prefix.

    >>> vit_layout(197).row_start, vit_layout(198).grid, vit_layout(200)
    (1, (14, 14), None)
    """
    for prefix, layout in _VIT_LAYOUTS:
        g = math.isqrt(max(n_rows - prefix, 0))
        if g >= 2 and g * g == n_rows - prefix:
            return Trim(prefix, (g, g), "ViT pos_embed: " + layout.format(g=g))
    return None


def choose_tensor(infos: list[TensorInfo], label: str) -> str:
    """The tensor `load` reads when none is named: detected, or the file's only tensor; else
    a LoadError listing the candidates."""
    name = detect_position_tensor(infos)
    if name is None and len(infos) == 1:
        # Reading the only tensor gives the precise reason it is unusable, if it is.
        name = infos[0].name
    if name is None:
        usable = [f"{info.name} {info.shape}" for info in infos if info.table_shape is not None]
        more = f" and {len(usable) - 20} more" if len(usable) > 20 else ""
        msg = (
            f"{label} holds {len(infos)} tensors and none is clearly the position table; "
            f"choose one by name. 2-D candidates: {', '.join(usable[:20]) or 'none'}{more}."
        )
        raise LoadError(msg)
    return name


@contextmanager
def _opened(source: Source, filename: str | None) -> Iterator[_File]:
    """Open `source` and decide its format from magic bytes, then from its extension."""
    if isinstance(source, bytes):
        label = filename or "uploaded file"
        file, size = BytesIO(source), len(source)
    else:
        path = Path(source)
        label = filename or path.name
        try:
            file = open(path, "rb")  # noqa: SIM115 -- closed by the `with` below
        except OSError as exc:
            msg = f"Cannot open {label}: {exc.strerror}."
            raise LoadError(msg) from exc
        size = os.fstat(file.fileno()).st_size
    with file:
        if size == 0:
            msg = f"{label} is empty (0 bytes); the upload or export did not complete."
            raise LoadError(msg)
        head = file.read(16)
        file.seek(0)
        yield _File(file, size, label, _format(head, Path(label).suffix.lower(), label))


def _format(head: bytes, suffix: str, label: str) -> str:
    """Format of a file from its first 16 bytes and its suffix; pickles are refused here."""
    if suffix in PICKLE_SUFFIXES:
        raise LoadError(_pickle_message(label))
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "npz"
    # safetensors: u64 header length (far below 2**32) then the JSON object.
    if len(head) > 8 and head[4:8] == b"\0\0\0\0" and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise LoadError(_pickle_message(label))
    if suffix in _SUFFIX_FORMATS:
        return _SUFFIX_FORMATS[suffix]
    msg = (
        f"{label} is not a format posviz reads (no known magic bytes, extension "
        f"{suffix or 'none'!r}). Accepted formats: {ACCEPTED_FORMATS}."
    )
    raise LoadError(msg)


def _pickle_message(label: str) -> str:
    stem = Path(label).stem or "model"
    return (
        f"{label} is pickle-based (PyTorch .pt/.pth/.bin/.ckpt, .pkl, joblib): unpickling runs "
        "whatever code the file contains, so posviz never loads pickles. Convert it to "
        "safetensors on a machine where you trust the file, then load that:\n"
        "    import torch; from safetensors.torch import save_file\n"
        "    save_file({k: v.contiguous() for k, v in "
        f'torch.load("{label}", weights_only=True).items()}}, "{stem}.safetensors")'
    )


def _run(step: Callable[..., _T], src: _File, *args: object) -> _T:
    """Run a lister/reader from the file's start, turning parser failures into a LoadError."""
    src.file.seek(0)
    try:
        return step(src, *args)
    except LoadError:
        raise
    except _CORRUPT as exc:
        msg = (
            f"{src.label} could not be read as {src.kind} ({type(exc).__name__}: {exc}); "
            "the file is truncated or corrupt: export it again."
        )
        raise LoadError(msg) from exc


def _read_exact(file: BinaryIO, nbytes: int, what: str) -> bytearray:
    """Exactly `nbytes` from `file` into a fresh writable buffer."""
    buffer = bytearray(nbytes)
    view = memoryview(buffer)
    done = 0
    while done < nbytes:
        got = file.readinto(view[done:])
        if not got:
            msg = f"{what} is truncated: {nbytes - done:,} of {nbytes:,} data bytes are missing."
            raise LoadError(msg)
        done += got
    return buffer


# --- .npy and .npz ---------------------------------------------------------------------


_NPY_HEADER_READERS = {
    (1, 0): npy_format.read_array_header_1_0,
    (2, 0): npy_format.read_array_header_2_0,
}


def _npy_header(file: BinaryIO, what: str, nbytes: int) -> tuple[tuple[int, ...], np.dtype, bool]:
    """Shape, dtype and Fortran order of an .npy stream of `nbytes`, checked against its size."""
    version = npy_format.read_magic(file)
    if version not in _NPY_HEADER_READERS:
        msg = f"{what} uses .npy format version {version}, which holds no numeric table."
        raise LoadError(msg)
    try:
        shape, fortran, dtype = _NPY_HEADER_READERS[version](file)
    except (ValueError, TypeError, SyntaxError, tokenize.TokenError) as exc:
        # numpy parses the header as a Python literal: garbage fails in the tokenizer, and an
        # expression such as 2**40 fails with the repr of a syntax-tree node.
        reason = "an expression, not a literal" if " object at 0x" in str(exc) else str(exc)
        msg = f"{what} has a corrupt .npy header ({reason[:200]}); export it again."
        raise LoadError(msg) from exc
    if not all(_whole(s) and s >= 0 for s in shape):
        msg = f"{what} has a corrupt .npy header (shape {shape} is not sizes); export it again."
        raise LoadError(msg)
    data = math.prod(shape) * dtype.itemsize
    if file.tell() + data > nbytes:
        msg = (
            f"{what} is truncated or corrupt: its header declares shape {shape} of {dtype} "
            f"({data:,} data bytes) but it holds {nbytes:,} bytes in all."
        )
        raise LoadError(msg)
    return shape, dtype, fortran


def _npy_data(file: BinaryIO, what: str, nbytes: int) -> np.ndarray:
    """The array of an .npy stream: header checked, then exactly its data bytes read."""
    shape, dtype, fortran = _npy_header(file, what, nbytes)
    if dtype.hasobject:
        msg = (
            f"{what} holds Python objects (dtype object), which .npy stores as a pickle; posviz "
            "never unpickles. Save a numeric array: np.save(path, np.asarray(x, dtype=np.float32))."
        )
        raise LoadError(msg)
    check_elements(what, shape, _SAVE_LESS)
    buffer = _read_exact(file, math.prod(shape) * dtype.itemsize, what)
    return np.frombuffer(buffer, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def _list_npy(src: _File) -> list[TensorInfo]:
    shape, dtype, _ = _npy_header(src.file, src.label, src.size)
    return [TensorInfo("table", shape, str(dtype))]


def _read_npy(src: _File, name: str) -> np.ndarray:
    _check_single(src, name)
    return _npy_data(src.file, src.label, src.size)


def _npz_members(archive: zipfile.ZipFile, label: str) -> dict[str, zipfile.ZipInfo]:
    """The .npy members of an archive by array name, after refusing pickles and bombs."""
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        msg = f"{label} has {len(members):,} members, above the limit of {MAX_MEMBERS:,}."
        raise LoadError(msg)
    if any(m.filename.endswith(".pkl") for m in members):
        raise LoadError(_pickle_message(label))
    declared = sum(m.file_size for m in members)
    if declared > MAX_UNZIPPED_BYTES:
        msg = (
            f"{label} declares {declared:,} bytes uncompressed, above the limit of "
            f"{MAX_UNZIPPED_BYTES:,}: refused as a possible zip bomb; save only the tables."
        )
        raise LoadError(msg)
    for m in members:
        if m.file_size > 2**20 and m.file_size > MAX_RATIO * m.compress_size:
            msg = (
                f"{label}: member {m.filename} inflates {m.file_size // max(m.compress_size, 1):,}"
                f" times ({m.compress_size:,} -> {m.file_size:,} bytes), beyond the {MAX_RATIO}x "
                "of any real table: refused as a possible zip bomb."
            )
            raise LoadError(msg)
    arrays = {m.filename.removesuffix(".npy"): m for m in members if m.filename.endswith(".npy")}
    if not arrays:
        msg = f"{label} is a zip archive without .npy arrays; an .npz is written by numpy.savez."
        raise LoadError(msg)
    return arrays


def _list_npz(src: _File) -> list[TensorInfo]:
    with zipfile.ZipFile(src.file) as archive:
        infos = []
        for name, member in _npz_members(archive, src.label).items():
            with archive.open(member) as file:
                shape, dtype, _ = _npy_header(file, f"{src.label}:{name}", member.file_size)
            infos.append(TensorInfo(name, shape, str(dtype)))
    return infos


def _read_npz(src: _File, name: str) -> np.ndarray:
    with zipfile.ZipFile(src.file) as archive:
        arrays = _npz_members(archive, src.label)
        if name not in arrays:
            raise LoadError(_missing_message(src.label, name, arrays))
        with archive.open(arrays[name]) as file:
            return _npy_data(file, f"{src.label}:{name}", arrays[name].file_size)


# --- safetensors -----------------------------------------------------------------------


def _safetensors_header(src: _File) -> tuple[dict[str, dict], int]:
    """Tensor entries of a safetensors header, each checked, and where the data region starts.

    Layout: u64 little-endian header length n, n bytes of JSON, then the data region; each
    entry's ``data_offsets`` are relative to that region. A header is parsed and checked once:
    listing, reading and every rerun find it by its hash in `_CHECKED_HEADERS`.
    """
    if src.size < 8:
        msg = f"{src.label} is truncated: {src.size} bytes, less than a safetensors header."
        raise LoadError(msg)
    (n,) = struct.unpack("<Q", src.file.read(8))
    if n > MAX_HEADER_BYTES:
        msg = (
            f"{src.label} has a safetensors header of {n:,} bytes, above the limit of "
            f"{MAX_HEADER_BYTES:,} (about {MAX_HEADER_BYTES // 100:,} tensors): save the "
            "position table, or fewer tensors, in a file of its own."
        )
        raise LoadError(msg)
    if 8 + n > src.size:
        msg = (
            f"{src.label} is truncated or not safetensors: its header claims {n:,} bytes but the "
            f"file holds {src.size:,}. Export it again."
        )
        raise LoadError(msg)
    raw = src.file.read(n)
    key = (hashlib.sha256(raw).digest(), src.size - 8 - n)
    with _CHECKED_LOCK:
        entries = _CHECKED_HEADERS.get(key)
    if entries is None:
        entries = _check_header(src.label, raw, key[1])
        with _CHECKED_LOCK:
            _CHECKED_HEADERS[key] = entries
            while len(_CHECKED_HEADERS) > _CHECKED_SIZE or (
                sum(map(len, _CHECKED_HEADERS.values())) > 2 * MAX_TENSORS
            ):
                del _CHECKED_HEADERS[next(iter(_CHECKED_HEADERS))]
    return entries, 8 + n


#: Checked headers by (sha256 of the header bytes, data region size), oldest first: at most 8
#: headers and 2 * MAX_TENSORS entries in all (about 70 MB at worst), shared by all sessions.
_CHECKED_HEADERS: dict[tuple[bytes, int], dict[str, dict]] = {}
_CHECKED_SIZE = 8
_CHECKED_LOCK = threading.Lock()


class _TooManyObjects(Exception):
    """Raised from inside the JSON parser: the header holds more objects than it may."""


def _check_header(label: str, raw: bytes, region: int) -> dict[str, dict]:
    """The tensor entries of header bytes `raw`, each checked against a `region`-byte data area."""
    objects = itertools.count()

    def count(pairs: list[tuple[str, object]]) -> dict:
        # Every entry is a JSON object: stop building them past the cap, not after.
        if next(objects) > MAX_TENSORS + 1:  # the header itself and __metadata__
            raise _TooManyObjects
        return dict(pairs)

    too_many = (
        f"{label} describes more than {MAX_TENSORS:,} tensors in its safetensors header, the "
        "limit: save the position table, or fewer tensors, in a file of its own."
    )
    try:
        header = json.loads(raw, object_pairs_hook=count)
    except _TooManyObjects:
        raise LoadError(too_many) from None
    except (ValueError, RecursionError) as exc:
        msg = f"{label} has a corrupt safetensors header (not valid JSON: {exc})."
        raise LoadError(msg) from exc
    if not isinstance(header, dict):
        msg = f"{label} has a corrupt safetensors header (JSON {type(header).__name__})."
        raise LoadError(msg)
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    if len(entries) > MAX_TENSORS:
        raise LoadError(too_many)
    spans = sorted((_safetensors_span(label, k, v, region), k) for k, v in entries.items())
    for ((_, end), first), ((begin, _), second) in itertools.pairwise(spans):
        if begin < end:
            msg = (
                f"{label} is corrupt: tensors '{_short(first)}' and '{_short(second)}' overlap "
                "in the file."
            )
            raise LoadError(msg)
    return entries


def _whole(value: object) -> bool:
    """A JSON whole number; `True` is an int to Python but not a size."""
    return isinstance(value, int) and not isinstance(value, bool)


def _safetensors_span(label: str, name: str, entry: object, region: int) -> tuple[int, int]:
    """(begin, end) of one header entry, after checking dtype, shape and offsets agree."""
    what = f"{label}: tensor '{_short(name)}'"
    dtype = entry.get("dtype") if isinstance(entry, dict) else entry
    if not isinstance(dtype, str) or dtype not in _SAFETENSORS_DTYPES:
        msg = (
            f"{what} has unknown dtype {str(dtype)[:40]!r}; known: "
            f"{', '.join(_SAFETENSORS_DTYPES)}."
        )
        raise LoadError(msg)
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    valid = (
        isinstance(shape, list)
        and all(_whole(s) and s >= 0 for s in shape)
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(map(_whole, offsets))
    )
    if not valid:
        msg = (
            f"{what} has a malformed header entry (shape {str(shape)[:80]}, data_offsets "
            f"{str(offsets)[:80]}): sizes must be lists of whole numbers."
        )
        raise LoadError(msg)
    begin, end = offsets
    if not 0 <= begin <= end <= region:
        msg = (
            f"{what} has data offsets [{begin}, {end}] outside the {region:,}-byte data region: "
            "the file is truncated or corrupt."
        )
        raise LoadError(msg)
    needed = math.prod(shape) * np.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
    if end - begin != needed:
        msg = (
            f"{what} is corrupt: its data offsets span {end - begin:,} bytes but shape "
            f"{str(shape)[:80]} of {dtype} needs {needed:,}."
        )
        raise LoadError(msg)
    return begin, end


def _list_safetensors(src: _File) -> list[TensorInfo]:
    entries, _ = _safetensors_header(src)
    return [TensorInfo(k, tuple(v["shape"]), v["dtype"]) for k, v in entries.items()]


def _read_safetensors(src: _File, name: str) -> np.ndarray:
    entries, start = _safetensors_header(src)
    if name not in entries:
        raise LoadError(_missing_message(src.label, name, entries))
    what, entry = f"{src.label}: tensor '{_short(name)}'", entries[name]
    check_safetensors_tensor(what, entry)
    begin, end = entry["data_offsets"]
    src.file.seek(start + begin)
    return safetensors_array(_read_exact(src.file, end - begin, what), entry)


# The three functions below are also how posviz.hub reads a safetensors file by range requests.


def safetensors_entries(head: bytes, file_size: int, label: str) -> tuple[dict[str, dict], int]:
    """Checked tensor entries of a safetensors file from its head alone, and where its data
    region starts. `head` holds the 8-byte length and the JSON header; `file_size` is the
    whole file's, so offsets are checked against the data region without reading it."""
    return _safetensors_header(_File(BytesIO(head), file_size, label, "safetensors"))


def check_safetensors_tensor(what: str, entry: dict) -> None:
    """Refuse a checked header entry before its bytes are read: masks, and too many values."""
    if entry["dtype"] == "BOOL":
        msg = f"{what} is BOOL (a mask, not an embedding); choose a float tensor."
        raise LoadError(msg)
    check_elements(what, tuple(entry["shape"]), _SAVE_LESS)


def safetensors_array(buffer: bytearray, entry: dict) -> np.ndarray:
    """The array a checked header entry's data bytes hold (BF16 becomes float32, exactly)."""
    shape = tuple(entry["shape"])
    array = np.frombuffer(buffer, dtype=_SAFETENSORS_DTYPES[entry["dtype"]]).reshape(shape)
    if entry["dtype"] == "BF16":
        # bfloat16 is the top half of a float32: shifting its bits up is exact.
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array


# --- text: .csv, .tsv, .txt ------------------------------------------------------------


@dataclass(frozen=True)
class _Text:
    """Data lines of a text table: (1-based line number, line), how to split, columns to skip."""

    lines: list[tuple[int, str]]
    delimiter: str | None
    skip: int

    def cells(self, line: str) -> list[str]:
        return line.split(self.delimiter)[self.skip :]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _scan_text(src: _File) -> _Text:
    """Find the data lines, the delimiter and a header of a text table, without parsing it.

    Blank lines and ``#`` comments (numpy.savetxt headers) are skipped. The delimiter is the
    first of tab, semicolon, comma found in the first line, else runs of whitespace. The
    first line is a header if a cell is not a number or it reads 0, 1, 2, ... (pandas column
    labels); a header starting with an empty cell marks a pandas index column, dropped.
    """
    if src.size > MAX_TEXT_BYTES:
        msg = (
            f"{src.label} is {src.size:,} bytes, above the {MAX_TEXT_BYTES:,}-byte limit for text "
            "tables; save the table as .npy or .safetensors instead."
        )
        raise LoadError(msg)
    try:
        text = src.file.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        msg = f"{src.label} is not UTF-8 text (byte {exc.start}); save it as UTF-8 CSV."
        raise LoadError(msg) from exc
    lines = [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        msg = f"{src.label} holds no numbers: every line is blank or a # comment."
        raise LoadError(msg)
    delimiter = next((d for d in "\t;," if d in lines[0][1]), None)
    first = lines[0][1].split(delimiter)
    if all(map(_is_number, first)) and first != [str(i) for i in range(len(first))]:
        return _Text(lines, delimiter, 0)
    if len(lines) == 1:
        msg = f"{src.label} holds a header line and no numbers."
        raise LoadError(msg)
    return _Text(lines[1:], delimiter, int(first[0].strip() == ""))


def _list_text(src: _File) -> list[TensorInfo]:
    text = _scan_text(src)
    return [TensorInfo("table", (len(text.lines), len(text.cells(text.lines[0][1]))), "float64")]


def _read_text(src: _File, name: str) -> np.ndarray:
    _check_single(src, name)
    text = _scan_text(src)
    width = len(text.cells(text.lines[0][1]))
    check_elements(src.label, (len(text.lines), width), _SAVE_LESS)
    table = np.empty((len(text.lines), width))
    for row, (number, line) in enumerate(text.lines):
        cells = text.cells(line)
        if len(cells) != width:
            msg = (
                f"{src.label} line {number} has {len(cells)} values where the first data row "
                f"has {width}; every row must have the same number of columns."
            )
            raise LoadError(msg)
        try:
            table[row] = cells
        except ValueError:
            column, cell = next((i, c) for i, c in enumerate(cells) if not _is_number(c))
            msg = f"{src.label} line {number}, column {column + 1}: {cell!r} is not a number."
            raise LoadError(msg) from None
    return table


def _check_single(src: _File, name: str) -> None:
    if name != "table":
        raise LoadError(_missing_message(src.label, name, ["table"]))


def _missing_message(label: str, name: str, names: Iterable[str]) -> str:
    names = [_short(n) for n in names]
    more = f" and {len(names) - 20:,} more" if len(names) > 20 else ""
    return f"{label} has no tensor {_short(name)!r}; it holds: {', '.join(names[:20])}{more}."


def _short(name: str) -> str:
    """A name as messages quote it: a header may hold names of megabytes."""
    return name if len(name) <= 120 else f"{name[:100]}… ({len(name):,} characters)"


# --- writing: .npy and .safetensors bytes of a table --------------------------------------


def storage_dtype(table: Embedding) -> tuple[np.dtype, str]:
    """The dtype to write `table` in, and a note when it is not the stored dtype.

    The stored dtype when numpy holds it (float16/32/64, by numpy or safetensors name) and
    the values fit it; otherwise the analysed dtype (BF16 and integer tables, or float16
    overflow), with a note saying so.
    """
    name = table.dtype
    try:
        stored = np.dtype(_SAFETENSORS_DTYPES.get(name.upper(), name))
    except TypeError:
        stored = None
    analysed = table.values.dtype
    if stored is None or stored.kind != "f":
        return analysed, f"written as {analysed} (stored {name} has no numpy float equivalent)"
    if stored.itemsize < 4:
        peak = max(np.abs(table.values).max(), np.abs(table.prefix).max(initial=0.0))
        if peak > np.finfo(stored).max:
            return analysed, f"written as {analysed}: values up to {peak:.3g} overflow {name}"
    return stored, ""


def _full_array(table: Embedding, *, batch_axis: bool) -> np.ndarray:
    dtype, _ = storage_dtype(table)
    full = np.concatenate([table.prefix, table.values]).astype(dtype)
    return full[None] if batch_axis else full


def to_npy(table: Embedding, *, batch_axis: bool = False) -> bytes:
    """The table with its prefix rows as .npy bytes, in :func:`storage_dtype`.

    `batch_axis` writes shape (1, n_rows, d_model), the layout of timm's ``pos_embed``.
    """
    buffer = BytesIO()
    np.save(buffer, _full_array(table, batch_axis=batch_axis), allow_pickle=False)
    return buffer.getvalue()


def to_safetensors(table: Embedding, *, batch_axis: bool = False) -> bytes:
    """The table with its prefix rows as .safetensors bytes under the table's tensor name.

    The file's metadata holds the table's source (which says how it was resampled).

    Examples
    --------
    >>> t = Embedding.from_array(np.eye(12, 3), name="wpe", source="s", dtype="F16")
    >>> safetensors.numpy.load(to_safetensors(t))["wpe"].dtype
    dtype('float16')
    """
    return safetensors.numpy.save(
        {table.name: _full_array(table, batch_axis=batch_axis)},
        metadata={"posviz": json.dumps(table.provenance())},
    )


_LISTERS: dict[str, Callable[[_File], list[TensorInfo]]] = {
    "npy": _list_npy,
    "npz": _list_npz,
    "safetensors": _list_safetensors,
    "text": _list_text,
}
_READERS: dict[str, Callable[[_File, str], np.ndarray]] = {
    "npy": _read_npy,
    "npz": _read_npz,
    "safetensors": _read_safetensors,
    "text": _read_text,
}
