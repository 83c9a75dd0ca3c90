"""Position probes against analytic truth, a direct numpy reference, and no-information controls."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import KFold, cross_val_predict

from posviz import figures, probes, simulate


def test_sinusoidal_absolute_position_is_exact():
    result = probes.absolute_probe(simulate.sinusoidal_table(512, 768), np.arange(512))
    assert result.mae == 0.0
    assert result.r2 > 0.9999


def test_gaussian_rows_hold_no_absolute_position():
    rows = simulate.gaussian(512, 768, seed=0).values
    result = probes.absolute_probe(rows, np.arange(512))
    # Predictions independent of the truth with its spread: MAE ~ n/3 (171 for n = 512).
    assert 0.28 * 512 < result.mae < 0.40 * 512
    assert result.r2 < 0


def test_absolute_probe_matches_a_direct_ridge_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((120, 6))
    y = np.arange(120)
    result = probes.absolute_probe(x, y, alpha=0.5, seed=7)
    expected = np.empty(120)
    scaled = x / x.std()
    for train, test in KFold(5, shuffle=True, random_state=7).split(x):
        # Ridge with an unpenalised intercept: centre the training fold, solve the normal
        # equations (X'X + alpha I) w = X'y.
        mean_x, mean_y = scaled[train].mean(axis=0), y[train].mean()
        xc = scaled[train] - mean_x
        w = np.linalg.solve(xc.T @ xc + 0.5 * np.eye(6), xc.T @ (y[train] - mean_y))
        expected[test] = (scaled[test] - mean_x) @ w + mean_y
    np.testing.assert_allclose(result.predictions, expected, rtol=1e-9, atol=1e-9)
    assert result.mae == np.mean(np.abs(np.round(expected) - y))


def test_folds_are_sklearns_kfold():
    for n, folds, seed in [(10, 5, 0), (103, 5, 7), (1024, 3, 2**31 - 1)]:
        expected = KFold(folds, shuffle=True, random_state=seed).split(np.zeros(n))
        for (train, test), (train_ref, test_ref) in zip(
            probes._folds(n, folds, seed), expected, strict=True
        ):
            np.testing.assert_array_equal(train, train_ref)
            np.testing.assert_array_equal(test, test_ref)
    with pytest.raises(ValueError, match="at least 10 rows"):
        probes._folds(9, 5, 0)


@pytest.mark.parametrize(
    "shape",
    [(300, 40), (200, 159), (100, 300)],
    ids=["primal", "primal, d = training rows - 1", "dual"],
)
@pytest.mark.parametrize("control", ["table", "row-shuffled", "Gaussian"])
def test_absolute_probe_equals_sklearn_ridge_out_of_fold(shape, control):
    # The reference the probe used to run: scikit-learn's Ridge(solver="cholesky") fold by
    # fold. Near d = training rows the controls' fits are ill-conditioned (predictions far
    # outside the table), where both routes agree to ~1e-9 of the largest prediction.
    n, d = shape
    table = simulate.learned_like(n, d, seed=0).values
    rows = {
        "table": table,
        "row-shuffled": table[np.random.default_rng(0).permutation(n)],
        "Gaussian": simulate.gaussian(n, d, seed=0).values,
    }[control]
    positions = np.arange(n)
    result = probes.absolute_probe(rows, positions, alpha=1e-3, seed=5)
    expected = cross_val_predict(
        Ridge(alpha=1e-3, solver="cholesky"),
        probes._scaled(rows),
        positions,
        cv=KFold(5, shuffle=True, random_state=5),
    )
    scale = np.abs(expected).max()
    np.testing.assert_allclose(result.predictions, expected, rtol=0, atol=1e-8 * scale)
    assert result.model == "Ridge(alpha=0.001, solver='cholesky')"


@pytest.mark.parametrize(
    "rows",
    [simulate.sinusoidal_table(200, 64), simulate.learned_like(100, 300, seed=0).values],
    ids=["primal", "dual"],
)
@pytest.mark.filterwarnings("ignore")  # the reference's own singular-matrix warnings
def test_unpenalised_absolute_probe_of_rank_deficient_rows_is_sklearns(rows):
    # alpha = 0 leaves singular normal equations: no Cholesky factor, the minimum-norm fit.
    positions = np.arange(len(rows))
    result = probes.absolute_probe(rows, positions, alpha=0.0, seed=2)
    expected = cross_val_predict(
        Ridge(alpha=0.0, solver="cholesky"),
        probes._scaled(rows),
        positions,
        cv=KFold(5, shuffle=True, random_state=2),
    )
    np.testing.assert_allclose(result.predictions, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("shape", [(300, 40), (100, 300)], ids=["primal", "dual"])
def test_absolute_probes_sharing_rows_equal_separate_probes(shape):
    # The row-shuffled control fits the table's rows against shuffled positions, together
    # with the table's own fit.
    rows = simulate.learned_like(*shape, seed=0).values
    positions = np.arange(shape[0])
    shuffled = np.random.default_rng(0).permutation(positions)
    together = probes._absolute_probes(rows, [positions, shuffled], folds=5, alpha=1e-3, seed=1)
    for probe, target in zip(together, [positions, shuffled], strict=True):
        alone = probes.absolute_probe(rows, target, seed=1)
        np.testing.assert_allclose(probe.predictions, alone.predictions, rtol=1e-10, atol=1e-8)
        np.testing.assert_array_equal(probe.positions, target)


def test_pair_logistic_fit_is_sklearns_logistic_regression():
    # Two folds fitted at once must each reach the optimum scikit-learn reaches alone on the
    # concatenated features [e_i ; e_j] (tight tolerances so both are at the optimum).
    # float64: scikit-learn would fit float32 input in float32.
    x = probes._scaled(simulate.learned_like(60, 8, seed=2).values)
    rng = np.random.default_rng(0)
    i, j = rng.integers(60, size=(2, 2, 300))
    labels = j > i
    coef, intercept = probes._fit_pair_logistic(x, i, j, labels, C=0.5, tol=1e-10)
    for fold in range(2):
        features = np.concatenate([x[i[fold]], x[j[fold]]], axis=1)
        reference = LogisticRegression(C=0.5, tol=1e-10, max_iter=10000).fit(features, labels[fold])
        fitted = coef[:, [2 * fold, 2 * fold + 1]].T.ravel()
        np.testing.assert_allclose(fitted, reference.coef_[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(intercept[fold], reference.intercept_[0], atol=1e-6)


def test_pair_logistic_stops_where_scikit_learns_lbfgs_would():
    # The optimiser steps in rescaled weights; its stop must still be scikit-learn's, on the
    # gradient in the weights themselves (a looser stop would change the probe's numbers).
    x = probes._scaled(simulate.learned_like(300, 64, seed=1).values).astype(np.float32)
    rng = np.random.default_rng(3)
    i, j = rng.integers(300, size=(2, 3, 800))
    labels = j > i
    coef, intercept = probes._fit_pair_logistic(x, i, j, labels, C=0.01, tol=1e-3)
    for fold in range(3):
        features = np.concatenate([x[i[fold]], x[j[fold]]], axis=1).astype(np.float64)
        w = coef[:, [2 * fold, 2 * fold + 1]].T.ravel()
        residual = expit(features @ w + intercept[fold]) - labels[fold]
        gradient = features.T @ residual / 800 + w / (0.01 * 800)
        assert max(np.abs(gradient).max(), abs(residual.sum() / 800)) <= 1e-3 * (1 + 1e-4)


def test_relative_order_of_a_sinusoidal_table():
    result = probes.relative_probe(simulate.sinusoidal_table(256, 64), np.arange(256), n_pairs=800)
    assert result.error_rate < 0.1
    assert result.n_test_pairs == 5 * 200


def test_relative_probe_cannot_memorise_rows_of_a_wide_gaussian_table():
    # d >= n: one linear score per row could be memorised if test pairs reused training rows.
    rows = np.random.default_rng(1).standard_normal((100, 200))
    result = probes.relative_probe(rows, np.arange(100), n_pairs=800)
    assert 0.4 < result.error_rate < 0.6


def test_controls_subsampling_and_seeding():
    values = simulate.sinusoidal_table(1500, 32)
    report = probes.probe_with_controls(values, seed=3, max_rows=300, n_pairs=400)
    assert report.subsampled
    assert report.n_rows == 300
    assert report.n_positions == 1500
    positions = report.absolute["table"].positions
    assert len(np.unique(positions)) == 300
    assert np.all(np.diff(positions) > 0)
    assert positions.max() < 1500
    assert list(report.absolute) == list(probes.CONTROLS)
    shuffled = report.absolute["row-shuffled"].positions
    assert not np.array_equal(shuffled, positions)
    np.testing.assert_array_equal(np.sort(shuffled), positions)
    assert report.absolute["table"].mae < 0.05 * 1500
    for control in ("row-shuffled", "Gaussian"):
        assert report.absolute[control].mae > 0.2 * 1500
        assert 0.35 < report.relative[control].error_rate < 0.65
    again = probes.probe_with_controls(values, seed=3, max_rows=300, n_pairs=400)
    for name in probes.CONTROLS:
        assert again.absolute[name].mae == report.absolute[name].mae
        assert again.relative[name].error_rate == report.relative[name].error_rate
    other = probes.probe_with_controls(values, seed=4, max_rows=300, n_pairs=400)
    assert not np.array_equal(other.absolute["table"].positions, positions)


def test_probe_figure_traces():
    report = probes.probe_with_controls(simulate.sinusoidal_table(200, 16), n_pairs=300)
    fig = figures.probe_predictions(report)
    clouds = [t for t in fig.data if t.type == "scattergl"]
    assert [t.name.split(" (")[0] for t in clouds] == list(probes.CONTROLS)
    assert all(len(t.x) == 200 and t.y.dtype == np.float32 for t in clouds)
    assert fig.data[-1].name == "perfect"
    assert fig.layout.xaxis.title.text == "true position p"
    assert fig.layout.yaxis.title.text == "predicted position"
    assert fig.layout.yaxis.range == pytest.approx((-0.25 * 199, 1.25 * 199))
    assert "seed 0, all 200 rows" in fig.layout.title.text
