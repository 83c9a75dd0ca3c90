"""Which positions are unusual: per-position statistics, robust outlier flags, change points."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
from numpy.lib.stride_tricks import sliding_window_view

from posviz._linalg import gram_of_blocks, mean_row, row_blocks
from posviz._params import SEED, Bound, bounded, records_params
from posviz.export import column_label
from posviz.rows import RowLabels

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFINITIONS",
    "BoundarySummary",
    "ChangePoints",
    "Outliers",
    "PositionStatistics",
    "boundary_summary",
    "change_points",
    "hampel",
    "outliers",
    "position_statistics",
]


#: 1.4826 * MAD estimates the standard deviation of normally distributed data.
MAD_TO_SD = 1.4826
#: The statistics that flag outliers and the score flags are set on, in words (the page's
#: tooltips, the report).
DEFINITIONS = {
    "norm": "‖e_p‖: Euclidean norm of the row.",
    "neighbour_cos": "max(cos(e_p, e_p-1), cos(e_p, e_p+1)): similarity to the more similar "
    "neighbour, so a row is odd only when it is unlike both neighbours (a row next to an odd "
    "row keeps its other neighbour).",
    "dist_to_mean": "‖e_p − ē‖: distance to the mean row ē.",
    "residual_norm": "‖(e_p − ē)(I − V_k V_kᵀ)‖: norm of the centred row after removing its "
    "projection on the top-k principal directions V_k: what the smooth low-rank structure "
    "does not explain.",
    "robust_z": f"Robust z = (x − window median) / ({MAD_TO_SD} · MAD of the window): the "
    f"Hampel identifier. {MAD_TO_SD} · MAD estimates the standard deviation of normal data.",
}

#: A statistic that varies less than this share of its typical size inside a window is
#: treated as constant: float32 rounding alone is ~1e-7 relative.
RELATIVE_FLOOR = 1e-6


@dataclass(frozen=True)
class PositionStatistics:
    """Per-position curves of a table.

    Attributes
    ----------
    norm : ndarray of shape (n_positions,)
    cos_prev : ndarray of shape (n_positions,)
        cos(e_p, e_p-1); NaN at p = 0.
    cos_next : ndarray of shape (n_positions,)
        cos(e_p, e_p+1); NaN at the last position.
    dist_to_mean : ndarray of shape (n_positions,)
    residual_norm : ndarray of shape (n_positions,) or None
        Norm of the centred row outside its top `n_directions_removed` principal directions;
        None when ``n_directions_removed == 0``.
    params : dict
        The settings of :func:`position_statistics` (``n_directions_removed``).
    """

    norm: np.ndarray
    cos_prev: np.ndarray
    cos_next: np.ndarray
    dist_to_mean: np.ndarray
    residual_norm: np.ndarray | None
    params: dict = field(default_factory=dict)

    @property
    def neighbour_cos(self) -> np.ndarray:
        """ndarray of shape (n_positions,): cosine to the more similar neighbour."""
        return np.fmax(self.cos_prev, self.cos_next)

    def flagging_curves(self) -> dict[str, np.ndarray]:
        """The curves outliers are flagged on, by their names in :data:`DEFINITIONS`."""
        curves = {
            "norm": self.norm,
            "neighbour_cos": self.neighbour_cos,
            "dist_to_mean": self.dist_to_mean,
        }
        if self.residual_norm is not None:
            curves["residual_norm"] = self.residual_norm
        return curves


@records_params
@bounded(n_directions_removed=Bound(0, None))
def position_statistics(values: np.ndarray, *, n_directions_removed: int = 0) -> PositionStatistics:
    """Norm, neighbour cosines, distance to the mean row and (optionally) residual norm.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    n_directions_removed : int
        Principal directions (of the mean-centred table) to remove for `residual_norm`;
        0 skips it.

    Notes
    -----
    Computed in float64, in blocks of rows (:func:`posviz._linalg.row_blocks`) so a large
    float32 table is never copied whole. The principal directions are the top eigenvectors
    of the d x d Gram matrix of the centred table (``scipy.linalg.eigh`` with
    ``subset_by_index``), and the residual is formed explicitly (not as a difference of
    squared norms, which would lose the digits of small residuals).

    Examples
    --------
    >>> s = position_statistics(np.array([[3.0, 4.0], [0.0, 1.0], [0.0, 2.0]]))
    >>> s.norm.tolist(), s.cos_next.tolist()
    ([5.0, 1.0, 2.0], [0.8, 1.0, nan])
    """
    n, d = values.shape
    if not 0 <= n_directions_removed < min(n, d):
        msg = (
            f"n_directions_removed must be in 0..{min(n, d) - 1} for a {n} x {d} table, "
            f"got {n_directions_removed}."
        )
        raise ValueError(msg)
    mean = mean_row(values, center=True)
    norms: list[np.ndarray] = []
    dist: list[np.ndarray] = []
    dots: list[np.ndarray] = []
    previous = None  # last row of the previous block, for the cosine across the block edge
    for block in row_blocks(values):
        norms.append(np.linalg.norm(block, axis=1))
        dist.append(np.linalg.norm(block - mean, axis=1))
        rows = block if previous is None else np.vstack([previous, block])
        dots.append(np.einsum("ij,ij->i", rows[1:], rows[:-1]))
        previous = block[-1:]
    norm = np.concatenate(norms)
    safe = np.where(norm > 0, norm, 1.0)
    cos = np.concatenate(dots) / (safe[1:] * safe[:-1])
    nan = np.array([np.nan])
    residual = None
    if n_directions_removed:
        gram = gram_of_blocks(row_blocks(values, mean), d)
        _, directions = scipy.linalg.eigh(gram, subset_by_index=[d - n_directions_removed, d - 1])
        residual = np.concatenate(
            [
                np.linalg.norm(c - (c @ directions) @ directions.T, axis=1)
                for c in row_blocks(values, mean)
            ]
        )
    return PositionStatistics(
        norm=norm,
        cos_prev=np.concatenate([nan, cos]),
        cos_next=np.concatenate([cos, nan]),
        dist_to_mean=np.concatenate(dist),
        residual_norm=residual,
    )


def hampel(signal: np.ndarray, *, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Robust z-scores of a curve against its sliding-window median (the Hampel identifier).

    Position p is compared with the ``2 * window + 1`` positions centred on it; near the ends
    the window is shifted inward so it keeps its size (or is the whole curve if shorter).
    ``z = (x_p - median) / (1.4826 * MAD)``, with the scale floored at ``1e-6`` of the curve's
    median absolute value so rounding noise on a constant curve never scores.

    Parameters
    ----------
    signal : ndarray of shape (n_positions,)
        NaN-free.
    window : int
        Half-width of the window, >= 1.

    Returns
    -------
    z : ndarray of shape (n_positions,)
    median : ndarray of shape (n_positions,)
        The window median each position is compared with.

    Examples
    --------
    >>> z, med = hampel(np.array([1.0, 2, 1, 2, 1, 9, 1, 2, 1]), window=2)
    >>> med.tolist()
    [1.0, 1.0, 1.0, 2.0, 1.0, 2.0, 1.0, 1.0, 1.0]
    >>> round(float(z[5]), 3)  # window [2, 1, 9, 1, 2]: median 2, MAD 1
    4.721
    """
    if window < 1:
        msg = f"window must be >= 1 position, got {window}."
        raise ValueError(msg)
    n = len(signal)
    size = min(2 * window + 1, n)
    windows = sliding_window_view(signal, size)
    start = np.clip(np.arange(n) - size // 2, 0, n - size)
    median = np.median(windows, axis=1)[start]
    mad = np.median(np.abs(windows - np.median(windows, axis=1)[:, None]), axis=1)[start]
    floor = RELATIVE_FLOOR * np.median(np.abs(signal))
    scale = np.maximum(MAD_TO_SD * mad, floor)
    deviation = signal - median
    z = np.divide(deviation, scale, out=np.zeros(n), where=scale > 0)
    return z, median


@dataclass(frozen=True)
class Outliers:
    """Positions whose statistics stand out from their neighbourhood (Hampel identifier).

    Attributes
    ----------
    statistics : tuple of str
        Names of the curves, in row order of the arrays below.
    values : ndarray of shape (n_statistics, n_positions)
    median : ndarray of shape (n_statistics, n_positions)
        Sliding-window median each value is compared with.
    z : ndarray of shape (n_statistics, n_positions)
        Robust z-score ``(value - median) / (1.4826 * MAD)``.
    flagged : ndarray of bool, shape (n_statistics, n_positions)
        ``abs(z) > threshold``.
    params : dict
        The settings of :func:`outliers` (``hampel_window``, ``threshold``) and of the
        statistics flagged.
    """

    statistics: tuple[str, ...]
    values: np.ndarray
    median: np.ndarray
    z: np.ndarray
    flagged: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def rule(self) -> str:
        """When a position is flagged, in words."""
        return (
            f"|robust z| > {self.params['threshold']:g} in a window of "
            f"±{self.params['hampel_window']} positions"
        )

    @property
    def positions(self) -> np.ndarray:
        """ndarray of int: positions flagged by at least one statistic, ascending."""
        return np.flatnonzero(self.flagged.any(axis=0))

    def records(self) -> list[dict[str, object]]:
        """One record per (position, statistic) flag, ordered by position."""
        stat, pos = np.nonzero(self.flagged)
        order = np.lexsort((stat, pos))
        return [
            {
                "position": int(pos[i]),
                "statistic": self.statistics[stat[i]],
                "value": float(self.values[stat[i], pos[i]]),
                "window_median": float(self.median[stat[i], pos[i]]),
                "z": float(self.z[stat[i], pos[i]]),
            }
            for i in order
        ]

    def to_frame(self) -> pd.DataFrame:
        """:meth:`records` as a frame (with its columns even when nothing is flagged)."""
        import pandas as pd

        columns = ["position", "statistic", "value", "window_median", "z"]
        return pd.DataFrame(self.records(), columns=columns)


@records_params
@bounded(hampel_window=Bound(1, None), threshold=Bound(1.0, 1e6, whole=False))
def outliers(
    stats: PositionStatistics, *, hampel_window: int = 16, threshold: float = 8.0
) -> Outliers:
    """Flag positions whose statistics are far from their sliding-window median.

    Parameters
    ----------
    stats : PositionStatistics
        Its :meth:`~PositionStatistics.flagging_curves` are scored.
    hampel_window : int
        Half-width w of the window: each position is compared with the median of the 2w + 1
        positions around it, shifted inward at the ends (a Hampel filter: :func:`hampel`).
    threshold : float
        Flag where the robust z-score exceeds this in absolute value.

    Examples
    --------
    >>> rows = np.c_[np.cos(np.arange(50.0)), np.sin(np.arange(50.0))]
    >>> rows[0] *= 3.0
    >>> outliers(position_statistics(rows), hampel_window=8).positions.tolist()
    [0]
    """
    curves = stats.flagging_curves()
    scores = [
        hampel(np.asarray(c, dtype=np.float64), window=hampel_window) for c in curves.values()
    ]
    z = np.array([s[0] for s in scores])
    return Outliers(
        statistics=tuple(curves),
        values=np.array([np.asarray(c, dtype=np.float64) for c in curves.values()]),
        median=np.array([s[1] for s in scores]),
        z=z,
        flagged=np.abs(z) > threshold,
    )


@dataclass(frozen=True)
class BoundarySummary:
    """Mean of each statistic over the first k, the middle, and the last k positions.

    Attributes
    ----------
    statistics : tuple of str
    first, middle, last : ndarray of shape (n_statistics,)
        Means over positions ``0..k-1``, ``k..n-k-1`` and ``n-k..n-1``, k the setting
        ``boundary_size``.
    params : dict
        The settings of :func:`boundary_summary` and of the statistics summarised.
    """

    statistics: tuple[str, ...]
    first: np.ndarray
    middle: np.ndarray
    last: np.ndarray
    params: dict = field(default_factory=dict)

    def procedure(self) -> str:
        """What the summary compares, in words."""
        k = self.params["boundary_size"]
        return f"Mean over the first {k}, the middle, and the last {k} positions."

    def to_frame(self) -> pd.DataFrame:
        """One row per statistic: its means over the first k, the middle and the last k."""
        import pandas as pd

        k = self.params["boundary_size"]
        return pd.DataFrame(
            {
                "statistic": self.statistics,
                f"first_{k}": self.first,
                "middle": self.middle,
                f"last_{k}": self.last,
            }
        )


@records_params
@bounded(boundary_size=Bound(1, None))
def boundary_summary(stats: PositionStatistics, *, boundary_size: int = 8) -> BoundarySummary:
    """Compare the first and last `boundary_size` positions with the middle of the table, on
    each of the statistics' :meth:`~PositionStatistics.flagging_curves`.

    Parameters
    ----------
    stats : PositionStatistics
    boundary_size : int
        k: the first k and the last k positions are each compared with the middle.

    Examples
    --------
    >>> rows = np.c_[[3.0, 0, 0, 0, 0], [4.0, 1, 1, 1, 3]]  # norms 5, 1, 1, 1, 3
    >>> summary = boundary_summary(position_statistics(rows), boundary_size=1)
    >>> summary.to_frame().to_dict("records")[0]
    {'statistic': 'norm', 'first_1': 5.0, 'middle': 1.0, 'last_1': 3.0}
    """
    curves = stats.flagging_curves()
    n = len(stats.norm)
    k = boundary_size
    if not 1 <= k < n / 2:
        msg = (
            f"boundary_size must be in 1..{(n - 1) // 2} so a middle remains for {n} "
            f"positions, got {k}."
        )
        raise ValueError(msg)
    stacked = np.array([np.asarray(c, dtype=np.float64) for c in curves.values()])
    return BoundarySummary(
        statistics=tuple(curves),
        first=stacked[:, :k].mean(axis=1),
        middle=stacked[:, k : n - k].mean(axis=1),
        last=stacked[:, n - k :].mean(axis=1),
    )


#: Rows on each side of a boundary that the local lines are fitted to. Short, so that a step is
#: a change over a row or two: a wiggle spread over several rows is not one.
STEP_WINDOW = 8
#: Rows on each side whose residuals give a step's standard error: the noise model sees every
#: wiggle shorter than this. With 32, a 128-row learned-like table showed a false step; with
#: 128, the stretches mix quiet and wiggly parts of a curve (MiniLM's norm is both).
NOISE_WINDOW = 64
#: Degree of the trend removed from each noise stretch before its autocovariances are taken.
_NOISE_DEGREE = 2
#: Rows just before a boundary left out of both lines: a step may take a row (MiniLM's row 126
#: lies half-way up its step at 127/128).
_GUARD = 1
#: Values of the noise stretches worked on at once: 512 KB arrays stay in cache (8 MB ones made
#: a 65536-row curve 3x slower).
_CHUNK_VALUES = 2**16
#: Curves without a step on which the test, with its default settings, found one, of the curves
#: tried: what the null gives in practice. tests/test_boundary_changepoints.py draws the same
#: curves and checks these counts.
FALSE_ALARMS = {
    "Gaussian noise, 512 rows": (1, 200),
    "AR(1) noise with ρ = 0.9, 512 rows": (2, 200),
    "learned-like tables, 128 to 2048 rows": (0, 100),
}


@dataclass(frozen=True)
class ChangePoints:
    """Where a statistic's curve steps: a change within a row or two that the curve's own
    wiggles do not explain.

    Attributes
    ----------
    positions : ndarray of int, shape (n_changes,)
        First position after each step, ascending.
    shifts : ndarray of shape (n_changes,)
        Size of the step: the line fitted to the `window` rows after it minus the line fitted
        to the `window` rows before it (the row just before it left out), both at the boundary.
    z : ndarray of shape (n_changes,)
        Each step over its standard error, which allows for the curve's autocorrelation (see
        :func:`change_points`): a z statistic, standard normal where the curve has no step.
    critical : float
        The |z| a step needed: the two-sided normal quantile of ``alpha``, Bonferroni-corrected
        over the `n_tested` boundaries.
    alpha : float
        Family-wise false-alarm rate of the test over the whole curve.
    window : int
        Rows on each side that the lines are fitted to (:data:`STEP_WINDOW`).
    n_tested : int
        Boundaries tested: at least `min_size` rows from either end, with enough rows kept on
        each side to judge the noise.
    left_out : ndarray of int
        Rows left out of every fit and noise estimate: those flagged on any statistic.
    null_z : ndarray of shape (null_draws,)
        The largest |z| on each of `null_draws` shuffles of the curve (its kept values in a
        random order, `seed`): what the test gives on this curve's values without any order.
    params : dict
        The settings of :func:`change_points` and of the outliers that set `left_out`.
    """

    positions: np.ndarray
    shifts: np.ndarray
    z: np.ndarray
    critical: float
    alpha: float
    window: int
    n_tested: int
    left_out: np.ndarray
    null_z: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def null_found(self) -> int:
        """How many of the shuffled curves had a change point (|z| above the critical)."""
        return int(np.sum(self.null_z > self.critical))

    def to_frame(self) -> pd.DataFrame:
        """One row per change point: where, the size of the step and its z statistic."""
        import pandas as pd

        return pd.DataFrame({"position": self.positions, "shift": self.shifts, "z": self.z})

    def describe(self, labels: RowLabels | None = None) -> str:
        """The change points in words: the first row after each step, named as `labels` name
        rows (a relative table's position, or the offsets a DeBERTa bucket covers, as its axes
        are), or that none was found."""
        if not self.positions.size:
            return "none found (no step stands out of the curve's own wiggles)"
        labels = labels or RowLabels()
        # Offsets are ranges ("278 … 280"): a semicolon keeps one step from the next.
        return ("; " if labels.bucketed else ", ").join(labels.text(self.positions))

    def procedure(self) -> str:
        """How the change points were found, and what the test gives without a step, in words."""
        p, w = self.params, self.window
        statistic = column_label(p["statistic"])  # as the page's tables head it
        if not self.n_tested:
            return (
                f"Steps on {statistic}: no boundary could be tested. A step needs "
                f"{2 * w + _GUARD} kept rows on each side to judge the noise, and "
                f"{p['min_size']} positions from either end."
            )
        left_out = self.left_out.size
        text = (
            f"Steps on {statistic}: at each boundary, lines are fitted to the {w} rows "
            f"after it and to the {w} rows before it (the row just before it left out: a step "
            "may take a row); the step is their difference at the boundary. Its standard error "
            "allows for the curve's own autocorrelation: it comes from the autocovariances of "
            f"the residuals of quadratics fitted to {NOISE_WINDOW} rows on each side, "
            "Bartlett-weighted (Newey & West 1987), so slow wiggles count as noise, not as "
            f"steps. z = step / standard error; a step counts when |z| > {self.critical:.3g} "
            f"(false-alarm rate {self.alpha:g} over the {self.n_tested} boundaries tested, "
            f"Bonferroni). The largest first, then each stretch between the steps found is "
            f"tested again on its own rows; at most {p['max_changes']}, at least "
            f"{p['min_size']} positions apart and from either end. A step's position is the "
            "first row on the new level (the row left out counts after it once three quarters "
            "of the way up). "
        )
        if left_out:
            text += (
                f"The {left_out} rows flagged as outliers are left out of every fit, so a "
                "single odd row neither makes a step nor hides one. "
            )
        draws = self.null_z.size
        if draws:
            text += (
                f"Null: the same test on this curve shuffled {draws} times (seed {p['seed']}) "
                f"found a step in {self.null_found}; the largest |z| was "
                f"{float(self.null_z.max()):.2f}. "
            )
        measured = "; ".join(f"{k}: {a} of {b}" for k, (a, b) in FALSE_ALARMS.items())
        return text + f"Curves without a step on which the test found one: {measured}."


@records_params
@bounded(
    max_changes=Bound(0, 20),
    min_size=Bound(1, None),
    alpha=Bound(0.0, 1.0, whole=False),
    null_draws=Bound(0, 1000),
    seed=SEED,
)
def change_points(
    flags: Outliers,
    *,
    statistic: str = "norm",
    max_changes: int = 3,
    min_size: int = 16,
    alpha: float = 0.01,
    null_draws: int = 20,
    seed: int = 0,
) -> ChangePoints:
    """Find steps of a statistic's curve: changes within a row or two that its own
    autocorrelated wiggles do not explain.

    At every boundary t (between rows t - 1 and t), lines are fitted by least squares to the
    :data:`STEP_WINDOW` rows from t on and to as many rows before t - 1 (row t - 1 is left out
    of both, so a step may take a row); the step is the difference of the two lines at the
    boundary, a linear contrast ``c @ x`` of the curve that a line (a drift) leaves at zero.

    Its variance allows for the curve's autocorrelation, so that slow wiggles are not steps:
    quadratics are fitted to the :data:`NOISE_WINDOW` rows on each side of the boundary
    (separately, so a step at t is not noise in its own test), and the sample autocovariances
    gamma(h) of their pooled residuals (over their degrees of freedom) give ``var = sum_h k(h)
    gamma(h) sum_i c_i c_(i+h)`` over the lags the contrast spans, with the Bartlett weights
    ``k(h) = 1 - |h| / span`` of Newey & West (1987, "A simple, positive semi-definite,
    heteroskedasticity and autocorrelation consistent covariance matrix", Econometrica
    55:703-708), which keep it non-negative. ``z = step / sqrt(var)``, standard normal where
    the curve has no step; a step counts when |z| exceeds the two-sided normal quantile of
    `alpha`, Bonferroni-corrected over the boundaries tested.

    The steps are taken by binary segmentation: the largest |z| first, then each stretch
    between the steps found is tested again on its own rows (so a step's jump is never noise
    in its neighbour's test), until none passes or `max_changes` are found. A step's position
    is the first row on the new level: the row left out before its boundary counts after the
    step only when it lies at least three quarters of the way from the line before to the
    line after (a row half-way up, as MiniLM's row 126, stays before it).

    Rows flagged on any statistic by :func:`outliers` are left out of every fit and noise
    estimate, so a single odd row neither makes a step nor hides one beside it. The same test
    on `null_draws` shuffles of the curve gives its null (:attr:`ChangePoints.null_z`); the
    false alarms measured on curves without a step are :data:`FALSE_ALARMS`.

    Parameters
    ----------
    flags : Outliers
    statistic : str
        One of ``flags.statistics``.
    max_changes : int
        Change points found at most.
    min_size : int
        Least distance between steps, and from a step to either end of the table.
    alpha : float
        Family-wise false-alarm rate over the curve.
    null_draws : int
        Shuffles of the curve the test is run on for its null; 0 skips them.
    seed : int
        Seed of the shuffles.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> norms = np.r_[np.ones(128), 2 * np.ones(384)] + 0.05 * rng.standard_normal(512)
    >>> flags = outliers(position_statistics(np.c_[norms, np.zeros(512)]))
    >>> change_points(flags).positions.tolist()
    [128]
    >>> drift = np.linspace(1, 2, 512) + 0.05 * rng.standard_normal(512)
    >>> change_points(outliers(position_statistics(np.c_[drift, np.zeros(512)]))).describe()
    "none found (no step stands out of the curve's own wiggles)"
    """
    import scipy.stats  # slow to import; only this test needs it

    if min_size < 1:
        msg = f"min_size must be >= 1 position, got {min_size}."
        raise ValueError(msg)
    if not 0 < alpha < 1:
        msg = f"alpha must be between 0 and 1, got {alpha}."
        raise ValueError(msg)
    if not 0 <= null_draws <= 1000:
        msg = f"null_draws must be in 0..1000 shuffles, got {null_draws}."
        raise ValueError(msg)
    x = np.asarray(flags.values[flags.statistics.index(statistic)], dtype=np.float64)
    keep = ~np.asarray(flags.flagged.any(axis=0))  # an array: numpy's stubs allow a scalar

    def boundaries(rows: int) -> np.ndarray:
        """The boundaries a stretch of `rows` rows can test: `min_size` from either end, and
        room for the lines."""
        first, last = max(min_size, STEP_WINDOW + _GUARD), rows - max(min_size, STEP_WINDOW)
        return np.arange(first, last + 1, dtype=np.int64)

    def strongest(
        lo: int, hi: int, steps: np.ndarray, z: np.ndarray
    ) -> tuple[int, float, float] | None:
        """The boundary of rows lo..hi-1 with the largest |z|: (position, step, z)."""
        if np.all(np.isnan(z)):
            return None
        i = int(np.nanargmax(z))
        position = _first_row_after(x, keep, lo + int(boundaries(hi - lo)[i]))
        return position, float(steps[i]), float(z[i])

    def search(lo: int, hi: int) -> tuple[int, float, float] | None:
        """The strongest boundary of rows lo..hi-1 tested on their own rows only."""
        tested = boundaries(hi - lo)
        if not tested.size:
            return None
        return strongest(lo, hi, *_StepTest(keep[lo:hi], tested).scores(x[lo:hi]))

    n = len(x)
    whole = _StepTest(keep, boundaries(n))
    steps, z = whole.scores(x)
    n_tested = int(np.sum(~np.isnan(z)))
    critical = float(scipy.stats.norm.isf(alpha / (2 * n_tested))) if n_tested else float("inf")
    # Binary segmentation: the strongest step first; then each stretch between the steps found
    # is searched on its own rows, so a step's jump is never noise in its neighbour's test.
    best = {(0, n): strongest(0, n, steps, z) if n_tested else None}
    found: list[tuple[int, float, float]] = []

    def z_of(segment: tuple[int, int]) -> float:
        top = best[segment]
        return -1.0 if top is None else top[2]

    while len(found) < max_changes:
        segment = max(best, key=z_of)
        top = best.pop(segment)
        if top is None or top[2] <= critical:
            break
        found.append(top)
        best[segment[0], top[0]] = search(segment[0], top[0])
        best[top[0], segment[1]] = search(top[0], segment[1])
    found.sort()
    null_z = np.zeros(null_draws if n_tested else 0)
    rng = np.random.default_rng(seed)
    for draw in range(len(null_z)):
        shuffled = x.copy()
        shuffled[keep] = rng.permutation(x[keep])
        null_z[draw] = np.nanmax(whole.scores(shuffled)[1])
    return ChangePoints(
        positions=np.array([f[0] for f in found], dtype=int),
        shifts=np.array([f[1] for f in found]),
        z=np.array([f[2] for f in found]),
        critical=critical,
        alpha=alpha,
        window=STEP_WINDOW,
        n_tested=n_tested,
        left_out=np.flatnonzero(~keep),
        null_z=null_z,
    )


class _StepTest:
    """The step test's parts that depend only on which rows are kept, made once and applied to
    the curve and to each of its shuffles (:meth:`scores`).

    Rows outside the curve and rows not kept weigh zero in every fit, so the windows of a
    boundary near an end or beside a flagged row just hold fewer rows.
    """

    def __init__(self, keep: np.ndarray, boundaries: np.ndarray) -> None:
        w, g = STEP_WINDOW, _GUARD
        self.span = span = 2 * w + g
        self.pad = pad = NOISE_WINDOW + span
        self.keep = keep
        self.weights = np.pad(keep.astype(np.float64), pad)
        self.t = t = boundaries + pad
        before, enough_before = _fit_weights(self.weights, t - g - w, w, 1, at=w + g - 0.5)
        after, enough_after = _fit_weights(self.weights, t, w, 1, at=-0.5)
        self.contrast = np.concatenate([-before, np.zeros((len(t), g)), after], axis=1)
        lags = np.arange(span)
        overlap = np.stack(
            [
                np.einsum("kj,kj->k", self.contrast[:, h:], self.contrast[:, : span - h])
                for h in lags
            ],
            axis=1,
        )
        # Var(c @ e) = sum over lags of gamma(h) sum_i c_i c_(i+h), both signs of h, with the
        # Bartlett weights 1 - |h| / span (Newey & West 1987), which keep it non-negative.
        self.lag_weights = overlap * np.where(lags > 0, 2.0, 1.0) * (1.0 - lags / span)
        self.sum_squares = overlap[:, 0]
        # Noise stretches: the NOISE_WINDOW rows before the guard row and from t on; every
        # start they need, from the first boundary's first to the last boundary's second.
        self.first_start = int(t[0] - g - NOISE_WINDOW) if len(t) else 0
        starts = np.arange(self.first_start, int(t[-1]) + 1 if len(t) else 0)
        self.starts = starts
        total = np.concatenate([[0.0], np.cumsum(self.weights)])
        self.rows = total[starts + NOISE_WINDOW] - total[starts]
        self.full = self.rows == NOISE_WINDOW
        offsets = (np.arange(NOISE_WINDOW) - (NOISE_WINDOW - 1) / 2) / NOISE_WINDOW
        self.design = np.vander(offsets, _NOISE_DEGREE + 1, increasing=True)
        self.basis, _ = np.linalg.qr(self.design)  # orthonormal: a full stretch's fit is X q qᵀ
        before_rows = self.rows[t - g - NOISE_WINDOW - self.first_start]
        after_rows = self.rows[t - self.first_start]
        # Residual degrees of freedom: each stretch's quadratic takes three.
        self.noise_rows = np.maximum(before_rows + after_rows - 2 * (_NOISE_DEGREE + 1), 1.0)
        self.judged = enough_before & enough_after & (before_rows >= span) & (after_rows >= span)

    def scores(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The signed step at each boundary and its |z|; NaN where too few rows are kept."""
        g, span = _GUARD, self.span
        kept_values = x[self.keep]
        centre = float(np.median(kept_values)) if kept_values.size else 0.0
        values = np.pad(np.where(self.keep, x - centre, 0.0), self.pad)
        step = np.einsum(
            "kj,kj->k", self.contrast, sliding_window_view(values, span)[self.t - g - STEP_WINDOW]
        )
        sums = self._residual_autocovariances(values)
        gamma = (
            sums[self.t - g - NOISE_WINDOW - self.first_start] + sums[self.t - self.first_start]
        ) / self.noise_rows[:, None]
        # Noise floor: a curve without noise (a constant, a line) has only rounding residuals.
        floor = (RELATIVE_FLOOR * max(abs(centre), np.finfo(float).tiny)) ** 2
        variance = np.maximum(
            np.einsum("kh,kh->k", self.lag_weights, gamma), floor * self.sum_squares
        )
        z = np.abs(step) / np.sqrt(variance)
        return np.where(self.judged, step, np.nan), np.where(self.judged, z, np.nan)

    def _residual_autocovariances(self, values: np.ndarray) -> np.ndarray:
        """For each noise stretch: ``sum_i r_i r_(i+h)`` over lags h < span of the residuals r
        of a quadratic fitted to its kept rows (shape (n_starts, span))."""
        width, span = NOISE_WINDOW, self.span
        stretches = sliding_window_view(values, width)
        sums = np.empty((len(self.starts), span))
        size = max(1, _CHUNK_VALUES // width)
        for lo in range(0, len(self.starts), size):
            chosen = slice(lo, lo + size)
            starts, full = self.starts[chosen], self.full[chosen]
            residuals = np.empty((len(starts), width))
            # Full stretches share one projection; the others (beside a flagged row, at an end)
            # are fitted one by one.
            full_stretches = stretches[starts[full]]
            residuals[full] = full_stretches - (full_stretches @ self.basis) @ self.basis.T
            partial = starts[~full]
            if partial.size:
                rows = sliding_window_view(self.weights, width)[partial]
                stretch = stretches[partial]
                gram = np.einsum("kj,ja,jb->kab", rows, self.design, self.design)
                gram[rows.sum(axis=1) <= _NOISE_DEGREE] = np.eye(_NOISE_DEGREE + 1)
                coefficients = np.linalg.solve(gram, (stretch @ self.design)[:, :, None])[:, :, 0]
                residuals[~full] = rows * (stretch - coefficients @ self.design.T)
            sums[chosen] = np.stack(
                [
                    np.einsum("kj,kj->k", residuals[:, h:], residuals[:, : width - h])
                    for h in range(span)
                ],
                axis=1,
            )
        return sums


def _first_row_after(x: np.ndarray, keep: np.ndarray, t: int) -> int:
    """The first row after the step found at boundary t: t, or the row left out before it
    (t - 1) when that row has reached the new level: at least three quarters of the way from
    the line before the step to the line after it. A row half-way up a step (MiniLM's row 126
    is 45% of the way) stays before it; a sharp step is placed on its own row."""
    guard = t - _GUARD
    if not keep[guard]:
        return t

    def line_at_guard(rows: np.ndarray) -> float:
        rows = rows[keep[rows]]
        return float(np.polynomial.Polynomial.fit(rows, x[rows], 1)(guard))

    before = line_at_guard(np.arange(guard - STEP_WINDOW, guard))
    after = line_at_guard(np.arange(t, t + STEP_WINDOW))
    reached = (x[guard] - before) / (after - before) if after != before else 0.0
    return guard if reached >= 0.75 else t


def _fit_weights(
    weights: np.ndarray, starts: np.ndarray, width: int, degree: int, *, at: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row weights of the value at offset `at` of the polynomial fitted by least squares to
    the rows ``start .. start + width - 1`` (row weights 0 or 1), for each start; and whether
    each window holds enough rows for the fit."""
    offsets = (np.arange(width) - (width - 1) / 2) / width
    design = np.vander(offsets, degree + 1, increasing=True)
    point = np.vander([(at - (width - 1) / 2) / width], degree + 1, increasing=True)[0]
    rows = sliding_window_view(weights, width)[starts]
    gram = np.einsum("kj,ja,jb->kab", rows, design, design)
    enough = rows.sum(axis=1) > degree
    gram[~enough] = np.eye(degree + 1)  # never used: keeps the batch solvable
    solved = np.linalg.solve(gram, np.broadcast_to(point, (len(rows), degree + 1))[:, :, None])
    return rows * (solved[:, :, 0] @ design.T), enough
