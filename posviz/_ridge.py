"""The penalised linear fits the probes run: ridge with leave-one-out strength, least squares,
and L2 logistic regression on pairs of rows.

Private: :mod:`posviz.probes` holds the analysis (folds, controls, results, definitions);
this module only fits. Every function is a known estimator (scikit-learn's ``RidgeCV``,
``LinearRegression``, ``LogisticRegression``), computed so that many fits sharing rows share
their work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scipy.optimize import OptimizeResult

__all__ = [
    "STEEP_DIRECTIONS",
    "fit_pair_logistic",
    "least_squares",
    "nested_ridge",
    "pair_scores",
    "steep_directions",
]

#: Principal directions of the rows the pair logistic regression's optimiser rescales.
STEEP_DIRECTIONS = 16


def nested_ridge(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, alphas: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Ridge with an unpenalised intercept, its strength chosen per target by exact
    leave-one-out error: scikit-learn's ``RidgeCV(alphas=alphas).fit(x_train, y)``.

    Parameters
    ----------
    x_train : ndarray of shape (n_train, d)
    y_train : ndarray of shape (n_train, n_targets)
        Each column is fitted on its own, with its own strength.
    x_test : ndarray of shape (n_test, d)
    alphas : ndarray of shape (n_alphas,)
        Strengths to choose from, ascending (ties go to the smaller, as in ``RidgeCV``).

    Returns
    -------
    predicted : ndarray of shape (n_test, n_targets)
        Predictions for `x_test` at each target's chosen strength.
    chosen : ndarray of shape (n_targets,)
        The chosen strengths.

    Notes
    -----
    One eigendecomposition of the centred training rows' Gram matrix on the smaller side
    serves every strength and every target: with ``H = Xc (Xc'Xc + a I)^-1 Xc' + 11'/n`` the
    hat matrix, the leave-one-out residuals are ``e_i / (1 - H_ii)`` (exact for a fixed
    quadratic penalty).
    """
    mean, y_mean = x_train.mean(axis=0), y_train.mean(axis=0)
    xc, yc = x_train - mean, y_train - y_mean
    n, d = xc.shape
    # Both sides give H = basis diag(weights) basis': primal with the rows in the eigenbasis
    # of Xc'Xc, dual with the eigenvectors of Xc Xc'.
    primal = d <= n
    gram = xc.T @ xc if primal else xc @ xc.T
    # numpy's eigh (LAPACK dsyevd, as scipy's driver="evd") lets go of the GIL while it works;
    # scipy's holds it, and the probes' other parts, run beside this fit, wait for it.
    lam, vectors = np.linalg.eigh(gram)
    basis = xc @ vectors if primal else vectors
    lam = np.clip(lam, 0.0, None)
    inverse = 1 / (lam + alphas[:, None])  # (alphas, k)
    weights = inverse if primal else lam * inverse
    leverage = (basis**2) @ weights.T + 1 / n  # (n, alphas)
    projected = basis.T @ yc  # (k, targets)
    # Every strength for every target in one product (many control draws share these rows).
    coefficients = weights.T[:, :, None] * projected[:, None, :]  # (k, alphas, targets)
    loo = (basis @ coefficients.reshape(len(lam), -1)).reshape(n, len(alphas), -1)
    np.subtract(yc[:, None, :], loo, out=loo)  # the residuals, in place of the fitted values
    loo /= np.clip(1 - leverage, np.finfo(float).eps, None)[:, :, None]
    best = np.argmin(np.einsum("iat,iat->at", loo, loo), axis=0)
    # The chosen fits' weights on the features: the test rows are multiplied once, by these.
    chosen = inverse[best].T * projected  # (k, targets)
    coef = vectors @ chosen if primal else xc.T @ (basis @ chosen)
    return (x_test - mean) @ coef + y_mean, alphas[best]


def least_squares(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    """Predictions of ordinary least squares with an intercept (minimum-norm when the training
    rows do not determine it): scikit-learn's ``LinearRegression``."""
    mean, y_mean = x_train.mean(axis=0), y_train.mean(axis=0)
    coef = np.linalg.lstsq(x_train - mean, y_train - y_mean, rcond=None)[0]
    return (x_test - mean) @ coef + y_mean


def pair_scores(
    x: np.ndarray, coef: np.ndarray, intercept: np.ndarray, i: np.ndarray, j: np.ndarray
) -> np.ndarray:
    """``w_i . e_i + w_j . e_j + b`` of every pair, for folds stacked along the first axis.

    `coef` holds ``w_i`` and ``w_j`` of fold f in columns 2f and 2f + 1: one product of the
    table with all of them scores every row once, and each pair sums two of those scores,
    instead of multiplying a (pairs, 2 d_model) matrix of concatenated rows.
    """
    scores = x @ coef.astype(x.dtype)
    column = 2 * np.arange(len(i))[:, None]
    return scores[i, column] + scores[j, column + 1] + intercept[:, None]


def steep_directions(x: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """About the top-`rank` eigenvalues of ``x.T @ x`` and their (d, rank) eigenvectors.

    A seeded randomised range finder with two power iterations (Halko, Martinsson & Tropp
    2011): a few products with the table, far cheaper than a full eigendecomposition of the
    d x d Gram matrix. Approximate, which is enough to steer an optimiser.
    """
    width = min(rank + 10, *x.shape)
    basis = x @ np.random.default_rng(0).standard_normal((x.shape[1], width)).astype(x.dtype)
    for _ in range(2):
        basis = np.linalg.qr(x @ (x.T @ basis))[0]
    _, values, vectors = np.linalg.svd((basis.T @ x).astype(np.float64), full_matrices=False)
    return values[:rank] ** 2, vectors[:rank].T


def fit_pair_logistic(
    x: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    labels: np.ndarray,
    *,
    C: float,
    tol: float = 1e-3,
    steep: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """L2 logistic regressions on ``[e_i ; e_j]``, one per fold (row of `i`, `j`, `labels`).

    Each fold minimises scikit-learn's ``LogisticRegression(C=C)`` objective, the mean log
    loss over its pairs + ``|w|^2 / (2 C n_pairs)`` (intercept unpenalised), with L-BFGS-B
    and the options of its lbfgs solver, to its stop: ``max |gradient| <= tol``. The folds
    are independent, so their sum is minimised at once: every step is then two (rows x d) by
    (d x 2 folds) products, which read the table once for all folds (reading it is the
    per-step cost), and the stop holds for each fold. Returns the (d_model, 2 folds) weights and
    the intercepts.

    The optimiser runs on ``u`` with ``w = P u``, where P shrinks the rows' top principal
    directions to the curvature of the rest (same optimum, same stop on w's gradient): a
    table's few dominant directions otherwise make the problem ill-conditioned. At 1024 x 768
    the row-shuffled control then takes 14 steps instead of 82, the table 19 instead of 33.
    """
    from scipy.optimize import minimize  # here: slow to load, and a first open fits no probe

    n, d = x.shape
    folds, m = labels.shape
    penalty = 1.0 / (C * m)
    # The loss's curvature along eigenvector v_k of x'x at w = 0: each fold's rows are drawn
    # uniformly, with logistic weight 1/4.
    eigenvalues, v = steep if steep is not None else steep_directions(x, STEEP_DIRECTIONS)
    curvature = eigenvalues / (4 * n) + penalty
    shrink = np.sqrt(curvature[-1] / curvature) - 1

    def times_p(a: np.ndarray) -> np.ndarray:
        """``P a`` with ``P = I + V diag(shrink) V'`` (symmetric: also ``P' a``)."""
        return a + v @ (shrink[:, None] * (v.T @ a))

    column = 2 * np.arange(folds)[:, None]
    # Flat indices into the (n, 2 folds) gradient of the scores, for np.bincount.
    into_i = (i * 2 * folds + column).ravel()
    into_j = (j * 2 * folds + column + 1).ravel()
    # The last point evaluated and max |gradient in w| there, for the stop.
    last: dict[str, np.ndarray | float] = {"point": np.empty(0), "gradient": np.inf}

    def loss_and_gradient(point: np.ndarray) -> tuple[float, np.ndarray]:
        u, intercept = point[: d * 2 * folds].reshape(d, 2 * folds), point[d * 2 * folds :]
        # Scores from the table and w itself: P only changes what the optimiser steps in.
        coef = times_p(u)
        z = pair_scores(x, coef, intercept, i, j)
        # log(1 + e^z) and its derivative 1 / (1 + e^-z) from one exp(-|z|), stable for any z;
        # np.logaddexp and scipy.special.expit would each compute their own exponentials.
        small = np.exp(-np.abs(z))
        log_loss = np.maximum(z, 0) + np.log1p(small) - labels * z
        loss = np.sum(log_loss) / m + penalty / 2 * np.sum(coef**2)
        dz = (np.where(z >= 0, 1.0, small) / (1 + small) - labels).ravel() / m
        dscores = np.bincount(into_i, dz, n * 2 * folds) + np.bincount(into_j, dz, n * 2 * folds)
        d_coef = x.T @ dscores.reshape(n, 2 * folds).astype(x.dtype) + penalty * coef
        d_intercept = dz.reshape(folds, m).sum(axis=1)
        last["point"] = point.copy()
        last["gradient"] = max(np.abs(d_coef).max(), np.abs(d_intercept).max())
        return loss, np.concatenate([times_p(d_coef).ravel(), d_intercept])

    def stop(intermediate_result: OptimizeResult) -> None:
        # An iteration ends at its last evaluation; if not, wait for the next iteration.
        if np.array_equal(intermediate_result.x, last["point"]) and last["gradient"] <= tol:
            raise StopIteration

    result = minimize(
        loss_and_gradient,
        np.zeros(d * 2 * folds + folds),
        method="L-BFGS-B",
        jac=True,
        callback=stop,
        # The gradient stop is the callback's, on w: L-BFGS-B's own would test u's.
        options={"maxiter": 1000, "maxls": 50, "gtol": 0.0, "ftol": 64 * np.finfo(float).eps},
    )
    return times_p(result.x[: d * 2 * folds].reshape(d, 2 * folds)), result.x[d * 2 * folds :]
