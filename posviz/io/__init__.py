"""Which tensors does a file hold, and how is one of them read safely as a position table.

Formats: .npy, .npz, .safetensors, .gguf (llama.cpp's; quantized tensors are dequantized), and
text tables (.csv, .tsv, .txt, including the Embedding Projector's TSV). Pickle-based files
(PyTorch .pt/.bin/.ckpt, .pkl, joblib, torch zips) are refused, never unpickled. Listing reads
headers only; reading takes one tensor's bytes, after its size was checked. Every refusal is a
:class:`LoadError` naming the file. One private module per format reads it;
:mod:`posviz.io.detect` finds the position tensor and its leading rows that are not positions;
:mod:`posviz.io.write` writes a table (e.g. a resampled one) back as .npy or .safetensors bytes.
"""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import BufferedIOBase, BytesIO
from pathlib import Path
from typing import TypeVar

import numpy as np

from posviz.embedding import Embedding, LoadError
from posviz.io._file import TensorInfo, _File, _pickle_refused, single_name
from posviz.io._gguf import (
    FIRST_RANGE,
    MAX_GGUF_HEADER_BYTES,
    GGUFHeader,
    GGUFTensor,
    LongArray,
    _list_gguf,
    _read_gguf,
    check_gguf_tensor,
    file_reader,
    gguf_array,
    gguf_entries,
    gguf_row_bytes,
    header_entries,
    read_gguf_header,
    read_gguf_rows,
    read_gguf_tensor,
)
from posviz.io._npy import _list_npy, _read_npy
from posviz.io._npz import MAX_MEMBERS, MAX_RATIO, MAX_UNZIPPED_BYTES, _list_npz, _read_npz
from posviz.io._safetensors import (
    _SAFETENSORS_DTYPES as _SAFETENSOR_TYPES,
)
from posviz.io._safetensors import (
    MAX_HEADER_BYTES,
    MAX_TENSORS,
    _list_safetensors,
    _read_safetensors,
    _read_safetensors_rows,
    check_safetensors_tensor,
    row_bytes,
    rows_entry,
    safetensors_array,
    safetensors_entries,
)
from posviz.io._text import MAX_TEXT_BYTES, _list_text, _read_text
from posviz.io.detect import (
    POSITION_NAMES,
    ZERO_ROWS_SEARCHED,
    ReservedRows,
    Trim,
    choose_tensor,
    detect_position_tensor,
    reserved_rows,
    suggest_trim,
    trim_leading,
    vit_layout,
    zero_leading_rows,
)
from posviz.io.write import storage_dtype, to_npy, to_safetensors
from posviz.source import NO_CUT, Cut

__all__ = [
    "ACCEPTED_FORMATS",
    "FIRST_RANGE",
    "INDEX_SUFFIX",
    "MAX_GGUF_HEADER_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_MEMBERS",
    "MAX_RATIO",
    "MAX_TENSORS",
    "MAX_TEXT_BYTES",
    "MAX_UNZIPPED_BYTES",
    "PICKLE_SUFFIXES",
    "POSITION_NAMES",
    "ZERO_ROWS_SEARCHED",
    "GGUFHeader",
    "GGUFTensor",
    "Input",
    "LoadError",
    "LongArray",
    "ReservedRows",
    "TensorInfo",
    "Trim",
    "check_entry",
    "check_safetensors_tensor",
    "choose_tensor",
    "detect_position_tensor",
    "entry_array",
    "entry_row_bytes",
    "gguf_entries",
    "header_entries",
    "list_tensors",
    "load",
    "opened",
    "read_gguf_header",
    "read_gguf_rows",
    "read_gguf_tensor",
    "read_rows",
    "read_tensor",
    "reserved_rows",
    "row_bytes",
    "rows_entry",
    "safetensors_array",
    "safetensors_entries",
    "storage_dtype",
    "suggest_trim",
    "table_from",
    "to_npy",
    "to_safetensors",
    "trim_leading",
    "vit_layout",
    "zero_leading_rows",
]

#: What a file is read from: uploaded bytes, or a path on disk.
Input = bytes | str | os.PathLike
#: ``read(begin, end)``: those bytes of an opened file.
ReadRange = Callable[[int, int], bytes | bytearray]

#: What the app can read, as shown to users when a file is not one of them.
ACCEPTED_FORMATS = ".npy, .npz, .safetensors, .gguf, .csv, .tsv, .txt"
#: How a sharded safetensors checkpoint's index is named (transformers' ``save_pretrained``
#: writes ``model.safetensors.index.json`` beside the shards its ``weight_map`` lists).
INDEX_SUFFIX = ".safetensors.index.json"

PICKLE_SUFFIXES = frozenset({".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".joblib"})
_SUFFIX_FORMATS = {
    ".npy": "npy",
    ".npz": "npz",
    ".safetensors": "safetensors",
    ".gguf": "gguf",
    ".csv": "text",
    ".tsv": "text",
    ".txt": "text",
}

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


def list_tensors(source: Input, filename: str | None = None) -> list[TensorInfo]:
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


def read_tensor(source: Input, name: str, filename: str | None = None) -> np.ndarray:
    """Read one tensor, as stored except that BF16 becomes float32 and text becomes float64.

    Sizes are checked against ``embedding.MAX_ELEMENTS`` before memory is allocated, and only
    that tensor's bytes are read from a path.

    Returns
    -------
    ndarray of the stored shape
    """
    with _opened(source, filename) as src:
        return _run(_READERS[src.kind], src, name)


def read_rows(source: str | os.PathLike, name: str, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of tensor `name` of a safetensors file (along its first axis): only
    their bytes are read, after their size was checked (BF16 becomes float32).

    Raises
    ------
    LoadError
        If the file is not safetensors, has no such tensor or rows, or is corrupt.
    """
    with _opened(source, None) as src:
        if src.kind != "safetensors":
            msg = f"{src.label} is not a safetensors file; a model's weights are read from one."
            raise LoadError(msg)
        return _run(_read_safetensors_rows, src, name, start, stop)


def load(source: Input, filename: str | None = None, cut: Cut = NO_CUT) -> Embedding:
    """Read a position table from a file into an :class:`Embedding`.

    Parameters
    ----------
    source, filename
        As in :func:`list_tensors`.
    cut : Cut
        The tensor (by default the one :func:`detect_position_tensor` picks, or the only
        tensor of the file), the rows kept and their patch grid (:meth:`Embedding.from_array`).

    Raises
    ------
    LoadError
        If the file is refused, no tensor can be chosen (the candidates are listed), or the
        tensor is not a usable table.
    """
    with _opened(source, filename) as src:
        infos = _run(_LISTERS[src.kind], src)
        name = cut.tensor if cut.tensor is not None else choose_tensor(infos, src.label)
        array = _run(_READERS[src.kind], src, name)
    # A single-array file (.npy, text) lists its array as "table" and answers to its own name.
    single = [info.name for info in infos] == ["table"]
    dtype = infos[0].dtype if single else next(i.dtype for i in infos if i.name == name)
    return table_from(
        array,
        name=single_name(src.label) if single else name,
        source=src.label,
        dtype=dtype,
        cut=cut,
    )


def table_from(
    array: np.ndarray, *, name: str, source: str, dtype: str, cut: Cut = NO_CUT
) -> Embedding:
    """:meth:`Embedding.from_array` of a tensor read from `source`, `cut`'s rows and grid kept,
    whose refusals name it (also how a Hub model's fetched tensor becomes a table)."""
    try:
        return Embedding.from_array(
            array,
            name=name,
            source=source,
            dtype=dtype,
            row_start=cut.row_start,
            row_stop=cut.row_stop,
            grid=cut.grid,
        )
    except LoadError as exc:
        msg = f"{source}: {exc}"
        raise LoadError(msg) from exc


@contextmanager
def opened(source: Input, filename: str | None = None) -> Iterator[tuple[ReadRange, int, str]]:
    """`source` opened once for several reads: ``(read(begin, end), size, label)``, with the
    checks every read makes (a regular file, not empty; failures as a LoadError)."""
    with _opened(source, filename) as src:
        yield file_reader(src), src.size, src.label


@contextmanager
def _opened(source: Input, filename: str | None) -> Iterator[_File]:
    """Open `source` and decide its format from magic bytes, then from its extension."""
    if isinstance(source, bytes):
        label = filename or "uploaded file"
        file: BufferedIOBase = BytesIO(source)
        size = len(source)
    else:
        path = Path(source)
        label = filename or path.name
        try:
            # Non-blocking: opening a FIFO to read waits for a writer, forever. (Regular files
            # ignore the flag.) The check below is on what was opened, so a file swapped for
            # a FIFO between a check and the open cannot hang the reader either.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            msg = f"Cannot open {label}: {exc.strerror}."
            raise LoadError(msg) from exc
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            msg = f"{label} is not a regular file (a FIFO, device or folder); give a file."
            raise LoadError(msg)
        file, size = open(fd, "rb"), info.st_size  # noqa: SIM115 -- closed by the `with` below
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
        raise _pickle_refused(label)
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "npz"
    if head.startswith(b"GGUF"):
        return "gguf"
    # safetensors: u64 header length (far below 2**32) then the JSON object.
    if len(head) > 8 and head[4:8] == b"\0\0\0\0" and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise _pickle_refused(label)
    if suffix in _SUFFIX_FORMATS:
        return _SUFFIX_FORMATS[suffix]
    if suffix == ".json":  # most often a model's config.json, uploaded where tables go
        msg = (
            f"{label} is JSON, not a position table: a model's config.json describes its "
            "position scheme (rotary, ALiBi, relative), which the Schemes page reads (on the "
            f"command line, posviz summary). Tables are read from {ACCEPTED_FORMATS}."
        )
        raise LoadError(msg)
    msg = (
        f"{label} is not a format posviz reads (no known magic bytes, extension "
        f"{suffix or 'none'!r}). Accepted formats: {ACCEPTED_FORMATS}."
    )
    raise LoadError(msg)


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


_LISTERS: dict[str, Callable[[_File], list[TensorInfo]]] = {
    "npy": _list_npy,
    "npz": _list_npz,
    "safetensors": _list_safetensors,
    "gguf": _list_gguf,
    "text": _list_text,
}
_READERS: dict[str, Callable[[_File, str], np.ndarray]] = {
    "npy": _read_npy,
    "npz": _read_npz,
    "safetensors": _read_safetensors,
    "gguf": _read_gguf,
    "text": _read_text,
}


# A file's tensors as posviz.hub keeps them (entries of dtype, shape and data_offsets), whatever
# the format: safetensors dtypes and GGML types share their plain names (F32, F16, BF16, I8…).


def check_entry(what: str, entry: dict) -> None:
    """Refuse an entry before its bytes are read (masks, too many values, a type not read)."""
    if entry["dtype"] in _SAFETENSOR_TYPES:
        check_safetensors_tensor(what, entry)
    else:
        check_gguf_tensor(what, entry)


def entry_row_bytes(entry: dict) -> int:
    """Bytes of one row (one index of the first axis) of a checked entry, safetensors' or
    GGML's (a quantized row is whole blocks)."""
    if entry["dtype"] in _SAFETENSOR_TYPES:
        return row_bytes(entry)
    return gguf_row_bytes(entry)


def entry_array(buffer: bytearray, entry: dict) -> np.ndarray:
    """The array an entry's bytes hold: safetensors' dtypes as stored (BF16 as float32), GGML's
    quantized types dequantized to float32."""
    if entry["dtype"] in _SAFETENSOR_TYPES:
        return safetensors_array(buffer, entry)
    return gguf_array(buffer, entry)
