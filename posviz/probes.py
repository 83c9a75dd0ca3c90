"""How much absolute and relative position a table encodes: linear probes with controls.

The protocol of Wang & Chen (EMNLP 2020), "What do position embeddings learn?", with two
guards: every probe is also run on a row-shuffled copy and on an i.i.d. Gaussian table of the
same shape (neither holds position information), and the relative-order probe is tested on
pairs of positions never seen in training (pairs that share positions with the training pairs
let a probe memorise one score per row, which a Gaussian table with d >= n allows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
from scipy.optimize import OptimizeResult, minimize

from posviz._params import records_params

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ABOUT",
    "ALPHAS",
    "CONTROLS",
    "C_GRID",
    "DEFINITIONS",
    "INNER_FOLDS",
    "PROTOCOLS",
    "RELATIVE_CHANCE",
    "RELATIVE_PROTOCOL",
    "AbsoluteProbe",
    "ProbeReport",
    "RelativeProbe",
    "absolute_probe",
    "probe_with_controls",
    "relative_probe",
]

#: The probed tables, in display order: the table itself and its two no-information controls.
CONTROLS = ("table", "row-shuffled", "Gaussian")
#: What the probes answer, for the page and the report.
ABOUT = (
    "How much absolute and relative position a linear read-out recovers (Wang & Chen, "
    "EMNLP 2020), beside the same probe on two tables without position information: the rows "
    "shuffled to random positions, and i.i.d. Gaussian rows of the same shape and overall "
    "standard deviation."
)
#: The relative probe's chance error rate: a coin toss on the order of a pair.
RELATIVE_CHANCE = 0.5
#: What each headline number means and its chance level (the page's tooltips, the report).
DEFINITIONS = {
    "mae": "Absolute probe: mean |round(predicted) − p| of a linear regression from row to "
    "position p, predicted out of fold, mean ± sd over the folds of the repeated splits. "
    "Chance: the same for the constant predictor (the training fold's mean position, ≈ n/4 "
    "for evenly spread positions). Skill = 1 − MAE / chance MAE: 1 perfect, 0 no better "
    "than chance.",
    "r2": "Absolute probe: R² of the unrounded out-of-fold predictions (1 = perfect, 0 = as "
    "good as predicting the mean, < 0 worse), mean over the repeated splits.",
    "error_rate": "Relative probe: share of held-out pairs (i, j) misclassified by a logistic "
    "regression on [e_i ; e_j] predicting j > i, mean ± sd over the folds. Pairs are drawn "
    "within folds of positions, so no test pair contains a row seen in training. Chance 0.5.",
}
#: Principal directions of the rows the relative probe's optimiser rescales.
_STEEP_DIRECTIONS = 16


@dataclass(frozen=True)
class AbsoluteProbe:
    """Out-of-fold linear regression from a row to its position index, beside chance.

    Attributes
    ----------
    fold_mae : ndarray of shape (repeats, folds)
        Mean absolute error of the predictions rounded to integers (as in Wang & Chen) on
        each held-out fold of each repeated split.
    fold_chance_mae : ndarray of shape (repeats, folds)
        The same for the constant predictor: the fold's training-mean position, rounded
        (about n/4 for uniformly spread positions). The chance level.
    fold_alpha : ndarray of shape (repeats, folds)
        Ridge strength chosen on each fold's training rows (0 for plain least squares).
    r2 : float
        Coefficient of determination of the unrounded out-of-fold predictions, mean over the
        repeated splits.
    predictions : ndarray of shape (n_rows,)
        Out-of-fold prediction for every probed row in the first split (unrounded).
    positions : ndarray of int, shape (n_rows,)
        True position of every probed row.
    model : str
        The estimator and how its strength was chosen.
    """

    fold_mae: np.ndarray
    fold_chance_mae: np.ndarray
    fold_alpha: np.ndarray
    r2: float
    predictions: np.ndarray
    positions: np.ndarray
    model: str

    @property
    def mae(self) -> float:
        """Mean absolute error, mean over all folds of all splits."""
        return float(self.fold_mae.mean())

    @property
    def mae_sd_folds(self) -> float:
        """Standard deviation (ddof 1) of the MAE over all folds of all splits."""
        return float(self.fold_mae.std(ddof=1))

    @property
    def mae_sd_splits(self) -> float:
        """Standard deviation (ddof 1) over the repeated splits of each split's mean MAE."""
        means = self.fold_mae.mean(axis=1)
        return float(means.std(ddof=1)) if len(means) > 1 else float("nan")

    @property
    def chance_mae(self) -> float:
        """The constant predictor's MAE, mean over all folds of all splits."""
        return float(self.fold_chance_mae.mean())

    @property
    def fold_skill(self) -> np.ndarray:
        """ndarray of shape (repeats, folds): ``1 - MAE / chance MAE`` on each fold."""
        return 1 - self.fold_mae / self.fold_chance_mae

    @property
    def skill(self) -> float:
        """Skill score ``1 - MAE / chance MAE``, mean over all folds (1 perfect, 0 chance)."""
        return float(self.fold_skill.mean())

    @property
    def skill_sd(self) -> float:
        """Standard deviation (ddof 1) of the skill over all folds of all splits."""
        return float(self.fold_skill.std(ddof=1))


@dataclass(frozen=True)
class RelativeProbe:
    """Logistic regression on ``[e_i ; e_j]`` predicting whether ``j > i``, beside chance 0.5.

    Attributes
    ----------
    fold_error_rate : ndarray of shape (folds,)
        Share of misclassified test pairs in each outer fold (0.5 = chance).
    fold_C : ndarray of shape (folds,)
        Inverse L2 penalty chosen by inner cross-validation on each fold's training rows.
    n_test_pairs : int
        Test pairs over all folds (the same number in each).
    """

    fold_error_rate: np.ndarray
    fold_C: np.ndarray
    n_test_pairs: int

    @property
    def error_rate(self) -> float:
        """Share of misclassified test pairs over all folds."""
        return float(self.fold_error_rate.mean())

    @property
    def error_rate_sd(self) -> float:
        """Standard deviation (ddof 1) of the error rate over the folds."""
        return float(self.fold_error_rate.std(ddof=1))


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
    params : dict
        The settings of :func:`probe_with_controls` (``seed``, ``folds``, ``protocol``, ...).
    """

    absolute: dict[str, AbsoluteProbe]
    relative: dict[str, RelativeProbe]
    n_rows: int
    n_positions: int
    params: dict = field(default_factory=dict)

    @property
    def subsampled(self) -> bool:
        """Whether only a subsample of the rows was probed."""
        return self.n_rows < self.n_positions

    @property
    def rows_probed(self) -> str:
        """Which rows were probed, in words."""
        if self.subsampled:
            return f"a seeded random subsample of {self.n_rows:,} of {self.n_positions:,} rows"
        return f"all {self.n_positions:,} rows"

    def procedure(self) -> str:
        """How the probes were run, in words: rows, folds, splits, both protocols."""
        p = self.params
        return (
            f"Seed {p['seed']}; {p['folds']}-fold cross-validation on {self.rows_probed}, "
            f"repeated over {p['repeats']} seeded splits (± is the sd over their "
            f"{p['folds'] * p['repeats']} folds; the sd of the splits' means is in the table). "
            f"Absolute probe ({p['protocol']}): {PROTOCOLS[p['protocol']]}. Relative probe: "
            f"{RELATIVE_PROTOCOL}; {p['n_pairs']:,} training pairs per fold. The controls get "
            "the same procedure, their penalties chosen in their own folds."
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per probed table (the table, then its controls): the numbers to cite."""
        import pandas as pd

        rows = []
        for name, a in self.absolute.items():
            r = self.relative[name]
            rows.append(
                {
                    "table": name,
                    "mae": a.mae,
                    "mae_sd_folds": a.mae_sd_folds,
                    "mae_sd_splits": a.mae_sd_splits,
                    "chance_mae": a.chance_mae,
                    "skill": a.skill,
                    "skill_sd_folds": a.skill_sd,
                    "r2": a.r2,
                    "median_alpha": float(np.median(a.fold_alpha)),
                    "error_rate": r.error_rate,
                    "error_rate_sd_folds": r.error_rate_sd,
                    "chance_error_rate": RELATIVE_CHANCE,
                    "median_C": float(np.median(r.fold_C)),
                    "absolute_model": a.model,
                    "test_pairs": r.n_test_pairs,
                }
            )
        return pd.DataFrame(rows)


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
    random_state=seed)``: the same folds, without importing scikit-learn (slower to import than
    all of posviz) for them."""
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
    repeats: int = 2,
    protocol: str = "nested ridge",
    seed: int = 0,
) -> AbsoluteProbe:
    """Linear regression from rows to positions under repeated k-fold cross-validation.

    Parameters
    ----------
    values : ndarray of shape (n_rows, d_model)
    positions : ndarray of int, shape (n_rows,)
        Position index of each row (the regression target).
    folds : int
        Folds of ``KFold(shuffle=True)`` over the rows.
    repeats : int
        Splits into folds, seeded ``seed, seed + 1, ...``: the spread over splits. Each costs
        one eigendecomposition per fold (the d x d or n x n Gram matrix of its training rows).
    protocol : {"nested ridge", "linear"}
        See :data:`PROTOCOLS`. The table is divided by its overall standard deviation first.
    seed : int
        Seeds the first split.

    Notes
    -----
    "nested ridge" is scikit-learn's ``cross_val_predict(RidgeCV(alphas=ALPHAS), ...)`` (to
    ~1e-8 of the largest prediction, tested): within each outer fold the strength with the
    least exact leave-one-out squared error on that fold's training rows, all strengths
    from one eigendecomposition of the training rows' Gram matrix (:func:`_nested_ridge`).

    Examples
    --------
    >>> x = np.c_[np.arange(20.0), np.ones(20)]
    >>> absolute_probe(x, np.arange(20)).mae
    0.0
    """
    (probe,) = _absolute_probes(
        values, [positions], folds=folds, repeats=repeats, protocol=protocol, seed=seed
    )
    return probe


#: How the absolute probe fits, by the names the UI and exports use.
PROTOCOLS = {
    "nested ridge": "ridge regression whose strength alpha is chosen inside each outer fold by "
    "exact leave-one-out error on that fold's training rows over alpha = 10^-3 .. 10^7 (21 "
    "values; scikit-learn's RidgeCV): an unregularised fit interpolates when d_model nears the "
    "training rows, and the table and its controls get the same procedure",
    "linear": "ordinary least squares (minimum-norm when d_model ≥ the training rows), the "
    "protocol of Wang & Chen (2020), for comparison",
}
#: Ridge strengths searched by the nested protocol, on the table divided by its overall
#: standard deviation.
ALPHAS = np.logspace(-3, 7, 21)


def _absolute_probes(
    values: np.ndarray,
    targets: list[np.ndarray],
    *,
    folds: int,
    repeats: int,
    protocol: str,
    seed: int,
) -> list[AbsoluteProbe]:
    """:func:`absolute_probe` of the same rows against several position vectors at once (the
    fits share their factorisations)."""
    if protocol not in PROTOCOLS:
        msg = f"Unknown probe protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}."
        raise ValueError(msg)
    targets = np.asarray(targets)
    x, y = _scaled(values), targets.T.astype(np.float64)
    n_targets = len(targets)
    mae = np.empty((n_targets, repeats, folds))
    chance, alpha = np.empty_like(mae), np.empty_like(mae)
    r2 = np.empty((n_targets, repeats))
    first = np.empty(y.shape)
    for r in range(repeats):
        predicted = np.empty(y.shape)
        for f, (train, test) in enumerate(_folds(len(y), folds, seed + r)):
            if protocol == "linear":
                predicted[test] = _least_squares(x[train], y[train], x[test])
                alpha[:, r, f] = 0.0
            else:
                predicted[test], alpha[:, r, f] = _nested_ridge(x[train], y[train], x[test])
            truth = y[test]
            mae[:, r, f] = np.mean(np.abs(truth - np.round(predicted[test])), axis=0)
            constant = np.round(y[train].mean(axis=0))
            chance[:, r, f] = np.mean(np.abs(truth - constant), axis=0)
        residuals = y - predicted
        r2[:, r] = 1 - np.sum(residuals**2, axis=0) / np.sum((y - y.mean(axis=0)) ** 2, axis=0)
        if r == 0:
            first = predicted
    model = (
        "RidgeCV(alphas=logspace(-3, 7, 21)) per outer fold"
        if protocol == "nested ridge"
        else "LinearRegression()"
    )
    return [
        AbsoluteProbe(
            fold_mae=mae[t],
            fold_chance_mae=chance[t],
            fold_alpha=alpha[t],
            r2=float(r2[t].mean()),
            predictions=first[:, t],
            positions=targets[t],
            model=model,
        )
        for t in range(n_targets)
    ]


def _nested_ridge(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Predictions for `x_test` of ridge with an unpenalised intercept, its strength chosen
    per column of `y_train` from :data:`ALPHAS` by exact leave-one-out error; and the
    strengths.

    One eigendecomposition of the centred training rows' Gram matrix on the smaller side
    serves every strength: with ``H = Xc (Xc'Xc + a I)^-1 Xc' + 11'/n`` the hat matrix, the
    leave-one-out residuals are ``e_i / (1 - H_ii)`` (exact for a fixed quadratic penalty),
    as in scikit-learn's ``RidgeCV`` (ties go to the smaller strength, as there).
    """
    mean, y_mean = x_train.mean(axis=0), y_train.mean(axis=0)
    xc, yc, test = x_train - mean, y_train - y_mean, x_test - mean
    n, d = xc.shape
    # Both sides give H = basis diag(weights) basis' and predictions test_basis diag(1 / (lam
    # + a)) basis' y: primal with the rows in the eigenbasis of Xc'Xc, dual with the
    # eigenvectors of Xc Xc' (then test_basis = X_test Xc' U).
    if d <= n:
        lam, v = scipy.linalg.eigh(xc.T @ xc, driver="evd")
        basis, test_basis = xc @ v, test @ v
    else:
        lam, basis = scipy.linalg.eigh(xc @ xc.T, driver="evd")
        test_basis = (test @ xc.T) @ basis
    lam = np.clip(lam, 0.0, None)
    inverse = 1 / (lam + ALPHAS[:, None])  # (alphas, k)
    weights = inverse if d <= n else lam * inverse
    leverage = (basis**2) @ weights.T + 1 / n  # (n, alphas)
    projected = basis.T @ yc  # (k, targets)
    best = np.empty(yc.shape[1], dtype=int)
    for t in range(yc.shape[1]):
        fitted = basis @ (weights.T * projected[:, t : t + 1])  # (n, alphas)
        loo = (yc[:, t : t + 1] - fitted) / np.clip(1 - leverage, np.finfo(float).eps, None)
        best[t] = np.argmin(np.mean(loo**2, axis=0))
    predicted = test_basis @ (inverse[best].T * projected)
    return predicted + y_mean, ALPHAS[best]


def _least_squares(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    """Predictions of ordinary least squares with an intercept (minimum-norm when the training
    rows do not determine it): scikit-learn's ``LinearRegression``."""
    mean, y_mean = x_train.mean(axis=0), y_train.mean(axis=0)
    coef = np.linalg.lstsq(x_train - mean, y_train - y_mean, rcond=None)[0]
    return (x_test - mean) @ coef + y_mean


#: Inverse L2 penalties the relative probe's inner cross-validation chooses from, and its folds.
C_GRID = (1e-3, 1e-2, 1e-1, 1.0)
INNER_FOLDS = 3
#: How the relative probe fits, for the UI and exports.
RELATIVE_PROTOCOL = (
    "L2 logistic regression on [e_i ; e_j] predicting j > i; pairs drawn within folds, so no "
    "test pair contains a row seen in training; C chosen inside each outer fold by "
    f"{INNER_FOLDS}-fold inner cross-validation on its training rows over C = "
    + ", ".join(f"{c:g}" for c in C_GRID)
)


def relative_probe(
    values: np.ndarray,
    positions: np.ndarray,
    *,
    folds: int = 5,
    n_pairs: int = 2000,
    seed: int = 0,
) -> RelativeProbe:
    """Logistic regression on concatenated pairs ``[e_i ; e_j]`` predicting ``j > i``.

    The rows are split into `folds` folds (``KFold(shuffle=True)``); for each fold, `n_pairs`
    pairs of distinct training rows are sampled to fit, and ``n_pairs / (folds - 1)`` pairs of
    distinct held-out rows to test, so no test pair contains a row seen in training. The
    penalty is chosen per outer fold the same way one level down: its training rows are split
    into :data:`INNER_FOLDS` folds, pairs drawn within them, and the C of :data:`C_GRID` with
    the fewest inner validation errors wins (ties: the smaller C).

    Parameters
    ----------
    values : ndarray of shape (n_rows, d_model)
    positions : ndarray of int, shape (n_rows,)
    folds : int
    n_pairs : int
        Training pairs per fold (inner and outer).
    seed : int
        Seeds the folds and the pairs.

    Notes
    -----
    Each fit is scikit-learn's ``LogisticRegression(C=C, tol=1e-3)`` objective on the table
    divided by its overall standard deviation, minimised by L-BFGS in float32 to its lbfgs
    solver's stop (see :func:`_fit_pair_logistic`), all fits of one C at once.

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
    n_test = max(1, n_pairs // (folds - 1))
    inner_train, inner_test, train_pairs, test_pairs = [], [], [], []
    for f, (train, test) in enumerate(_folds(len(x), folds, seed)):
        for fit, check in _folds(len(train), INNER_FOLDS, seed + 1 + f):
            inner_train.append(_pairs(train[fit], n_pairs, rng))
            inner_test.append(_pairs(train[check], max(1, n_pairs // (INNER_FOLDS - 1)), rng))
        train_pairs.append(_pairs(train, n_pairs, rng))
        test_pairs.append(_pairs(test, n_test, rng))
    inner = np.array([_pair_errors(x, positions, inner_train, inner_test, C=C) for C in C_GRID])
    chosen = np.array(C_GRID)[inner.reshape(len(C_GRID), folds, -1).mean(axis=2).argmin(axis=0)]
    errors = np.empty(folds)
    for C in np.unique(chosen):
        which = np.flatnonzero(chosen == C)
        errors[which] = _pair_errors(
            x, positions, [train_pairs[w] for w in which], [test_pairs[w] for w in which], C=C
        )
    return RelativeProbe(fold_error_rate=errors, fold_C=chosen, n_test_pairs=folds * n_test)


def _pair_errors(
    x: np.ndarray,
    positions: np.ndarray,
    train_pairs: list[tuple[np.ndarray, np.ndarray]],
    test_pairs: list[tuple[np.ndarray, np.ndarray]],
    *,
    C: float,
) -> np.ndarray:
    """Test error rate of one pair logistic regression per (train, test) pair set."""
    i, j = np.transpose(train_pairs, (1, 0, 2))
    coef, intercept = _fit_pair_logistic(x, i, j, positions[j] > positions[i], C=C)
    i, j = np.transpose(test_pairs, (1, 0, 2))
    predicted = _pair_scores(x, coef, intercept, i, j) > 0
    return np.mean(predicted != (positions[j] > positions[i]), axis=1)


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
    2011): a few products with the table, far cheaper than a full eigendecomposition of the
    d x d Gram matrix. Approximate, which is enough to steer an optimiser.
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
    (d x 2 folds) products, which read the table once for all folds (reading it is the
    per-step cost), and the stop holds for each fold. Returns the (d_model, 2 folds) weights and
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


@records_params
def probe_with_controls(
    values: np.ndarray,
    *,
    seed: int = 0,
    max_rows: int = 2048,
    folds: int = 5,
    repeats: int = 2,
    protocol: str = "nested ridge",
    n_pairs: int = 2000,
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
    folds, repeats, protocol, n_pairs
        See :func:`absolute_probe` and :func:`relative_probe`.

    Notes
    -----
    The row-shuffled control keeps the rows but assigns them to random positions (a seeded
    permutation of the positions; the folds and pairs are the table's, so the same rows are
    held out); the Gaussian control has the same shape and the table's overall standard
    deviation. Each gets the same procedure as the table, its own penalties chosen inside
    its own folds.

    Examples
    --------
    >>> from posviz.simulate import sinusoidal_table
    >>> r = probe_with_controls(sinusoidal_table(64, 32), n_pairs=300)
    >>> r.absolute["table"].skill > 0.9 > abs(r.absolute["Gaussian"].skill)
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
    # Below 2**31: the probes add split and fold numbers to it (KFold takes < 2**32).
    options = {"folds": folds, "seed": int(probe_seed) % 2**31}
    absolute = {"repeats": repeats, "protocol": protocol, **options}
    # The row-shuffled control fits the table's rows, so its absolute probe shares the table's.
    table, row_shuffled = _absolute_probes(x, [positions, shuffled], **absolute)
    relative = {"n_pairs": n_pairs, **options}
    return ProbeReport(
        absolute={
            "table": table,
            "row-shuffled": row_shuffled,
            "Gaussian": absolute_probe(gaussian, positions, **absolute),
        },
        relative={
            "table": relative_probe(x, positions, **relative),
            "row-shuffled": relative_probe(x, shuffled, **relative),
            "Gaussian": relative_probe(gaussian, positions, **relative),
        },
        n_rows=len(x),
        n_positions=n,
    )
