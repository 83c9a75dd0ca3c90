"""posviz.io._npy: an .npy file's header read as numpy writes it (versions 1 and 2, either
order), checked against the file's size before any data is read; object arrays and headers
that are not literals refused with what to do."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from posviz.io import LoadError, TensorInfo, list_tensors, read_tensor

TABLE = np.arange(96, dtype=np.float32).reshape(12, 8) / 7


def npy(array: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    buffer = io.BytesIO()
    npy_format.write_array(buffer, array, version=version, allow_pickle=True)
    return buffer.getvalue()


def with_header(text: str, data: bytes = b"") -> bytes:
    """A version 1.0 .npy of header `text` (a dict literal, or anything else) and `data`."""
    header = text.encode("latin1")
    header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_both_versions_and_orders_read_the_values_numpy_wrote(version, order):
    data = npy(np.asarray(TABLE, order=order), version)
    assert list_tensors(data, "t.npy") == [TensorInfo("table", (12, 8), "float32")]
    array = read_tensor(data, "table", "t.npy")
    assert array.dtype == np.float32
    np.testing.assert_array_equal(array, TABLE)


def test_big_endian_values_are_read_as_stored():
    array = read_tensor(npy(TABLE.astype(">f8")), "table", "t.npy")
    np.testing.assert_array_equal(array, TABLE.astype(np.float64))


def test_a_third_version_header_is_refused_by_its_version():
    with pytest.raises(LoadError, match=r"t\.npy uses \.npy format version \(3, 0\)"):
        list_tensors(npy(TABLE, (3, 0)), "t.npy")


def test_a_file_shorter_than_its_header_declares_is_refused_before_reading():
    data = npy(TABLE)[:-1]
    message = (
        r"t\.npy is truncated or corrupt: its header declares shape \(12, 8\) of float32 "
        rf"\(384 data bytes\) but it holds {len(data):,} bytes in all\."
    )
    with pytest.raises(LoadError, match=message):
        list_tensors(data, "t.npy")


def test_a_header_that_is_an_expression_is_refused_as_one():
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2**40, 8), }"
    with pytest.raises(LoadError, match=r"corrupt \.npy header \(an expression, not a literal\)"):
        list_tensors(with_header(header), "t.npy")


@pytest.mark.parametrize(
    ("shape", "reason"),
    [("(-1, 8)", r"shape \(-1, 8\) is not sizes"), ("(1.5, 8)", r"shape is not valid: \(1.5, 8\)")],
)
def test_a_shape_that_is_not_sizes_is_refused(shape, reason):
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"
    with pytest.raises(LoadError, match=rf"t\.npy has a corrupt \.npy header \({reason}\); export"):
        list_tensors(with_header(header, bytes(64)), "t.npy")


def test_an_object_array_is_refused_unpickled():
    data = npy(np.array([[1.0, "x"]] * 12, dtype=object))
    with pytest.raises(LoadError, match=r"holds Python objects \(dtype object\).*never unpickles"):
        read_tensor(data, "table", "t.npy")


def test_listing_a_large_file_reads_its_header_only(tmp_path: Path, bytes_read: list[int]):
    path = tmp_path / "big.npy"
    with path.open("wb") as file:
        npy_format.write_array_header_1_0(file, {"descr": "<f4", "fortran_order": False,
                                                 "shape": (50_000, 1024)})  # fmt: skip
        file.truncate(file.tell() + 50_000 * 1024 * 4)  # 200 MB, a hole on disk
    assert list_tensors(path) == [TensorInfo("table", (50_000, 1024), "float32")]
    assert 0 < sum(bytes_read) <= 1024
