"""Offset profiles and their scores against analytic truth (sinusoidal, rotating tables) and the
diagonals of the matrix itself."""

from __future__ import annotations

import numpy as np
import pytest

import posviz._linalg
from posviz import offsets
from posviz.offsets import offset_profile, offset_scores
from posviz.similarity import prepared_rows
from posviz.simulate import learned_like, sinusoidal_table


@pytest.fixture(scope="module")
def sinusoid() -> np.ndarray:
    return sinusoidal_table(512, 768)


@pytest.fixture(scope="module")
def learned() -> np.ndarray:
    return learned_like(300, 48, seed=2).values


def direct_diagonals(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std over i of s(i, i+k), straight from the matrix."""
    diagonals = [np.diagonal(s, k) for k in range(len(s))]
    return np.array([d.mean() for d in diagonals]), np.array([d.std() for d in diagonals])


def test_sinusoid_offset_profile_is_the_formula(sinusoid):
    p = offset_profile(sinusoid, metric="cosine", center=False)
    freqs = 10000.0 ** (-np.arange(0, 768, 2) / 768)
    formula = (2 / 768) * np.cos(np.outer(np.arange(512), freqs)).sum(axis=1)
    np.testing.assert_allclose(p.mean, formula, atol=1e-12)
    assert [round(float(p.mean[k]), 4) for k in (1, 10, 100)] == [0.9734, 0.68, 0.4369]
    # Toeplitz: the same similarity for every p at a given offset, all of it explained by k.
    assert p.std.max() < 1e-10
    assert p.translation_invariance == pytest.approx(1.0, abs=1e-9)


def test_shuffled_sinusoid_loses_translation_invariance(sinusoid):
    shuffled = sinusoid[np.random.default_rng(0).permutation(len(sinusoid))]
    assert offset_profile(shuffled, center=False).translation_invariance < 0.05


@pytest.mark.parametrize("metric", ["cosine", "dot"])
@pytest.mark.parametrize("center", [True, False])
def test_profile_matches_direct_diagonals(learned, metric, center, monkeypatch):
    # A tiny scratch budget forces many row tiles and a ragged last one; rows are also
    # prepared (norms) and multiplied (Gram matrix) in small slices.
    monkeypatch.setattr(posviz._linalg, "BLOCK_BYTES", 40_000)
    monkeypatch.setattr(posviz._linalg, "N_BLOCKS", 7)
    x = prepared_rows(learned, metric=metric, center=center)
    s = x @ x.T
    mean, std = direct_diagonals(s)
    p = offset_profile(learned, metric=metric, center=center, max_offset=120)
    np.testing.assert_allclose(p.mean, mean[:121], rtol=0, atol=1e-10 * np.abs(s).max())
    np.testing.assert_allclose(p.std, std[:121], rtol=0, atol=1e-10 * np.abs(s).max())
    np.testing.assert_array_equal(p.count, 300 - np.arange(121))
    # Translation invariance by its definition, over pairs i < j.
    upper = s[np.triu_indices(300, 1)]
    within = sum(((np.diagonal(s, k) - mean[k]) ** 2).sum() for k in range(1, 300))
    expected = 1 - within / ((upper - upper.mean()) ** 2).sum()
    assert p.translation_invariance == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_wide_table_profile_matches_direct_diagonals(learned, metric):
    wide = learned[:40]  # 40 positions x 48 dimensions: the Gram matrix spans positions
    x = prepared_rows(wide, metric=metric, center=True)
    s = x @ x.T
    mean, std = direct_diagonals(s)
    p = offset_profile(wide, metric=metric, center=True)
    np.testing.assert_allclose(p.mean, mean, rtol=0, atol=1e-10 * np.abs(s).max())
    np.testing.assert_allclose(p.std, std, rtol=0, atol=1e-10 * np.abs(s).max())
    upper = s[np.triu_indices(40, 1)]
    within = sum(((np.diagonal(s, k) - mean[k]) ** 2).sum() for k in range(1, 40))
    assert p.translation_invariance == pytest.approx(
        1 - within / ((upper - upper.mean()) ** 2).sum(), rel=1e-9
    )


def test_scores_of_a_rotating_vector():
    # Rows at angle 2 pi p / 50: m(k) = cos(2 pi k / 50) exactly.
    angles = 2 * np.pi * np.arange(200) / 50
    p = offset_profile(np.column_stack([np.cos(angles), np.sin(angles)]), center=False)
    np.testing.assert_allclose(p.mean, np.cos(2 * np.pi * np.arange(200) / 50), atol=1e-12)
    s = offset_scores(p, monotonicity_window=10)
    assert s.monotonicity == pytest.approx(-1.0)
    # cos(2 pi k / 50) < 1/e from k = 9.5 on.
    assert (s.similarity_length, s.length_zero, s.falls_until) == (10, 13, 25)
    # Zero crossings at k = 12.5 + 25 j below 199, peaks at k = 50, 100, 150.
    assert (s.sign_changes, s.peaks) == (8, 3)


def test_default_largest_offset_is_the_pages(learned):
    assert offset_profile(learned, center=False).max_offset == 299  # every offset of a short table
    long = learned_like(offsets.MAX_OFFSET + 200, 4, seed=1).values
    assert offset_profile(long, spread=False, center=False).max_offset == offsets.MAX_OFFSET
    assert offsets.largest_offset(len(long), 10) == 10


def test_the_similarity_length_is_where_the_mean_first_falls_below_one_over_e():
    x = learned_like(300, 48, seed=2).values
    profile = offset_profile(x, center=True)
    expected = next(k for k in range(1, 300) if profile.mean[k] < profile.mean[0] / np.e)
    assert offset_scores(profile).similarity_length == expected
    assert "1/e" in offsets.DEFINITIONS["similarity_length"]


def test_ringing_counts_the_bands_not_every_wiggle():
    # Nine bands (k = 100, 200, ..., 900) under white noise of sd 0.002 at k = 1, growing as
    # 1 / sqrt(pairs) (a mean over n - k pairs): 0.09 at the last offset.
    k = np.arange(1001)
    count = np.arange(1001, 0, -1)
    rng = np.random.default_rng(0)
    mean = 0.5 * np.cos(2 * np.pi * k / 100) * np.exp(-k / 1000)
    mean[1:] += 0.002 * np.sqrt(1000 / count[1:]) * rng.standard_normal(1000)
    profile = offsets.OffsetProfile(
        offsets=k,
        mean=mean,
        std=np.zeros_like(mean),
        count=count,
        translation_invariance=1.0,
    )
    s = offset_scores(profile)
    assert s.noise == pytest.approx(0.002, rel=0.15)
    assert s.peaks == 9


def test_zero_row_gives_a_finite_profile():
    x = learned_like(20, 8, seed=1).values.copy()
    x[0] = 0
    assert np.isfinite(offset_profile(x, center=False).mean).all()


def test_bad_arguments_say_what_to_do(learned):
    with pytest.raises(ValueError, match="needs a similarity"):
        offset_profile(learned, metric="euclidean", center=False)
    with pytest.raises(ValueError, match="max_offset"):
        offset_profile(learned, max_offset=300, center=False)
    with pytest.raises(ValueError, match="window"):
        offset_scores(offset_profile(learned, max_offset=5, center=False), monotonicity_window=1)
    # A window past the last offset is clamped to it, and the result says so.
    assert (
        offset_scores(
            offset_profile(learned, max_offset=5, center=False), monotonicity_window=6
        ).window
        == 5
    )


def test_results_carry_their_settings_and_tables():
    # Rows at angle 2 pi p / 50: the profile and scores of test_scores_of_a_rotating_vector.
    angles = 2 * np.pi * np.arange(200) / 50
    p = offset_profile(
        np.column_stack([np.cos(angles), np.sin(angles)]), max_offset=60, center=False
    )
    assert p.params == {"metric": "cosine", "center": False, "max_offset": 60, "spread": True}
    frame = p.to_frame()
    assert list(frame.columns) == ["k", "mean", "std", "pairs"]
    np.testing.assert_allclose(frame["mean"], np.cos(2 * np.pi * np.arange(61) / 50), atol=1e-12)
    assert frame["pairs"].tolist() == list(range(200, 139, -1))
    s = offset_scores(p, monotonicity_window=10)
    assert s.params == {**p.params, "monotonicity_window": 10}
    row = s.to_frame().iloc[0].to_dict()
    assert row["translation_invariance"] == pytest.approx(1.0)
    assert (row["similarity_length"], row["length_zero"], row["falls_until"]) == (10, 13, 25)
    assert list(s.to_frame().columns) == list(s.metrics())
