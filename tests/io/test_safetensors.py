"""posviz.io._safetensors: BF16 bits read exactly, only the header and the one tensor read, the
header parsed once and bounded in bytes, entries, time and memory."""

from __future__ import annotations

import json
import struct
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import posviz.io
from posviz.io import LoadError, list_tensors, load, read_tensor
from posviz.source import Cut
from tests.corpus import write_safetensors


def test_bf16_bits_become_the_float32_they_encode(tmp_path: Path) -> None:
    # Five copies of the four cases: a table of the 10-row minimum that load() accepts.
    bits = np.tile(np.array([[0x3F80, 0xC049], [0x0001, 0x8000]], dtype="<u2"), (5, 1))
    path = write_safetensors(tmp_path / "b.safetensors", {"t": ("BF16", (10, 2), bits.tobytes())})
    expected = np.tile(np.array([[1.0, -3.140625], [2.0**-133, -0.0]], dtype=np.float32), (5, 1))
    assert load(path).dtype == "bfloat16"
    array = read_tensor(path, "t")
    assert array.dtype == np.float32
    np.testing.assert_array_equal(array, expected)
    assert np.signbit(array[1::2, 1]).all()


def sparse_checkpoint(path: Path) -> np.ndarray:
    """A safetensors file with a 128 MiB "wte" (a hole on disk) before a small "wpe"."""
    big = 8192 * 4096 * 4
    wpe = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    header = {
        "wte": {"dtype": "F32", "shape": [8192, 4096], "data_offsets": [0, big]},
        "wpe": {"dtype": "F32", "shape": [16, 8], "data_offsets": [big, big + wpe.nbytes]},
    }
    blob = json.dumps(header).encode()
    with path.open("wb") as file:
        file.write(struct.pack("<Q", len(blob)) + blob)
        file.seek(8 + len(blob) + big)
        file.write(wpe.tobytes())
    return wpe


def test_safetensors_listing_reads_only_the_header(tmp_path: Path, bytes_read: list[int]) -> None:
    sparse_checkpoint(tmp_path / "big.safetensors")
    infos = list_tensors(tmp_path / "big.safetensors")
    assert [(i.name, i.shape, i.dtype) for i in infos] == [
        ("wte", (8192, 4096), "F32"),
        ("wpe", (16, 8), "F32"),
    ]
    assert 0 < sum(bytes_read) < 1024


def test_safetensors_reads_one_tensor_without_the_rest(
    tmp_path: Path, bytes_read: list[int]
) -> None:
    wpe = sparse_checkpoint(tmp_path / "big.safetensors")
    table = load(tmp_path / "big.safetensors")
    assert table.name == "wpe"
    np.testing.assert_array_equal(table.values, wpe)
    assert sum(bytes_read) < 4 * 1024


def _empty_tensors(n: int) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    return {f"t{i}": ("F32", (0,), b"") for i in range(n)}


def test_a_safetensors_header_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Formerly: a header was parsed three times per Load (list, then list + read) and again
    # on every rerun.
    table = np.arange(48, dtype=np.float32).reshape(12, 4)
    path = write_safetensors(
        tmp_path / "once.safetensors", {"wpe": ("F32", (12, 4), table.tobytes())}
    )
    calls = []
    check = posviz.io._safetensors._check_header
    monkeypatch.setattr(
        posviz.io._safetensors, "_check_header", lambda *a: calls.append(a) or check(*a)
    )
    monkeypatch.setattr(posviz.io._safetensors, "_CHECKED_HEADERS", {})
    for _ in range(3):  # three reruns of the Data page: list, then Load
        list_tensors(path.read_bytes(), "once.safetensors")
        loaded = load(path.read_bytes(), "once.safetensors", Cut("wpe"))
    np.testing.assert_array_equal(loaded.values, table)
    assert len(calls) == 1
    # Another header is parsed anew, and a header error is raised every time, not cached.
    other = write_safetensors(tmp_path / "other.safetensors", {"w": ("F32", (12, 4), bytes(192))})
    list_tensors(other)
    assert len(calls) == 2


def test_header_byte_and_entry_limits_are_stated_with_their_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = write_safetensors(tmp_path / "big.safetensors", _empty_tensors(40))
    monkeypatch.setattr(posviz.io._safetensors, "MAX_HEADER_BYTES", 1000)
    with pytest.raises(LoadError, match=r"header of 2,\d{3} bytes, above the limit of 1,000"):
        list_tensors(big)
    monkeypatch.setattr(posviz.io._safetensors, "MAX_HEADER_BYTES", 2**20)
    monkeypatch.setattr(posviz.io._safetensors, "MAX_TENSORS", 39)
    with pytest.raises(LoadError, match="more than 39 tensors"):
        list_tensors(big)
    monkeypatch.setattr(posviz.io._safetensors, "MAX_TENSORS", 40)
    assert len(list_tensors(big)) == 40


def test_a_header_past_the_entry_limit_is_refused_in_bounded_time_and_memory(
    tmp_path: Path,
) -> None:
    # Formerly: a 100 MB header of 1.43 M empty tensors took 28 s and 1.6 GB to list. Now
    # 8 MiB at most is read, and parsing stops at the 65,537th tensor entry.
    data = write_safetensors(tmp_path / "many.safetensors", _empty_tensors(100_000)).read_bytes()
    assert len(data) < posviz.io.MAX_HEADER_BYTES
    start = time.process_time()  # CPU seconds: a busy machine's other work does not count
    with pytest.raises(LoadError, match="more than 65,536 tensors"):
        list_tensors(data, "many.safetensors")
    seconds = time.process_time() - start
    tracemalloc.start()
    with pytest.raises(LoadError, match="more than 65,536 tensors"):
        list_tensors(data, "many.safetensors")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 15  # about 1 s on an idle machine
    assert peak < 200 * 2**20
