"""Real files to load: good ones in every format and dtype, and a hostile corpus to refuse.

`good_files` returns what a reader must give back for each file; `hostile_files` returns files
that must be refused with a `LoadError` whose message contains `HOSTILE_WORDS[name]`. Browser
tests upload the same files (``from tests.corpus import hostile_files``). No file here needs
torch: BF16 is written by truncating float32 bits, pickles are made with the standard library.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shlex
import struct
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.lib import format as npy_format
from safetensors.numpy import save_file

#: Created by the pickles below if anything ever unpickles them.
MARKER = "UNPICKLED"

#: For each hostile file, a word its refusal message must contain (case-insensitive).
HOSTILE_WORDS = {
    "rce.pkl": "never loads pickles",
    "rce.pt": "convert it to safetensors",  # the code to run: beside the message
    "rce_misnamed.npy": "pickle",
    "rce_no_extension": "pickle",
    "torch_zip.pth": "pickle",
    "torch_zip_misnamed.npz": "pickle",
    "object.npy": "dtype object",
    "huge_shape.npy": "(1000000, 1000000)",
    "truncated.npy": "truncated",
    "bad_header.npy": "corrupt",
    "zip_bomb.npz": "zip bomb",
    "zip_ratio.npz": "zip bomb",
    "zip_many_members.npz": "1,001 members",
    "zip_without_npy.npz": "numpy.savez",
    "nan.npy": "row 2, column 3",
    "one_d.npy": "1-D",
    "three_d.npy": "3-D",
    "complex.npy": "complex",
    "empty.npy": "empty",
    "empty.csv": "empty",
    "comments_only.csv": "no numbers",
    "ragged.csv": "line 3",
    "text.csv": "'cat' is not a number",
    "latin1.csv": "UTF-8",
    "single_column.csv": "2 dimensions",
    "unknown.xyz": "Accepted formats",
    "st_bad_json.safetensors": "not valid JSON",
    "st_nested_json.safetensors": "not valid JSON",
    "st_header_list.safetensors": "JSON list",
    "st_header_beyond_file.safetensors": "header claims 1,000,000 bytes",
    "st_huge_header.safetensors": "limit",
    "st_offsets_mismatch.safetensors": "needs 64",
    "st_offsets_beyond_file.safetensors": "outside",
    "st_overlap.safetensors": "overlap",
    "st_unknown_dtype.safetensors": "unknown dtype 'F7'",
    "st_bool.safetensors": "BOOL",
    "st_three_d.safetensors": "3-D",
    # Formerly: types checked where bytes enter, sizes capped before parsing, clear messages.
    "st_dtype_list.safetensors": "unknown dtype \"['F32']\"",
    "st_dtype_dict.safetensors": "unknown dtype",
    "st_bool_shape.safetensors": "whole numbers",
    "st_too_many_tensors.safetensors": "more than 65,536 tensors",
    "expression_shape.npy": "an expression, not a literal",
    "bool_shape.npy": "(True, 4)",
    "float128_overflow.npy": "beyond float64's range",
    "nine_rows.npy": "at least 10 positions",
}


class Good(NamedTuple):
    """A readable file and what `read_tensor(path, tensor)` must return."""

    path: Path
    tensor: str
    values: np.ndarray
    dtype: str


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...], bytes]]) -> Path:
    """A safetensors file written by hand: name -> (dtype, shape, raw little-endian bytes).

    Independent of posviz and of the safetensors package, so it can write BF16 (numpy has
    no bfloat16).
    """
    header, data, offset = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        data.append(raw)
        offset += len(raw)
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"".join(data))
    return path


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of float32 values, by truncating the low 16 bits."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def good_files(tmp_path: Path) -> dict[str, Good]:
    """One file per format and dtype, small, with the array a reader must return."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((12, 8))
    out: dict[str, Good] = {}

    for dtype in ("float32", "float64", "float16"):
        path = tmp_path / f"table_{dtype}.npy"
        np.save(path, table.astype(dtype))
        out[f"npy_{dtype}"] = Good(path, "table", table.astype(dtype), dtype)
    fortran = np.asfortranarray(table)
    np.save(tmp_path / "fortran.npy", fortran)
    out["npy_fortran"] = Good(tmp_path / "fortran.npy", "table", fortran, "float64")
    # Unknown extension, recognised by magic bytes (np.save would append .npy to a path).
    (tmp_path / "table.dat").write_bytes(_npy_bytes(table))
    out["npy_sniffed"] = Good(tmp_path / "table.dat", "table", table, "float64")

    wpe, wte = table.astype(np.float32), rng.standard_normal((20, 8)).astype(np.float32)
    np.savez_compressed(tmp_path / "arrays.npz", wpe=wpe, wte=wte, bias=np.zeros(8))
    out["npz_wpe"] = Good(tmp_path / "arrays.npz", "wpe", wpe, "float32")
    out["npz_wte"] = Good(tmp_path / "arrays.npz", "wte", wte, "float32")

    # %.17g round-trips float64 exactly, so text must give the very same numbers back.
    lines = [",".join(f"{v:.17g}" for v in row) for row in table]
    texts = {
        "csv_header": (
            "header.csv",
            ",".join(f"dim{j}" for j in range(8)) + "\n" + "\n".join(lines),
        ),
        "csv_plain": ("plain.csv", "\n".join(lines) + "\n"),
        "csv_semicolon": ("semicolon.csv", "\n".join(line.replace(",", ";") for line in lines)),
        "csv_pandas": (
            "pandas.csv",
            ","
            + ",".join(map(str, range(8)))
            + "\n"
            + "\n".join(f"{i},{line}" for i, line in enumerate(lines)),
        ),
        "tsv_projector": ("vectors.tsv", "\n".join(line.replace(",", "\t") for line in lines)),
        "txt_whitespace": (
            "table.txt",
            "# saved by numpy.savetxt\n\n" + "\n".join(line.replace(",", "  ") for line in lines),
        ),
    }
    for key, (name, text) in texts.items():
        (tmp_path / name).write_text(text)
        out[key] = Good(tmp_path / name, "table", table, "float64")

    bf16_bits = to_bf16_bits(table)
    ints = rng.integers(-1000, 1000, size=(12, 8)).astype(np.int32)
    path = write_safetensors(
        tmp_path / "mixed.safetensors",
        {
            "f32": ("F32", (12, 8), table.astype("<f4").tobytes()),
            "f16": ("F16", (12, 8), table.astype("<f2").tobytes()),
            "bf16": ("BF16", (12, 8), bf16_bits.astype("<u2").tobytes()),
            "f64": ("F64", (12, 8), table.astype("<f8").tobytes()),
            "i32": ("I32", (12, 8), ints.astype("<i4").tobytes()),
        },
    )
    # Reference by another route than the reader's shift: mask the low half of float32 bits.
    bf16_values = (table.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    out["st_f32"] = Good(path, "f32", table.astype(np.float32), "F32")
    out["st_f16"] = Good(path, "f16", table.astype(np.float16), "F16")
    out["st_bf16"] = Good(path, "bf16", bf16_values, "BF16")
    out["st_f64"] = Good(path, "f64", table, "F64")
    out["st_i32"] = Good(path, "i32", ints, "I32")

    gpt2 = {
        "wte.weight": rng.standard_normal((64, 16)).astype(np.float32),
        "wpe.weight": rng.standard_normal((32, 16)).astype(np.float32),
        "h.0.attn.bias": np.tril(np.ones((32, 32), dtype=np.float32))[None, None],
    }
    save_file(gpt2, tmp_path / "gpt2.safetensors", metadata={"format": "pt"})
    out["st_gpt2_wpe"] = Good(
        tmp_path / "gpt2.safetensors", "wpe.weight", gpt2["wpe.weight"], "F32"
    )
    (tmp_path / "gpt2.weights").write_bytes((tmp_path / "gpt2.safetensors").read_bytes())
    out["st_sniffed"] = Good(tmp_path / "gpt2.weights", "wte.weight", gpt2["wte.weight"], "F32")

    pos_embed = rng.standard_normal((1, 197, 768)).astype(np.float32)
    save_file({"pos_embed": pos_embed, "cls_token": pos_embed[:, :1]}, tmp_path / "vit.safetensors")
    out["st_vit"] = Good(tmp_path / "vit.safetensors", "pos_embed", pos_embed, "F32")
    return out


class _RunsCode:
    """Unpickling this runs a shell command that creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def _npy_with_header(shape: tuple[int, ...], descr: str, data: bytes) -> bytes:
    """.npy bytes with a header that says `shape` whatever `data` holds."""
    header = io.BytesIO()
    npy_format.write_array_header_1_0(
        header, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return header.getvalue() + data


def _npy_header_text(header: str) -> bytes:
    """.npy 1.0 bytes whose header is `header` verbatim (numpy's writer would reject it)."""
    text = header.encode("latin1")
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def _npz_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _npy_bytes(array: np.ndarray, **kwargs: bool) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, **kwargs)
    return buffer.getvalue()


def _declare_size(archive: bytes, size: int) -> bytes:
    """Patch a one-member zip so both its headers declare `size` uncompressed bytes."""
    data = bytearray(archive)
    local, central = data.index(b"PK\x03\x04"), data.index(b"PK\x01\x02")
    data[local + 22 : local + 26] = struct.pack("<I", size)
    data[central + 24 : central + 28] = struct.pack("<I", size)
    return bytes(data)


def _safetensors_bytes(header: bytes | dict, data: bytes, *, length: int | None = None) -> bytes:
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(blob) if length is None else length) + blob + data


def hostile_files(tmp_path: Path) -> dict[str, Path]:
    """Files that must each be refused with a LoadError (see `HOSTILE_WORDS`), name -> path.

    The pickles would create ``tmp_path / MARKER`` if unpickled: check it never appears.
    """
    rce = pickle.dumps(_RunsCode(tmp_path / MARKER), protocol=4)
    torch_zip = _npz_bytes(
        {"archive/data.pkl": rce, "archive/version": b"3\n", "archive/data/0": bytes(64)}
    )
    nan = np.ones((12, 4))
    nan[2, 3] = np.nan
    f32 = {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}
    content: dict[str, bytes] = {
        "rce.pkl": rce,
        "rce.pt": rce,
        "rce_misnamed.npy": rce,
        "rce_no_extension": rce,
        "torch_zip.pth": torch_zip,
        "torch_zip_misnamed.npz": torch_zip,
        "object.npy": _npy_bytes(np.array([_RunsCode(tmp_path / MARKER)]), allow_pickle=True),
        "huge_shape.npy": _npy_with_header((10**6, 10**6), "<f4", bytes(64)),
        "truncated.npy": _npy_with_header((1000, 100), "<f4", bytes(400)),
        "bad_header.npy": b"\x93NUMPY\x01\x00\x10\x00{'descr': garbage\n",
        # 4 MiB of zeros deflate to ~4 kB, then the headers are made to declare ~4 GiB.
        "zip_bomb.npz": _declare_size(
            _npz_bytes({"wpe.npy": _npy_bytes(np.zeros((1024, 1024), np.float32))}), 2**32 - 2
        ),
        "zip_ratio.npz": _npz_bytes({"wpe.npy": _npy_bytes(np.zeros((2048, 1024), np.float32))}),
        "zip_many_members.npz": _npz_bytes(
            {f"a{i}.npy": _npy_bytes(np.zeros((2, 2))) for i in range(1001)}
        ),
        "zip_without_npy.npz": _npz_bytes({"readme.txt": b"hello"}),
        "nan.npy": _npy_bytes(nan),
        "one_d.npy": _npy_bytes(np.arange(10.0)),
        "three_d.npy": _npy_bytes(np.zeros((2, 3, 4))),
        "complex.npy": _npy_bytes(np.ones((4, 4), dtype=np.complex64)),
        "empty.npy": b"",
        "empty.csv": b"",
        "comments_only.csv": b"# nothing here\n\n   \n",
        "ragged.csv": b"1,2,3\n4,5,6\n7,8\n",
        "text.csv": b"animal,sound\ncat,meow\ndog,woof\n",
        "latin1.csv": "1,2\n3,4\ncaf\u00e9,5\n".encode("latin-1"),
        "single_column.csv": b"1\n2\n3\n",
        "unknown.xyz": bytes(range(256)),
        "st_bad_json.safetensors": _safetensors_bytes(b'{"wpe": {"dtype": ', bytes(64)),
        "st_nested_json.safetensors": _safetensors_bytes(b"{" + b"[" * 100_000, b""),
        "st_header_list.safetensors": _safetensors_bytes(b"[1, 2]", b""),
        "st_header_beyond_file.safetensors": _safetensors_bytes(
            {"wpe": f32}, bytes(64), length=10**6
        ),
        "st_huge_header.safetensors": _safetensors_bytes({"wpe": f32}, bytes(64), length=2**31),
        "st_offsets_mismatch.safetensors": _safetensors_bytes(
            {"wpe": {**f32, "data_offsets": [0, 60]}}, bytes(60)
        ),
        "st_offsets_beyond_file.safetensors": _safetensors_bytes({"wpe": f32}, bytes(32)),
        "st_overlap.safetensors": _safetensors_bytes(
            {"wpe": f32, "wte": {**f32, "data_offsets": [32, 96]}}, bytes(96)
        ),
        "st_unknown_dtype.safetensors": _safetensors_bytes(
            {"wpe": {**f32, "dtype": "F7"}}, bytes(64)
        ),
        "st_bool.safetensors": _safetensors_bytes(
            {"mask": {"dtype": "BOOL", "shape": [4, 4], "data_offsets": [0, 16]}}, bytes(16)
        ),
        "st_three_d.safetensors": _safetensors_bytes(
            {"wpe": {"dtype": "F32", "shape": [2, 2, 4], "data_offsets": [0, 64]}}, bytes(64)
        ),
        "st_dtype_list.safetensors": _safetensors_bytes({"wpe": {**f32, "dtype": ["F32"]}}, b""),
        "st_dtype_dict.safetensors": _safetensors_bytes({"wpe": {**f32, "dtype": {"a": 1}}}, b""),
        "st_bool_shape.safetensors": _safetensors_bytes(
            {"wpe": {**f32, "shape": [True, 16]}}, bytes(64)
        ),
        "st_too_many_tensors.safetensors": _safetensors_bytes(
            {
                f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
                for i in range(65_537)
            },
            b"",
        ),
        "expression_shape.npy": _npy_header_text(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2**40, 2**40), }"
        ),
        "bool_shape.npy": _npy_header_text(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (True, 4), }"
        ),
        "float128_overflow.npy": _npy_bytes(np.full((12, 4), np.longdouble("1e4000"))),
        "nine_rows.npy": _npy_bytes(np.ones((9, 4))),
    }
    paths = {}
    for name, data in content.items():
        paths[name] = tmp_path / name
        paths[name].write_bytes(data)
    return paths
