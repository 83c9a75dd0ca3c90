"""The probes' fits (posviz._ridge) against brute force and scikit-learn: scipy solves, explicit
refits, LogisticRegression on the concatenated pair features."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from posviz import _ridge, probes, simulate

ALPHAS = np.logspace(-3, 7, 21)


def _ridge_fit(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients and intercept of ridge with an unpenalised intercept, by one scipy solve."""
    mean, y_mean = x.mean(axis=0), y.mean(axis=0)
    xc = x - mean
    coef = scipy.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ (y - y_mean))
    return coef, y_mean - mean @ coef


def _brute_force_nested_ridge(
    x: np.ndarray, y: np.ndarray, x_test: np.ndarray
) -> tuple[np.ndarray, float, np.ndarray]:
    """The same choice by n refits per strength, each leaving one training row out."""
    errors = []
    for alpha in ALPHAS:
        residuals = []
        for i in range(len(x)):
            keep = np.arange(len(x)) != i
            coef, intercept = _ridge_fit(x[keep], y[keep], alpha)
            residuals.append(y[i] - x[i] @ coef - intercept)
        errors.append(np.mean(np.square(residuals)))
    best = int(np.argmin(errors))
    coef, intercept = _ridge_fit(x, y, ALPHAS[best])
    return x_test @ coef + intercept, ALPHAS[best], np.array(errors)


@pytest.mark.parametrize(
    "shape", [(40, 6), (30, 29), (20, 45)], ids=["primal", "d = n - 1", "dual"]
)
@pytest.mark.parametrize("rows_of", ["learned-like", "Gaussian"])
def test_nested_ridge_is_brute_force_leave_one_out(shape, rows_of):
    n, d = shape
    make = simulate.learned_like if rows_of == "learned-like" else simulate.gaussian
    x = probes._scaled(make(n + 10, d, seed=3).values)
    rng = np.random.default_rng(0)
    # Several targets at once, as the controls' draws are fitted: each gets its own strength.
    y = np.stack([np.arange(n + 10.0), rng.permutation(n + 10), rng.normal(size=n + 10)], 1)
    predicted, chosen = _ridge.nested_ridge(x[:n], y[:n], x[n:], ALPHAS)
    for t in range(y.shape[1]):
        expected, alpha, errors = _brute_force_nested_ridge(x[:n], y[:n, t], x[n:])
        if chosen[t] != alpha:  # a tie to rounding between strengths
            assert errors[chosen[t] == ALPHAS][0] == pytest.approx(errors.min(), rel=1e-9)
            expected = _ridge_fit(x[:n], y[:n, t], chosen[t])
            expected = x[n:] @ expected[0] + expected[1]
        scale = np.abs(expected).max()
        np.testing.assert_allclose(predicted[:, t], expected, rtol=0, atol=1e-9 * scale)


def test_nested_ridge_on_a_line_picks_the_weakest_strength():
    # y = x exactly: every leave-one-out error grows with the strength, so the weakest wins,
    # and its fit is the line shrunk by sum xc^2 / (sum xc^2 + alpha), sum xc^2 = 82.5.
    x = np.arange(10.0)[:, None]
    predicted, chosen = _ridge.nested_ridge(x, x[:, 0:1], np.array([[20.0]]), ALPHAS)
    assert chosen[0] == ALPHAS[0]
    shrink = 82.5 / (82.5 + ALPHAS[0])
    assert predicted[0, 0] == pytest.approx(4.5 + shrink * (20 - 4.5), rel=1e-12)


@pytest.mark.parametrize("shape", [(50, 8), (12, 30)], ids=["determined", "minimum-norm"])
def test_least_squares_is_numpys_lstsq_with_an_intercept(shape):
    rng = np.random.default_rng(1)
    x, y, x_test = (
        rng.normal(size=shape),
        rng.normal(size=(shape[0], 2)),
        rng.normal(size=(5, shape[1])),
    )
    # Reference: the intercept as a column of ones, unpenalised, in one lstsq on centred rows
    # (minimum norm over the coefficients only, as LinearRegression), checked by the normal
    # equations where they determine the fit.
    mean = x.mean(axis=0)
    coef = np.linalg.pinv(x - mean) @ (y - y.mean(axis=0))
    expected = (x_test - mean) @ coef + y.mean(axis=0)
    np.testing.assert_allclose(_ridge.least_squares(x, y, x_test), expected, atol=1e-10)
    if shape[0] > shape[1]:
        design = np.c_[np.ones(shape[0]), x]
        beta = scipy.linalg.solve(design.T @ design, design.T @ y)
        np.testing.assert_allclose(expected, np.c_[np.ones(5), x_test] @ beta, atol=1e-10)


def test_pair_scores_are_the_concatenated_rows_times_the_weights():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(7, 3))
    coef, intercept = rng.normal(size=(3, 4)), rng.normal(size=2)  # two folds
    i, j = rng.integers(7, size=(2, 2, 5))
    scores = _ridge.pair_scores(x, coef, intercept, i, j)
    for fold in range(2):
        w = np.r_[coef[:, 2 * fold], coef[:, 2 * fold + 1]]
        expected = np.c_[x[i[fold]], x[j[fold]]] @ w + intercept[fold]
        np.testing.assert_allclose(scores[fold], expected, rtol=1e-12)


def test_steep_directions_are_the_top_eigenvectors_of_a_low_rank_gram():
    # Rank 4 rows: the range finder sees the whole range, so it is exact.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 4)) @ rng.normal(size=(4, 20))
    values, vectors = _ridge.steep_directions(x, 4)
    expected, expected_vectors = scipy.linalg.eigh(x.T @ x, subset_by_index=[16, 19])
    np.testing.assert_allclose(values, expected[::-1], rtol=1e-9)
    np.testing.assert_allclose(np.abs(vectors.T @ expected_vectors[:, ::-1]), np.eye(4), atol=1e-8)


def test_pair_logistic_fit_is_sklearns_logistic_regression():
    # Two folds fitted at once must each reach the optimum scikit-learn reaches alone on the
    # concatenated features [e_i ; e_j] (tight tolerances so both are at the optimum).
    # float64: scikit-learn would fit float32 input in float32.
    x = probes._scaled(simulate.learned_like(60, 8, seed=2).values)
    rng = np.random.default_rng(0)
    i, j = rng.integers(60, size=(2, 2, 300))
    labels = j > i
    coef, intercept = _ridge.fit_pair_logistic(x, i, j, labels, C=0.5, tol=1e-10)
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
    coef, intercept = _ridge.fit_pair_logistic(x, i, j, labels, C=0.01, tol=1e-3)
    for fold in range(3):
        features = np.concatenate([x[i[fold]], x[j[fold]]], axis=1).astype(np.float64)
        w = coef[:, [2 * fold, 2 * fold + 1]].T.ravel()
        residual = expit(features @ w + intercept[fold]) - labels[fold]
        gradient = features.T @ residual / 800 + w / (0.01 * 800)
        assert max(np.abs(gradient).max(), abs(residual.sum() / 800)) <= 1e-3 * (1 + 1e-4)
