"""The shared float64 numerics of the analyses, against whole-table numpy references."""

from __future__ import annotations

import numpy as np
import pytest

import posviz._linalg
from posviz._linalg import (
    block_rows,
    centered,
    evenly_spaced,
    float64_blocks,
    float64_rows,
    gram,
    gram_of_blocks,
    mean_row,
    row_blocks,
)
from posviz.simulate import gaussian


@pytest.fixture
def table() -> np.ndarray:
    """float32, as uploaded, off-centre so that centring matters."""
    return (np.random.default_rng(3).standard_normal((301, 23)) * 2 + 5).astype(np.float32)


@pytest.mark.parametrize("center", [True, False])
def test_centered_is_the_table_minus_its_mean_row_in_float64(table, center):
    x64 = table.astype(np.float64)
    got = centered(table, center=center)
    assert got.dtype == np.float64
    assert not np.shares_memory(got, table)
    np.testing.assert_allclose(got, x64 - x64.mean(0) if center else x64, rtol=0, atol=1e-12)
    assert np.array_equal(mean_row(table, center=False), np.zeros(23))


def test_float64_rows_center_then_scale_each_row(table):
    mean, scale = np.arange(23.0), np.linspace(0.5, 2, 4)
    got = float64_rows(table[:4], mean, scale)
    expected = (table[:4].astype(np.float64) - mean) * scale[:, None]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(float64_rows(table[:4]), table[:4].astype(np.float64))


@pytest.mark.parametrize("n_blocks", [1, 3, 1000])
def test_row_blocks_cover_every_row_once(monkeypatch, table, n_blocks):
    monkeypatch.setattr(posviz._linalg, "N_BLOCKS", n_blocks)
    mean = table.mean(0, dtype=np.float64)
    blocks = list(row_blocks(table, mean))
    assert len(blocks) == min(n_blocks, len(table))
    np.testing.assert_array_equal(np.vstack(blocks), table.astype(np.float64) - mean)


@pytest.mark.parametrize("shape", [(301, 23), (23, 301)], ids=["tall", "wide"])
@pytest.mark.parametrize("n_blocks", [1, 3, 1000])
def test_gram_of_blocks_is_the_product_on_the_smaller_side(monkeypatch, shape, n_blocks):
    monkeypatch.setattr(posviz._linalg, "N_BLOCKS", n_blocks)
    x = np.random.default_rng(2).standard_normal(shape)
    scale = np.linspace(0.1, 1, shape[0])
    for center in (True, False):
        c = (x - x.mean(0) if center else x) * scale[:, None]
        expected = c.T @ c if shape[0] >= shape[1] else c @ c.T
        got = gram(x, center=center, row_scale=scale)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
        assert np.array_equal(got, got.T)
        assert got.flags.f_contiguous
    # Blocks of rows of any width: the d x d product, here of a wide table.
    got = gram_of_blocks(row_blocks(x), shape[1])
    np.testing.assert_allclose(got, x.T @ x, rtol=0, atol=1e-12 * np.abs(x.T @ x).max())


@pytest.mark.parametrize("shape", [(700, 600), (600, 700)], ids=["tall", "wide"])
def test_gram_is_the_whole_symmetric_product_across_mirrored_column_blocks(shape):
    x = gaussian(*shape, seed=1).values  # float32, as uploaded; sides past 2 mirror blocks
    centered = x.astype(np.float64) - x.mean(0, dtype=np.float64)
    expected = centered.T @ centered if shape[0] >= shape[1] else centered @ centered.T
    got = gram(x, center=True)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    assert np.array_equal(got, got.T)


@pytest.mark.parametrize("shape", [(50, 7), (7, 50)], ids=["tall", "wide"])
def test_blocks_stay_within_the_byte_budget(monkeypatch, shape):
    # 3 float64 rows of the tall orientation per block, whatever N_BLOCKS allows.
    monkeypatch.setattr(posviz._linalg, "BLOCK_BYTES", 3 * 8 * 7 + 5)
    assert block_rows(50, 7) == 3
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    blocks = list(float64_blocks(x, center=True))
    assert [len(b) for b in blocks] == [3] * 16 + [2]
    centered = x.astype(np.float64) - x.astype(np.float64).mean(axis=0)
    expected = centered if shape == (50, 7) else centered.T
    np.testing.assert_allclose(np.vstack(blocks), expected, atol=1e-12)


@pytest.mark.parametrize(("n", "k"), [(1, 5), (5, 5), (10, 4), (1000, 7), (101, 100), (30, 24)])
def test_evenly_spaced_keeps_both_ends_and_at_most_k_points(n, k):
    got = evenly_spaced(n, k)
    assert got[0] == 0
    assert got[-1] == n - 1
    assert len(got) == min(n, k)  # no two round alike while k <= n
    steps = np.diff(got)
    assert np.all(steps > 0)
    assert steps.size == 0 or steps.max() - steps.min() <= 1  # gaps differ by rounding only
    reference = np.round(np.arange(min(n, k)) * (n - 1) / max(min(n, k) - 1, 1)).astype(int)
    np.testing.assert_array_equal(got, reference)


def test_evenly_spaced_is_every_position_when_they_fit():
    np.testing.assert_array_equal(evenly_spaced(6, 6), np.arange(6))
    assert evenly_spaced(0, 3).size == 0


@pytest.mark.parametrize("shape", [(301, 23), (23, 301)], ids=["tall", "wide"])
def test_tall_times_is_the_centered_table_in_its_tall_orientation_times_a_matrix(shape):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    c = centered(x, center=True)
    tall = c if shape[0] >= shape[1] else c.T
    m = np.random.default_rng(6).standard_normal((tall.shape[1], 4))
    got = posviz._linalg.tall_times(x, m, center=True)
    np.testing.assert_allclose(got, tall @ m, rtol=0, atol=1e-12 * np.abs(tall @ m).max())
