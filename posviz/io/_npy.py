"""Reading .npy files: the header checked against the file's size, then exactly the data."""

from __future__ import annotations

import math
import tokenize
from io import BufferedIOBase

import numpy as np
from numpy.lib import format as npy_format

from posviz.embedding import LoadError, check_elements
from posviz.io._file import (
    _SAVE_LESS,
    TensorInfo,
    _check_single,
    _File,
    _read_exact,
    _whole,
)

_NPY_HEADER_READERS = {
    (1, 0): npy_format.read_array_header_1_0,
    (2, 0): npy_format.read_array_header_2_0,
}


def _npy_header(
    file: BufferedIOBase, what: str, nbytes: int
) -> tuple[tuple[int, ...], np.dtype, bool]:
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


def _npy_data(file: BufferedIOBase, what: str, nbytes: int) -> np.ndarray:
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
