"""Change points with known answers: all-MiniLM-L6-v2's real step at 127/128 and nothing else,
none on smooth, drifting or noisy curves, a planted step found even beside an outlier row, and
the false alarms the procedure states, measured again."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import scipy.signal

import posviz
from posviz import boundary, simulate

#: The position table of the all-MiniLM-L6-v2 posviz ships (posviz/examples), and the sha256
#: of its bytes as tests/data/README.md records it.
MINILM = "example:all-MiniLM-L6-v2"
TENSOR = "embeddings.position_embeddings.weight"
SHA256 = "4c347d866c9012e7160b42a7e36d9138935e0669cc62932df70cdc7d6401ea01"


@pytest.fixture(scope="module")
def minilm() -> np.ndarray:
    return posviz.load(MINILM, tensor=TENSOR).values


def found(values: np.ndarray, *, null_draws: int = 0, **settings) -> boundary.ChangePoints:
    """Change points of a table's norm with the default flags, as the page finds them (the
    shuffled null only where a test asks for it)."""
    flags = boundary.outliers(boundary.position_statistics(values))
    return boundary.change_points(flags, null_draws=null_draws, **settings)


def curve_table(curve: np.ndarray) -> np.ndarray:
    """A two-column table whose row norms are `curve` (positive)."""
    return np.c_[curve, np.zeros(len(curve))]


def stepped(values: np.ndarray, at: int, factor: float = 1.10) -> np.ndarray:
    """`values` with rows from `at` on scaled by `factor`: a step of the norm."""
    return values * np.where(np.arange(len(values)) < at, 1.0, factor)[:, None]


def test_the_minilm_table_is_the_recorded_one(minilm):
    assert hashlib.sha256(minilm.tobytes()).hexdigest() == SHA256
    assert minilm.shape == (512, 384)
    assert minilm.dtype == np.float32
    # The step issue 33 describes: ~0.41 before row 127, ~0.476 after it, row 127 alone.
    norm = np.linalg.norm(minilm.astype(np.float64), axis=1)
    assert np.median(norm[96:127]) == pytest.approx(0.41, abs=0.01)
    assert np.median(norm[128:160]) == pytest.approx(0.476, abs=0.005)
    assert norm[127] == pytest.approx(0.689, abs=0.001)


def test_minilm_steps_at_127_or_128_and_nowhere_else(minilm):
    changes = found(minilm)
    assert changes.positions.tolist() in ([127], [128])
    assert changes.shifts[0] == pytest.approx(0.06, abs=0.01)  # 0.414 up to 0.477
    assert changes.z[0] > changes.critical
    # Its odd row 127 (flagged on neighbour cosine) and the boosted end rows are left out.
    assert changes.left_out.tolist() == [0, 1, 127, 510, 511]
    assert found(minilm, null_draws=20).null_found == 0


def test_a_step_planted_in_minilm_is_found_beside_its_own(minilm):
    table = stepped(minilm.astype(np.float64), 300)
    assert found(table).positions.tolist() == [127, 300]
    table[299] *= 3.0  # an outlier row just before the planted step
    assert found(table).positions.tolist() == [127, 300]


@pytest.mark.parametrize("seed", range(10))
def test_a_single_outlier_row_neither_makes_a_step_nor_hides_one(seed):
    rng = np.random.default_rng(seed)
    table = simulate.learned_like(512, 256, seed=seed).values.astype(np.float64)
    odd = table.copy()
    odd[rng.integers(64, 448)] *= 3.0
    assert found(odd).positions.size == 0
    at = int(rng.integers(64, 448))
    for row in (at - 1, at, at + 1):  # the odd row before, at and after the step
        odd = stepped(table, at)
        odd[row] *= 3.0
        positions = found(odd).positions.tolist()
        assert len(positions) == 1
        assert abs(positions[0] - at) <= 1, (row, positions)


@pytest.mark.parametrize("seed", range(20))
def test_a_planted_ten_percent_step_is_found_on_its_row(seed):
    at = int(np.random.default_rng(100 + seed).integers(32, 480))
    table = simulate.learned_like(512, 256, seed=seed).values.astype(np.float64)
    changes = found(stepped(table, at))
    assert changes.positions.size == 1
    assert abs(changes.positions[0] - at) <= 1
    norm = boundary.position_statistics(table).norm
    assert changes.shifts[0] == pytest.approx(0.1 * norm[at], rel=0.3)


@pytest.mark.parametrize("n", [128, 512, 1024, 2048])
def test_smooth_simulated_tables_have_no_step(n):
    for seed in range(5):
        assert found(simulate.learned_like(n, 768, seed=seed).values).positions.size == 0
    assert found(simulate.sinusoidal_table(n, 128)).positions.size == 0


def test_slow_wiggles_and_drifts_are_not_steps():
    p = np.arange(512.0)
    noise = 0.002 * np.random.default_rng(0).standard_normal(512)
    wiggles = 1 + 0.03 * np.sin(2 * np.pi * p / 48) + noise
    drift = np.sqrt(1 + p) / 10 + noise
    for curve in (wiggles, drift):
        changes = found(curve_table(curve))
        assert changes.positions.size == 0
        assert changes.describe().startswith("none found")
    table = simulate.learned_like(512, 256, boundary=0.0, seed=3).values
    assert found(table * np.linspace(1.0, 2.0, 512)[:, None]).positions.size == 0


def test_the_z_statistic_matches_a_direct_computation():
    # Lines by numpy.polyfit, noise by the sample autocovariances of numpy.polyfit quadratics'
    # residuals, the variance of the contrast as c @ T @ c with T Toeplitz, Bartlett-weighted.
    rng = np.random.default_rng(7)
    x = np.cumsum(rng.standard_normal(300)) * 0.1 + rng.standard_normal(300)
    keep = np.ones(300, bool)
    keep[[3, 40, 41, 150, 290]] = False
    tested = np.arange(17, 285)
    steps, z = boundary._StepTest(keep, tested).scores(x)
    w, span, width = boundary.STEP_WINDOW, 2 * boundary.STEP_WINDOW + 1, boundary.NOISE_WINDOW

    def line_step(curve: np.ndarray, t: int) -> float:
        before = [r for r in range(t - 1 - w, t - 1) if keep[r]]
        after = [r for r in range(t, t + w) if keep[r]]
        at = t - 0.5
        return np.polyval(np.polyfit(after, curve[after], 1), at) - np.polyval(
            np.polyfit(before, curve[before], 1), at
        )

    def lagged_sums(rows: list[int]) -> tuple[np.ndarray, int]:
        r = np.zeros(width)
        kept = [i - rows[0] for i in rows if keep[i]]
        fit = np.polyfit(kept, x[np.array(rows)[kept]], 2)
        r[kept] = x[np.array(rows)[kept]] - np.polyval(fit, kept)
        return np.array([r[h:] @ r[: width - h] for h in range(span)]), len(kept)

    for t in (20, 45, 100, 151, 280):
        rows = range(t - 1 - w, t + w)
        c = np.array([line_step(np.eye(300)[r], t) for r in rows])  # the step is linear
        assert c @ x[list(rows)] == pytest.approx(steps[t - 17], rel=1e-9)
        assert steps[t - 17] == pytest.approx(line_step(x, t), rel=1e-9)
        before, n_before = lagged_sums([i for i in range(t - 1 - width, t - 1) if i >= 0])
        after, n_after = lagged_sums([i for i in range(t, t + width) if i < 300])
        gamma = (before + after) / (n_before + n_after - 6)
        lag = np.abs(np.subtract.outer(np.arange(span), np.arange(span)))
        toeplitz = (gamma * (1 - np.arange(span) / span))[lag]
        assert z[t - 17] == pytest.approx(abs(line_step(x, t)) / np.sqrt(c @ toeplitz @ c))


@pytest.mark.parametrize(("rho", "sd"), [(0.0, 0.05), (0.5, 0.08), (0.9, 0.1)])
def test_z_is_standard_normal_where_there_is_no_step(rho, sd):
    # On long AR(1) noise the z of every boundary spreads as N(0, 1) does: the noise model
    # allows for the autocorrelation (with iid errors assumed, rho 0.9 gives sd ~2.4).
    e = np.random.default_rng(3).standard_normal(20_100)
    x = scipy.signal.lfilter([1.0], [1.0, -rho], e)[100:]
    keep = np.ones(len(x), bool)
    steps, z = boundary._StepTest(keep, np.arange(100, len(x) - 100)).scores(x)
    signed = np.sign(steps) * z
    assert np.std(signed) == pytest.approx(1.0, abs=sd)
    assert np.mean(np.abs(signed) > 1.96) == pytest.approx(0.05, abs=0.025)


def gaussian_noise(seed: int) -> np.ndarray:
    return curve_table(1 + 0.05 * np.random.default_rng(seed).standard_normal(512))


def ar1_noise(seed: int) -> np.ndarray:
    e = np.random.default_rng(seed).standard_normal(612)
    return curve_table(1 + 0.01 * scipy.signal.lfilter([1.0], [1.0, -0.9], e)[100:])


def learned_like(seed: int) -> np.ndarray:
    n = (128, 512, 1024, 2048)[seed % 4]
    return simulate.learned_like(n, 256, seed=seed // 4).values


#: How the curves behind boundary.FALSE_ALARMS are drawn: seeds 0..count-1 of each.
NULL_CURVES = {
    "Gaussian noise, 512 rows": gaussian_noise,
    "AR(1) noise with ρ = 0.9, 512 rows": ar1_noise,
    "learned-like tables, 128 to 2048 rows": learned_like,
}


@pytest.mark.slow  # 500 curves: ~15 s quiet, ~50 s on a loaded machine
def test_the_false_alarms_the_procedure_states_are_measured_here():
    assert set(NULL_CURVES) == set(boundary.FALSE_ALARMS)
    alpha = 0.01  # the default the counts are for
    for name, curve in NULL_CURVES.items():
        stated, count = boundary.FALSE_ALARMS[name]
        alarms = sum(found(curve(seed)).positions.size > 0 for seed in range(count))
        assert alarms == stated, name
        assert alarms / count <= 2 * alpha, name
    text = found(gaussian_noise(0), null_draws=20).procedure()
    for name, (stated, count) in boundary.FALSE_ALARMS.items():
        assert f"{name}: {stated} of {count}" in text


def test_the_null_of_the_curve_is_its_shuffles(minilm):
    changes = found(minilm, null_draws=30, seed=4)
    assert changes.null_z.shape == (30,)
    np.testing.assert_array_equal(changes.null_z, found(minilm, null_draws=30, seed=4).null_z)
    assert not np.array_equal(changes.null_z, found(minilm, null_draws=30, seed=5).null_z)
    assert changes.null_found == int(np.sum(changes.null_z > changes.critical))
    assert "shuffled 30 times (seed 4) found a step in" in changes.procedure()
    assert "Null:" not in found(minilm).procedure()


def test_the_table_heads_z_as_the_text_names_it(minilm):
    # Issue 36: the table said "z" while the text said t.
    changes = found(minilm)
    assert list(changes.to_frame().columns) == ["position", "shift", "z"]
    assert "z = step / standard error" in changes.procedure()
    assert " t " not in changes.procedure()


def test_a_table_too_short_to_judge_has_no_boundary_tested():
    changes = found(curve_table(1 + 0.1 * np.random.default_rng(0).random(20)), null_draws=20)
    assert (changes.n_tested, changes.positions.size, changes.null_z.size) == (0, 0, 0)
    assert changes.critical == float("inf")
    assert "no boundary" in changes.procedure()


def test_bad_settings_are_refused():
    flags = boundary.outliers(boundary.position_statistics(gaussian_noise(0)))
    refused = r"null_draws is -1; it must be a whole number from 0 to 1,000"
    with pytest.raises(ValueError, match=refused):
        boundary.change_points(flags, null_draws=-1)
