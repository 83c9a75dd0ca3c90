"""Which positions are unusual: per-position statistics, robust outlier flags, change points."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
from numpy.lib.stride_tricks import sliding_window_view

from posviz._linalg import gram_of_blocks, mean_row, row_blocks
from posviz._params import Bound, bounded, records_params

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
    norm, dist, dots = [], [], []
    previous = None  # last row of the previous block, for the cosine across the block edge
    for block in row_blocks(values):
        norm.append(np.linalg.norm(block, axis=1))
        dist.append(np.linalg.norm(block - mean, axis=1))
        rows = block if previous is None else np.vstack([previous, block])
        dots.append(np.einsum("ij,ij->i", rows[1:], rows[:-1]))
        previous = block[-1:]
    norm = np.concatenate(norm)
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

    def cleaned(self, statistic: str) -> np.ndarray:
        """ndarray of shape (n_positions,): the curve with flagged values replaced by the median.

        Single odd rows are not level shifts; :func:`change_points` runs on this.
        """
        i = self.statistics.index(statistic)
        return np.where(self.flagged[i], self.median[i], self.values[i])


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
        Half-width of the window (see :func:`hampel`).
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


@dataclass(frozen=True)
class ChangePoints:
    """Where a statistic's curve steps, against a local quadratic trend (a drift is no step).

    Attributes
    ----------
    positions : ndarray of int, shape (n_changes,)
        First position after each step, ascending.
    shifts : ndarray of shape (n_changes,)
        Size of the step: the quadratic fitted to the `window` positions after it minus the
        one fitted to the `window` positions before it, both extrapolated to the step.
    z : ndarray of shape (n_changes,)
        That step over its standard error (the two fits' pooled residual noise): a t
        statistic with ``2 window - 6`` degrees of freedom under a locally smooth curve.
    critical : float
        The |t| a step needed: the two-sided ``alpha`` quantile, Bonferroni-corrected over
        every position tested.
    alpha : float
        Family-wise false-alarm rate of the test over the whole curve.
    window : int
        Positions on each side of a candidate step (``max(min_size, 8)``).
    params : dict
        The settings of :func:`change_points` and of the outliers whose cleaned curve was
        searched.
    """

    positions: np.ndarray
    shifts: np.ndarray
    z: np.ndarray
    critical: float
    alpha: float
    window: int
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per change point: where, the size of the step and its t statistic."""
        import pandas as pd

        return pd.DataFrame({"position": self.positions, "shift": self.shifts, "z": self.z})

    def describe(self, first_position: int = 0) -> str:
        """The change points in words: their positions (row 0 labelled `first_position`, as a
        relative table's axes are), or that none was found."""
        if not self.positions.size:
            return "none found (no step stands out of the local trend)"
        return ", ".join(map(str, (self.positions + first_position).tolist()))

    def procedure(self) -> str:
        """How the change points were found, in words."""
        w, p = self.window, self.params
        return (
            f"Steps against a local trend on {p['statistic']}: at each position a quadratic is "
            f"fitted to the {w} positions before it and one to the {w} after it; the step is "
            "their difference there, over its standard error (a t statistic, "
            f"{_degrees_of_freedom(w)} degrees of freedom). A step counts when |t| > "
            f"{self.critical:.3g} (false-alarm rate {self.alpha:g} over the whole curve, "
            f"Bonferroni); the largest first, at most {p['max_changes']}, at least {w} "
            f"positions apart. A steady drift (a line, or a curve smooth over {w} positions) "
            "has no step."
        )


#: Fewest positions on each side of a candidate step: the trends' residual noise needs
#: degrees of freedom (2 x (8 - 3) = 10 for the t test).
_MIN_WINDOW = 8
#: Degree of the local trend a step is measured against: quadratic, so that a curve smooth on
#: the window's scale (a drift, the slow waves of a learned table's norm) leaves no step. With
#: lines, learned-like 512 x 128 tables reached 1.07x the critical |t| without any step.
_TREND_DEGREE = 2


@records_params
@bounded(max_changes=Bound(0, 20), min_size=Bound(1, None), alpha=Bound(0.0, 1.0, whole=False))
def change_points(
    flags: Outliers,
    *,
    statistic: str = "norm",
    max_changes: int = 3,
    min_size: int = 16,
    alpha: float = 0.01,
) -> ChangePoints:
    """Find steps of a statistic's curve against its local (quadratic) trend.

    The curve searched is :meth:`Outliers.cleaned`, so single odd rows are not counted. At
    every position t, quadratics are fitted by least squares to the ``w = max(min_size, 8)``
    positions before and after it; the step is the difference of the two fits at the
    boundary, and its t statistic is that over its standard error, from the two fits' pooled
    residuals. A drifting curve (a line, or any curve smooth on the scale of w) leaves no
    step, where a change in mean would be fitted to it; a jump leaves one of its size. Steps
    count when |t| exceeds the Bonferroni-corrected two-sided `alpha` quantile of Student's
    t with ``2 w - 6`` degrees of freedom over all positions tested; the largest are kept,
    at least w apart, at most `max_changes`.

    Parameters
    ----------
    flags : Outliers
    statistic : str
        One of ``flags.statistics``.
    max_changes : int
    min_size : int
        Positions on each side of a step (at least 8 are used) and the least distance between
        steps.
    alpha : float
        Family-wise false-alarm rate over the curve.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> norms = np.r_[np.ones(128), 2 * np.ones(384)] + 0.05 * rng.standard_normal(512)
    >>> flags = outliers(position_statistics(np.c_[norms, np.zeros(512)]))
    >>> change_points(flags).positions.tolist()
    [128]
    >>> drift = np.linspace(1, 2, 512) + 0.05 * rng.standard_normal(512)
    >>> change_points(outliers(position_statistics(np.c_[drift, np.zeros(512)]))).describe()
    'none found (no step stands out of the local trend)'
    """
    import scipy.stats  # slow to import; only this test needs it

    x = flags.cleaned(statistic)
    if min_size < 1:
        msg = f"min_size must be >= 1 position, got {min_size}."
        raise ValueError(msg)
    if not 0 < alpha < 1:
        msg = f"alpha must be between 0 and 1, got {alpha}."
        raise ValueError(msg)
    w = max(min_size, _MIN_WINDOW)
    candidates, steps, z = _steps(x, w)
    critical = (
        float(scipy.stats.t.ppf(1 - alpha / (2 * len(candidates)), _degrees_of_freedom(w)))
        if len(candidates)
        else float("inf")
    )
    kept: list[int] = []
    for i in np.argsort(-z, kind="stable"):
        if len(kept) == max_changes or z[i] <= critical:
            break
        if all(abs(candidates[i] - candidates[j]) >= w for j in kept):
            kept.append(int(i))
    kept.sort()
    return ChangePoints(
        positions=candidates[kept].astype(int),
        shifts=steps[kept],
        z=z[kept],
        critical=critical,
        alpha=alpha,
        window=w,
    )


def _steps(x: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate positions t, the step of the local trends at each, and its |t statistic|.

    Quadratics are fitted to every window ``x[i:i + w]`` at once (through the QR of their
    shared design); the step at t compares the window ending at t with the one starting
    there, both evaluated at ``t - 1/2``.
    """
    n = len(x)
    if n < 2 * w:
        return np.empty(0, dtype=int), np.empty(0), np.empty(0)
    offsets = np.arange(w) - (w - 1) / 2
    q, r = np.linalg.qr(np.vander(offsets, _TREND_DEGREE + 1, increasing=True))
    windows = np.lib.stride_tricks.sliding_window_view(x - np.median(x), w)
    projected = windows @ q
    coefficients = np.linalg.solve(r, projected.T).T
    residuals = np.maximum(np.sum(windows**2, axis=1) - np.sum(projected**2, axis=1), 0.0)
    t = np.arange(w, n - w + 1)
    before, after = t - w, t
    edge = w / 2  # from a window's centre to the boundary between the two windows
    at_end, at_start = (
        np.vander([e], _TREND_DEGREE + 1, increasing=True)[0] for e in (edge, -edge)
    )
    step = coefficients[after] @ at_start - coefficients[before] @ at_end
    inverse = np.linalg.inv(r)
    # Variance of the step per unit noise variance: the two fits' prediction variances.
    variance = sum(float(np.sum((v @ inverse) ** 2)) for v in (at_end, at_start))
    # Noise floor: a curve without noise (a constant, a line) has only rounding residuals.
    floor = (RELATIVE_FLOOR * max(float(np.median(np.abs(x))), np.finfo(float).tiny)) ** 2
    noise = np.maximum((residuals[before] + residuals[after]) / _degrees_of_freedom(w), floor)
    return t, step, np.abs(step) / np.sqrt(noise * variance)


def _degrees_of_freedom(w: int) -> int:
    """Of the pooled residuals of two trends fitted to w positions each."""
    return 2 * (w - _TREND_DEGREE - 1)
