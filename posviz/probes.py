"""How much absolute and relative position a table encodes: linear probes with controls.

The protocol of Wang & Chen (EMNLP 2020), "What do position embeddings learn?", with two
guards: every probe is also run on a row-shuffled copy and on an i.i.d. Gaussian table of the
same shape (neither holds position information), and the relative-order probe is tested on
pairs of positions never seen in training (pairs that share positions with the training pairs
let a probe memorise one score per row, which a Gaussian table with d >= n allows).
"""

from __future__ import annotations

import functools
import hashlib
import platform
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError
from threadpoolctl import threadpool_info, threadpool_limits

from posviz import _disk, _ridge, _settings
from posviz._params import SEED, Bound, bounded, records_params
from posviz.embedding import MIN_POSITIONS

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ABOUT",
    "ALPHAS",
    "CONTROLS",
    "C_GRID",
    "DEFINITIONS",
    "GAUSSIAN_CACHE",
    "GAUSSIAN_REUSE",
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
    "skill_text",
]

#: The probed tables, in display order: the table itself and its two no-information controls.
CONTROLS = ("table", "row-shuffled", "Gaussian")
#: What the probes answer, for the page and the report.
ABOUT = (
    "How much absolute and relative position a linear read-out recovers (Wang & Chen, "
    "EMNLP 2020), beside the same probe on two tables without position information: the rows "
    "shuffled to random positions, and i.i.d. Gaussian rows of the same shape (every probed "
    "table is divided by its overall standard deviation, so the table's scale does not matter)."
)
#: The relative probe's chance error rate: a coin toss on the order of a pair.
RELATIVE_CHANCE = 0.5
#: What each headline number means and its chance level (the page's tooltips, the report).
DEFINITIONS = {
    "mae": "Absolute probe: mean |round(predicted) − p| of a linear regression from row to "
    "position p, predicted out of fold, mean ± sd over the folds of the repeated splits. "
    "Chance: the same for the constant predictor (the training fold's mean position, ≈ n/4 "
    "for evenly spread positions). Skill = 1 − MAE / chance MAE: 1 perfect, 0 no better "
    "than chance. For the controls: the mean over their draws (20 by default) and their central "
    "95% (2.5th to 97.5th percentile over draws).",
    "r2": "Absolute probe: R² of the unrounded out-of-fold predictions (1 = perfect, 0 = as "
    "good as predicting the mean, < 0 worse), mean over the repeated splits.",
    "error_rate": "Relative probe: share of held-out pairs (i, j) misclassified by a logistic "
    "regression on [e_i ; e_j] predicting j > i, mean ± sd over the folds. Pairs are drawn "
    "within folds of positions, so no test pair contains a row seen in training. Chance 0.5.",
}


def skill_text(value: float) -> str:
    """A skill score as the page, its chart and the report write it: three decimals, a hair
    below zero written 0.000 (not -0.000).

    Examples
    --------
    >>> skill_text(0.99325), skill_text(-0.00044), skill_text(-0.00062)
    ('0.993', '0.000', '-0.001')
    """
    return f"{round(value, 3) + 0.0:.3f}"  # + 0.0: round(-0.0004, 3) is -0.0


#: Gaussian controls kept for reuse: each holds its draws' predictions and positions, 2 x 20 x
#: 2048 numbers by default (0.7 MB); at the bounds' extreme (100 draws of 65,536 rows) 105 MB,
#: less than the probes' own fits of such a table take while they run.
GAUSSIAN_CACHE = 8
#: Why the Gaussian control costs nothing after its first run, for the page and exports.
GAUSSIAN_REUSE = (
    "The Gaussian control depends only on the table's shape, the seed and the probe settings "
    "(each table is divided by its overall sd, so not even the scale counts): it is computed "
    f"once per shape, settings and seed, and reused for every table, session and report: the "
    f"last {GAUSSIAN_CACHE} kept in memory, and on disk (POSVIZ_RESULTS_CACHE) for later "
    "processes, read back bit for bit and only by the same posviz code, numpy, scipy and BLAS."
)
#: Why :meth:`ProbeReport.to_frame` leaves some cells empty, for whoever shows it.
BLANK_CELLS = (
    "Blank cells: the table has no range over draws (it is probed as it is, once per split); "
    "a control has no sd over folds or splits (its numbers are means over its draws, with "
    "their central 95%)."
)


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
    control_draws: dict[str, list[AbsoluteProbe]]
    params: dict = field(default_factory=dict)

    @property
    def n_control_draws(self) -> int:
        """Draws of each control the absolute probe ran on."""
        return len(self.control_draws["Gaussian"])

    def control_summary(self, name: str, measure: str = "skill") -> tuple[float, float, float]:
        """(mean, 2.5th, 97.5th percentile) of an absolute probe measure over a control's draws.

        `measure` is an attribute of :class:`AbsoluteProbe`: "skill", "mae", "r2", ...
        """
        values = np.array([getattr(p, measure) for p in self.control_draws[name]])
        low, high = np.percentile(values, [2.5, 97.5])
        return float(values.mean()), float(low), float(high)

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

    def procedure_steps(self) -> list[str]:
        """How the probes were run, one step a sentence or two: the rows and folds, the
        absolute probe, the relative probe, the controls."""
        p = self.params
        return [
            f"Seed {p['seed']}; {p['folds']}-fold cross-validation on {self.rows_probed}, "
            f"repeated over {p['repeats']} seeded splits (for the table, ± is the sd over their "
            f"{p['folds'] * p['repeats']} folds; the sd of the splits' means is in the table).",
            f"Absolute probe ({p['protocol']}): {PROTOCOLS[p['protocol']]}.",
            f"Relative probe: {RELATIVE_PROTOCOL}; {p['n_pairs']:,} training pairs per fold. "
            "The controls get the same procedure, their penalties chosen in their own folds.",
            self.controls_procedure(),
        ]

    def procedure(self) -> str:
        """How the probes were run, in words: :meth:`procedure_steps` in one paragraph."""
        return " ".join(self.procedure_steps())

    def controls_procedure(self) -> str:
        """How the controls were drawn and summarised, in words."""
        n = self.n_control_draws
        return (
            f"Controls over {n} draws each: the absolute probe's numbers for a control are the "
            f"mean over its draws, with their central 95% (2.5th to 97.5th percentile over the "
            f"draws, not over folds). Row-shuffled: the table's rows at {n} seeded random "
            "positions (the folds stay, so the draws share the table's fits' decompositions). "
            "Gaussian: one i.i.d. standard Gaussian table of the same shape, its rows at "
            f"{n} seeded random positions (its rows are exchangeable, so each draw is a Gaussian "
            "table; the draws share its rows). The relative probe's controls are their first "
            f"draw (± over its folds). {GAUSSIAN_REUSE}"
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per probed table (the table, then its controls): the numbers to cite."""
        import pandas as pd

        rows = []
        for name, a in self.absolute.items():
            r = self.relative[name]
            if name in self.control_draws:  # means over the draws, and their central 95%
                draws = self.control_draws[name]
                mae, mae_low, mae_high = self.control_summary(name, "mae")
                skill, skill_low, skill_high = self.control_summary(name, "skill")
                spread = {"mae_sd_folds": np.nan, "mae_sd_splits": np.nan, "skill_sd_folds": np.nan}
                r2 = float(np.mean([p.r2 for p in draws]))
                chance = float(np.mean([p.chance_mae for p in draws]))
                alphas = np.concatenate([p.fold_alpha.ravel() for p in draws])
            else:
                mae, skill, r2, chance, alphas = a.mae, a.skill, a.r2, a.chance_mae, a.fold_alpha
                mae_low = mae_high = skill_low = skill_high = np.nan
                spread = {
                    "mae_sd_folds": a.mae_sd_folds,
                    "mae_sd_splits": a.mae_sd_splits,
                    "skill_sd_folds": a.skill_sd,
                }
                draws = [a]
            rows.append(
                {
                    "table": name,
                    "draws": len(draws),
                    "mae": mae,
                    "mae_sd_folds": spread["mae_sd_folds"],
                    "mae_sd_splits": spread["mae_sd_splits"],
                    "mae_draws_low": mae_low,
                    "mae_draws_high": mae_high,
                    "chance_mae": chance,
                    "skill": skill,
                    "skill_sd_folds": spread["skill_sd_folds"],
                    "skill_draws_low": skill_low,
                    "skill_draws_high": skill_high,
                    "r2": r2,
                    "median_alpha": float(np.median(alphas)),
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
    from one eigendecomposition of the training rows' Gram matrix
    (:func:`posviz._ridge.nested_ridge`).

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
    fan_out: Callable[..., Iterable[Any]] = map,
) -> list[AbsoluteProbe]:
    """:func:`absolute_probe` of the same rows against several position vectors at once (the
    fits share their factorisations).

    The folds' fits are independent: `fan_out` (``map`` by default; an executor's ``map``
    runs them in its workers) makes them, in order.
    """
    if protocol not in PROTOCOLS:
        msg = f"Unknown probe protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}."
        raise ValueError(msg)
    stacked = np.asarray(targets)
    x, y = _scaled(values), stacked.T.astype(np.float64)
    n_targets = len(stacked)
    splits = [_folds(len(y), folds, seed + r) for r in range(repeats)]

    def fit(split: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray | float]:
        train, test = split
        if protocol == "linear":
            return _ridge.least_squares(x[train], y[train], x[test]), 0.0
        return _ridge.nested_ridge(x[train], y[train], x[test], ALPHAS)

    fits = iter(fan_out(fit, [split for repeat in splits for split in repeat]))
    mae = np.empty((n_targets, repeats, folds))
    chance, alpha = np.empty_like(mae), np.empty_like(mae)
    r2 = np.empty((n_targets, repeats))
    first = np.empty(y.shape)
    for r, repeat in enumerate(splits):
        predicted = np.empty(y.shape)
        for f, (train, test) in enumerate(repeat):
            predicted[test], alpha[:, r, f] = next(fits)
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
            positions=stacked[t],
            model=model,
        )
        for t in range(n_targets)
    ]


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
    solver's stop (see :func:`posviz._ridge.fit_pair_logistic`), all fits of one C at once.

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
    # Every fit steers its optimiser by the same directions of the rows: found once.
    steep = _ridge.steep_directions(x, _ridge.STEEP_DIRECTIONS)
    inner = np.array(
        [_pair_errors(x, positions, inner_train, inner_test, C=C, steep=steep) for C in C_GRID]
    )
    chosen = np.array(C_GRID)[inner.reshape(len(C_GRID), folds, -1).mean(axis=2).argmin(axis=0)]
    errors = np.empty(folds)
    for C in np.unique(chosen):
        which = np.flatnonzero(chosen == C)
        pairs = [train_pairs[w] for w in which], [test_pairs[w] for w in which]
        errors[which] = _pair_errors(x, positions, *pairs, C=C, steep=steep)
    return RelativeProbe(fold_error_rate=errors, fold_C=chosen, n_test_pairs=folds * n_test)


def _pair_errors(
    x: np.ndarray,
    positions: np.ndarray,
    train_pairs: list[tuple[np.ndarray, np.ndarray]],
    test_pairs: list[tuple[np.ndarray, np.ndarray]],
    *,
    C: float,
    steep: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """Test error rate of one pair logistic regression per (train, test) pair set."""
    i, j = np.transpose(train_pairs, (1, 0, 2))
    labels = positions[j] > positions[i]
    coef, intercept = _ridge.fit_pair_logistic(x, i, j, labels, C=C, steep=steep)
    i, j = np.transpose(test_pairs, (1, 0, 2))
    predicted = _ridge.pair_scores(x, coef, intercept, i, j) > 0
    return np.mean(predicted != (positions[j] > positions[i]), axis=1)


def _pairs(rows: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`n` pairs ``(i, j)`` of distinct `rows`, uniformly."""
    i = rng.integers(len(rows), size=n)
    j = (i + rng.integers(1, len(rows), size=n)) % len(rows)
    return rows[i], rows[j]


@records_params
@bounded(
    seed=SEED,
    max_rows=Bound(MIN_POSITIONS, 65536),
    folds=Bound(2, 20),
    repeats=Bound(2, 10),
    n_pairs=Bound(100, 20_000),
    n_control_draws=Bound(1, 100),
)
def probe_with_controls(
    values: np.ndarray,
    *,
    seed: int = 0,
    max_rows: int = 2048,
    folds: int = 5,
    repeats: int = 2,
    protocol: str = "nested ridge",
    n_pairs: int = 2000,
    n_control_draws: int = 20,
) -> ProbeReport:
    """Absolute and relative probes on a table, row-shuffled copies, and a Gaussian table.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    seed : int
        One seed for everything random: the row subsample, the shuffle, the Gaussian table,
        the folds and the pairs. The three tables are probed with the same folds and pairs.
    max_rows : int
        Probe a seeded random subsample of this many rows (kept in position order) when the
        table is longer, so long vocabularies stay responsive.
    folds : int
        Folds of the rows (``KFold(shuffle=True)``), for both probes.
    repeats : int
        The absolute probe's folds are drawn this many times (seeds seed, seed + 1, ...); its
        ± is the sd over all their folds. Each split costs one eigendecomposition per fold.
    protocol : {"nested ridge", "linear"}
        The absolute probe's fit: see :data:`PROTOCOLS`.
    n_pairs : int
        The relative probe's training pairs per fold (:func:`relative_probe`).
    n_control_draws : int
        Draws of each control the absolute probe runs on (summarised by their mean and
        central 95%); the relative probe runs on the first.

    Notes
    -----
    The row-shuffled control keeps the rows but assigns them to random positions (a seeded
    permutation of the positions; the folds and pairs are the table's, so the same rows are
    held out); the Gaussian control is a standard Gaussian table of the same shape (every
    probe divides its table by the overall standard deviation first). Each gets the same
    procedure as the table, its own penalties chosen inside its own folds. The Gaussian
    control depends on nothing but the shape and these settings: it is computed once for
    them and kept (the last :data:`GAUSSIAN_CACHE`, read-only) for any table of that shape.

    A control's draws are position vectors for the same rows, so the absolute probe fits them
    all from the rows' decompositions, one per fold, reused across ridge strengths and
    targets: the row-shuffled draws share the table's, and the Gaussian draws assign one
    Gaussian table's exchangeable rows to random positions (each draw is distributed as a
    Gaussian table; they share its rows). So 2 x 20 draws cost two tables' decompositions.

    Examples
    --------
    >>> from posviz.simulate import sinusoidal_table
    >>> r = probe_with_controls(sinusoidal_table(64, 32), n_pairs=300, n_control_draws=3)
    >>> r.absolute["table"].skill > 0.9 > abs(r.absolute["Gaussian"].skill)
    True
    """
    positions, shuffles, _, probe_seed = _draws(len(values), seed, max_rows, n_control_draws)
    x = np.asarray(values[positions], dtype=np.float64)  # only the probed rows converted
    options: dict[str, Any] = {"folds": folds, "seed": probe_seed}
    absolute = {"repeats": repeats, "protocol": protocol, **options}
    relative = {"n_pairs": n_pairs, **options}
    # One BLAS thread per fit: the fits are many mid-sized products and 768 x 768
    # decompositions, which a second thread's hand-offs slow down (default table, 2 cores:
    # 4.45 -> 3.70 s on a quiet machine, 10.8 -> 4.1 s with the other core busy). The
    # independent parts run two at a time instead, each as it would alone (the same numbers,
    # bit for bit): a second core is then busy for whole fits, not for each product's half.
    # The longest parts are queued first, then the table's absolute probe a fold at a time,
    # so its folds fill whichever worker the others leave free.
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(2) as pool:
        # Keyword arguments in one order: the kept Gaussian controls are keyed by the call.
        gaussian = pool.submit(
            _gaussian_control,
            *values.shape,
            seed=seed,
            max_rows=max_rows,
            folds=folds,
            repeats=repeats,
            protocol=protocol,
            n_pairs=n_pairs,
            n_control_draws=n_control_draws,
        )
        shuffled_fit = pool.submit(relative_probe, x, shuffles[0], **relative)
        table_fit = pool.submit(relative_probe, x, positions, **relative)
        # The row-shuffled control fits the table's rows: its absolute probe shares the table's.
        table, *row_shuffled = _absolute_probes(
            x, [positions, *shuffles], fan_out=pool.map, **absolute
        )
        gaussians, gaussian_fit = gaussian.result()
        fitted = {
            "table": table_fit.result(),
            "row-shuffled": shuffled_fit.result(),
            "Gaussian": gaussian_fit,
        }
    return ProbeReport(
        absolute={"table": table, "row-shuffled": row_shuffled[0], "Gaussian": gaussians[0]},
        relative=fitted,
        control_draws={"row-shuffled": row_shuffled, "Gaussian": list(gaussians)},
        n_rows=len(x),
        n_positions=len(values),
    )


def _draws(
    n_positions: int, seed: int, max_rows: int, n_control_draws: int
) -> tuple[np.ndarray, list[np.ndarray], np.random.Generator, int]:
    """What the seed decides before a value is read: the probed positions, the row-shuffled
    draws, the generator the Gaussian control continues from, and the probes' seed."""
    if n_control_draws < 1:
        msg = f"n_control_draws must be at least 1, got {n_control_draws}."
        raise ValueError(msg)
    subsample_seed, control_seed, probe_seed = np.random.SeedSequence(seed).generate_state(3)
    positions = np.arange(n_positions)
    if n_positions > max_rows:
        chosen = np.random.default_rng(subsample_seed).choice(n_positions, max_rows, replace=False)
        positions = np.sort(chosen)
    rng = np.random.default_rng(control_seed)
    shuffles = [rng.permutation(positions) for _ in range(n_control_draws)]
    # Below 2**31: the probes add split and fold numbers to it (KFold takes < 2**32).
    return positions, shuffles, rng, int(probe_seed) % 2**31


@functools.lru_cache(maxsize=GAUSSIAN_CACHE)
def _gaussian_control(
    n_positions: int, d_model: int, **settings: Any
) -> tuple[tuple[AbsoluteProbe, ...], RelativeProbe]:
    """The Gaussian control of :func:`probe_with_controls`, read-only (every caller shares
    it): kept in memory, else read from the results folder, else computed and stored there."""
    key = _control_key(n_positions, d_model, settings)
    store = _results_store()
    stored = store.read(_KIND, *key) if store else None
    control = _control_from_bytes(stored, key) if stored else None
    if control is None:
        control = _compute_gaussian_control(n_positions, d_model, **settings)
        if store:
            store.write(_KIND, _control_to_bytes(control, key), *key)
    draws, relative = control
    return tuple(_read_only(p) for p in draws), _read_only(relative)


#: Bytes of Gaussian controls kept on disk (each 0.2-0.7 MB at the app's defaults).
RESULTS_CACHE_BYTES = 64 * 2**20
_KIND = "gaussian-control"


def _results_store() -> _disk.Store | None:
    folder = _settings.results_cache_dir()
    return _disk.Store(folder, (_KIND,), RESULTS_CACHE_BYTES) if folder else None


@functools.cache
def _code_and_libraries() -> tuple[str, ...]:
    """What a stored control's numbers depend on besides its settings: this code, numpy's
    generator and the BLAS and LAPACK that computed it (their last bits differ by kernel)."""
    import scipy

    code = hashlib.sha256(Path(__file__).read_bytes() + Path(_ridge.__file__).read_bytes())
    blas = sorted(
        f"{i['internal_api']} {i['version']} {i.get('architecture')}" for i in threadpool_info()
    )
    return (code.hexdigest(), np.__version__, scipy.__version__, platform.machine(), *blas)


def _control_key(n_positions: int, d_model: int, settings: dict[str, Any]) -> tuple[str, ...]:
    shape = f"{n_positions} x {d_model}"
    return (shape, repr(sorted(settings.items())), *_code_and_libraries())


def _control_to_bytes(
    control: tuple[tuple[AbsoluteProbe, ...], RelativeProbe], key: tuple[str, ...]
) -> bytes:
    """The control as safetensors (no pickle), each absolute field stacked over the draws."""
    draws, relative = control
    arrays = {f: np.stack([np.asarray(getattr(d, f)) for d in draws]) for f in _ABSOLUTE_ARRAYS}
    arrays |= {f"relative.{f}": np.asarray(getattr(relative, f)) for f in _RELATIVE_ARRAYS}
    texts = {"key": "\0".join(key), "model": draws[0].model}
    arrays |= {name: np.frombuffer(text.encode(), np.uint8) for name, text in texts.items()}
    return safetensors.numpy.save(arrays)


_ABSOLUTE_ARRAYS = ("fold_mae", "fold_chance_mae", "fold_alpha", "r2", "predictions", "positions")
_RELATIVE_ARRAYS = ("fold_error_rate", "fold_C", "n_test_pairs")


def _control_from_bytes(
    data: bytes, key: tuple[str, ...]
) -> tuple[tuple[AbsoluteProbe, ...], RelativeProbe] | None:
    """What :func:`_control_to_bytes` wrote for `key`, or None: another key, or not such a file."""
    try:
        arrays = safetensors.numpy.load(data)
        if bytes(arrays.pop("key")).decode() != "\0".join(key):
            return None
        model = bytes(arrays.pop("model")).decode()
        draws = tuple(
            AbsoluteProbe(
                **{f: arrays[f][i] for f in _ABSOLUTE_ARRAYS if f != "r2"},
                r2=float(arrays["r2"][i]),
                model=model,
            )
            for i in range(len(arrays["r2"]))
        )
        relative = RelativeProbe(
            fold_error_rate=arrays["relative.fold_error_rate"],
            fold_C=arrays["relative.fold_C"],
            n_test_pairs=int(arrays["relative.n_test_pairs"]),
        )
    except (SafetensorError, KeyError, TypeError, ValueError, UnicodeDecodeError):
        return None
    return draws, relative


def _compute_gaussian_control(
    n_positions: int,
    d_model: int,
    *,
    seed: int,
    max_rows: int,
    folds: int,
    repeats: int,
    protocol: str,
    n_pairs: int,
    n_control_draws: int,
) -> tuple[tuple[AbsoluteProbe, ...], RelativeProbe]:
    """The Gaussian control of :func:`probe_with_controls`, computed: its absolute probe's
    draws and its relative probe.

    It needs no value of the table: a standard Gaussian table has the table's shape, and
    every probe divides its table by the overall sd first (a Gaussian of the table's sd would
    only differ from this one in the last bit of some values, after that division).
    """
    positions, _, rng, probe_seed = _draws(n_positions, seed, max_rows, n_control_draws)
    gaussian = rng.standard_normal((len(positions), d_model))
    # The Gaussian table's rows as they are, then at random positions.
    placements = [positions, *(rng.permutation(positions) for _ in range(n_control_draws - 1))]
    with threadpool_limits(1, user_api="blas"):
        draws = _absolute_probes(
            gaussian, placements, folds=folds, repeats=repeats, protocol=protocol, seed=probe_seed
        )
        relative = relative_probe(
            gaussian, positions, n_pairs=n_pairs, folds=folds, seed=probe_seed
        )
    return tuple(draws), relative


_Probe = TypeVar("_Probe", AbsoluteProbe, RelativeProbe)


def _read_only(result: _Probe) -> _Probe:
    """`result`, its arrays made read-only: it is shared."""
    for value in vars(result).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return result
