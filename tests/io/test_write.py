"""posviz.io.write: a table written back, its prefix rows first, in its stored dtype (or the
analysed one, saying why), under its tensor name, with timm's batch axis when asked."""

from __future__ import annotations

import io

import numpy as np
import pytest
import safetensors.numpy

from posviz import simulate
from posviz.embedding import Embedding
from posviz.io import storage_dtype, to_npy, to_safetensors


def test_safetensors_keeps_name_dtype_and_batch_axis():
    values = simulate.sinusoidal_table(16, 4).astype(np.float16)
    table = Embedding.from_array(values, name="wpe.weight", source="s", dtype="F16")
    loaded = safetensors.numpy.load(to_safetensors(table, batch_axis=True))
    assert list(loaded) == ["wpe.weight"]
    assert loaded["wpe.weight"].dtype == np.float16
    np.testing.assert_array_equal(loaded["wpe.weight"][0], values)


@pytest.mark.parametrize(
    ("stored", "scale", "written"),
    [("BF16", 1.0, "float32"), ("float16", 1e6, "float32"), ("F64", 1.0, "float64")],
)
def test_storage_dtype_falls_back_and_says_why(stored, scale, written):
    table = Embedding.from_array(scale * np.eye(12, 3, dtype=np.float32), name="t", source="s")
    table = Embedding.from_array(table.values, name="t", source="s", dtype=stored)
    dtype, note = storage_dtype(table)
    assert dtype == np.dtype(written)
    assert (note == "") == (stored == "F64")


def test_npy_holds_the_prefix_rows_then_the_table_in_the_stored_dtype():
    full = np.random.default_rng(0).standard_normal((13, 8)).astype(np.float16)
    table = Embedding.from_array(full, name="pos_embed", source="s", dtype="F16", row_start=1)
    back = np.load(io.BytesIO(to_npy(table)))
    assert (back.dtype, back.shape) == (np.float16, (13, 8))
    np.testing.assert_array_equal(back, full)  # the class token's row first, as stored
    assert np.load(io.BytesIO(to_npy(table, batch_axis=True))).shape == (1, 13, 8)
