"""Principal components over position, sinusoid fits and subspace likeness against truth."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.signal
from scipy.optimize import curve_fit
from sklearn.metrics import r2_score

from posviz import simulate
from posviz.components import (
    PrincipalComponents,
    fit_sinusoids,
    max_components,
    periodogram,
    principal_components,
    sinusoid_basis,
    sinusoid_likeness,
)
from posviz.spectrum import spectrum


def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def known_frequencies(n: int, cycles: list[float], amplitudes: list[float]) -> np.ndarray:
    """Table whose PC pairs are cos/sin of `cycles` over n positions along orthonormal dims."""
    p = np.arange(n)[:, None] * 2 * np.pi / n
    waves = np.concatenate([np.cos(p * cycles), np.sin(p * cycles)], axis=1)
    directions = np.linalg.qr(rng().standard_normal((40, 2 * len(cycles))))[0].T
    return (waves * np.tile(amplitudes, 2)) @ directions


def as_components(trajectories: np.ndarray) -> PrincipalComponents:
    """Any trajectories in the place of a table's components: fits and likeness read only
    their scores (the variance shares and directions here are placeholders)."""
    k = trajectories.shape[1]
    return PrincipalComponents(
        scores=trajectories,
        loadings=np.eye(k),
        singular_values=np.linalg.norm(trajectories, axis=0),
        explained_variance=np.full(k, 1 / k),
        params={"center": False},
    )


def flip_like_posviz(u_s: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Apply the documented sign rule (largest absolute loading positive) to a reference SVD."""
    signs = np.sign(v[np.abs(v).argmax(axis=0), np.arange(v.shape[1])])
    return u_s * signs, v * signs


@pytest.mark.parametrize("shape", [(60, 25), (25, 60)], ids=["tall", "wide"])
@pytest.mark.parametrize("center", [True, False])
def test_projections_equal_u_times_s_of_the_svd(shape, center):
    x = rng().standard_normal(shape) + np.linspace(0, 3, shape[1])
    pc = principal_components(x, n_components=5, center=center)
    xc = x - x.mean(axis=0) if center else x
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    scores, loadings = flip_like_posviz(u[:, :5] * s[:5], vt[:5].T)
    np.testing.assert_allclose(pc.scores, scores, atol=1e-10)
    np.testing.assert_allclose(pc.loadings, loadings, atol=1e-10)
    np.testing.assert_allclose(pc.singular_values, s[:5], rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(pc.scores, axis=0), s[:5], rtol=1e-12)


def test_variance_shares_are_the_spectrum_explained_variance():
    table = simulate.learned_like(300, 64, seed=3).values
    for center in (True, False):
        pc = principal_components(table, n_components=8, center=center)
        np.testing.assert_allclose(
            pc.explained_variance,
            spectrum(table, center=center).explained_variance[:8],
            rtol=1e-10,
        )


def test_sign_convention_does_not_depend_on_precision_or_sign_of_the_table():
    table = simulate.learned_like(200, 48, seed=1).values
    in_64 = principal_components(table.astype(np.float64), n_components=6)
    in_32 = principal_components(table, n_components=6)
    np.testing.assert_allclose(in_32.scores, in_64.scores, atol=1e-10)
    negated = principal_components(-table.astype(np.float64), n_components=6)
    np.testing.assert_allclose(negated.loadings, in_64.loadings, atol=1e-12)
    largest = in_64.loadings[np.abs(in_64.loadings).argmax(axis=0), range(6)]
    assert (largest > 0).all()


def test_k_beyond_the_rank_is_refused_with_the_limit():
    assert max_components((10, 4), center=True) == 4
    assert max_components((4, 10), center=True) == 3
    with pytest.raises(ValueError, match="between 1 and 3"):
        principal_components(np.ones((4, 10)), n_components=4)


def test_periodogram_is_scipys_power_spectrum_as_a_share_of_the_sum_of_squares():
    for n in (31, 32):
        x = rng().standard_normal((n, 3))
        _, power = scipy.signal.periodogram(x, fs=n, detrend=False, scaling="spectrum", axis=0)
        np.testing.assert_allclose(periodogram(x), (power * n / np.sum(x**2, axis=0)).T)
        np.testing.assert_allclose(periodogram(x).sum(axis=1), 1.0)


def test_sinusoid_fit_matches_nonlinear_least_squares_and_sklearn_r2():
    n = 400
    p = np.arange(n)
    noisy = 2.0 * np.cos(2 * np.pi * 3.3 * p / n - 1.0) + 0.5 + 0.8 * rng().standard_normal(n)

    def model(p, a, f, phi, c):
        return a * np.cos(2 * np.pi * f * p / n + phi) + c

    tight = {"xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}
    reference, _ = curve_fit(model, p, noisy, p0=[2.0, 3.3, -1.0, 0.5], **tight)
    fit = fit_sinusoids(as_components(noisy[:, None]))
    np.testing.assert_allclose(
        [fit.amplitude[0], fit.frequency[0], fit.phase[0], fit.offset[0]], reference, rtol=1e-6
    )
    assert fit.r2[0] == pytest.approx(r2_score(noisy, fit.fitted[:, 0]), rel=1e-12)
    assert 0.7 < fit.r2[0] < 0.9  # noise variance 0.64 against signal variance 2


def test_frequencies_of_a_table_built_from_known_frequencies_are_recovered():
    cycles = [3, 7, 12, 20]
    table = known_frequencies(256, cycles, [4.0, 3.0, 2.0, 1.0])
    pc = principal_components(table, n_components=8)
    fits = fit_sinusoids(pc)
    expected = np.repeat(cycles, 2)  # cos and sin of each frequency share its variance
    np.testing.assert_array_equal(fits.peak, expected)
    np.testing.assert_allclose(fits.frequency, expected, atol=1e-6)
    np.testing.assert_allclose(fits.r2, 1.0, atol=1e-9)


def test_half_integer_frequencies_are_found():
    n, cycles = 500, [1.5, 4.5, 9.5]
    p = np.arange(n)[:, None]
    directions = np.linalg.qr(rng().standard_normal((30, 3)))[0].T
    table = (np.cos(2 * np.pi * p * cycles / n) * [9.0, 3.0, 1.0]) @ directions
    fits = fit_sinusoids(principal_components(table, n_components=3))
    assert (np.abs(fits.peak - cycles) <= 1).all()
    assert (np.abs(fits.frequency - cycles) < 0.1).all()


def _brute_force_residuals(y: np.ndarray, per_bin: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares residual of [cos, sin, 1] on a fine grid inside [1/2, n/2), by batched QR:
    shape (frequencies, columns of y)."""
    n = len(y)
    cycles = np.arange(per_bin // 2, per_bin * n // 2) / per_bin
    angle = 2 * np.pi * cycles[:, None] * np.arange(n) / n
    design = np.stack([np.cos(angle), np.sin(angle), np.ones_like(angle)], axis=-1)
    q = np.linalg.qr(design)[0]
    return cycles, np.sum(y**2, axis=0) - np.sum(np.einsum("fnk,nc->fkc", q, y) ** 2, axis=1)


def _drifting(n: int, seed: int) -> np.ndarray:
    # A PC trajectory of a trained table: frequency drifting a few bins, amplitude modulated.
    r = np.random.default_rng(seed)
    x = np.arange(n) / n
    f0, drift, phase = r.uniform(10, n / 4), r.uniform(1, 8), r.uniform(0, 2 * np.pi)
    envelope = 1 + r.uniform(0, 0.9) * np.cos(2 * np.pi * r.uniform(0, 2) * x)
    return envelope * np.cos(2 * np.pi * (f0 * x + drift / 2 * x**2) + phase)


def _two_close(n: int, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    f, gap = r.uniform(5, n / 4), r.uniform(0.6, 2.0)
    x = 2 * np.pi * np.arange(n) / n
    return np.cos(f * x) + r.uniform(0.7, 1.0) * np.cos((f + gap) * x + r.uniform(0, 6))


def _noise(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n)


@pytest.mark.parametrize("make", [_drifting, _two_close, _noise])
def test_the_fit_is_the_global_least_squares_optimum(make):
    n = 256
    trajectories = np.column_stack([make(n, seed) for seed in range(24)])
    fits = fit_sinusoids(as_components(trajectories))
    missed_near_peak = 0
    cycles, all_residuals = _brute_force_residuals(trajectories)
    for c, (y, residuals) in enumerate(zip(trajectories.T, all_residuals.T, strict=True)):
        best = residuals.min()
        rss = np.sum((y - fits.fitted[:, c]) ** 2)
        assert rss <= best * (1 + 1e-9)  # at least as good as every point of the fine grid
        assert abs(fits.frequency[c] - cycles[residuals.argmin()]) < 1 / 32 or rss < best
        near_peak = np.abs(cycles - fits.peak[c]) <= 1
        missed_near_peak += residuals[near_peak].min() > 1.01 * best
    if make is _drifting:
        # Cases where a search within a bin of the periodogram peak stops short.
        assert missed_near_peak >= 2


def test_pcs_of_a_sinusoidal_table_are_sinusoids():
    pc = principal_components(simulate.sinusoidal_table(1024, 768), n_components=6)
    assert (fit_sinusoids(pc).r2 > 0.99).all()


def test_gaussian_rows_fit_badly_and_look_like_their_shuffles():
    pc = principal_components(simulate.gaussian(512, 64, seed=2).values, n_components=6)
    assert (fit_sinusoids(pc).r2 < 0.1).all()
    likeness = sinusoid_likeness(pc, n_frequencies=8, n_shuffles=50, seed=0)
    # Rows are exchangeable, so the table is one more draw from the shuffles' distribution.
    spread = likeness.shuffled.std()
    assert abs(likeness.mean_cos2 - likeness.shuffled.mean()) < 4 * spread
    assert likeness.shuffled.mean() == pytest.approx(16 / 512, rel=0.3)  # 2m / n by chance


def test_learned_like_span_is_sinusoidal_far_above_chance():
    # Without the boundary kicks, which give end rows components of their own.
    table = simulate.learned_like(512, 128, boundary=0.0, seed=0).values
    likeness = sinusoid_likeness(
        principal_components(table, n_components=6), n_frequencies=8, n_shuffles=20, seed=0
    )
    assert likeness.mean_cos2 > 0.95
    assert likeness.shuffled.max() < 0.2
    assert likeness.p_value == pytest.approx(1 / 21)


def test_likeness_is_the_mean_squared_cosine_of_orthonormal_bases():
    scores = rng().standard_normal((100, 4))
    likeness = sinusoid_likeness(as_components(scores), n_frequencies=5, n_shuffles=1)
    q_a = np.linalg.qr(scores)[0]
    q_b = np.linalg.qr(sinusoid_basis(100, 5))[0]
    assert likeness.mean_cos2 == pytest.approx(np.sum((q_a.T @ q_b) ** 2) / 4, rel=1e-12)


def test_shuffled_control_is_the_likeness_of_row_shuffled_trajectories():
    pc = principal_components(simulate.learned_like(200, 32, seed=4).values, n_components=5)
    scores = pc.scores
    likeness = sinusoid_likeness(pc, n_frequencies=4, n_shuffles=3, seed=9)
    orders = np.random.default_rng(9)
    basis = sinusoid_basis(200, 4)
    expected = [
        np.mean(np.cos(scipy.linalg.subspace_angles(scores[orders.permutation(200)], basis)) ** 2)
        for _ in range(3)
    ]
    np.testing.assert_allclose(likeness.shuffled, expected, rtol=1e-10)


def test_shuffled_control_equals_components_of_the_shuffled_table():
    table = simulate.learned_like(200, 32, seed=4).values.astype(np.float64)
    order = rng().permutation(200)
    shuffled = principal_components(table[order], n_components=5)
    original = principal_components(table, n_components=5)
    np.testing.assert_allclose(shuffled.scores, original.scores[order], atol=1e-10)


def test_basis_is_cos_and_sin_of_half_cycles():
    basis = sinusoid_basis(10, 2)
    p = np.arange(10)
    np.testing.assert_allclose(basis[:, 2], np.cos(np.pi * 2 * p / 10))
    np.testing.assert_allclose(basis[:, 1], np.sin(np.pi * p / 10))
    with pytest.raises(ValueError, match="between 1 and 5"):
        sinusoid_likeness(as_components(rng().standard_normal((10, 2))), n_frequencies=0)
    # More frequencies than a short table has: all it has, and the result says how many.
    short = as_components(rng().standard_normal((10, 2)))
    assert sinusoid_likeness(short, n_frequencies=6).n_frequencies == 5


# --- what the results carry -----------------------------------------------------------------


def test_components_table_and_settings():
    x = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    pc = principal_components(x, n_components=2, center=False)
    assert pc.params == {"n_components": 2, "center": False}
    table = pc.to_frame()
    assert list(table.columns) == ["position", "PC1", "PC2"]
    assert table["position"].tolist() == [0, 1, 2, 3]
    assert table["PC1"].tolist() == [2.0, -2.0, 0.0, 0.0]
    assert table["PC2"].tolist() == pc.scores[:, 1].tolist()


def test_fits_table_holds_each_components_share_and_sinusoid(components_result):
    pc, fits, _ = components_result
    assert fits.params == {"n_components": 4, "center": True, "min_cycles": 0.5}
    table = fits.to_frame()
    assert table["component"].tolist() == [1, 2, 3, 4]
    assert table["explained_variance"].tolist() == pc.explained_variance.tolist()
    assert table["frequency_cycles"].tolist() == fits.frequency.tolist()
    assert table["r2"].tolist() == fits.r2.tolist()
    assert fits.median_r2 == np.median(fits.r2)
    power = fits.periodogram_table()
    assert power["cycles"].tolist() == list(range(151))  # 300 positions: 0..n/2 cycles
    np.testing.assert_allclose(power[["PC1", "PC2", "PC3", "PC4"]].sum(), 1.0)


def test_likeness_table_is_its_numbers_and_its_null():
    # A table whose top two PCs are exactly the first sinusoid pair: every cos² is 1.
    pc = principal_components(
        sinusoid_basis(100, 3)[:, :2] * [3.0, 2.0], n_components=2, center=False
    )
    likeness = sinusoid_likeness(pc, n_frequencies=3, n_shuffles=4, seed=2)
    assert likeness.params == {
        "n_components": 2,
        "center": False,
        "n_frequencies": 3,
        "n_shuffles": 4,
        "seed": 2,
    }
    assert "shuffled 4 times (seed 2)" in likeness.procedure()
    np.testing.assert_allclose(likeness.cos2, [1.0, 1.0], rtol=1e-12)
    assert likeness.random_level == 6 / 100
    assert likeness.smallest_p_value == 1 / 5
    assert likeness.p_value == 1 / 5  # no shuffle is as sinusoid-like
    row = likeness.to_frame().iloc[0]
    assert row["n_frequencies"] == 3
    assert row["mean_cos2"] == likeness.mean_cos2
    assert row["shuffled_mean_cos2"] == np.mean(likeness.shuffled)
    assert row["shuffled_std_cos2"] == np.std(likeness.shuffled)
    assert row["p_value"] == likeness.p_value
    angles = likeness.angles_table()
    assert angles["angle"].tolist() == [1, 2]
    assert angles["angle_rad"].tolist() == likeness.angles[::-1].tolist()
    assert likeness.shuffled_table()["mean_cos2"].tolist() == likeness.shuffled.tolist()


def test_a_monotone_trajectory_fits_at_the_half_cycle_bound_and_says_so():
    # A straight line: the unbounded least squares ran to f -> 0 with amplitude 9e8.
    p = np.arange(200.0)
    fits = fit_sinusoids(as_components(np.column_stack([p - p.mean(), np.sin(p)])))
    assert fits.frequency[0] == pytest.approx(0.5, abs=1e-6)
    assert fits.at_lower_bound.tolist() == [True, False]
    assert fits.amplitude[0] < 200  # the line spans 200; a half cycle of about that height
    assert fits.to_frame()["at_lower_bound"].tolist() == [True, False]
    with pytest.raises(ValueError, match="min_cycles"):
        fit_sinusoids(as_components(np.column_stack([p, p])), min_cycles=0)


def test_a_structured_tables_likeness_p_value_can_be_below_one_percent():
    table = simulate.learned_like(512, 128, boundary=0.0, seed=0).values
    likeness = sinusoid_likeness(principal_components(table, n_components=6))
    assert len(likeness.shuffled) == 999
    assert likeness.p_value == pytest.approx(1 / 1000)
    assert likeness.p_text == "p ≤ 0.001 (999 shuffles, none as sinusoid-like)"
    count = np.sum(likeness.shuffled >= likeness.mean_cos2)
    assert likeness.p_value == (1 + count) / (1 + 999)
