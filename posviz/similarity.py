"""How does similarity between positions fall with distance, and does it depend on offset alone?"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.fft

from posviz import _linalg
from posviz._linalg import evenly_spaced, float64_rows, gram, mean_row, row_blocks
from posviz._params import records_params

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFINITIONS",
    "MAX_OFFSET",
    "METRICS",
    "SIMILARITIES",
    "GridSimilarity",
    "OffsetProfile",
    "OffsetScores",
    "SimilarityMap",
    "grid_heights",
    "grid_neighbours",
    "grid_similarity",
    "largest_offset",
    "offset_profile",
    "offset_scores",
    "prepared_rows",
    "similarity_map",
]

#: Pairwise measures offered: cosine similarity, dot product, Euclidean distance.
METRICS = ("cosine", "dot", "euclidean")
#: The measures that are similarities (inner products), as the offset profile needs.
SIMILARITIES = ("cosine", "dot")
#: Largest offset k of the offset profile unless asked for more: its spread costs
#: n_positions x k x d_model multiply-adds (the mean and translation invariance cover all k).
MAX_OFFSET = 1024
#: What each column of :meth:`OffsetScores.to_frame` means: the page's help and the report's note.
DEFINITIONS = {
    "translation_invariance": "1 − Σ_k Σ_i (s(i, i+k) − m(k))² / Σ_{i<j} (s(i, j) − mean s)²: "
    "the share of the variance of s over all pairs explained by the offset alone. 1 for a "
    "Toeplitz matrix (sinusoidal tables), near 0 for shuffled rows. Exact, over all offsets.",
    "monotonicity": "Spearman rank correlation of the mean profile m(k) with k for "
    "k = 1..monotonicity_window: −1 when similarity falls steadily with distance.",
    "falls_until": "Last offset before m(k) first stops falling (first k with m(k+1) ≥ m(k)).",
    "length_half": "Similarity length: first offset k with m(k) < ½ m(0). m(0) is 1 for "
    "cosine without zero rows and the mean squared norm for dot.",
    "length_zero": "First offset k with m(k) < 0.",
    "sign_changes": "Sign changes of m(k) for k = 1..largest offset.",
    "local_maxima": "Local maxima of m(k) for k = 1..largest offset: the off-diagonal bands "
    "of e.g. GPT-2.",
}
#: Values (float64) per chunk of rows prepared at a time for maps: 8 MB. Their cells are
#: products of chunks, so a chunk's size is part of a cell's rounding: kept as it was.
_CHUNK_ELEMENTS = 2**20
#: Columns transformed per FFT call: bounds the FFT scratch to ~2L x 16 complex values.
_FFT_COLUMNS = 16


def prepared_rows(
    values: np.ndarray, *, metric: str, center: bool, rows: slice = slice(None)
) -> np.ndarray:
    """float64 rows ready for inner products: centred and, for cosine, scaled to unit norm.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    metric : {"cosine", "dot", "euclidean"}
    center : bool
        Subtract the mean row of the whole table (not of `rows`) first.
    rows : slice
        Which rows to return.

    Returns
    -------
    ndarray of shape (n_rows, d_model)
        A row of zero norm stays zero, so its cosine with any row is 0 (not NaN).

    Examples
    --------
    >>> prepared_rows(np.array([[3.0, 4.0], [0.0, 0.0]]), metric="cosine", center=False)
    array([[0.6, 0.8],
           [0. , 0. ]])
    """
    _check_metric(metric)
    return _prepare(values[rows], mean_row(values, center=center), metric)


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        msg = f"Unknown metric {metric!r}; choose one of {', '.join(METRICS)}."
        raise ValueError(msg)


def _prepare(rows: np.ndarray, mean: np.ndarray, metric: str) -> np.ndarray:
    x = float64_rows(rows, mean)
    if metric == "cosine":
        # einsum, not linalg.norm: no temporary the size of the table.
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
        np.divide(x, norms, out=x, where=norms > 0)
    return x


class _PreparedTable:
    """:func:`prepared_rows` of the whole table, made in float64 a slice at a time on indexing.

    ``t[rows]`` and ``t[rows, cols]`` give what ``prepared_rows(values)[...]`` would, without
    the float64 copy of the whole table (twice a float32 table's bytes). Its norms pass reads
    every row once, which the offset profile does anyway; maps prepare their window's rows
    with `_prepare` instead, so a zoom into a long table reads only that window.
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


# --- position x position map ----------------------------------------------------------------


@dataclass(frozen=True)
class SimilarityMap:
    """A window of the position x position matrix: exact cells, or block means when large.

    Attributes
    ----------
    values : ndarray of shape (n_row_blocks, n_col_blocks)
        float64. With ``block == 1`` the exact s(i, j). Otherwise, per block of ``block x
        block`` positions, the mean of s (cosine, dot) or the root mean square of the distance
        (euclidean: the mean distance is not bilinear, its square is). The last block of a
        range may be shorter.
    row_positions : ndarray of shape (n_row_blocks,)
        Centre position of each row block (the position itself when ``block == 1``).
    col_positions : ndarray of shape (n_col_blocks,)
        Centre position of each column block.
    block : int
        Positions per block side.
    rows, cols : tuple of (int, int)
        The window's position ranges (start, stop).
    params : dict
        The settings of :func:`similarity_map` (``metric``, ``center``, ...).
    """

    values: np.ndarray
    row_positions: np.ndarray
    col_positions: np.ndarray
    block: int
    rows: tuple[int, int]
    cols: tuple[int, int]
    params: dict = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """Whether every cell is one (i, j) pair."""
        return self.block == 1


def _block_means(
    values: np.ndarray, span: tuple[int, int], block: int, mean: np.ndarray, metric: str
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Block means of the prepared rows and of their squared norms, a chunk of rows at a time.

    Chunks of ~_CHUNK_ELEMENTS values, whole blocks each: no float64 copy of the table.
    """
    start, stop = span
    step = block * max(1, _CHUNK_ELEMENTS // (block * values.shape[1]))
    for first in range(start, stop, step):
        x = _prepare(values[first : min(first + step, stop)], mean, metric)
        starts = np.arange(0, len(x), block)
        counts = np.diff(np.append(starts, len(x)))[:, None]
        squares = np.add.reduceat(np.einsum("ij,ij->i", x, x), starts)
        yield np.add.reduceat(x, starts, axis=0) / counts, squares / counts[:, 0]


def _block_centers(span: tuple[int, int], block: int) -> np.ndarray:
    starts = np.arange(*span, block)
    return starts + (np.minimum(starts + block, span[1]) - starts - 1) / 2


@records_params
def similarity_map(
    values: np.ndarray,
    *,
    metric: str = "cosine",
    center: bool = True,
    rows: tuple[int, int] | None = None,
    cols: tuple[int, int] | None = None,
    max_side: int = 800,
) -> SimilarityMap:
    """Cosine similarity, dot product or Euclidean distance between positions.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    metric : {"cosine", "dot", "euclidean"}
    center : bool
        Subtract the mean row first. Stated wherever the result is shown.
    rows, cols : (start, stop) or None
        Position ranges of the window; the whole table by default.
    max_side : int
        Above this many positions a side, cells are ``block x block`` block means with
        ``block = ceil(longest side / max_side)``. A float32 heatmap costs ~6.7 bytes of
        figure JSON per cell (base64 plus escaping): 800 a side keeps a figure under 5 MB.

    Notes
    -----
    Block means of a bilinear measure are bilinear in the block means of the rows:
    ``mean_{i in A, j in B} <x_i, x_j> = <mean_A x, mean_B x>``. So the overview is one small
    matrix product and no L x L matrix is ever formed. Distances use
    ``|a - b|^2 = |a|^2 + |b|^2 - 2<a, b>`` in float64: near 0 their absolute error is about
    ``sqrt(eps) * row norm`` (1.5e-8 relative to the norm).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    >>> similarity_map(x, metric="dot", center=False).values
    array([[1., 0., 1.],
           [0., 4., 2.],
           [1., 2., 2.]])
    >>> m = similarity_map(x, metric="dot", center=False, max_side=2)
    >>> m.block, m.values, m.row_positions
    (2, array([[1.25, 1.5 ],
           [1.5 , 2.  ]]), array([0.5, 2. ]))
    """
    n = len(values)
    spans = [rows or (0, n), cols or (0, n)]
    for name, (start, stop) in zip(("rows", "cols"), spans, strict=True):
        if not 0 <= start < stop <= n:
            msg = f"{name} range {start}:{stop} is outside positions 0..{n}; pick a range inside."
            raise ValueError(msg)
    _check_metric(metric)
    block = -(-max(stop - start for start, stop in spans) // max_side)
    mean = mean_row(values, center=center)
    a, a_sq = (
        np.concatenate(parts)
        for parts in zip(*_block_means(values, spans[0], block, mean, metric), strict=True)
    )
    # Column chunks one at a time: a single row against 50k columns needs no 50k x d copy.
    chunks = (
        [(a, a_sq)] if spans[1] == spans[0] else _block_means(values, spans[1], block, mean, metric)
    )
    parts = []
    for b, b_sq in chunks:
        inner = a @ b.T
        if metric == "euclidean":
            inner = np.sqrt(np.clip(a_sq[:, None] + b_sq[None, :] - 2 * inner, 0.0, None))
        parts.append(inner)
    return SimilarityMap(
        values=np.concatenate(parts, axis=1),
        row_positions=_block_centers(spans[0], block),
        col_positions=_block_centers(spans[1], block),
        block=int(block),
        rows=(int(spans[0][0]), int(spans[0][1])),
        cols=(int(spans[1][0]), int(spans[1][1])),
    )


# --- similarity vs offset -------------------------------------------------------------------


def _autocorrelation(x: np.ndarray) -> np.ndarray:
    """``sum_i <x_i, x_{i+k}>`` for k = 0..len(x)-1, by float64 FFT of each column."""
    n = len(x)
    n_fft = scipy.fft.next_fast_len(2 * n - 1, real=True)
    power = np.zeros(n_fft // 2 + 1)
    for start in range(0, x.shape[1], _FFT_COLUMNS):
        # Columns made contiguous first: an FFT along contiguous rows beats strided columns.
        columns = np.ascontiguousarray(x[:, start : start + _FFT_COLUMNS].T)
        spectrum = scipy.fft.rfft(columns, n=n_fft)
        power += (spectrum.real**2 + spectrum.imag**2).sum(axis=0)
    return scipy.fft.irfft(power, n=n_fft)[:n]


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
        Largest offset k, at most ``n_positions - 1``; by default
        :func:`largest_offset` (every offset up to `MAX_OFFSET`). The spread costs
        ``n_positions * max_offset * d_model`` multiply-adds, so lower it for huge tables.
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
    sums = _autocorrelation(x)
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
    length_half, length_zero : int or None
        First offset with m(k) below 0.5 x m(0) (resp. below 0): the similarity length. m(0)
        is 1 for cosine without zero rows, the mean squared norm for dot. None if never.
    sign_changes : int
        Times m(k) crosses 0.
    local_maxima : int
        Interior peaks of m(k): the off-diagonal bands ("ringing") of e.g. GPT-2.
    translation_invariance : float
        The profile's (see :class:`OffsetProfile`), reported beside the scores.
    params : dict
        The settings of :func:`offset_scores` and of the profile scored.
    """

    monotonicity: float
    window: int
    falls_until: int
    length_half: int | None
    length_zero: int | None
    sign_changes: int
    local_maxima: int
    translation_invariance: float
    params: dict = field(default_factory=dict)

    def metrics(self) -> dict[str, float | int | None]:
        """The scores by their export names, translation invariance first."""
        return {
            "translation_invariance": self.translation_invariance,
            "monotonicity": self.monotonicity,
            "falls_until": self.falls_until,
            "length_half": self.length_half,
            "length_zero": self.length_zero,
            "sign_changes": self.sign_changes,
            "local_maxima": self.local_maxima,
        }

    def to_frame(self) -> pd.DataFrame:
        """:meth:`metrics` as a one-row frame: what the page, the report and exports show."""
        import pandas as pd

        return pd.DataFrame([self.metrics()])


def _first(mask: np.ndarray) -> int | None:
    """1-based index of the first True (an offset, since mask starts at k = 1), or None."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) + 1 if hits.size else None


@records_params
def offset_scores(profile: OffsetProfile, *, monotonicity_window: int = 32) -> OffsetScores:
    """Scores of how m(k) = mean s(i, i+k) falls with k (see :class:`OffsetScores`).

    Examples
    --------
    Rows at 0, 50, 100 and 150 degrees: m(k) = cos(50k degrees).

    >>> angles = np.radians([0, 50, 100, 150])
    >>> p = offset_profile(np.column_stack([np.cos(angles), np.sin(angles)]), center=False)
    >>> s = offset_scores(p, monotonicity_window=3)
    >>> round(s.monotonicity, 9), s.length_half, s.length_zero, s.sign_changes
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
    rho = scipy.stats.spearmanr(profile.offsets[1 : window + 1], m[1 : window + 1]).statistic
    rising = np.flatnonzero(np.diff(m) >= 0)
    tail = m[1:]
    return OffsetScores(
        monotonicity=float(rho),
        window=window,
        falls_until=int(rising[0]) if rising.size else k_max,
        length_half=_first(tail < 0.5 * m[0]),
        length_zero=_first(tail < 0),
        sign_changes=int(np.count_nonzero(np.diff(tail >= 0))),
        local_maxima=len(scipy.signal.find_peaks(tail)[0]),
        translation_invariance=profile.translation_invariance,
    )


# --- 2-D grids ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GridSimilarity:
    """Cosine similarity on a row-major H x W patch grid (ViT, Dosovitskiy et al. Fig. 7).

    Attributes
    ----------
    tiles : ndarray of shape (n_tile_rows, n_tile_cols, height, width)
        ``tiles[a, b]`` is the cosine of patch ``(tile_rows[a], tile_cols[b])`` with every patch.
    tile_rows : ndarray of shape (n_tile_rows,)
        Patch rows that have a tile: all of them, or evenly spaced when there are too many.
    tile_cols : ndarray of shape (n_tile_cols,)
    row_profile : ndarray of shape (height,)
        Mean cosine between patches ``dr`` rows apart in the same column, dr = 0..height-1.
    col_profile : ndarray of shape (width,)
        Mean cosine between patches ``dc`` columns apart in the same row, dc = 0..width-1.
    params : dict
        The settings of :func:`grid_similarity` (``grid``, ``center``, ...).
    """

    tiles: np.ndarray
    tile_rows: np.ndarray
    tile_cols: np.ndarray
    row_profile: np.ndarray
    col_profile: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def grid(self) -> tuple[int, int]:
        """(height, width) of the grid: the shape of every tile."""
        return self.tiles.shape[2], self.tiles.shape[3]

    @property
    def subsampled(self) -> bool:
        """Whether some patches have no tile."""
        return self.tiles.shape[:2] != self.grid


def grid_heights(n_positions: int) -> tuple[list[int], int]:
    """The heights of every row-major grid of `n_positions` patches, and the most square one.

    >>> grid_heights(12)
    ([1, 2, 3, 4, 6, 12], 3)
    """
    small = [h for h in range(1, math.isqrt(n_positions) + 1) if n_positions % h == 0]
    heights = sorted({*small, *(n_positions // h for h in small)})
    return heights, min(heights, key=lambda h: abs(h - n_positions // h))


def grid_neighbours(position: int, grid: tuple[int, int]) -> list[int]:
    """The positions above, left of, right of and below `position` on a row-major grid.

    A 1-D table is the grid (1, n_positions): its neighbours are p - 1 and p + 1.

    >>> grid_neighbours(4, (3, 3)), grid_neighbours(0, (1, 5))
    ([1, 3, 5, 7], [1])
    """
    height, width = grid
    row, col = divmod(position, width)
    steps = ((-1, 0), (0, -1), (0, 1), (1, 0))
    return [
        (row + dr) * width + col + dc
        for dr, dc in steps
        if 0 <= row + dr < height and 0 <= col + dc < width
    ]


@records_params
def grid_similarity(
    values: np.ndarray,
    *,
    grid: tuple[int, int],
    center: bool = True,
    max_tiles: int = 24,
    max_side: int = 800,
) -> GridSimilarity:
    """Per-patch cosine maps and row/column profiles of a 2-D position grid.

    Parameters
    ----------
    values : ndarray of shape (height * width, d_model)
        Patch rows in row-major order (prefix tokens already trimmed).
    grid : (height, width)
    center : bool
        Subtract the mean row first.
    max_tiles : int
        Most tiles per mosaic side; more patches are subsampled evenly.
    max_side : int
        Most cells per mosaic side (tiles x patches), which keeps the figure small: large
        grids get fewer tiles.

    Examples
    --------
    >>> g = grid_similarity(np.eye(4), grid=(2, 2), center=False)
    >>> g.tiles[0, 1].tolist(), g.row_profile.tolist()
    ([[0.0, 1.0], [0.0, 0.0]], [1.0, 0.0])
    """
    height, width = grid
    if height * width != len(values):
        msg = (
            f"Grid {height} x {width} = {height * width} patches, but the table has "
            f"{len(values)} rows; give a grid whose height x width is the number of rows."
        )
        raise ValueError(msg)
    x = prepared_rows(values, metric="cosine", center=center)
    rows = evenly_spaced(height, min(max_tiles, max(1, max_side // height)))
    cols = evenly_spaced(width, min(max_tiles, max(1, max_side // width)))
    patches = (rows[:, None] * width + cols[None, :]).ravel()
    tiles = (x[patches] @ x.T).reshape(len(rows), len(cols), height, width)
    cube = x.reshape(height, width, -1)
    row_sums = _autocorrelation(cube.reshape(height, -1))
    col_sums = _autocorrelation(cube.transpose(1, 0, 2).reshape(width, -1))
    return GridSimilarity(
        tiles=tiles,
        tile_rows=rows,
        tile_cols=cols,
        row_profile=row_sums / (width * np.arange(height, 0, -1)),
        col_profile=col_sums / (height * np.arange(width, 0, -1)),
    )
