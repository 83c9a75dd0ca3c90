"""How much absolute and relative position a table encodes: linear probes with controls.

The protocol of Wang & Chen (EMNLP 2020), "What do position embeddings learn?", with two
guards: every probe is also run on a row-shuffled copy and on an i.i.d. Gaussian table of the
same shape (neither holds position information), and the relative-order probe is tested on
pairs of positions never seen in training (pairs that share positions with the training pairs
let a probe memorise one score per row, which a Gaussian table with d >= n allows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.linalg import (
    LinAlgError,
    cho_factor,
    cho_solve,
    cholesky,
    solve,
    solve_triangular,
)
from scipy.optimize import OptimizeResult, minimize

__all__ = [
    "CONTROLS",
    "AbsoluteProbe",
    "ProbeReport",
    "RelativeProbe",
    "absolute_probe",
    "probe_with_controls",
    "relative_probe",
]

#: The probed tables, in display order: the table itself and its two no-information controls.
CONTROLS = ("table", "row-shuffled", "Gaussian")
#: Principal directions of the rows the relative probe's optimiser rescales.
_STEEP_DIRECTIONS = 16


@dataclass(frozen=True)
class AbsoluteProbe:
    """Out-of-fold linear regression from a row to its position index.

    Attributes
    ----------
    mae : float
        Mean absolute error of the predictions rounded to integers (as in Wang & Chen).
    r2 : float
        Coefficient of determination of the unrounded predictions.
    predictions : ndarray of shape (n_rows,)
        Out-of-fold prediction for every probed row (unrounded).
    positions : ndarray of int, shape (n_rows,)
        True position of every probed row.
    model : str
        The estimator, e.g. ``"Ridge(alpha=0.001, solver='cholesky')"``.
    """

    mae: float
    r2: float
    predictions: np.ndarray
    positions: np.ndarray
    model: str


@dataclass(frozen=True)
class RelativeProbe:
    """Logistic regression on ``[e_i ; e_j]`` predicting whether ``j > i``.

    Attributes
    ----------
    error_rate : float
        Share of misclassified test pairs, pooled over the folds (0.5 = chance).
    n_test_pairs : int
        Test pairs over all folds.
    """

    error_rate: float
    n_test_pairs: int


@dataclass(frozen=True)
class ProbeReport:
    """Both probes on a table and on its controls.

    Attributes
    ----------
    absolute : dict of str to AbsoluteProbe
        Keyed by :data:`CONTROLS`.
    relative : dict of str to RelativeProbe
        Keyed by :data:`CONTROLS`.
    n_rows : int
        Rows probed (a seeded subsample when the table had more than `max_rows`).
    n_positions : int
        Rows of the table.
    seed, folds, max_rows, n_pairs : int
    alpha, C : float
    """

    absolute: dict[str, AbsoluteProbe]
    relative: dict[str, RelativeProbe]
    n_rows: int
    n_positions: int
    seed: int
    folds: int
    max_rows: int
    n_pairs: int
    alpha: float
    C: float

    @property
    def subsampled(self) -> bool:
        """Whether only a subsample of the rows was probed."""
        return self.n_rows < self.n_positions

    def table(self) -> pd.DataFrame:
        """One row per probed table (the table, then its controls): the numbers to cite."""
        return pd.DataFrame(
            [
                {
                    "table": name,
                    "mae": self.absolute[name].mae,
                    "r2": self.absolute[name].r2,
                    "error_rate": self.relative[name].error_rate,
                    "absolute_model": self.absolute[name].model,
                    "test_pairs": self.relative[name].n_test_pairs,
                }
                for name in self.absolute
            ]
        )


def _scaled(values: np.ndarray) -> np.ndarray:
    # One overall scale (no per-feature standardising): leaves a linear probe's fit unchanged
    # and makes alpha and C mean the same for tables of any magnitude.
    x = np.array(values, dtype=np.float64)  # a copy the callers may change in place
    std = x.std()
    if std > 0:
        x /= std
    return x


def _folds(n: int, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Sorted (train, test) rows of ``sklearn.model_selection.KFold(folds, shuffle=True,
    random_state=seed)``: the same folds, without importing scikit-learn (2 s) for them."""
    if n < 2 * folds:
        msg = f"{folds}-fold probes need at least {2 * folds} rows, got {n}."
        raise ValueError(msg)
    splits = []
    for test in np.array_split(np.random.RandomState(seed).permutation(n), folds):
        held_out = np.zeros(n, dtype=bool)
        held_out[test] = True
        splits.append((np.flatnonzero(~held_out), np.flatnonzero(held_out)))
    return splits


def absolute_probe(
    values: np.ndarray,
    positions: np.ndarray,
    *,
    folds: int = 5,
    alpha: float = 1e-3,
    seed: int = 0,
) -> AbsoluteProbe:
    """Linear regression from rows to positions under k-fold cross-validation.

    Parameters
    ----------
    values : ndarray of shape (n_rows, d_model)
    positions : ndarray of int, shape (n_rows,)
        Position index of each row (the regression target).
    folds : int
        Folds of ``KFold(shuffle=True)`` over the rows.
    alpha : float
        Ridge penalty on the table divided by its overall standard deviation. The default is
        small enough to act only as a tie-breaker: least squares when d_model is below the
        training rows of a fold, a unique near-minimum-norm fit when it is not (then least
        squares has no unique solution).
    seed : int
        Seeds the fold assignment.

    Notes
    -----
    Ridge with an unpenalised intercept throughout rather than least squares below d >= n:
    one estimator for every shape. The predictions are scikit-learn's
    ``cross_val_predict(Ridge(alpha, solver="cholesky"), ...)`` (to 1e-8 of the largest
    prediction, tested; ~1e-10 typically) at a fraction of the work: see
    :func:`_ridge_out_of_fold`.

    Examples
    --------
    >>> x = np.c_[np.arange(20.0), np.ones(20)]
    >>> absolute_probe(x, np.arange(20)).mae
    0.0
    """
    (probe,) = _absolute_probes(values, [positions], folds=folds, alpha=alpha, seed=seed)
    return probe


def _absolute_probes(
    values: np.ndarray, targets: list[np.ndarray], *, folds: int, alpha: float, seed: int
) -> list[AbsoluteProbe]:
    """:func:`absolute_probe` of the same rows against several position vectors at once (the
    fits share their factorisations)."""
    targets = np.asarray(targets)
    x, y = _scaled(values), targets.T.astype(np.float64)
    # Centring the whole table changes no fold's fit (each fold is centred again), and puts
    # the intercept's column (ones) orthogonal to the table's, as _ridge_out_of_fold needs.
    x -= x.mean(axis=0)
    splits = _folds(len(y), folds, seed)
    try:
        predicted = _ridge_out_of_fold(x, y, splits, alpha)
    except LinAlgError:  # alpha = 0 on rank-deficient rows: no Cholesky factor exists
        predicted = _ridge_out_of_fold_by_svd(x, y, splits, alpha)
    probes = []
    for positions, prediction in zip(targets, predicted.T, strict=True):
        residuals = positions - prediction
        probes.append(
            AbsoluteProbe(
                mae=float(np.mean(np.abs(positions - np.round(prediction)))),
                r2=float(1 - residuals @ residuals / np.sum((positions - positions.mean()) ** 2)),
                predictions=prediction,
                positions=positions,
                model=f"Ridge(alpha={alpha:g}, solver='cholesky')",
            )
        )
    return probes


def _ridge_out_of_fold(
    x: np.ndarray, y: np.ndarray, splits: list[tuple[np.ndarray, np.ndarray]], alpha: float
) -> np.ndarray:
    """Out-of-fold predictions of ridge regression with an unpenalised intercept, for each
    column of `y` (all columns share the factorisations). `x` is column-centred.

    The same fits as scikit-learn's ``Ridge(solver="cholesky")`` on each training fold
    (primal d x d normal equations when d_model is at most the training rows, dual n_train x
    n_train kernel equations when it is not), at a fraction of the products and Cholesky
    factorisations: at 1024 x 768 (primal, one thread) 0.06 s vs 0.11 s fold by fold and
    0.2-0.4 s through scikit-learn.
    """
    n, d = x.shape
    predicted = np.empty(y.shape)
    if d <= min(len(train) for train, _ in splits):
        # One fit on all rows serves every fold: a fold's out-of-fold residuals are
        # (I - H_ff)^-1 e_f, with H = X (X'X + alpha I)^-1 X' + 11'/n the hat matrix and e
        # the residuals of that fit (exact for any fixed quadratic penalty): one d x d
        # Cholesky per table instead of one per fold.
        a = x.T @ x
        a.flat[:: d + 1] += alpha
        low = cholesky(a, lower=True, overwrite_a=True, check_finite=False)
        half = solve_triangular(low, x.T, lower=True, check_finite=False)  # H = half'half + 1/n
        residuals = y - y.mean(axis=0) - half.T @ (half @ (y - y.mean(axis=0)))
        for _, test in splits:
            block = half[:, test]
            fold = np.eye(len(test)) - block.T @ block - 1 / n  # I - H_ff
            predicted[test] = y[test] - solve(fold, residuals[test], assume_a="pos")
    else:
        kernel = x @ x.T  # every fold's training and test blocks are sliced from it
        for train, test in splits:
            # Double centring gives <x_a - mean, x_b - mean> from the uncentred kernel.
            a = kernel[np.ix_(train, train)]
            row_means = a.mean(axis=1)
            grand_mean = row_means.mean()
            a -= row_means[:, None] + row_means[None, :] - grand_mean
            a.flat[:: len(a) + 1] += alpha
            y_mean = y[train].mean(axis=0)
            dual = cho_solve(cho_factor(a, overwrite_a=True, check_finite=False), y[train] - y_mean)
            cross = kernel[np.ix_(test, train)]
            cross -= cross.mean(axis=1)[:, None] + row_means[None, :] - grand_mean
            predicted[test] = cross @ dual + y_mean
    return predicted


def _ridge_out_of_fold_by_svd(
    x: np.ndarray, y: np.ndarray, splits: list[tuple[np.ndarray, np.ndarray]], alpha: float
) -> np.ndarray:
    """:func:`_ridge_out_of_fold` fold by fold through the SVD: the minimum-norm solution,
    which scikit-learn's ``Ridge(solver="cholesky")`` also falls back to when its Cholesky
    fails."""
    predicted = np.empty(y.shape)
    for train, test in splits:
        mean, y_mean = x[train].mean(axis=0), y[train].mean(axis=0)
        u, s, vt = np.linalg.svd(x[train] - mean, full_matrices=False)
        # numpy's lstsq cut-off: centring leaves one singular value at rounding level.
        kept = s > s[0] * np.finfo(float).eps * max(len(train), x.shape[1])
        gains = s[kept] / (s[kept] ** 2 + alpha)
        coef = vt[kept].T @ (gains[:, None] * (u[:, kept].T @ (y[train] - y_mean)))
        predicted[test] = (x[test] - mean) @ coef + y_mean
    return predicted


def relative_probe(
    values: np.ndarray,
    positions: np.ndarray,
    *,
    folds: int = 5,
    n_pairs: int = 2000,
    C: float = 0.01,
    seed: int = 0,
) -> RelativeProbe:
    """Logistic regression on concatenated pairs ``[e_i ; e_j]`` predicting ``j > i``.

    The rows are split into `folds` folds (``KFold(shuffle=True)``); for each fold, `n_pairs`
    pairs of distinct training rows are sampled to fit, and ``n_pairs / (folds - 1)`` pairs of
    distinct held-out rows to test, so no test pair contains a row seen in training.

    Parameters
    ----------
    values : ndarray of shape (n_rows, d_model)
    positions : ndarray of int, shape (n_rows,)
    folds : int
    n_pairs : int
        Training pairs per fold.
    C : float
        Inverse L2 penalty of the logistic regression (unpenalised intercept) on the table
        divided by its overall standard deviation: scikit-learn's
        ``LogisticRegression(C=C, tol=1e-3)`` objective, minimised by L-BFGS in float32 to
        its lbfgs solver's stop (see :func:`_fit_pair_logistic`). With the default C = 0.01
        the folds converge together in 14-20 steps at 1024 x 768 (C = 1: up to 85 steps, on
        the row-shuffled control; the error rates differ from C = 1's by about a point on
        simulated tables).
    seed : int
        Seeds the folds and the pairs.

    Examples
    --------
    >>> x = np.c_[np.arange(40.0), np.ones(40)]
    >>> relative_probe(x, np.arange(40), n_pairs=200).error_rate < 0.1
    True
    """
    # float32 halves the memory traffic of every L-BFGS step, which dominates the run time.
    x = _scaled(values).astype(np.float32)
    positions = np.asarray(positions)
    rng = np.random.default_rng(seed)
    train_pairs, test_pairs = [], []
    for train, test in _folds(len(x), folds, seed):
        train_pairs.append(_pairs(train, n_pairs, rng))
        test_pairs.append(_pairs(test, max(1, n_pairs // (folds - 1)), rng))
    i, j = np.transpose(train_pairs, (1, 0, 2))
    coef, intercept = _fit_pair_logistic(x, i, j, positions[j] > positions[i], C=C)
    i, j = np.transpose(test_pairs, (1, 0, 2))
    predicted = _pair_scores(x, coef, intercept, i, j) > 0
    wrong = int(np.count_nonzero(predicted != (positions[j] > positions[i])))
    return RelativeProbe(error_rate=wrong / i.size, n_test_pairs=i.size)


def _pairs(rows: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`n` pairs ``(i, j)`` of distinct `rows`, uniformly."""
    i = rng.integers(len(rows), size=n)
    j = (i + rng.integers(1, len(rows), size=n)) % len(rows)
    return rows[i], rows[j]


def _pair_scores(
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


def _steep_directions(x: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """About the top-`rank` eigenvalues of ``x.T @ x`` and their (d, rank) eigenvectors.

    A seeded randomised range finder with two power iterations (Halko, Martinsson & Tropp
    2011): a few products with the table instead of a full eigendecomposition (5 ms against
    50 ms at 1024 x 768). Approximate, which is enough to steer an optimiser.
    """
    width = min(rank + 10, *x.shape)
    basis = x @ np.random.default_rng(0).standard_normal((x.shape[1], width)).astype(x.dtype)
    for _ in range(2):
        basis = np.linalg.qr(x @ (x.T @ basis))[0]
    _, values, vectors = np.linalg.svd((basis.T @ x).astype(np.float64), full_matrices=False)
    return values[:rank] ** 2, vectors[:rank].T


def _fit_pair_logistic(
    x: np.ndarray, i: np.ndarray, j: np.ndarray, labels: np.ndarray, *, C: float, tol: float = 1e-3
) -> tuple[np.ndarray, np.ndarray]:
    """L2 logistic regressions on ``[e_i ; e_j]``, one per fold (row of `i`, `j`, `labels`).

    Each fold minimises scikit-learn's ``LogisticRegression(C=C)`` objective, the mean log
    loss over its pairs + ``|w|^2 / (2 C n_pairs)`` (intercept unpenalised), with L-BFGS-B
    and the options of its lbfgs solver, to its stop: ``max |gradient| <= tol``. The folds
    are independent, so their sum is minimised at once: every step is then two (rows x d) by
    (d x 2 folds) products, 4x cheaper than a fold at a time (the per-step cost is reading
    the table), and the stop holds for each fold. Returns the (d_model, 2 folds) weights and
    the intercepts.

    The optimiser runs on ``u`` with ``w = P u``, where P shrinks the rows' top principal
    directions to the curvature of the rest (same optimum, same stop on w's gradient): a
    table's few dominant directions otherwise make the problem ill-conditioned. At 1024 x 768
    the row-shuffled control then takes 14 steps instead of 82, the table 19 instead of 33.
    """
    n, d = x.shape
    folds, m = labels.shape
    penalty = 1.0 / (C * m)
    # The loss's curvature along eigenvector v_k of x'x at w = 0: each fold's rows are drawn
    # uniformly, with logistic weight 1/4.
    eigenvalues, v = _steep_directions(x, _STEEP_DIRECTIONS)
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
        z = _pair_scores(x, coef, intercept, i, j)
        # log(1 + e^z) and its derivative 1 / (1 + e^-z) from one exp(-|z|), stable for any z
        # and 2.6x faster than np.logaddexp and scipy.special.expit apiece.
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


def probe_with_controls(
    values: np.ndarray,
    *,
    seed: int = 0,
    max_rows: int = 2048,
    folds: int = 5,
    alpha: float = 1e-3,
    n_pairs: int = 2000,
    C: float = 0.01,
) -> ProbeReport:
    """Absolute and relative probes on a table, a row-shuffled copy, and a Gaussian table.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    seed : int
        One seed for everything random: the row subsample, the shuffle, the Gaussian table,
        the folds and the pairs. The three tables are probed with the same folds and pairs.
    max_rows : int
        Probe a seeded random subsample of this many rows (kept in position order) when the
        table is longer, so long vocabularies stay responsive.
    folds, alpha, n_pairs, C
        See :func:`absolute_probe` and :func:`relative_probe`.

    Notes
    -----
    The row-shuffled control keeps the rows but assigns them to random positions (a seeded
    permutation of the positions; the folds and pairs are the table's, so the same rows are
    held out); the Gaussian control has the same shape and the table's overall standard
    deviation.

    Examples
    --------
    >>> from posviz.simulate import sinusoidal_table
    >>> r = probe_with_controls(sinusoidal_table(64, 32), n_pairs=300)
    >>> r.absolute["table"].mae < r.absolute["Gaussian"].mae
    True
    """
    n = len(values)
    subsample_seed, control_seed, probe_seed = np.random.SeedSequence(seed).generate_state(3)
    positions = np.arange(n)
    if n > max_rows:
        subsample = np.random.default_rng(subsample_seed).choice(n, max_rows, replace=False)
        positions = np.sort(subsample)
    x = np.asarray(values[positions], dtype=np.float64)  # only the probed rows converted
    rng = np.random.default_rng(control_seed)
    shuffled = rng.permutation(positions)  # the table's rows at random positions
    gaussian = rng.normal(scale=x.std(), size=x.shape)
    options = {"folds": folds, "seed": int(probe_seed)}
    # The row-shuffled control fits the table's rows, so its absolute probe shares the table's.
    table, row_shuffled = _absolute_probes(x, [positions, shuffled], alpha=alpha, **options)
    relative = {"n_pairs": n_pairs, "C": C, **options}
    return ProbeReport(
        absolute={
            "table": table,
            "row-shuffled": row_shuffled,
            "Gaussian": absolute_probe(gaussian, positions, alpha=alpha, **options),
        },
        relative={
            "table": relative_probe(x, positions, **relative),
            "row-shuffled": relative_probe(x, shuffled, **relative),
            "Gaussian": relative_probe(gaussian, positions, **relative),
        },
        n_rows=len(x),
        n_positions=n,
        seed=seed,
        folds=folds,
        max_rows=max_rows,
        n_pairs=n_pairs,
        alpha=alpha,
        C=C,
    )
