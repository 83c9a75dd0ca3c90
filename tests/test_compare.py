"""posviz.compare against invariances (rotation, scale) and independent numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import orthogonal_procrustes, subspace_angles
from scipy.stats import ortho_group

import posviz._linalg
from posviz import compare, simulate
from posviz.spectrum import spectrum


@pytest.fixture
def table() -> np.ndarray:
    return simulate.learned_like(200, 24, seed=2).values.astype(np.float64)


@pytest.fixture
def rotation() -> np.ndarray:
    return ortho_group.rvs(24, random_state=5)


def reference_cka(x: np.ndarray, y: np.ndarray, *, center: bool) -> float:
    """Kornblith et al. (2019) eq. (5) via the n x n Gram matrices and the centring matrix H."""
    n = len(x)
    h = np.eye(n) - 1.0 / n if center else np.eye(n)
    kx, ky = h @ x @ x.T @ h, h @ y @ y.T @ h
    return float(np.sum(kx * ky) / (np.linalg.norm(kx) * np.linalg.norm(ky)))


def test_cka_with_itself_and_rotated_copy_is_one(table, rotation):
    assert compare.linear_cka(table, table) == pytest.approx(1.0, abs=1e-12)
    assert compare.linear_cka(table, 3 * table @ rotation) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("shape", [(200, 24), (10, 40)])  # tall: dimension side; wide: positions
def test_cka_and_compare_match_the_gram_formula(shape, center):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) + 1.0
    y = x[:, :5] @ rng.standard_normal((5, 7)) + rng.standard_normal((shape[0], 7))
    expected = reference_cka(x, y, center=center)
    assert compare.linear_cka(x, y, center=center) == pytest.approx(expected, rel=1e-12)
    assert compare.compare(x, y, n_components=3, center=center).cka == pytest.approx(
        expected, rel=1e-12
    )
    assert 0.0 < expected < 1.0


@pytest.mark.parametrize("shape", [(200, 24), (10, 40)])
def test_compare_shares_grams_but_matches_the_single_measures(shape):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    y = x @ rng.standard_normal((shape[1], shape[1])) + rng.standard_normal(shape)
    result = compare.compare(x, y, n_components=4)
    assert result.procrustes_error == pytest.approx(compare.procrustes_error(x, y), rel=1e-12)
    expected = subspace_angles(compare.position_components(x, 4), compare.position_components(y, 4))
    np.testing.assert_allclose(result.principal_angles, np.sort(expected), atol=1e-10)


@pytest.mark.parametrize("n_blocks", [1, posviz._linalg.N_BLOCKS, 200])
@pytest.mark.parametrize("center", [True, False])
def test_compare_in_row_blocks_matches_independent_float64_references(
    monkeypatch, n_blocks, center
):
    # float32 tables as users bring them, in one block, the default blocks and 1-row blocks.
    monkeypatch.setattr(posviz._linalg, "N_BLOCKS", n_blocks)
    rng = np.random.default_rng(4)
    x = simulate.learned_like(200, 24, seed=4).values
    y = (x @ rng.standard_normal((24, 24)) + 0.1 * rng.standard_normal(x.shape)).astype(np.float32)
    result = compare.compare(x, y, n_components=5, center=center)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert result.cka == pytest.approx(reference_cka(x64, y64, center=center), rel=1e-12)
    x_hat, y_hat = ((v - v.mean(0)) if center else v for v in (x64, y64))
    ux, uy = (np.linalg.svd(v, full_matrices=False)[0][:, :5] for v in (x_hat, y_hat))
    expected_angles = np.sort(subspace_angles(ux, uy))
    np.testing.assert_allclose(result.principal_angles, expected_angles, atol=1e-10)
    x_hat, y_hat = x_hat / np.linalg.norm(x_hat), y_hat / np.linalg.norm(y_hat)
    rotation, _ = orthogonal_procrustes(y_hat, x_hat)
    expected = np.linalg.norm(y_hat @ rotation - x_hat)
    assert result.procrustes_error == pytest.approx(expected, rel=1e-10)
    assert compare.procrustes_error(x, y, center=center) == pytest.approx(expected, rel=1e-10)
    assert compare.linear_cka(x, y, center=center) == pytest.approx(result.cka, rel=1e-12)
    got = compare.position_components(x, 5, center=center)
    np.testing.assert_allclose(np.abs(got.T @ ux), np.eye(5), atol=1e-8)


def test_procrustes_of_rotated_copy_is_zero_and_of_noise_is_not(table, rotation):
    assert compare.procrustes_error(table, 2 * table @ rotation) < 1e-6
    noise = np.random.default_rng(0).standard_normal(table.shape)
    assert compare.procrustes_error(table, noise) > 0.5


@pytest.mark.parametrize("center", [True, False])
def test_procrustes_matches_the_residual_of_scipy_orthogonal_procrustes(table, center):
    y = table[:, ::-1] + 0.3 * np.random.default_rng(1).standard_normal(table.shape)
    x_hat, y_hat = ((v - v.mean(0)) if center else v for v in (table, y))
    x_hat, y_hat = x_hat / np.linalg.norm(x_hat), y_hat / np.linalg.norm(y_hat)
    rotation, _ = orthogonal_procrustes(y_hat, x_hat)
    expected = np.linalg.norm(y_hat @ rotation - x_hat)
    assert 0.1 < expected < 1.9
    got = compare.procrustes_error(table, y, center=center)
    assert got == pytest.approx(expected, rel=1e-10)


def test_position_components_match_numpy_svd(table):
    u = np.linalg.svd(table - table.mean(0), full_matrices=False)[0][:, :5]
    got = compare.position_components(table, 5)
    np.testing.assert_allclose(np.abs(got.T @ u), np.eye(5), atol=1e-8)


def test_principal_angles_zero_for_rotated_copy_and_known_for_constructed_subspaces(
    table, rotation
):
    same = compare.compare(table, table @ rotation, n_components=6)
    np.testing.assert_allclose(same.principal_angles, 0, atol=1e-6)
    assert same.procrustes_error < 1e-6
    # Tables whose only component over positions is a cosine vs a tilted mix of cos and sin:
    # the one angle between the spans is the tilt.
    p = np.arange(100) * 2 * np.pi / 100
    x = np.cos(p)[:, None] * [1.0, 2.0]
    y = (np.cos(p) * np.cos(0.3) + np.sin(p) * np.sin(0.3))[:, None] * [1.0, -1.0, 0.5]
    tilted = compare.compare(x, y, n_components=1)
    np.testing.assert_allclose(tilted.principal_angles, [0.3], atol=1e-10)
    assert tilted.procrustes_error is None  # widths differ


def test_bad_inputs_say_what_to_do(table):
    with pytest.raises(ValueError, match="resample one"):
        compare.compare(table, table[:-1])
    with pytest.raises(ValueError, match=r"pick 1\.\.24"):
        compare.position_components(table, 25)
    with pytest.raises(ValueError, match="fewer than k"):
        compare.position_components(np.outer(np.arange(10.0), [1.0, 2.0, 3.0]), 2)


def test_metrics_table_has_a_difference_column():
    a = spectrum(simulate.sinusoidal_table(64, 16))
    b = spectrum(simulate.learned_like(64, 16).values)
    frame = compare.metrics_table(a, b)
    row = frame.set_index("metric").loc["effective_rank"]
    assert row["first"] == pytest.approx(a.effective_rank)
    assert row["difference"] == pytest.approx(b.effective_rank - a.effective_rank)


def test_comparison_tables_carry_degrees_and_settings():
    # The one angle between a cosine and a cosine tilted by 0.3 rad (as above): 0.3 rad.
    p = np.arange(100) * 2 * np.pi / 100
    x = np.cos(p)[:, None] * [1.0, 2.0]
    y = (np.cos(p) * np.cos(0.3) + np.sin(p) * np.sin(0.3))[:, None] * [1.0, -1.0]
    result = compare.compare(x, y, n_components=1, center=False, n_permutations=0)
    assert result.params == {
        "n_components": 1,
        "center": False,
        "n_permutations": 0,
        "seed": 0,
    }
    np.testing.assert_allclose(result.degrees, [np.degrees(0.3)], atol=1e-8)
    angles = result.angles_table()
    assert angles["angle"].tolist() == [1]
    np.testing.assert_allclose(angles[["radians", "degrees"]].iloc[0], [0.3, 17.188733853924695])
    measures = result.to_frame()
    assert list(measures.columns) == ["cka", "cka_debiased", "procrustes_error"]
    assert result.metrics()["max_angle_degrees"] == pytest.approx(np.degrees(0.3))
    assert compare.largest_k((100, 2), (100, 2)) == 2


def reference_debiased_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Song et al. (2012) unbiased HSIC with the n x n kernels, as Nguyen et al. (2021) eq. (3)."""

    def hsic(k: np.ndarray, m: np.ndarray) -> float:
        n = len(k)
        k, m = k - np.diag(np.diag(k)), m - np.diag(np.diag(m))
        ones = np.ones(n)
        return (
            np.trace(k @ m)
            + (ones @ k @ ones) * (ones @ m @ ones) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * ones @ k @ m @ ones
        ) / (n * (n - 3))

    kx, ky = x @ x.T, y @ y.T  # uncentred: the estimator is shift-invariant
    return float(hsic(kx, ky) / np.sqrt(hsic(kx, kx) * hsic(ky, ky)))


def test_debiased_cka_against_the_n_by_n_formula(table, rotation):
    other = simulate.learned_like(200, 40, seed=7).values.astype(np.float64) + 3.0
    assert compare.debiased_cka(table, other) == pytest.approx(
        reference_debiased_cka(table, other), rel=1e-9
    )
    assert compare.debiased_cka(table, 2 * table @ rotation + 1) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("width", [128, 384])
def test_independent_gaussian_tables_have_debiased_cka_near_0_inside_the_null(width):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((512, 128)), rng.standard_normal((512, width))
    result = compare.compare(x, y)
    # The classic estimator is biased upwards (0.20, 0.29 here), and stays as it was.
    assert result.cka == pytest.approx(compare.linear_cka(x, y), rel=1e-12)
    assert result.cka > 0.15
    assert abs(result.cka_debiased) < 0.01
    null = result.null
    assert null.n_permutations == 200
    assert null.observed_cka == pytest.approx(result.cka, rel=1e-6)
    metrics = result.metrics()
    assert metrics["cka_debiased_p_value"] > 0.05
    assert metrics["cka_debiased_null_mean"] == pytest.approx(0.0, abs=0.002)
    assert metrics["cka_null_mean"] == pytest.approx(result.cka, rel=0.05)
    assert metrics["cka_debiased_null_p95"] == np.percentile(null.cka_debiased, 95)
    count = np.sum(null.cka_debiased >= null.observed_cka_debiased)
    assert metrics["cka_debiased_p_value"] == (1 + count) / 201
    assert "shuffled 200 times" in null.procedure()
    assert (result.params["n_permutations"], result.params["seed"]) == (200, 0)


@pytest.mark.parametrize("shape", [(60, 8), (30, 50)])  # the dimension side and the position side
def test_the_null_is_the_cka_of_row_shuffled_tables(shape):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(shape), rng.standard_normal(shape) + 2
    null = compare.cka_null(x, y, n_permutations=5, seed=3, center=False)
    orders = np.random.default_rng(3)
    for c, d in zip(null.cka, null.cka_debiased, strict=True):
        order = orders.permutation(len(y))
        assert c == pytest.approx(reference_cka(x, y[order], center=False), rel=1e-6)
        assert d == pytest.approx(reference_debiased_cka(x, y[order]), rel=1e-5, abs=1e-7)
    related = compare.cka_null(x, x + 0.1 * y, n_permutations=19)
    assert related.p_value() == related.p_value("cka") == 1 / 20


@pytest.mark.filterwarnings("error")
def test_a_table_without_variance_is_refused_with_the_reason_not_divided_by():
    rng = np.random.default_rng(0)
    varied = rng.standard_normal((40, 6))
    flat = np.full((40, 6), 0.25)
    measures = [
        lambda x, y: compare.compare(x, y, n_components=2, n_permutations=5),
        compare.linear_cka,
        compare.procrustes_error,
        lambda x, y: compare.cka_null(x, y, n_permutations=5),
    ]
    for measure in measures:
        with pytest.raises(
            ValueError, match=r"first table has no variance \(every row is the same"
        ):
            measure(flat, varied)
        with pytest.raises(ValueError, match="second table has no variance"):
            measure(varied, flat)
    with pytest.raises(ValueError, match=r"no variance \(every entry is 0\)"):
        compare.linear_cka(np.zeros((40, 6)), varied, center=False)
    # Uncentred, a constant table is of rank 1: the k it allows is named.
    with pytest.raises(ValueError, match="1 non-zero components, fewer than k = 2; pick k up to 1"):
        compare.compare(flat, varied, n_components=2, n_permutations=0, center=False)
    # The debiased CKA alone keeps its documented NaN.
    assert np.isnan(compare.debiased_cka(flat, varied))
