"""Simulated tables have the structure they claim."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import toeplitz

from posviz import simulate


def test_sinusoidal_rows_have_norm_sqrt_half_d_and_toeplitz_gram():
    pe = simulate.sinusoidal_table(128, 64)
    np.testing.assert_allclose(np.linalg.norm(pe, axis=1), np.sqrt(32), rtol=1e-12)
    gram = pe @ pe.T
    np.testing.assert_allclose(gram, toeplitz(gram[0]), atol=1e-10)


def test_sinusoidal_matches_the_formula():
    pe = simulate.sinusoidal_table(10, 8, base=100.0)
    p, i = 7, 2
    assert pe[p, 2 * i] == pytest.approx(np.sin(p / 100 ** (2 * i / 8)))
    assert pe[p, 2 * i + 1] == pytest.approx(np.cos(p / 100 ** (2 * i / 8)))


def test_learned_like_is_seeded_smooth_and_has_odd_end_rows():
    a = simulate.learned_like(256, 64, seed=4)
    b = simulate.learned_like(256, 64, seed=4)
    assert a.sha256 == b.sha256
    assert a.sha256 != simulate.learned_like(256, 64, seed=5).sha256
    norms = np.linalg.norm(a.values, axis=1)
    middle = np.median(norms[1:-1])
    assert norms[0] > 2 * middle
    assert norms[-1] > 2 * middle
    x = a.values[1:-1]
    cos = (
        np.sum(x[1:] * x[:-1], axis=1)
        / np.linalg.norm(x[1:], axis=1)
        / np.linalg.norm(x[:-1], axis=1)
    )
    assert np.median(cos) > 0.9  # neighbours are alike


def test_gaussian_has_no_structure():
    g = simulate.gaussian(400, 300, seed=1).values
    assert abs(float(g.mean())) < 0.01
    assert float(g.std()) == pytest.approx(1, abs=0.01)


def test_vit_grid_layout():
    e = simulate.vit_grid(3, 4, 16, prefix_tokens=2)
    assert e.shape == (12, 16)
    assert e.grid == (3, 4)
    assert e.prefix.shape == (2, 16)
    row_part = e.values[:, :8].reshape(3, 4, 8)
    col_part = e.values[:, 8:].reshape(3, 4, 8)
    # The first half encodes the patch row only, the second the column only.
    np.testing.assert_array_equal(row_part, np.broadcast_to(row_part[:, :1], row_part.shape))
    np.testing.assert_array_equal(col_part, np.broadcast_to(col_part[:1], col_part.shape))


def test_vit_grid_needs_d_multiple_of_4():
    with pytest.raises(ValueError, match="multiple of 4"):
        simulate.vit_grid(2, 2, 6)
