"""Boundary statistics, outlier flags and change points against analytic truth and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from posviz import boundary, simulate
from posviz._params import defaults
from posviz.rows import RowLabels, row_offsets


def test_sinusoidal_statistics_are_analytic():
    pe = simulate.sinusoidal_table(200, 64)
    s = boundary.position_statistics(pe, n_directions_removed=0)
    # Every row has norm sqrt(d/2); the cosine of neighbours depends on the offset only:
    # <PE[p], PE[p+1]> = sum_i cos(w_i) over the d/2 frequencies.
    freqs = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    np.testing.assert_allclose(s.norm, np.sqrt(32), rtol=1e-12)
    np.testing.assert_allclose(s.cos_next[:-1], np.cos(freqs).sum() / 32, rtol=1e-12)
    np.testing.assert_array_equal(s.cos_prev[1:], s.cos_next[:-1])
    assert np.isnan(s.cos_prev[0])
    assert np.isnan(s.cos_next[-1])
    assert s.residual_norm is None


def test_distance_and_residual_against_references():
    x = np.random.default_rng(3).standard_normal((60, 10))
    s = boundary.position_statistics(x, n_directions_removed=3)
    np.testing.assert_allclose(s.dist_to_mean, cdist(x, x.mean(axis=0)[None])[:, 0])
    # Residual outside the top-3 right singular vectors of the centred table, by SVD.
    centred = x - x.mean(axis=0)
    vt = np.linalg.svd(centred, full_matrices=False)[2][:3]
    expected = np.linalg.norm(centred - centred @ vt.T @ vt, axis=1)
    np.testing.assert_allclose(s.residual_norm, expected, rtol=1e-10)


def test_block_edges_change_nothing():
    # 10,000 rows cross several block edges (posviz._linalg.N_BLOCKS): compare with whole numpy.
    x = np.random.default_rng(4).standard_normal((10_000, 8)).astype(np.float32)
    s = boundary.position_statistics(x, n_directions_removed=2)
    x64 = x.astype(np.float64)
    unit = x64 / np.linalg.norm(x64, axis=1, keepdims=True)
    np.testing.assert_allclose(s.cos_next[:-1], np.sum(unit[1:] * unit[:-1], axis=1), rtol=1e-12)
    centred = x64 - x64.mean(axis=0)
    np.testing.assert_allclose(s.dist_to_mean, np.linalg.norm(centred, axis=1), rtol=1e-12)
    vt = np.linalg.svd(centred, full_matrices=False)[2][:2]
    expected = np.linalg.norm(centred - centred @ vt.T @ vt, axis=1)
    np.testing.assert_allclose(s.residual_norm, expected, rtol=1e-9)


def test_too_many_directions_removed_is_refused():
    with pytest.raises(ValueError, match=r"n_directions_removed must be in 0\.\.9"):
        boundary.position_statistics(np.ones((20, 10)), n_directions_removed=10)


def test_hampel_matches_a_direct_window_median_and_mad():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(100)
    z, median = boundary.hampel(x, window=5)
    p = 50  # interior: the window is positions 45..55
    window = x[45:56]
    mad = np.median(np.abs(window - np.median(window)))
    assert median[p] == np.median(window)
    assert z[p] == pytest.approx((x[p] - np.median(window)) / (1.4826 * mad))
    # At the ends the window is shifted inward and keeps 11 positions.
    assert median[0] == np.median(x[:11])
    assert median[-1] == np.median(x[-11:])


def test_rounding_noise_on_a_constant_curve_is_not_flagged():
    curve = np.sqrt(384) + 1e-14 * np.random.default_rng(0).standard_normal(300)
    default = defaults(boundary.outliers)
    z, _ = boundary.hampel(curve, window=default["hampel_window"])
    assert not np.any(np.abs(z) > default["threshold"])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n", [512, 1024])
def test_boosted_end_rows_are_flagged_and_no_middle_row(n, seed):
    table = simulate.learned_like(n, 768, boundary=4.0, seed=seed)
    flags = boundary.outliers(boundary.position_statistics(table.values))
    assert flags.positions.tolist() == [0, n - 1]
    # Both ends stand out on norm and on neighbour similarity, not only on one statistic.
    flagged_on = {(r["position"], r["statistic"]) for r in flags.records()}
    assert {(0, "norm"), (0, "neighbour_cos"), (n - 1, "norm")} <= flagged_on


def test_a_row_next_to_an_odd_row_is_not_flagged_by_its_neighbour():
    table = simulate.learned_like(256, 64, seed=2).values.copy()
    table[100] *= 6.0  # one odd middle row
    flags = boundary.outliers(boundary.position_statistics(table))
    assert 100 in flags.positions
    assert 99 not in flags.positions
    assert 101 not in flags.positions


def test_boundary_summary_means():
    stats = boundary.position_statistics(np.c_[np.arange(10.0), np.zeros(10)])  # norm = p
    s = boundary.boundary_summary(stats, boundary_size=2)
    assert (s.first[0], s.middle[0], s.last[0]) == (0.5, 4.5, 8.5)
    table = s.to_frame()
    assert list(table.columns) == ["statistic", "first_2", "middle", "last_2"]
    assert table.iloc[0].tolist() == ["norm", 0.5, 4.5, 8.5]
    assert list(table["statistic"]) == list(stats.flagging_curves())
    assert s.params == {"n_directions_removed": 0, "boundary_size": 2}
    with pytest.raises(ValueError, match=r"boundary_size must be in 1\.\.4"):
        boundary.boundary_summary(stats, boundary_size=5)


def curve_flags(curve: np.ndarray) -> boundary.Outliers:
    """Outliers of one curve (as "norm") with nothing flagged: change points search the curve."""
    values = np.asarray(curve, dtype=np.float64)[None]
    nothing = np.zeros(values.shape)
    return boundary.Outliers(("norm",), values, values, nothing, nothing.astype(bool))


def test_change_point_at_a_level_shift_of_the_norm():
    # BERT-like: positions past 128 were trained less and have a different norm.
    rng = np.random.default_rng(1)
    directions = rng.standard_normal((512, 64))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    norms = np.where(np.arange(512) < 128, 1.0, 1.3) + 0.02 * rng.standard_normal(512)
    stats = boundary.position_statistics(directions * norms[:, None])
    found = boundary.change_points(curve_flags(stats.norm), max_changes=3)
    assert found.positions.tolist() == [128]
    assert found.shifts[0] == pytest.approx(0.3, abs=0.03)
    assert found.z[0] > 2 * found.critical


def test_a_drifting_norm_has_no_change_point_and_a_planted_jump_is_found():
    # A smooth table whose norm grows linearly: the old change-in-mean search cut it 3 times.
    # 256 wide: at 64 its norm wiggles by ~0.05 a row, so a 5% jump (0.1) is no clearer than
    # the wiggles (z 2.4 against 4.25), where the test is built not to call wiggles steps.
    table = simulate.learned_like(512, 256, boundary=0.0, seed=3).values
    drift = table * np.linspace(1.0, 2.0, 512)[:, None]
    for curve in (boundary.position_statistics(drift).norm, np.linspace(1.0, 2.0, 512)):
        found = boundary.change_points(curve_flags(curve))
        assert found.positions.size == 0
        assert found.describe().startswith("none found")
    # The same drift with a 5% jump at 300 (noise: the table's own wiggles).
    jump = drift * np.where(np.arange(512) < 300, 1.0, 1.05)[:, None]
    found = boundary.change_points(curve_flags(boundary.position_statistics(jump).norm))
    assert found.positions.tolist() == [300]
    # In words as the axes label the rows: a relative table's row 300 is relative position 44;
    # DeBERTa's row 300 is bucket 44, offset 44 alone (the exact band), its row 456 a range.
    assert (found.describe(), found.describe(RowLabels(first_position=-256))) == ("300", "44")
    buckets = RowLabels(-256, row_offsets(position_buckets=256, max_relative_positions=512))
    assert found.describe(buckets) == "44"
    far = boundary.change_points(curve_flags(np.where(np.arange(512) < 456, 1.0, 1.5)))
    assert far.describe(buckets) == "278 … 280"
    # A curved drift (the square root of position) has no step either.
    assert boundary.change_points(curve_flags(np.sqrt(1 + np.arange(512.0)))).positions.size == 0


def test_no_change_point_on_noise_or_a_constant_curve():
    noise = np.random.default_rng(5).standard_normal(1000)
    assert boundary.change_points(curve_flags(noise)).positions.size == 0
    assert boundary.change_points(curve_flags(np.full(300, 19.6))).positions.size == 0


def test_change_points_respect_min_size_and_cap():
    noise = 0.05 * np.random.default_rng(2).standard_normal(170)
    steps = np.repeat([0.0, 1.0, 0.0, 2.0], [50, 20, 50, 50]) + noise
    found = boundary.change_points(curve_flags(steps), min_size=1, max_changes=5)
    assert found.positions.tolist() == [50, 70, 120]
    assert found.window == 8  # lines fitted to 8 positions a side
    assert boundary.change_points(curve_flags(steps), max_changes=1).positions.tolist() == [120]
    # Steps keep 25 positions a side from the ends and from each other.
    kept = boundary.change_points(curve_flags(steps), min_size=25, max_changes=5).positions
    assert 120 in kept
    assert np.diff([0, *kept.tolist(), 170]).min() >= 25


def test_results_carry_their_settings_and_tables():
    table = simulate.learned_like(200, 32, seed=0).values
    stats = boundary.position_statistics(table, n_directions_removed=3)
    flags = boundary.outliers(stats, hampel_window=10, threshold=6.0)
    assert stats.params == {"n_directions_removed": 3}
    assert flags.params == {"n_directions_removed": 3, "hampel_window": 10, "threshold": 6.0}
    assert flags.rule == "|robust z| > 6 in a window of ±10 positions"
    changes = boundary.change_points(flags, statistic="dist_to_mean", max_changes=2, min_size=5)
    assert changes.params == {
        "n_directions_removed": 3,
        "hampel_window": 10,
        "threshold": 6.0,
        "statistic": "dist_to_mean",
        "max_changes": 2,
        "min_size": 5,
        "alpha": 0.01,
        "null_draws": 20,
        "seed": 0,
    }
    # The rows flagged on any statistic are left out, as if flagged on the curve searched.
    left_out = flags.flagged.any(axis=0)
    curve = flags.values[flags.statistics.index("dist_to_mean")]
    direct = boundary.change_points(
        boundary.Outliers(("norm",), curve[None], curve[None], curve[None] * 0, left_out[None]),
        max_changes=2,
        min_size=5,
    )
    np.testing.assert_array_equal(changes.positions, direct.positions)
    np.testing.assert_array_equal(changes.left_out, np.flatnonzero(left_out))
    frame = changes.to_frame()
    assert list(frame.columns) == ["position", "shift", "z"]
    np.testing.assert_array_equal(frame["position"], changes.positions)
    np.testing.assert_array_equal(frame["shift"], changes.shifts)
    np.testing.assert_array_equal(frame["z"], changes.z)
    assert "Steps on dist to mean:" in changes.procedure()
    assert "at most 2, at least 5 positions apart and from either end" in changes.procedure()
