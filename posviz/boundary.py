"""Which positions are unusual: per-position statistics, robust outlier flags, change points."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
from numpy.lib.stride_tricks import sliding_window_view

from posviz import _params
from posviz._linalg import gram_of_blocks, mean_row, row_blocks
from posviz._params import records_params

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
    "defaults",
    "hampel",
    "limits",
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
        Norm of the centred row outside the top-`top_k` principal directions; None when
        ``top_k == 0``.
    params : dict
        The settings of :func:`position_statistics` (``top_k``).
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
def position_statistics(values: np.ndarray, *, top_k: int = 0) -> PositionStatistics:
    """Norm, neighbour cosines, distance to the mean row and (optionally) residual norm.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    top_k : int
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
    if not 0 <= top_k < min(n, d):
        msg = f"top_k must be in 0..{min(n, d) - 1} for a {n} x {d} table, got {top_k}."
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
    if top_k:
        gram = gram_of_blocks(row_blocks(values, mean), d)
        _, directions = scipy.linalg.eigh(gram, subset_by_index=[d - top_k, d - 1])
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
    """Where a statistic's curve shifts level, by binary segmentation.

    Attributes
    ----------
    positions : ndarray of int, shape (n_changes,)
        First position of each new segment, ascending.
    shifts : ndarray of shape (n_changes,)
        Mean of the segment starting there minus the mean of the segment before it.
    gains : ndarray of shape (n_changes,)
        Share of the curve's total sum of squared deviations removed by that split.
    segment_means : ndarray of shape (n_changes + 1,)
    sigma : float
        Noise level estimated from first differences, ``1.4826 * MAD(diff) / sqrt(2)``.
    penalty : float
        Smallest reduction in squared deviations a split needed, ``2 sigma^2 log n`` (BIC).
    params : dict
        The settings of :func:`change_points` and of the outliers whose cleaned curve was
        searched.
    """

    positions: np.ndarray
    shifts: np.ndarray
    gains: np.ndarray
    segment_means: np.ndarray
    sigma: float
    penalty: float
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per change point: where, the shift of the mean, the share of variance."""
        import pandas as pd

        return pd.DataFrame(
            {"position": self.positions, "shift": self.shifts, "share_of_variance": self.gains}
        )

    def procedure(self) -> str:
        """How the change points were found, in words."""
        return (
            f"Binary segmentation for changes in mean on {self.params['statistic']}: each step "
            f"makes the split that most reduces squared deviations, into segments of at least "
            f"{self.params['min_size']} positions, until {self.params['max_changes']} changes "
            f"or until the "
            f"reduction is below 2σ² log n (BIC; σ = {self.sigma:.3g} from first differences)."
        )


@records_params
def change_points(
    flags: Outliers,
    *,
    statistic: str = "norm",
    max_changes: int = 3,
    min_size: int = 16,
) -> ChangePoints:
    """Find level shifts of a statistic by greedy binary segmentation (least squares, BIC stop).

    The curve searched is :meth:`Outliers.cleaned`, so single odd rows are not counted as
    shifts. Each step splits the segment, at the position, that most reduces the sum of
    squared deviations from the segment means; it stops after `max_changes` splits or when the
    best reduction is below ``2 sigma^2 log n`` (the BIC penalty for a change in mean with
    noise level sigma). Segments keep at least `min_size` positions.

    Parameters
    ----------
    flags : Outliers
    statistic : str
        One of ``flags.statistics``.
    max_changes : int
    min_size : int

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> norms = np.r_[np.ones(128), 2 * np.ones(384)] + 0.05 * rng.standard_normal(512)
    >>> flags = outliers(position_statistics(np.c_[norms, np.zeros(512)]))
    >>> change_points(flags).positions.tolist()
    [128]
    """
    x = flags.cleaned(statistic)
    n = len(x)
    if min_size < 1:
        msg = f"min_size must be >= 1 position, got {min_size}."
        raise ValueError(msg)
    mad = np.median(np.abs(np.diff(x) - np.median(np.diff(x))))
    sigma = max(MAD_TO_SD * mad / np.sqrt(2), RELATIVE_FLOOR * float(np.median(np.abs(x))))
    penalty = 2 * sigma**2 * np.log(n)
    total = float(np.sum((x - x.mean()) ** 2))
    cuts = [0, n]
    gains = []
    for _ in range(max_changes):
        best = (0.0, -1)
        for a, b in itertools.pairwise(cuts):
            gain, t = _best_split(x[a:b], min_size)
            if gain > best[0]:
                best = (gain, a + t)
        if best[0] <= penalty:
            break
        cuts = sorted([*cuts, best[1]])
        gains.append(best)
    positions = np.array(cuts[1:-1], dtype=int)
    means = np.array([x[a:b].mean() for a, b in itertools.pairwise(cuts)])
    by_position = {t: g for g, t in gains}
    return ChangePoints(
        positions=positions,
        shifts=np.diff(means),
        gains=np.array([by_position[t] / total for t in positions.tolist()]),
        segment_means=means,
        sigma=float(sigma),
        penalty=float(penalty),
    )


def _best_split(x: np.ndarray, min_size: int) -> tuple[float, int]:
    """Largest reduction of squared deviations from splitting `x` in two, and where."""
    n = len(x)
    t = np.arange(min_size, n - min_size + 1)
    if len(t) == 0:
        return 0.0, -1
    # Centred first: cumulative sums of raw values would lose digits on a curve far from 0.
    cumsum = np.cumsum(x - x.mean())[t - 1]
    # Mean difference of the two parts, (S_t/t - (S_n - S_t)/(n - t)), with S_n = 0.
    gain = cumsum**2 * n / (t * (n - t))
    best = int(np.argmax(gain))
    return float(gain[best]), int(t[best])


def limits(shape: tuple[int, int]) -> dict[str, int]:
    """Largest value of each integer setting that a table of this shape allows.

    A window or a shortest segment of more than half the table says nothing more; the
    boundary size leaves a middle; `top_k` leaves a residual.

    Examples
    --------
    >>> limits((20, 6))
    {'top_k': 5, 'hampel_window': 10, 'boundary_size': 9, 'min_size': 10}
    """
    n, d = shape
    half = max(1, n // 2)
    return {
        "top_k": min(n, d) - 1,
        "hampel_window": half,
        "boundary_size": max(1, (n - 1) // 2),
        "min_size": half,
    }


def defaults(shape: tuple[int, int]) -> dict[str, object]:
    """The default settings of the boundary functions for a table of this shape: each
    signature's default, within its :func:`limits`.

    Examples
    --------
    >>> d = defaults((20, 6))
    >>> d["hampel_window"], d["boundary_size"], d["min_size"], d["threshold"]
    (10, 8, 10, 8.0)
    """
    most = limits(shape)
    found = {
        **_params.defaults(position_statistics),
        **_params.defaults(outliers),
        **_params.defaults(boundary_summary),
        **_params.defaults(change_points),
    }
    return {name: min(value, most.get(name, value)) for name, value in found.items()}
