"""How does similarity fall with the offset between positions, and does it depend on offset alone?

The offset profile m(k), the mean of s(i, i+k) over i, with its spread and translation
invariance, and the scores of its shape (monotonicity, similarity length, ringing). The maps of
s(i, j) themselves are in `posviz.similarity`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from posviz import _linalg
from posviz._linalg import autocorrelation, float64_rows, gram, mean_row, row_blocks
from posviz._params import Bound, bounded, records_params

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFINITIONS",
    "MAX_OFFSET",
    "PEAK_PROMINENCE",
    "SIMILARITIES",
    "SIMILARITY_LENGTH",
    "OffsetProfile",
    "OffsetScores",
    "largest_offset",
    "offset_profile",
    "offset_scores",
    "profile_noise",
    "similarity_length",
]

#: The measures that are similarities (inner products), as the offset profile needs.
SIMILARITIES = ("cosine", "dot")
#: Largest offset k of the offset profile unless asked for more: its spread costs
#: n_positions x k x d_model multiply-adds (the mean and translation invariance cover all k).
MAX_OFFSET = 1024
#: The similarity length, in the words of every label that shows it (pages, Collection).
SIMILARITY_LENGTH = (
    "Similarity length: offset where mean similarity first falls below 1/e of m(0), the first "
    "k with m(k) < m(0)/e (m(0) is 1 for cosine without zero rows: below 1/e; the mean squared "
    "norm for dot). None if it never does."
)
#: A peak of m(k) counts as ringing when its prominence is this many times the profile's noise.
PEAK_PROMINENCE = 10.0
#: What each column of :meth:`OffsetScores.to_frame` means: the page's help and the report's note.
DEFINITIONS = {
    "translation_invariance": "1 − Σ_k Σ_i (s(i, i+k) − m(k))² / Σ_{i<j} (s(i, j) − mean s)²: "
    "the share of the variance of s over all pairs explained by the offset alone. 1 for a "
    "Toeplitz matrix (sinusoidal tables), near 0 for shuffled rows. Exact, over all offsets.",
    "monotonicity": "Spearman rank correlation of the mean profile m(k) with k for "
    "k = 1..monotonicity_window: −1 when similarity falls steadily with distance.",
    "falls_until": "Last offset before m(k) first stops falling (first k with m(k+1) ≥ m(k)).",
    "similarity_length": SIMILARITY_LENGTH,
    "length_zero": "First offset k with m(k) < 0.",
    "sign_changes": "Sign changes of m(k) for k = 1..largest offset.",
    "peaks": "Ringing: peaks of m(k), k = 1..largest offset, whose prominence is at least "
    f"{PEAK_PROMINENCE:g} times the noise of m at that offset (s / √pairs(k), s the sd of white "
    "noise from the second differences of m(k)·√pairs(k): 1.4826 · MAD / √6): the off-diagonal "
    "bands of e.g. GPT-2, not every wiggle.",
    "profile_noise": "The noise level of m(k) at k = 1 that ringing peaks are measured against.",
}


class _PreparedTable:
    """:func:`posviz.similarity.prepared_rows` of the whole table, made in float64 a slice at
    a time on indexing.

    ``t[rows]`` and ``t[rows, cols]`` give what ``prepared_rows(values)[...]`` would, without
    the float64 copy of the whole table (twice a float32 table's bytes). Its norms pass reads
    every row once, which the offset profile does anyway; maps prepare only their window's
    rows, so a zoom into a long table reads only that window.
    """

    def __init__(self, values: np.ndarray, *, metric: str, center: bool) -> None:
        self.values, self.shape = values, values.shape
        self.mean = mean_row(values, center=center)
        squares = np.concatenate(
            [np.einsum("ij,ij->i", b, b) for b in row_blocks(values, self.mean)]
        )
        #: Per row: the factor applied after centring (1 / norm for cosine; a zero row stays 0).
        self.scale = np.ones(len(values))
        if metric == "cosine":
            norms = np.sqrt(squares)
            self.scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        #: Per row: its inner product with itself once prepared, s(i, i).
        self.self_similarity = squares * self.scale**2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: slice | tuple[slice, slice]) -> np.ndarray:
        rows, cols = key if isinstance(key, tuple) else (key, slice(None))
        return float64_rows(self.values[rows, cols], self.mean[cols], self.scale[rows])


def _diagonal_spread(x: _PreparedTable, mean: np.ndarray, max_offset: int) -> np.ndarray:
    """``sum_i (s(i, i+k) - mean_k)^2`` for k = 0..max_offset, one row tile at a time.

    A tile of t rows against the t + K - 1 rows after them holds every (i, i+k), k <= K, of
    those rows; reading it along a sheared view (row r shifted left by r) puts offset k in
    column k - 1. Pairs past the table's end are NaN and skipped.
    """
    n = len(x)
    squares = np.zeros(max_offset + 1)
    squares[0] = np.sum((x.self_similarity - mean[0]) ** 2)
    if max_offset == 0:
        return squares
    # A tile makes t * (t + K - 1) products for the t * K it needs: t near K / 2 wastes
    # little, and 128 to 512 rows keep the matrix product efficient, where the largest tile
    # the budget allows would mostly compute pairs beyond offset K. Buffers are reused, so
    # memory stays within two float64 blocks (`BLOCK_BYTES` each) whatever the length.
    k = max_offset
    budget = int((np.sqrt(k**2 + _linalg.BLOCK_BYTES / 2) - k) / 2)
    tile = min(n, max(1, min(budget, int(np.clip(k // 2, 128, 512)))))
    scratch = np.empty(tile * (tile + k - 1))
    deviations = np.empty((tile, k))
    for start in range(0, n - 1, tile):
        # The tile's rows and the rows after them, prepared once: the first are in the second.
        window = x[start : start + tile + k]
        rows = window[:tile]
        width = len(rows) + k - 1
        available = min(width, n - start - 1)
        products = scratch[: len(rows) * width].reshape(len(rows), width)
        np.matmul(rows, window[1 : 1 + available].T, out=products[:, :available])
        products[:, available:] = np.nan
        band = np.lib.stride_tricks.sliding_window_view(products.ravel(), k)[:: width + 1]
        deviation = np.subtract(band, mean[1 : k + 1], out=deviations[: len(rows)])
        np.square(deviation, out=deviation)
        if available < width:
            deviation[np.isnan(deviation)] = 0.0
        squares[1:] += deviation.sum(axis=0)
        del window, rows  # before the next window is made: one float64 window at a time
    return squares


@dataclass(frozen=True)
class OffsetProfile:
    """How similarity depends on the offset k between positions: s(i, i+k) summarised over i.

    Attributes
    ----------
    offsets : ndarray of shape (max_offset + 1,)
        k = 0..max_offset.
    mean : ndarray of shape (max_offset + 1,)
        Mean over i of s(i, i+k): exact (float64 FFT autocorrelation, ~1e-13).
    std : ndarray of shape (max_offset + 1,)
        Standard deviation over i of s(i, i+k), exact (row tiles of the matrix, float64);
        NaN when not computed (``spread=False``).
    count : ndarray of shape (max_offset + 1,)
        Pairs at each offset, ``n_positions - k``.
    translation_invariance : float
        Share of the variance of s(i, j) over all pairs i < j explained by the offset j - i:
        ``1 - sum_k sum_i (s(i, i+k) - mean_k)^2 / sum_{i<j} (s(i, j) - mean)^2``. 1 when s
        depends on the offset alone (a Toeplitz matrix, e.g. sinusoidal tables), near 0 when
        rows are shuffled. Computed over all offsets whatever `max_offset` is; NaN when every
        pair has the same similarity.
    params : dict
        The settings of :func:`offset_profile` (``metric``, ``center``, ...).
    """

    offsets: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    count: np.ndarray
    translation_invariance: float
    params: dict = field(default_factory=dict)

    @property
    def max_offset(self) -> int:
        """Largest offset summarised."""
        return len(self.offsets) - 1

    def to_frame(self) -> pd.DataFrame:
        """One row per offset k: the mean and std of s(i, i+k) over i, and the pairs counted."""
        import pandas as pd

        return pd.DataFrame(
            {"k": self.offsets, "mean": self.mean, "std": self.std, "pairs": self.count}
        )


def largest_offset(n_positions: int, max_offset: int = MAX_OFFSET) -> int:
    """The largest offset a table of `n_positions` rows has, at most `max_offset`.

    >>> largest_offset(300), largest_offset(5000), largest_offset(5000, 512)
    (299, 1024, 512)
    """
    return min(n_positions - 1, max_offset)


@records_params
@bounded(max_offset=Bound(1, None, optional=True))
def offset_profile(
    values: np.ndarray,
    *,
    metric: str = "cosine",
    center: bool = True,
    max_offset: int | None = None,
    spread: bool = True,
) -> OffsetProfile:
    """Mean and spread of s(i, i+k) over i for each offset k, and translation invariance.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    metric : {"cosine", "dot"}
        A similarity: both are inner products of prepared rows, which the FFT route needs.
    center : bool
        Subtract the mean row first.
    max_offset : int or None
        Largest offset k, at most ``n_positions - 1``; by default :func:`largest_offset`
        (every offset up to `MAX_OFFSET`). The mean is exact at every k (a float64 FFT); the
        spread is exact too and costs ``n_positions * max_offset * d_model`` multiply-adds:
        lower k to speed up huge tables.
    spread : bool
        Compute `std`. Off, it is NaN and the rest costs about a third (a collection needs
        only the mean).

    Notes
    -----
    ``sum_i <x_i, x_{i+k}>`` for all k is the autocorrelation of each column, summed: one
    float64 FFT of length ~2L per column, O(L d log L) and no L x L matrix. The sum of squares
    over all pairs, needed by translation invariance, is ``|X^T X|_F^2`` (a d x d matrix).

    Examples
    --------
    >>> p = offset_profile(np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]), center=False)
    >>> p.mean, p.std
    (array([ 1.,  0., -1.]), array([0., 0., 0.]))
    """
    if metric not in SIMILARITIES:
        msg = f"The offset profile needs a similarity (cosine or dot), not {metric!r}."
        raise ValueError(msg)
    n = len(values)
    k_max = largest_offset(n) if max_offset is None else max_offset
    if not 0 <= k_max < n:
        msg = f"max_offset {max_offset} must be between 0 and n_positions - 1 = {n - 1}."
        raise ValueError(msg)
    x = _PreparedTable(values, metric=metric, center=center)
    sums = autocorrelation(x)
    count = np.arange(n, 0, -1)
    mean = sums / count
    std = (
        np.sqrt(_diagonal_spread(x, mean, k_max) / count[: k_max + 1])
        if spread
        else np.full(k_max + 1, np.nan)
    )
    # Translation invariance over pairs i < j (offsets 1..n-1): between-offset over total SS.
    pairs = n * (n - 1) / 2
    total = sums[1:].sum()
    g = gram(values, center=center, row_scale=x.scale)
    # norm: no copy of the Gram matrix (as large as a float32 table at 8192 x 4096), where a
    # square would make one and vdot two (it flattens in C order; the Gram is Fortran-ordered).
    squares = (np.linalg.norm(g) ** 2 - np.sum(x.self_similarity**2)) / 2
    total_ss = squares - total**2 / pairs
    between = np.sum(sums[1:] ** 2 / count[1:]) - total**2 / pairs
    scale = max(squares, np.finfo(np.float64).tiny)
    invariance = float(between / total_ss) if total_ss > 1e-12 * scale else float("nan")
    return OffsetProfile(
        offsets=np.arange(k_max + 1),
        mean=mean[: k_max + 1],
        std=std,
        count=count[: k_max + 1],
        translation_invariance=invariance,
    )


@dataclass(frozen=True)
class OffsetScores:
    """Shape of the mean offset profile m(k), for offsets k = 1..max_offset.

    Attributes
    ----------
    monotonicity : float
        Spearman rank correlation of m(k) with k for k = 1..window: -1 when similarity falls
        steadily with distance. NaN when m is constant there.
    window : int
        Offsets used by `monotonicity`: the setting ``monotonicity_window``, at most the
        profile's largest offset.
    falls_until : int
        Last offset k before m stops falling: the first k with m(k+1) >= m(k) (max_offset if
        it falls throughout).
    similarity_length : int or None
        Offset where m(k) first falls below m(0)/e (:func:`similarity_length`). None if never.
    length_zero : int or None
        First offset with m(k) below 0. None if never.
    sign_changes : int
        Times m(k) crosses 0.
    peaks : int
        Peaks of m(k) standing out of its noise (prominence at least :data:`PEAK_PROMINENCE`
        times :func:`profile_noise` at the peak): the off-diagonal bands ("ringing") of e.g.
        GPT-2.
    noise : float
        That noise level at offset 1 (where it is smallest).
    translation_invariance : float
        The profile's (see :class:`OffsetProfile`), reported beside the scores.
    params : dict
        The settings of :func:`offset_scores` and of the profile scored.
    """

    monotonicity: float
    window: int
    falls_until: int
    similarity_length: int | None
    length_zero: int | None
    sign_changes: int
    peaks: int
    noise: float
    translation_invariance: float
    params: dict = field(default_factory=dict)

    def metrics(self) -> dict[str, float | int | None]:
        """The scores by their export names, translation invariance first."""
        return {
            "translation_invariance": self.translation_invariance,
            "monotonicity": self.monotonicity,
            "falls_until": self.falls_until,
            "similarity_length": self.similarity_length,
            "length_zero": self.length_zero,
            "sign_changes": self.sign_changes,
            "peaks": self.peaks,
            "profile_noise": self.noise,
        }

    def to_frame(self) -> pd.DataFrame:
        """:meth:`metrics` as a one-row frame: what the page, the report and exports show."""
        import pandas as pd

        return pd.DataFrame([self.metrics()])


def similarity_length(mean: np.ndarray) -> int | None:
    """Offset where the mean similarity m(k) first falls below m(0)/e, or None if never.

    The one definition the Similarity page and the Collection use (see
    :data:`SIMILARITY_LENGTH`).

    >>> similarity_length(np.exp(-np.arange(6) / 2.0))
    3
    """
    return _first(mean[1:] < mean[0] / np.e)


def profile_noise(mean: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The noise level of m(k) at each offset k >= 1: ``s / sqrt(pairs(k))``.

    m(k) is a mean over ``pairs(k) = n - k`` pairs, so its noise grows towards the largest
    offsets. ``s`` is a robust sd of white noise from the second differences ``d`` of
    ``m(k) sqrt(pairs(k))``: ``1.4826 * median |d - median d| / sqrt(6)`` (white noise of sd
    s gives differences of sd ``sqrt(6) s``; smooth trends and slow bands barely reach them).
    """
    scale = np.sqrt(count[1:])
    d = np.diff(mean[1:] * scale, 2)
    s = 1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(6) if d.size else 0.0
    return s / scale


def _first(mask: np.ndarray) -> int | None:
    """1-based index of the first True (an offset, since mask starts at k = 1), or None."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) + 1 if hits.size else None


@records_params
@bounded(monotonicity_window=Bound(2, None))
def offset_scores(profile: OffsetProfile, *, monotonicity_window: int = 32) -> OffsetScores:
    """Scores of how m(k) = mean s(i, i+k) falls with k (see :class:`OffsetScores`).

    Parameters
    ----------
    profile : OffsetProfile
    monotonicity_window : int
        Offsets k = 1..window over which the Spearman correlation of m(k) with k is taken
        (at most the profile's largest offset).

    Examples
    --------
    Rows at 0, 50, 100 and 150 degrees: m(k) = cos(50k degrees).

    >>> angles = np.radians([0, 50, 100, 150])
    >>> p = offset_profile(np.column_stack([np.cos(angles), np.sin(angles)]), center=False)
    >>> s = offset_scores(p, monotonicity_window=3)
    >>> round(s.monotonicity, 9), s.similarity_length, s.length_zero, s.sign_changes
    (-1.0, 2, 2, 1)
    """
    # Imported here: scipy.signal and scipy.stats take longer to import than the rest of posviz
    # together, and only the scores use them (every page imports this module at start-up).
    import scipy.signal
    import scipy.stats

    k_max = profile.max_offset
    if monotonicity_window < 2 or k_max < 2:
        msg = f"The monotonicity window must hold 2..{k_max} offsets, got {monotonicity_window}."
        raise ValueError(msg)
    # A short table: every offset it has (stated in the result).
    window = min(monotonicity_window, k_max)
    m = profile.mean
    ranked = m[1 : window + 1]
    # A flat profile (a table without variance) has no ranks to correlate: undefined, NaN.
    rho = (
        scipy.stats.spearmanr(profile.offsets[1 : window + 1], ranked).statistic
        if np.ptp(ranked)
        else np.nan
    )
    rising = np.flatnonzero(np.diff(m) >= 0)
    tail = m[1:]
    noise = profile_noise(m, profile.count)
    return OffsetScores(
        monotonicity=float(rho),
        window=window,
        falls_until=int(rising[0]) if rising.size else k_max,
        similarity_length=similarity_length(m),
        length_zero=_first(tail < 0),
        sign_changes=int(np.count_nonzero(np.diff(tail >= 0))),
        # A noiseless profile (noise 0) counts every strict peak, as it should.
        peaks=len(scipy.signal.find_peaks(tail, prominence=PEAK_PROMINENCE * noise)[0]),
        noise=float(noise[0]) if noise.size else 0.0,
        translation_invariance=profile.translation_invariance,
    )
