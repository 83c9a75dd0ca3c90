"""Similarity maps against direct / sklearn references and grid maps against their patches."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances

from posviz import similarity
from posviz.offsets import offset_profile
from posviz.similarity import grid_similarity, similarity_map
from posviz.simulate import learned_like, vit_grid


@pytest.fixture(scope="module")
def learned() -> np.ndarray:
    return learned_like(300, 48, seed=2).values


@pytest.mark.parametrize(
    ("metric", "reference"),
    [
        ("cosine", cosine_similarity),
        ("dot", lambda x: x @ x.T),
        ("euclidean", euclidean_distances),
    ],
)
@pytest.mark.parametrize("center", [True, False])
def test_exact_map_matches_sklearn(learned, metric, reference, center, monkeypatch):
    monkeypatch.setattr(similarity, "_CHUNK_ELEMENTS", 48 * 70)  # chunks of 70 rows
    x = np.asarray(learned, dtype=np.float64)
    expected = reference(x - x.mean(axis=0) if center else x)
    m = similarity_map(learned, metric=metric, center=center)
    assert m.exact
    np.testing.assert_array_equal(m.row_positions, np.arange(300))
    # Distances near 0 lose half the digits to |a|^2 + |b|^2 - 2<a, b> (documented).
    atol = 1e-7 * np.linalg.norm(x, axis=1).max() if metric == "euclidean" else 1e-12
    np.testing.assert_allclose(m.values, expected, rtol=1e-9, atol=atol)


def test_window_is_the_submatrix_with_whole_table_centring(learned):
    full = similarity_map(learned, metric="cosine", center=True)
    window = similarity_map(learned, metric="cosine", center=True, rows=(10, 60), cols=(200, 290))
    np.testing.assert_allclose(window.values, full.values[10:60, 200:290], atol=1e-13)
    np.testing.assert_array_equal(window.col_positions, np.arange(200, 290))


@pytest.mark.parametrize("metric", ["cosine", "dot", "euclidean"])
def test_block_overview_is_block_means_of_the_exact_matrix(learned, metric, monkeypatch):
    monkeypatch.setattr(similarity, "_CHUNK_ELEMENTS", 48 * 20)  # chunks of 2 blocks
    exact = similarity_map(learned, metric=metric, center=True).values
    m = similarity_map(learned, metric=metric, center=True, max_side=40)
    assert m.block == 8  # ceil(300 / 40); the last block holds 300 - 37 * 8 = 4 positions
    blocks = [(a, min(a + 8, 300)) for a in range(0, 300, 8)]
    if metric == "euclidean":  # root mean square of the distance
        expected = [[np.sqrt(np.mean(exact[a:b, c:d] ** 2)) for c, d in blocks] for a, b in blocks]
    else:
        expected = [[exact[a:b, c:d].mean() for c, d in blocks] for a, b in blocks]
    np.testing.assert_allclose(m.values, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.row_positions, [(a + b - 1) / 2 for a, b in blocks])


def test_zero_row_has_cosine_zero_not_nan():
    x = learned_like(20, 8, seed=1).values.copy()
    x[0] = 0
    m = similarity_map(x, metric="cosine", center=False)
    assert np.isfinite(m.values).all()
    np.testing.assert_array_equal(m.values[0], 0.0)


def test_bad_arguments_say_what_to_do(learned):
    with pytest.raises(ValueError, match="outside positions"):
        similarity_map(learned, rows=(290, 310), center=False)
    with pytest.raises(ValueError, match="Unknown metric"):
        similarity_map(learned, metric="manhattan", center=False)
    with pytest.raises(ValueError, match="height x width"):
        grid_similarity(learned, grid=(7, 7), center=False)


def test_grid_tiles_peak_at_their_own_patch():
    table = vit_grid(6, 7, 64).values
    g = grid_similarity(table, grid=(6, 7), center=False)
    assert g.tiles.shape == (6, 7, 6, 7)
    assert not g.subsampled
    for r in range(6):
        for c in range(7):
            assert np.unravel_index(np.argmax(g.tiles[r, c]), (6, 7)) == (r, c)
    np.testing.assert_allclose(g.tiles.reshape(42, 42), cosine_similarity(table), atol=1e-12)
    # Row and column structure: the row profile is the 1-D sinusoid of the first half only.
    s = cosine_similarity(table).reshape(6, 7, 6, 7)
    rows = [np.mean([s[r, c, r + k, c] for r in range(6 - k) for c in range(7)]) for k in range(6)]
    cols = [np.mean([s[r, c, r, c + k] for r in range(6) for c in range(7 - k)]) for k in range(7)]
    np.testing.assert_allclose(g.row_profile, rows, atol=1e-12)
    np.testing.assert_allclose(g.col_profile, cols, atol=1e-12)


def test_large_grids_subsample_tiles_evenly():
    g = grid_similarity(vit_grid(30, 40, 16).values, grid=(30, 40), max_side=800, center=False)
    assert g.subsampled
    assert g.tile_rows[[0, -1]].tolist() == [0, 29]
    assert g.tile_cols[[0, -1]].tolist() == [0, 39]
    assert g.tiles.shape == (24, 20, 30, 40)  # 800 // 40 = 20 tiles across


def test_large_table_never_forms_the_full_matrix():
    values = learned_like(6000, 32, seed=0).values
    tracemalloc.start()
    m = similarity_map(values, metric="cosine", center=True)
    p = offset_profile(values, metric="cosine", center=True)  # the offsets' too
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert m.values.shape == (750, 750)
    assert np.isfinite(p.std).all()
    assert peak < 6000**2 * 8 / 3  # an L x L float64 matrix would be 288 MB


def test_results_carry_their_settings(learned):
    window = similarity_map(learned, rows=(10, 20), cols=(0, 300), max_side=100, center=False)
    assert window.params == {
        "metric": "cosine",
        "center": False,
        "rows": (10, 20),
        "cols": (0, 300),
        "max_side": 100,
    }
    assert (window.rows, window.cols, window.block) == ((10, 20), (0, 300), 3)
    g = grid_similarity(learned[:288], grid=(12, 24), center=True)
    assert g.params == {"grid": (12, 24), "center": True, "max_tiles": 24, "max_side": 800}
    assert g.grid == (12, 24)


@pytest.mark.parametrize("grid", [(1, 7), (3, 3), (4, 5)])
def test_grid_neighbours_are_the_patches_one_step_away(grid):
    height, width = grid
    cells = [divmod(p, width) for p in range(height * width)]
    for position, (r, c) in enumerate(cells):
        expected = [q for q, (r2, c2) in enumerate(cells) if abs(r - r2) + abs(c - c2) == 1]
        assert similarity.grid_neighbours(position, grid) == expected


@pytest.mark.parametrize("n", [1, 12, 196, 197, 1024])
def test_grid_heights_are_the_divisors_and_the_squarest(n):
    heights, squarest = similarity.grid_heights(n)
    assert heights == [h for h in range(1, n + 1) if n % h == 0]
    assert abs(squarest - n // squarest) == min(abs(h - n // h) for h in heights)


def test_euclidean_self_distances_are_exactly_zero_and_small_distances_exact():
    # Rows far from the origin, some 1e-6 of their norm apart: the Gram route cancels there.
    rng = np.random.default_rng(5)
    base = 100 + rng.standard_normal((1, 64))
    x = base + 1e-6 * rng.standard_normal((40, 64)) * (np.arange(40)[:, None] % 2)
    x = np.vstack([x, 100 + rng.standard_normal((40, 64))])
    expected = np.linalg.norm(x[:, None, :] - x[None, :, :], axis=2)
    m = similarity_map(x, metric="euclidean")
    assert (np.diag(m.values) == 0.0).all()
    np.testing.assert_allclose(m.values, expected, rtol=1e-9, atol=0)
    # A window overlapping itself has its zeros where rows meet columns.
    window = similarity_map(x, metric="euclidean", rows=(5, 30), cols=(10, 40))
    assert (np.diag(window.values[5:]) == 0.0).all()
