"""Reading .safetensors files: the header checked once, then one tensor's bytes."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import struct
import threading
from io import BytesIO

import numpy as np

from posviz.embedding import LoadError, check_elements
from posviz.io._file import (
    _SAVE_LESS,
    TensorInfo,
    _File,
    _missing_message,
    _read_exact,
    _short,
    _whole,
)

#: A safetensors header is refused beyond these, before it is parsed: GPT-2's 148 tensors take
#: 15 KB of header (about 100 bytes each), so 8 MiB holds some 80,000 entries, and a
#: checkpoint file holds a few thousand tensors at most. Parsing time and memory grow with
#: the header's bytes and entries, so these bound both for any header they admit.
MAX_HEADER_BYTES = 8 * 2**20
MAX_TENSORS = 65_536

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
    # An entry that is only a dtype name has no sizes: refused as malformed below.
    fields = entry if isinstance(entry, dict) else {}
    shape, offsets = fields.get("shape"), fields.get("data_offsets")
    if not (
        isinstance(shape, list)
        and all(_whole(s) and s >= 0 for s in shape)
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(map(_whole, offsets))
    ):
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


def _read_safetensors_rows(src: _File, name: str, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of tensor `name` along its first axis: only their bytes are read
    (one layer's query rows of a fused q/k/v tensor, without its values' rows)."""
    entries, data = _safetensors_header(src)
    if name not in entries:
        raise LoadError(_missing_message(src.label, name, entries))
    what, entry = f"{src.label}: tensor '{_short(name)}'", entries[name]
    part = rows_entry(what, entry, start, stop)
    check_safetensors_tensor(what, part)
    begin = entry["data_offsets"][0] + start * row_bytes(entry)
    src.file.seek(data + begin)
    return safetensors_array(_read_exact(src.file, (stop - start) * row_bytes(entry), what), part)


def row_bytes(entry: dict) -> int:
    """Bytes of one row (one index of the first axis) of a checked header entry."""
    return math.prod(entry["shape"][1:]) * np.dtype(_SAFETENSORS_DTYPES[entry["dtype"]]).itemsize


def rows_entry(what: str, entry: dict, start: int, stop: int) -> dict:
    """The header entry of rows [start, stop) of `entry` (a slice of its first axis)."""
    shape = entry["shape"]
    if not shape or not 0 <= start < stop <= shape[0]:
        msg = f"{what} of shape {shape} has no rows {start}:{stop}."
        raise LoadError(msg)
    return {**entry, "shape": [stop - start, *shape[1:]]}


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
