"""Reading .gguf files (llama.cpp, Ollama, LM Studio): the header checked once, then one
tensor's bytes, dequantized by ggml-org's own `gguf` package.

Who does what. The header (magic, counts, key/value metadata, tensor infos) is read by the
bounded reader below; the `gguf` package (pinned in requirements.txt) gives the type tables
(`GGUFValueType`, `GGMLQuantizationType`, `GGML_QUANT_SIZES`) and turns a tensor's bytes into
floats (`gguf.quants.dequantize`, every type it implements: F16, BF16, Q4_0 … Q8_0, the
K-quants, the IQ types). `gguf.GGUFReader` is not used, for three reasons checked on gguf 0.19.0:

- It memory-maps a path: an upload (bytes) or a Hub file read by range requests has none.
- It walks every key and array element in Python, making numpy arrays as it goes: a 7.7 MB
  header with a 150,000-token vocabulary and 280,000 merges took 31 s on this machine (numpy
  reads those bytes in 5 ms).
- Its bounds are the file's: an array count of 2**60 with no bytes behind it loops through
  empty reads ``2**60`` times (it never advances); nested arrays recurse until Python's limit.

So every count, length and depth is checked here against the bytes that can follow it (the
file's size and `MAX_HEADER_BYTES`) before anything is read or allocated, as posviz.io checks
a safetensors header, and the header is read in growing pieces (a few MB of a multi-GB file;
the same reader serves range requests on the Hub). llama.cpp's own loader (ggml/src/gguf.cpp)
sets the rules followed: versions 2 and 3, no duplicate keys or tensor names, at most 4
dimensions, rows a whole number of blocks, ``general.alignment`` a u32 power of two. It refuses
arrays of arrays; gguf-py writes them, so they are read here up to `MAX_ARRAY_DEPTH` levels.

Arrays of up to `DECODED_ELEMENTS` values are decoded into the metadata; longer ones (a
vocabulary's tokens, scores and merges) are checked and stepped over, and kept as their type
and length (:class:`LongArray`). Stepping over an array of strings is vectorised (every length
field found at once, then the chain of lengths verified), with a loop over the strings only
when that check fails (a string holding NUL bytes, or one of 256 bytes or more).
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from posviz.embedding import LoadError, check_elements
from posviz.io._file import _SAVE_LESS, TensorInfo, _File, _missing_message, _read_exact, _short

__all__ = [
    "DECODED_ELEMENTS",
    "DECODED_TOTAL",
    "MAX_ARRAY_DEPTH",
    "MAX_GGUF_HEADER_BYTES",
    "MAX_KEYS",
    "MAX_NAME_BYTES",
    "MAX_NESTED",
    "MAX_WALKED",
    "GGUFHeader",
    "GGUFTensor",
    "LongArray",
    "file_reader",
    "gguf_array",
    "gguf_entries",
    "gguf_row_bytes",
    "header_entries",
    "read_gguf_header",
    "read_gguf_rows",
    "read_gguf_tensor",
]

#: A GGUF header is refused beyond this many bytes: large vocabularies live in the header
#: (Llama-3's 128,256 tokens and 280,147 merges take about 8 MB, Gemma-3's 262,144 tokens with
#: their scores and types about 6 MB), so 64 MiB leaves room for eight times that. Parsing
#: keeps only the small values, so memory is the header's bytes and not much more.
MAX_GGUF_HEADER_BYTES = 64 * 2**20
#: Most metadata keys and most tensors: real files hold 20-60 keys and up to a few thousand
#: tensors (a 61-layer mixture of experts: about 1,100).
MAX_KEYS = 65_536
MAX_GGUF_TENSORS = 65_536
#: Longest key or tensor name (llama.cpp's tensor names stop at 63 bytes).
MAX_NAME_BYTES = 4096
#: Deepest nesting of arrays (llama.cpp refuses any; gguf-py writes them).
MAX_ARRAY_DEPTH = 4
#: Arrays up to this long are decoded; longer ones are kept as a LongArray.
DECODED_ELEMENTS = 4096
#: Array elements decoded in one header at most (each becomes a Python value): the keys posviz
#: reads hold a few numbers each. Past it, arrays are stepped over and kept as LongArray.
DECODED_TOTAL = 2**16
#: Arrays inside arrays stepped over in one header at most (each is a step in Python; llama.cpp
#: reads none): 5 million one-element arrays fit in a 64 MiB header.
MAX_NESTED = 4096
#: Strings stepped over one by one in one header at most (only when the walk of a whole array at
#: once cannot settle it: empty strings, NUL bytes, 256 bytes or more). A vocabulary's tokens and
#: merges are about 540,000 (Llama-3's, Gemma-3's); 8 million empty strings fit in 64 MiB.
MAX_WALKED = 2**20
#: GGML's most dimensions of a tensor (GGML_MAX_DIMS).
MAX_DIMS = 4
#: Bytes read first from a file on disk, and over the network: the header is then read in
#: growing pieces as far as it goes. A disk read is cheap next to a parse, which starts again
#: after each piece; a network read pays for every byte beyond the header.
FIRST_READ = 16 * 2**20
FIRST_RANGE = 2**16
#: Pieces read as far as a guess says, before pieces grow by half each time.
GUESSES = 4

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
#: Value type -> (struct code, size, name), little-endian.
_SCALARS = {
    0: ("B", 1, "u8"),
    1: ("b", 1, "i8"),
    2: ("H", 2, "u16"),
    3: ("h", 2, "i16"),
    4: ("I", 4, "u32"),
    5: ("i", 4, "i32"),
    6: ("f", 4, "f32"),
    7: ("?", 1, "bool"),
    10: ("Q", 8, "u64"),
    11: ("q", 8, "i64"),
    12: ("d", 8, "f64"),
}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
_NUMPY = {
    "u8": "u1",
    "i8": "i1",
    "u16": "<u2",
    "i16": "<i2",
    "u32": "<u4",
    "i32": "<i4",
    "f32": "<f4",
    "bool": "u1",
    "u64": "<u8",
    "i64": "<i8",
    "f64": "<f8",
}
#: GGML types numpy reads as they are (everything else goes through gguf's dequantize).
_PLAIN = {
    "F32": "<f4",
    "F16": "<f2",
    "F64": "<f8",
    "I8": "i1",
    "I16": "<i2",
    "I32": "<i4",
    "I64": "<i8",
}


@dataclass(frozen=True)
class LongArray:
    """A metadata array too long to decode (a vocabulary): its element type and length."""

    type: str
    count: int

    def __repr__(self) -> str:
        return f"<array of {self.count:,} {self.type}>"


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file, as its header describes it.

    Attributes
    ----------
    name : str
    shape : tuple of int
        numpy's order (rows first): GGUF stores dimensions innermost first, so
        ``position_embd.weight`` with ne = [768, 1024] is (1024, 768).
    type : str
        The GGML type's name: ``"F32"``, ``"F16"``, ``"BF16"``, ``"Q8_0"``, ``"Q4_K"``, …
    begin, end : int
        Its bytes, relative to the data region (which starts at `GGUFHeader.data_start`).
    """

    name: str
    shape: tuple[int, ...]
    type: str
    begin: int
    end: int


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF file's header, checked.

    Attributes
    ----------
    version : int
    metadata : dict of str to value
        Every key: numbers, bools, strings, tuples for short arrays, LongArray for long ones.
    value_types : dict of str to str
        Each key's type as GGUF names it (``"u32"``, ``"str"``, ``"arr[str]"``, …).
    tensors : dict of str to GGUFTensor
    alignment : int
    data_start : int
        Where the data region starts (the header, padded to `alignment`).
    nbytes : int
        The header's own bytes: magic to the end of the tensor infos (their sha256 names the
        header in a provenance: :func:`read_gguf_header` returns them).
    """

    version: int
    metadata: dict[str, Any]
    value_types: dict[str, str]
    tensors: dict[str, GGUFTensor]
    alignment: int
    data_start: int
    nbytes: int

    @property
    def architecture(self) -> str:
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) else ""


class _Short(Exception):
    """The bytes read so far end before the header does; `need` is how far to read: at least
    that far, or, when `guess`, about that far (an array or the tensor infos, their end guessed
    from what was read of them)."""

    def __init__(self, need: int, *, guess: bool = False) -> None:
        super().__init__(need)
        self.need = need
        self.guess = guess


def _gguf_types() -> tuple[Any, Any]:
    """gguf's GGMLQuantizationType and GGML_QUANT_SIZES (importing gguf costs ~0.2 s: only
    when a GGUF file is read)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    return GGMLQuantizationType, GGML_QUANT_SIZES


@dataclass
class _Progress:
    """What the parses of a header's first bytes settled: the next parse, of more bytes, goes
    on from there (each key and tensor info is parsed once, but the one a piece cut off), with
    the work each bound counts so far."""

    pos: int = 0
    counts: tuple[int, int, int] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    value_types: dict[str, str] = field(default_factory=dict)
    tensors_start: int | None = None
    infos: list[tuple[str, tuple[int, ...], str, int, int]] = field(default_factory=list)
    decoded: int = 0
    nested: int = 0
    walked: int = 0


class _Parser:
    """One pass over header bytes `buf` of a `size`-byte file, from where `progress` stopped;
    raises _Short past its end."""

    def __init__(self, buf: bytes | bytearray, size: int, label: str, progress: _Progress) -> None:
        self.buf = buf
        self.size = size
        self.label = label
        self.pos = progress.pos
        self.limit = min(size, MAX_GGUF_HEADER_BYTES)
        self.decoded, self.nested, self.walked = progress.decoded, progress.nested, progress.walked

    def settled(self, progress: _Progress) -> None:
        """Keep what this parse settled so far (a whole key or tensor info) in `progress`."""
        progress.pos = self.pos
        progress.decoded, progress.nested, progress.walked = self.decoded, self.nested, self.walked

    def fits(self, nbytes: int, what: str) -> None:
        """Refuse `what` of `nbytes` from here before anything is read: past the file's end
        (corrupt), or past the header's limit."""
        if nbytes > self.size - self.pos:
            msg = (
                f"{self.label} is corrupt: {what} at byte {self.pos:,} claims {nbytes:,} bytes, "
                f"more than the {self.size - self.pos:,} left in the file."
            )
            raise LoadError(msg)
        if nbytes > MAX_GGUF_HEADER_BYTES - self.pos:
            msg = (
                f"{self.label} has a GGUF header of more than {MAX_GGUF_HEADER_BYTES:,} bytes "
                f"({what} at byte {self.pos:,} claims {nbytes:,}); real headers, vocabulary "
                "included, take a few MB. The file is corrupt or not a model."
            )
            raise LoadError(msg)

    def take(self, nbytes: int, what: str) -> int:
        """Check that `nbytes` from here exist (in the file, within the limit, read so far),
        step over them and return where they start."""
        end = self.pos + nbytes
        if end > self.size:
            msg = (
                f"{self.label} is truncated or not GGUF: {what} at byte {self.pos:,} needs "
                f"{nbytes:,} bytes, and the file ends at {self.size:,}."
            )
            raise LoadError(msg)
        if end > MAX_GGUF_HEADER_BYTES:
            msg = (
                f"{self.label} has a GGUF header of more than {MAX_GGUF_HEADER_BYTES:,} bytes "
                f"({what} at byte {self.pos:,}); real headers, vocabulary included, take a "
                "few MB. The file is corrupt or not a model."
            )
            raise LoadError(msg)
        if end > len(self.buf):
            raise _Short(end)
        start, self.pos = self.pos, end
        return start

    def scalar(self, code: int, what: str) -> Any:
        fmt, nbytes, _ = _SCALARS[code]
        return struct.unpack_from("<" + fmt, self.buf, self.take(nbytes, what))[0]

    def u32(self, what: str) -> int:
        return self.scalar(4, what)

    def u64(self, what: str) -> int:
        return self.scalar(10, what)

    def raw_string(self, what: str, *, most: int | None = None) -> bytes:
        length = self.u64(f"the length of {what}")
        if most is not None and length > most:
            msg = f"{self.label}: {what} is {length:,} bytes long, above the limit of {most:,}."
            raise LoadError(msg)
        self.fits(length, what)
        start = self.take(length, what)
        return bytes(self.buf[start : start + length])

    def name(self, what: str) -> str:
        raw = self.raw_string(what, most=MAX_NAME_BYTES)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"{self.label} is corrupt: {what} is not UTF-8 ({_short(repr(raw))})."
            raise LoadError(msg) from exc

    def value(self, code: int, key: str, depth: int = 0) -> tuple[Any, str]:
        """A value of type `code` and its type's name."""
        if code in _SCALARS:
            return self.scalar(code, f"the value of {key!r}"), _SCALARS[code][2]
        if code == _STRING:
            raw = self.raw_string(f"the value of {key!r}")
            return raw.decode("utf-8", errors="replace"), "str"
        if code == _ARRAY:
            return self.array(key, depth + 1)
        msg = f"{self.label} is corrupt: key {_short(key)!r} has unknown value type {code}."
        raise LoadError(msg)

    def array(self, key: str, depth: int) -> tuple[Any, str]:
        if depth > MAX_ARRAY_DEPTH:
            msg = (
                f"{self.label}: key {_short(key)!r} nests arrays deeper than {MAX_ARRAY_DEPTH} "
                "levels (llama.cpp reads no nested arrays at all); refused."
            )
            raise LoadError(msg)
        code = self.u32(f"the element type of {key!r}")
        count = self.u64(f"the length of {key!r}")
        if code not in _SCALARS and code not in (_STRING, _ARRAY):
            msg = f"{self.label} is corrupt: array {_short(key)!r} has unknown element type {code}."
            raise LoadError(msg)
        # The fewest bytes an element takes: a string its 8-byte length, an array 12.
        smallest = _SCALARS[code][1] if code in _SCALARS else 8 if code == _STRING else 12
        self.fits(count * smallest, f"array {_short(key)!r} of {count:,} elements")
        decoded = count <= DECODED_ELEMENTS and self.decoded + count <= DECODED_TOTAL
        if code in _SCALARS:
            item = _SCALARS[code][2]
            start = self.take(count * _SCALARS[code][1], f"the elements of {key!r}")
            if not decoded:
                return LongArray(item, count), f"arr[{item}]"
            self.decoded += count
            values = np.frombuffer(self.buf, _NUMPY[item], count, start)
            decoded_values = values.astype(bool).tolist() if item == "bool" else values.tolist()
            return tuple(decoded_values), f"arr[{item}]"
        if code == _STRING:
            if not decoded:
                self.skip_strings(count, key)
                return LongArray("str", count), "arr[str]"
            self.decoded += count
            what = f"an element of {key!r}"
            return tuple(self.value(_STRING, what)[0] for _ in range(count)), "arr[str]"
        # Arrays of arrays: each a step in Python, so their number is bounded before any is.
        self.nested += count
        if self.nested > MAX_NESTED:
            msg = (
                f"{self.label}: key {_short(key)!r} holds {count:,} arrays inside an array; "
                f"posviz steps over at most {MAX_NESTED:,} in a header (llama.cpp reads none). "
                "The file is corrupt or hostile."
            )
            raise LoadError(msg)
        items = [self.value(_ARRAY, key, depth) for _ in range(count)]
        inner = items[0][1] if items else "arr"
        return tuple(v for v, _ in items), f"arr[{inner}]"

    def skip_strings(self, count: int, key: str) -> None:
        """Step over `count` length-prefixed strings: all at once when the chain of lengths
        checks out, else one by one (at most `MAX_WALKED` in a header, none of them copied)."""
        end = _string_chain_end(self.buf, self.pos, count)
        if end is not None:
            self.take(end - self.pos, f"the elements of {key!r}")
            return
        window = min(len(self.buf) - self.pos, _WINDOW)
        found = _length_fields(self.buf, self.pos, window)
        guess = self.pos + int(window / max(found, 1) * count * 1.05)
        if found and guess > len(self.buf) and len(self.buf) < self.limit:
            # Read on as far as the strings so far suggest the rest goes, and a bit more.
            raise _Short(guess, guess=True)
        if self.walked + count > MAX_WALKED:
            msg = (
                f"{self.label}: array {_short(key)!r} holds {count:,} strings that cannot be "
                "stepped over at once (empty ones, NUL bytes, 256 bytes or more); posviz steps "
                f"over at most {MAX_WALKED:,} one by one in a header (a vocabulary's tokens and "
                "merges are about 540,000). The file is corrupt or hostile."
            )
            raise LoadError(msg)
        self.walked += count
        what = f"an element of {key!r}"
        buf, pos, have = self.buf, self.pos, len(self.buf)
        for _ in range(count):
            if pos + 8 <= have:
                (length,) = _U64.unpack_from(buf, pos)
                if pos + 8 + length <= have:
                    pos += 8 + length
                    continue
            self.pos = pos  # past the bytes read: the checked reads say why, or read on
            self.raw_string(what)
            pos = self.pos
        self.pos = pos

    def tensor(self, GGMLType: Any, sizes: Any) -> tuple[str, tuple[int, ...], str, int, int]:
        """One tensor info: name, numpy shape, type name, offset, bytes."""
        name = self.name("a tensor name")
        what = f"{self.label}: tensor {_short(name)!r}"
        n_dims = self.u32(f"the dimension count of tensor {name!r}")
        if n_dims > MAX_DIMS:
            msg = f"{what} has {n_dims} dimensions; GGML tensors have at most {MAX_DIMS}."
            raise LoadError(msg)
        dims = [self.u64(f"a dimension of tensor {name!r}") for _ in range(n_dims)]
        code = self.u32(f"the type of tensor {name!r}")
        offset = self.u64(f"the data offset of tensor {name!r}")
        try:
            kind = GGMLType(code)
            block, type_size = sizes[kind]
        except (ValueError, KeyError):
            msg = f"{what} has GGML type {code}, which the gguf package does not know."
            raise LoadError(msg) from None
        n = math.prod(dims)
        if n > 2**62:
            msg = f"{what} has dimensions {dims}: more elements than any file can hold."
            raise LoadError(msg)
        if dims and dims[0] % block:
            msg = (
                f"{what} is corrupt: rows of {dims[0]:,} values are not a whole number of "
                f"{kind.name} blocks of {block}."
            )
            raise LoadError(msg)
        return name, tuple(reversed(dims)), kind.name, offset, n // block * type_size


#: Bytes of an array's strings scanned to guess how far they go (a few bytes of bool each).
_WINDOW = 2**22


def _length_fields(buf: bytes | bytearray, start: int, nbytes: int) -> int:
    """How many length fields of short strings (a byte, then seven zero bytes, then a non-zero
    byte) the `nbytes` from `start` in `buf` hold: what the bytes read so far say of an array's
    strings."""
    zero = np.frombuffer(buf, np.uint8, count=nbytes, offset=start) == 0
    return int(np.count_nonzero(zero[:-1] > zero[1:]))


#: The low k bytes of a word, for k = 0..3 (`_word_chain_end`).
_LOW_BYTES = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], np.uint32)


def _string_chain_end(buf: bytes | bytearray, start: int, count: int) -> int | None:
    """Where `count` length-prefixed strings starting at `start` end, found without a loop over
    them (by whole words, else byte by byte); None when the bytes read so far do not settle it.
    """
    end = _word_chain_end(buf, start, count)
    return end if end is not None else _byte_chain_end(buf, start, count)


def _word_chain_end(buf: bytes | bytearray, start: int, count: int) -> int | None:
    """`_string_chain_end` read four bytes at a time (4-6x fewer elements than by bytes, and
    no pass over the bytes but one compare): a length field of a short string (a byte, then
    seven zero bytes) holds exactly one whole aligned zero word, and strings with no NUL byte
    hold none; the word before it ends with the length byte (its highest non-zero byte), the
    word after starts with the field's last zeros. The candidates are accepted only if each
    length leads exactly to the next field, as in `_byte_chain_end`; an empty string (a zero
    length byte) breaks the pattern, and that method reads it.
    """
    first = start - 1 - (start - 1) % 4  # the aligned word holding byte start - 1
    if len(buf) - start < 8 * count + 1 or first < 0:
        return None
    window = 24 * count + 2**12
    while True:
        stop = min(len(buf), start + window)
        words = np.frombuffer(buf, np.uint32, count=(stop - first) // 4, offset=first)
        zero = np.flatnonzero(words == 0)
        zero = zero[np.searchsorted(zero, 1) :]  # a zero word before `start` is no field's
        if len(zero) >= count or stop == len(buf):
            break
        window *= 2
    if len(zero) < count or zero[count - 1] + 1 >= len(words):
        return None
    zero = zero[:count]
    before, after = words[zero - 1], words[zero + 1]
    top = (before > 0xFF).astype(np.uint8)  # the length byte's place in the word before
    top += before > 0xFFFF
    top += before > 0xFFFFFF
    lengths = before >> (top.astype(np.uint32) * 8)
    fields = 4 * zero + (first - start - 4) + top
    if (
        fields[0] != 0
        or not before.all()
        or (after & _LOW_BYTES[top]).any()  # the field's zeros that spill into the next word
        or not np.array_equal(np.diff(fields), lengths[:-1] + 8)
    ):
        return None
    (last,) = struct.unpack_from("<Q", buf, start + int(fields[-1]))
    return start + int(fields[-1]) + 8 + last


def _byte_chain_end(buf: bytes | bytearray, start: int, count: int) -> int | None:
    """`_string_chain_end` byte by byte.

    A string under 256 bytes with no NUL byte is stored as its length (one byte, then seven
    zero bytes) and its text: each length field ends a run of zero bytes (vocabularies' tokens
    and merges are such strings; any other array is walked string by string). The candidates are
    taken from the zero runs, and accepted only if each one's length leads exactly to the next:
    that is the array's own chain of lengths, so the answer is exact or None. The bytes are
    scanned in a window that grows until it holds `count` candidates, not to the buffer's end
    (the strings after this array are another array's).
    """
    if len(buf) - start < 8 * count + 1:
        return None
    window = 24 * count + 2**12
    while True:
        stop = min(len(buf), start + window)
        zero = np.frombuffer(buf, np.uint8, count=stop - start, offset=start) == 0
        ends = np.flatnonzero(zero[:-1] > zero[1:])  # the last zero byte of each run
        if len(ends) >= count or stop == len(buf):
            break
        window *= 2
    if len(ends) < count:
        return None
    fields = ends[:count] - 7
    if fields[0] != 0:
        return None
    lengths = np.diff(fields) - 8  # what each string's length must be to reach the next field
    if len(lengths) and (lengths.min() < 0 or lengths.max() > 255):
        return None
    # Each field must hold its length: the low byte, then zeros (byte 7 ends the run already).
    seg = np.frombuffer(buf, np.uint8, count=stop - start, offset=start)
    heads = fields[:-1]
    if not np.array_equal(seg[heads], lengths):
        return None
    if not all(zero[heads + k].all() for k in range(1, 7)):
        return None
    (last,) = struct.unpack_from("<Q", buf, start + int(fields[-1]))
    return start + int(fields[-1]) + 8 + last


def _preamble(p: _Parser, buf: bytes | bytearray, size: int, label: str) -> tuple[int, int, int]:
    """The magic, version and counts, checked: (version, tensors, keys)."""
    if size < 24:
        msg = f"{label} is truncated: {size} bytes, less than a GGUF header."
        raise LoadError(msg)
    magic = bytes(buf[p.take(4, "the magic bytes") : 4])
    if magic != _MAGIC:
        msg = f"{label} is not a GGUF file (it starts with {magic!r}, not b'GGUF')."
        raise LoadError(msg)
    version = p.u32("the version")
    if version & 0xFFFF == 0 and version:
        msg = (
            f"{label} is a big-endian GGUF file; posviz reads little-endian ones. Convert it "
            "with gguf-py's gguf_convert_endian script."
        )
        raise LoadError(msg)
    if version not in _VERSIONS:
        msg = f"{label} is GGUF version {version}; posviz reads versions 2 and 3 (llama.cpp's)."
        raise LoadError(msg)
    n_tensors, n_keys = p.u64("the tensor count"), p.u64("the key count")
    for count, most, kind, smallest in (
        (n_tensors, MAX_GGUF_TENSORS, "tensors", 24),
        (n_keys, MAX_KEYS, "metadata keys", 13),
    ):
        if count > most:
            msg = (
                f"{label} claims {count:,} {kind} in its GGUF header, above the limit of "
                f"{most:,} (real files hold up to a few thousand). It is corrupt or hostile."
            )
            raise LoadError(msg)
        p.fits(count * smallest, f"{count:,} {kind}")
    return version, n_tensors, n_keys


def _parse(buf: bytes | bytearray, size: int, label: str, progress: _Progress) -> GGUFHeader:
    """The header in `buf` (the first bytes of a `size`-byte file), checked, parsed on from
    where `progress` stopped; _Short if `buf` ends before the header does (`progress` then
    holds the keys and tensor infos settled)."""
    GGMLType, sizes = _gguf_types()
    p = _Parser(buf, size, label, progress)
    if progress.counts is None:
        progress.counts = _preamble(p, buf, size, label)
        p.settled(progress)
    version, n_tensors, n_keys = progress.counts
    metadata, value_types = progress.metadata, progress.value_types
    while len(metadata) < n_keys:
        key = p.name("a metadata key")
        if key in metadata:
            msg = f"{label} is corrupt: metadata key {_short(key)!r} appears twice."
            raise LoadError(msg)
        value = p.value(p.u32(f"the type of {key!r}"), key)
        metadata[key], value_types[key] = value
        p.settled(progress)
    if progress.tensors_start is None:
        progress.tensors_start = p.pos
    tensors_start = progress.tensors_start
    alignment = metadata.get("general.alignment", 32)
    if "general.alignment" in metadata and (
        value_types["general.alignment"] != "u32" or alignment < 1 or alignment & (alignment - 1)
    ):
        msg = f"{label}: general.alignment is {alignment!r}; it must be a u32 power of two."
        raise LoadError(msg)
    infos = progress.infos
    while len(infos) < n_tensors:
        start = p.pos
        try:
            infos.append(p.tensor(GGMLType, sizes))
        except _Short as short:
            # Read on as far as the infos so far suggest the rest goes (names of ~30 bytes).
            each = (start - tensors_start) / len(infos) if infos else 64
            guess = start + int(each * (n_tensors - len(infos)) * 1.05)
            raise _Short(max(short.need, guess), guess=True) from None
        p.settled(progress)

    nbytes = p.pos
    data_start = -(-nbytes // alignment) * alignment
    region = size - data_start
    tensors: dict[str, GGUFTensor] = {}
    for name, shape, kind, offset, length in infos:
        what = f"{label}: tensor {_short(name)!r}"
        if name in tensors:
            msg = f"{label} is corrupt: tensor {_short(name)!r} appears twice."
            raise LoadError(msg)
        if offset % alignment:
            msg = f"{what} is corrupt: its offset {offset:,} is not a multiple of {alignment}."
            raise LoadError(msg)
        if offset + length > region:
            msg = (
                f"{what} is truncated: its {length:,} bytes at offset {offset:,} end past the "
                f"{max(region, 0):,}-byte data region. Download the file again."
            )
            raise LoadError(msg)
        tensors[name] = GGUFTensor(name, shape, kind, offset, offset + length)
    spans = sorted((t.begin, t.end, t.name) for t in tensors.values() if t.end > t.begin)
    for (_, end, first), (begin, _, second) in itertools.pairwise(spans):
        if begin < end:
            msg = f"{label} is corrupt: tensors {_short(first)!r} and {_short(second)!r} overlap."
            raise LoadError(msg)
    return GGUFHeader(version, metadata, value_types, tensors, alignment, data_start, nbytes)


def read_gguf_header(
    read: Callable[[int, int], bytes | bytearray],
    size: int,
    label: str,
    *,
    first: int = FIRST_READ,
) -> tuple[GGUFHeader, memoryview]:
    """A GGUF file's checked header and its bytes, read through ``read(begin, end)`` in
    growing pieces (a file's seek and read, or one range request each on the Hub).

    The first piece is `first` bytes; when the header goes on, the next piece reaches as
    far as the parse says it must: for an array of strings or the tensor infos, as far as
    what was read of them suggests they go, plus 5% (each guess made from more of them); else,
    and after `GUESSES` guesses, at least half again as far as read so far (so a header of n
    bytes costs O(log n) pieces whatever its strings). A header is never read beyond
    `MAX_GGUF_HEADER_BYTES`.

    Raises
    ------
    LoadError
        If it is not GGUF, is truncated, or breaks a bound or one of llama.cpp's rules.
    """
    buf = read(0, min(size, first))
    guesses = 0
    progress = _Progress()
    while True:
        try:
            header = _parse(buf, size, label, progress)
        except _Short as short:
            guesses += short.guess
            if short.guess and guesses <= GUESSES:
                end = short.need + 2**12
            else:
                end = max(short.need + 2**12, len(buf) * 3 // 2)
            end = min(size, MAX_GGUF_HEADER_BYTES, end)
            buf = bytearray(buf) if isinstance(buf, bytes) else buf
            buf += read(len(buf), end)
            continue
        # A view, not a copy: most callers only hash or keep these bytes.
        return header, memoryview(buf)[: header.nbytes]


def gguf_entries(head: bytes, size: int, label: str) -> tuple[dict[str, dict], int, GGUFHeader]:
    """A GGUF file's tensors as posviz.hub keeps a safetensors file's: entries of dtype (the
    GGML type's name), shape and data_offsets relative to the data region, where that region
    starts, and the header. `head` holds the header's bytes; `size` is the whole file's."""

    def read(begin: int, end: int) -> bytes:
        if end > len(head):
            msg = f"{label}: the GGUF header kept is shorter than the header it describes."
            raise LoadError(msg)
        return head[begin:end]

    header, _ = read_gguf_header(read, size, label, first=len(head))
    return header_entries(header), header.data_start, header


def header_entries(header: GGUFHeader) -> dict[str, dict]:
    """A checked header's tensors as entries of dtype, shape and data_offsets."""
    return {
        t.name: {"dtype": t.type, "shape": list(t.shape), "data_offsets": [t.begin, t.end]}
        for t in header.tensors.values()
    }


def check_gguf_tensor(what: str, entry: dict) -> None:
    """Refuse a tensor before its bytes are read: too many values, or a type the gguf package
    cannot dequantize (found on one block of zeros, through its public function)."""
    check_elements(what, tuple(entry["shape"]), _SAVE_LESS)
    kind = entry["dtype"]
    if kind in _PLAIN:
        return
    GGMLType, sizes = _gguf_types()
    from gguf.quants import dequantize

    _, type_size = sizes[GGMLType[kind]]
    try:
        dequantize(np.zeros((1, type_size), dtype=np.uint8), GGMLType[kind])
    except NotImplementedError:
        msg = f"{what} is stored as {kind}, which the gguf package cannot dequantize yet."
        raise LoadError(msg) from None


def gguf_array(buffer: bytes | bytearray, entry: dict) -> np.ndarray:
    """The values of a checked GGUF tensor entry's bytes: F32, F16, F64 and integers as
    stored, everything else dequantized to float32 by gguf's ``dequantize``."""
    kind, shape = entry["dtype"], tuple(entry["shape"])
    if kind in _PLAIN:
        return np.frombuffer(buffer, dtype=_PLAIN[kind]).reshape(shape)
    GGMLType, _ = _gguf_types()
    from gguf.quants import dequantize

    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    raw = np.frombuffer(buffer, dtype=np.uint8).reshape(rows, -1)
    return np.asarray(dequantize(raw, GGMLType[kind]), dtype=np.float32).reshape(shape)


def gguf_row_bytes(entry: dict) -> int:
    """Bytes of one row (one index of the first axis) of a checked GGUF entry: whole blocks,
    as the header's check that rows are made of whole blocks ensures."""
    GGMLType, sizes = _gguf_types()
    block, type_size = sizes[GGMLType[entry["dtype"]]]
    return math.prod(entry["shape"][1:]) // block * type_size


def read_gguf_rows(
    read: Callable[[int, int], bytes | bytearray],
    header: GGUFHeader,
    name: str,
    start: int,
    stop: int,
    label: str,
) -> np.ndarray:
    """Rows [start, stop) of tensor `name` (its first axis) of a GGUF file whose `header` was
    read, through ``read(begin, end)``: only their bytes are read, and only they are
    dequantized (a layer's query and key rows of a fused q/k/v tensor)."""
    if name not in header.tensors:
        raise LoadError(_missing_message(label, name, header.tensors))
    tensor = header.tensors[name]
    entry = {"dtype": tensor.type, "shape": list(tensor.shape)}
    what = f"{label}: tensor '{_short(name)}'"
    if not tensor.shape or not 0 <= start < stop <= tensor.shape[0]:
        msg = f"{what} of shape {list(tensor.shape)} has no rows {start}:{stop}."
        raise LoadError(msg)
    part = {**entry, "shape": [stop - start, *tensor.shape[1:]]}
    check_gguf_tensor(what, part)
    row = gguf_row_bytes(entry)
    begin = header.data_start + tensor.begin + start * row
    return gguf_array(read(begin, begin + (stop - start) * row), part)


def _list_gguf(src: _File) -> list[TensorInfo]:
    header, _ = read_gguf_header(file_reader(src), src.size, src.label)
    return [TensorInfo(t.name, t.shape, t.type) for t in header.tensors.values()]


def read_gguf_tensor(
    read: Callable[[int, int], bytes | bytearray], header: GGUFHeader, name: str, label: str
) -> np.ndarray:
    """Tensor `name` of a GGUF file whose `header` was read, through ``read(begin, end)``: its
    size checked first, then only its bytes read."""
    if name not in header.tensors:
        raise LoadError(_missing_message(label, name, header.tensors))
    tensor = header.tensors[name]
    entry = {"dtype": tensor.type, "shape": list(tensor.shape)}
    check_gguf_tensor(f"{label}: tensor '{_short(name)}'", entry)
    begin, end = header.data_start + tensor.begin, header.data_start + tensor.end
    return gguf_array(read(begin, end), entry)


def file_reader(src: _File) -> Callable[[int, int], bytes | bytearray]:
    """``read(begin, end)`` of an opened file: exactly those bytes, or a LoadError."""

    def read(begin: int, end: int) -> bytes | bytearray:
        src.file.seek(begin)
        # One read into a new bytes object: no zero-filled buffer first (a header is MBs).
        data = src.file.read(end - begin)
        if len(data) == end - begin:
            return data
        return data + _read_exact(src.file, end - begin - len(data), src.label)

    return read


def _read_gguf(src: _File, name: str) -> np.ndarray:
    read = file_reader(src)
    header, _ = read_gguf_header(read, src.size, src.label)
    return read_gguf_tensor(read, header, name, src.label)
