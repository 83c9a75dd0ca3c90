"""Spectrum numbers against analytic oracles and an independent SVD."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg

import posviz._linalg
import posviz.spectrum
from posviz.components import principal_components
from posviz.simulate import gaussian, learned_like, sinusoidal_table
from posviz.spectrum import THRESHOLDS, spectrum


@pytest.fixture(scope="module")
def sinusoid() -> np.ndarray:
    return sinusoidal_table(512, 768)


@pytest.mark.parametrize(
    ("center", "ranks", "ks"),
    [
        (True, (120.96, 6.80, 24.12), (11, 56, 90, 111, 133)),
        (False, (108.98, 2.37, 5.20), (2, 27, 65, 96, 129)),
    ],
)
def test_sinusoidal_oracles(sinusoid, center, ranks, ks):
    s = spectrum(sinusoid, center=center)
    effective, stable, participation = ranks
    assert round(s.effective_rank, 2) == effective
    assert round(s.stable_rank, 2) == stable
    assert round(s.participation_ratio, 2) == participation
    assert tuple(s.k_at(t) for t in THRESHOLDS) == ks


@pytest.mark.parametrize(
    "table",
    [
        sinusoidal_table(512, 768),  # hundreds of values far below sigma_1: the refined route
        sinusoidal_table(900, 64, base=50.0),
        gaussian(40, 300, seed=3).values,
        gaussian(300, 40, seed=3).values * np.logspace(0, -7, 40),  # seven decades
    ],
    ids=["sinusoid-wide", "sinusoid-tall", "gaussian-wide", "graded-tall"],
)
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("route", ["inverse-iteration", "MRRR", "fallback"])
def test_every_value_above_1e6_of_the_largest_is_exact_to_1e6(monkeypatch, table, center, route):
    # Each route on every table, whether or not its tridiagonal form splits.
    monkeypatch.setattr(posviz.spectrum, "_splits", lambda *args: route == "MRRR")
    if route == "fallback":
        # A basis that misses the small values' span: the Ritz check must send them to MRRR.
        def junk(diagonal, off_diagonal, shifts, scale):
            rng = np.random.default_rng(1)
            return np.linalg.qr(rng.standard_normal((len(diagonal), len(shifts))))[0]

        monkeypatch.setattr(posviz.spectrum, "_inverse_iteration", junk)
    x = np.asarray(table, dtype=np.float64)
    reference = np.linalg.svd(x - x.mean(0) if center else x, compute_uv=False)
    s = spectrum(x, center=center)
    kept = reference >= 1e-6 * reference[0]
    np.testing.assert_allclose(s.singular_values[kept], reference[kept], rtol=1e-6)
    assert s.floor < 1e-6 * reference[0]
    assert np.all(s.singular_values[~kept] < 2e-6 * reference[0])


def test_mrrr_finds_the_small_values_vectors_where_the_tridiagonal_form_splits(monkeypatch):
    # A sinusoidal table's reduction falls apart into hundreds of small blocks: MRRR's route.
    routes = []
    for name in ("_inverse_iteration", "_smallest_vectors"):
        found = getattr(posviz.spectrum, name)
        monkeypatch.setattr(
            posviz.spectrum,
            name,
            lambda *a, name=name, found=found: routes.append(name) or found(*a),
        )
    spectrum(sinusoidal_table(1024, 768))
    assert routes == ["_smallest_vectors"]
    routes.clear()
    spectrum(learned_like(1024, 768, seed=0).values)  # 29 small values in one block
    assert routes == ["_inverse_iteration"]


def _ill_conditioned_tables() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    u = np.linalg.qr(rng.standard_normal((400, 200)))[0]
    v = np.linalg.qr(rng.standard_normal((200, 200)))[0]
    clustered = np.repeat([1.0, 1e-2, 1e-4, 1e-5], 50) * (1 + 1e-12 * rng.standard_normal(200))
    low_rank = rng.standard_normal((300, 30)) @ rng.standard_normal((30, 120))
    return {
        "steep": (u * np.logspace(0, -9, 200)) @ v.T,  # nine decades
        "clustered": (u * clustered) @ v.T,  # four values, fifty times each
        "rank-30": low_rank + 1e-5 * rng.standard_normal((300, 120)),  # 90 values near 1e-5
        "rank-deficient": low_rank,  # 90 values that are rounding noise
        "learned-like": learned_like(600, 400, seed=3).values,  # hundreds below 1e-3
        "wide-graded": (gaussian(120, 500, seed=4).values * np.logspace(0, -6, 500)),
    }


@pytest.mark.parametrize("name", list(_ill_conditioned_tables()))
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("route", ["inverse-iteration", "MRRR"])
def test_values_above_the_floor_are_exact_to_1e9_without_falling_back(
    monkeypatch, name, center, route
):
    # Within 1e-9 of numpy's float64 SVD down to 1e-6 of the largest (below it the reference
    # itself is off by ~eps sigma_1 / sigma), by either route, and inverse iteration's without
    # the MRRR fallback.
    monkeypatch.setattr(posviz.spectrum, "_splits", lambda *args: route == "MRRR")
    fallbacks = []
    if route == "inverse-iteration":
        monkeypatch.setattr(
            scipy.linalg, "eigh_tridiagonal", lambda *a, **k: fallbacks.append(1) or (None, None)
        )
    x = np.asarray(_ill_conditioned_tables()[name], dtype=np.float64)
    reference = np.linalg.svd(x - x.mean(0) if center else x, compute_uv=False)
    s = spectrum(x, center=center)
    resolved = (reference > s.floor) & (reference >= 1e-6 * reference[0])
    np.testing.assert_allclose(s.singular_values[resolved], reference[resolved], rtol=1e-9)
    # Between the floor and 1e-6 of the largest: within the refined route's bound.
    rest = (reference > s.floor) & ~resolved
    bound = (
        1e-9 * (1e-6 * reference[0] / reference[rest]) ** 2 + 1e-15 * reference[0] / reference[rest]
    )
    assert np.all(np.abs(s.singular_values[rest] - reference[rest]) <= bound * reference[rest])
    assert not fallbacks


def test_a_constant_table_has_no_variance_and_one_value_without_centring():
    x = np.full((50, 20), 0.3, dtype=np.float32)
    assert not spectrum(x).singular_values.any()
    uncentred = spectrum(x, center=False).singular_values
    assert uncentred[0] == pytest.approx(np.linalg.svd(x.astype(np.float64))[1][0], rel=1e-12)
    assert np.all(uncentred[1:] <= spectrum(x, center=False).floor)


@pytest.mark.filterwarnings("error")
def test_a_constant_tables_shares_are_undefined_and_say_so_quietly():
    x = np.full((50, 20), 0.3, dtype=np.float32)
    s = spectrum(x)
    assert np.isnan(s.explained_variance).all()
    assert s.metrics()["k90"] is None
    pc = principal_components(x, n_components=3)
    assert np.isnan(pc.explained_variance).all()


def test_derived_numbers_by_definition():
    sigma = np.array([4.0, 2.0, 1.0, 1.0])
    s = spectrum(np.diag(sigma), center=False)
    np.testing.assert_allclose(s.singular_values, sigma)
    p = sigma / sigma.sum()
    assert s.effective_rank == pytest.approx(np.exp(-(p * np.log(p)).sum()))
    assert s.stable_rank == pytest.approx(22 / 16)
    assert s.participation_ratio == pytest.approx(22**2 / (256 + 16 + 1 + 1))
    np.testing.assert_allclose(s.cumulative, np.cumsum(sigma**2) / 22)
    np.testing.assert_allclose(s.reconstruction_error, np.sqrt([1, 6 / 22, 2 / 22, 1 / 22, 0]))
    assert [s.k_at(t) for t in (0.5, 0.8, 0.9, 0.95, 0.99)] == [1, 2, 2, 3, 4]


def test_equal_singular_values_give_full_effective_rank():
    s = spectrum(np.eye(7), center=False)
    assert s.effective_rank == pytest.approx(7)
    assert s.stable_rank == pytest.approx(7)
    assert s.participation_ratio == pytest.approx(7)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "center"),
    [
        *[(shape, c) for shape in [(512, 128), (128, 512), (256, 256), (40, 300)] for c in (1, 0)],
        ((1024, 768), True),
    ],
)
def test_pure_gaussian_noise_stays_below_the_threshold(shape, center):
    # The target: 0 components in at least 95% of seeds (the old Marchenko-Pastur
    # edge with sigma from the table was crossed in 12-25% of seeds).
    counts = [
        spectrum(np.random.default_rng(seed).normal(scale=3.0, size=shape), center=bool(center))
        for seed in range(40)
    ]
    assert sum(s.n_above_noise == 0 for s in counts) >= 38


@pytest.mark.slow
@pytest.mark.parametrize(("shape", "rank"), [((512, 128), 5), ((300, 700), 12), ((256, 256), 1)])
def test_planted_rank_plus_noise_counts_exactly_the_rank(shape, rank):
    rng = np.random.default_rng(rank)
    m, d = shape
    u = np.linalg.qr(rng.standard_normal((m, rank)))[0]
    v = np.linalg.qr(rng.standard_normal((d, rank)))[0]
    # Signal singular values 2-4x the noise's top edge sqrt(m) + sqrt(d) (SNR well above).
    strengths = np.linspace(4, 2, rank) * (np.sqrt(m) + np.sqrt(d))
    for seed in range(5):
        noise = np.random.default_rng(100 + seed).standard_normal(shape)
        table = (u * strengths) @ v.T + noise
        assert spectrum(table, center=False).n_above_noise == rank
        assert spectrum(table - table.mean(0) + 7.0, center=True).n_above_noise == rank


@pytest.mark.slow
def test_marchenko_pastur_median_against_sampled_eigenvalues():
    # Independent of the quadrature: eigenvalues of Z Z^T / d for i.i.d. Gaussian Z.
    rng = np.random.default_rng(0)
    for m, d in [(800, 800), (400, 1600), (300, 6000)]:
        z = rng.standard_normal((m, d))
        sampled = np.median(np.linalg.eigvalsh(z @ z.T / d))
        assert posviz.spectrum.marchenko_pastur_median(m / d) == pytest.approx(sampled, abs=4e-3)


@pytest.mark.parametrize("beta", [6e-8, 1e-4, 0.013, 0.5, 768 / 1023, 2047 / 2048, 0.999999, 1.0])
def test_the_marchenko_pastur_distribution_function_and_median_against_quadrature(beta):
    from scipy.integrate import quad
    from scipy.optimize import brentq

    # The closed form against scipy's quadrature of the density, in the angle of
    # x = 1 + beta - 2 sqrt(beta) cos(angle): a smooth integrand, split where beta near 1
    # makes it steep.
    s = np.sqrt(beta)

    def density(angle: float) -> float:
        # 1 + beta - 2 s cos(angle), written so that it does not cancel near angle 0, beta 1.
        return 2 / np.pi * np.sin(angle) ** 2 / ((1 - s) ** 2 + 4 * s * np.sin(angle / 2) ** 2)

    def integrated(angle: float) -> float:
        edges = [0.0, *(e for e in (1e-6, 1e-4, 1e-2) if e < angle), angle]
        return sum(
            quad(density, a, b, limit=500, epsabs=1e-14, epsrel=1e-12)[0]
            for a, b in itertools.pairwise(edges)
        )

    for angle in np.linspace(0, np.pi, 9)[1:-1]:
        closed = posviz.spectrum._marchenko_pastur_cdf(angle, beta)
        assert closed == pytest.approx(integrated(angle), abs=1e-11)
    median = posviz.spectrum.marchenko_pastur_median(beta)
    angle = np.arccos((1 + beta - median) / (2 * s))
    assert integrated(angle) == pytest.approx(0.5, abs=1e-9)
    # And against the former route, a quadrature in x and brentq, where that is accurate (for
    # beta in (0.9995, 1) the density's steep start put its median up to 1e-3 off).
    if beta < 0.99:
        low, high = (1 - s) ** 2, (1 + s) ** 2

        def below(x: float) -> float:
            def in_x(t: float) -> float:
                return np.sqrt(max((high - t) * (t - low), 0.0)) / (2 * np.pi * beta * t)

            return quad(in_x, low, x, limit=200, epsabs=1e-13, epsrel=1e-12)[0] - 0.5

        former = brentq(below, low, high, xtol=1e-14, rtol=1e-14)
        assert median == pytest.approx(former, rel=1e-10)


def test_omega_against_the_paper():
    omega = posviz.spectrum.hard_threshold_coefficient
    # Gavish & Donoho (2014): omega(1) ~ 2.858, and lambda*(1) = 4 / sqrt(3) over sqrt(mu_1).
    assert omega(1.0) == pytest.approx(2.858, abs=5e-4)
    mu = posviz.spectrum.marchenko_pastur_median(1.0)
    assert omega(1.0) == pytest.approx(4 / np.sqrt(3) / np.sqrt(mu), rel=1e-12)
    # Their cubic fit 0.56 b^3 - 0.95 b^2 + 1.82 b + 1.43 lies within 0.02 of the exact omega.
    beta = np.linspace(0.001, 1, 200)
    cubic = 0.56 * beta**3 - 0.95 * beta**2 + 1.82 * beta + 1.43
    exact = np.array([omega(b) for b in beta])
    assert np.max(np.abs(exact - cubic)) < 0.02
    # ... and omega falls to sqrt(2) (the known-noise lambda*(0)) as beta -> 0.
    assert omega(1e-6) == pytest.approx(np.sqrt(2), abs=2e-3)


def test_the_threshold_is_omega_times_the_median_of_the_noise_shapes_values():
    x = gaussian(40, 300, seed=1).values.astype(np.float64)
    s = spectrum(x, center=True)
    assert s.noise_shape == (39, 300)
    sigma = np.linalg.svd(x - x.mean(0), compute_uv=False)[:39]  # the exact zero left out
    omega = posviz.spectrum.hard_threshold_coefficient(39 / 300)
    assert s.noise_threshold == pytest.approx(omega * np.median(sigma), rel=1e-10)
    assert s.metrics()["gavish_donoho_threshold"] == s.noise_threshold


def test_the_exported_threshold_reproduces_n_above_noise_on_an_exactly_low_rank_table():
    # Rank 60 exactly: the median value is rounding noise, so the floor is the cut used.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 60)) @ rng.standard_normal((60, 200))
    metrics = spectrum(x).metrics()
    sigma = np.linalg.svd(x - x.mean(0), compute_uv=False)
    assert metrics["n_above_noise"] == 60
    assert np.count_nonzero(sigma > metrics["noise_threshold"]) == metrics["n_above_noise"]
    assert metrics["noise_threshold"] == max(
        metrics["gavish_donoho_threshold"], metrics["resolution_floor"]
    )
    assert metrics["resolution_floor"] > metrics["gavish_donoho_threshold"]


@pytest.mark.slow
def test_every_value_of_the_centred_sinusoidal_table_is_exact_to_1e9_relative():
    # At 2048 x 512 a value just above the old refinement cut (1e-4 sigma_1) was 2.4e-9 off.
    x = sinusoidal_table(2048, 512)
    sigma = np.linalg.svd(x - x.mean(0), compute_uv=False)
    resolved = sigma > 1e-6 * sigma[0]
    s = spectrum(x).singular_values
    np.testing.assert_allclose(s[resolved], sigma[resolved], rtol=1e-9)


def test_an_exactly_low_rank_table_counts_its_resolved_components():
    # No noise at all: the median value is rounding noise, the floor decides.
    x = np.outer(np.arange(50.0), np.ones(20)) + np.outer(np.sin(np.arange(50.0)), np.arange(20))
    assert spectrum(x, center=False).n_above_noise == 2


def test_centering_removes_the_mean_row():
    x = np.ones((10, 4)) * 5 + np.eye(10, 4)
    assert spectrum(x, center=False).singular_values[0] > 10
    centred = spectrum(x, center=True)
    assert centred.params == {"center": True}
    assert centred.singular_values[0] < 1.5


@pytest.mark.parametrize("shape", [(64, 64), (40, 300)])
def test_centring_a_table_with_few_rows_leaves_one_exact_zero(shape):
    x = gaussian(*shape, seed=2).values.astype(np.float64)
    s = spectrum(x, center=True)
    assert s.singular_values[-1] == 0.0
    reference = np.linalg.svd(x - x.mean(0), compute_uv=False)
    np.testing.assert_allclose(s.singular_values[:-1], reference[:-1], rtol=1e-9)
    assert s.floor < 1e-6 * reference[0]


@pytest.mark.parametrize("n_blocks", [1, 3, 1000])
@pytest.mark.parametrize("shape", [(300, 40), (40, 300)], ids=["tall", "wide"])
def test_block_wise_gram_and_refinement_match_numpy_svd(monkeypatch, n_blocks, shape):
    # 1000 blocks: one row (or column) per block. Seven decades: the refinement runs too.
    monkeypatch.setattr(posviz._linalg, "N_BLOCKS", n_blocks)
    x = gaussian(300, 40, seed=5).values.astype(np.float64) * np.logspace(0, -7, 40)
    x = x if shape == (300, 40) else x.T.copy()
    centred = x - x.mean(0)
    reference = np.linalg.svd(centred, compute_uv=False)
    s = spectrum(x, center=True)
    kept = reference >= 1e-6 * reference[0]
    np.testing.assert_allclose(s.singular_values[kept], reference[kept], rtol=1e-6)
    expected = centred.T @ centred if shape == (300, 40) else centred @ centred.T
    np.testing.assert_allclose(posviz._linalg.gram(x, center=True), expected, atol=1e-12)


@pytest.mark.parametrize("center", [True, False])
def test_a_table_without_variance_has_undefined_metrics_not_nan(center):
    # Formerly: all rows equal printed "stable rank nan"; in float64 the rows' mean can miss
    # the row by rounding (0.1 * 3 / 3 != 0.1), which left a residue that looked like rank 1.
    rows = np.tile(np.array([0.1, 1e39, -7.3, 0.0]), (37, 1))
    s = spectrum(rows if center else np.zeros_like(rows), center=center)
    assert not s.has_variance
    assert s.metrics()["stable_rank"] is None
    assert s.metrics()["k90"] is None
    assert spectrum(rows, center=False).has_variance  # uncentred, equal rows have rank 1


def test_the_result_carries_its_settings_and_tables():
    s = spectrum(np.diag([3.0, 4.0]), center=False)
    assert s.params == {"center": False}
    table = s.to_frame()
    assert list(table.columns) == ["k", "singular_value", "explained_variance", "cumulative"]
    assert table["k"].tolist() == [1, 2]
    assert table["singular_value"].tolist() == [4.0, 3.0]
    np.testing.assert_allclose(table["explained_variance"], [16 / 25, 9 / 25], rtol=1e-15)
    np.testing.assert_allclose(table["cumulative"], [16 / 25, 1.0], rtol=1e-15)
    metrics = s.metrics_table()
    assert len(metrics) == 1
    assert metrics.iloc[0].to_dict() == pytest.approx(s.metrics())
    assert metrics["k50"].item() == 1
    assert metrics["stable_rank"].item() == 25 / 16
    assert s.noise_cut == max(s.noise_threshold, s.floor)
    assert list(posviz.spectrum.DEFINITIONS) == [
        "effective_rank",
        "stable_rank",
        "participation_ratio",
        "n_above_noise",
    ]


@pytest.mark.parametrize("shape", [(5, 2), (2, 7), (2, 2)])
def test_a_two_by_two_gram_refines_its_small_value(shape):
    # scipy's dgttrf refuses n = 2, which the smallest tables reach when a value needs refining.
    rng = np.random.default_rng(3)
    u, _ = np.linalg.qr(rng.standard_normal((max(shape), 2)))
    v, _ = np.linalg.qr(rng.standard_normal((min(shape), 2)))
    table = u[:, :2] @ np.diag([1.0, 1e-5]) @ v.T
    table = table if table.shape == shape else table.T
    expected = np.linalg.svd(table, compute_uv=False)
    got = spectrum(table, center=False).singular_values
    np.testing.assert_allclose(got, expected, rtol=1e-9)
