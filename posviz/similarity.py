"""How similar is each position to every other: position x position maps and 2-D grid maps.

The profile of similarity against the offset between positions, and its scores, are in
`posviz.offsets`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from posviz._linalg import autocorrelation, evenly_spaced, float64_rows, mean_row
from posviz._params import Bound, bounded, records_params

__all__ = [
    "METRICS",
    "METRIC_NAMES",
    "GridSimilarity",
    "SimilarityMap",
    "grid_heights",
    "grid_neighbours",
    "grid_similarity",
    "prepared_rows",
    "similarity_map",
]

#: Pairwise measures offered: cosine similarity, dot product, Euclidean distance.
METRICS = ("cosine", "dot", "euclidean")
#: Each measure in words, as figures and widgets name it.
METRIC_NAMES = {
    "cosine": "cosine similarity",
    "dot": "dot product",
    "euclidean": "Euclidean distance",
}
#: Values (float64) per chunk of rows prepared at a time for maps: 8 MB. Their cells are
#: products of chunks, so a chunk's size is part of a cell's rounding: kept as it was.
_CHUNK_ELEMENTS = 2**20


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


#: Squared distances below this share of ``|a|^2 + |b|^2`` lose more than ~1e-9 of their
#: digits to the Gram route's cancellation: they are recomputed from the rows.
_CANCELLATION = 1e-6


def _distances(
    a: np.ndarray,
    a_sq: np.ndarray,
    b: np.ndarray,
    b_sq: np.ndarray,
    inner: np.ndarray,
    *,
    exact: bool,
) -> np.ndarray:
    """Euclidean distances (RMS within blocks) from the inner products of rows `a` and `b`.

    With single-row cells (`exact`), cells where the Gram route cancels are recomputed as
    ``|a_i - b_j|`` directly, a chunk of cells at a time.
    """
    squares = a_sq[:, None] + b_sq[None, :]
    d2 = squares - 2 * inner
    if exact:
        i, j = np.nonzero(d2 < _CANCELLATION * squares)
        step = max(1, _CHUNK_ELEMENTS // a.shape[1])
        for first in range(0, len(i), step):
            rows, cols = i[first : first + step], j[first : first + step]
            diff = a[rows] - b[cols]
            d2[rows, cols] = np.einsum("ij,ij->i", diff, diff)
    return np.sqrt(np.clip(d2, 0.0, None))


def _block_centers(span: tuple[int, int], block: int) -> np.ndarray:
    starts = np.arange(*span, block)
    return starts + (np.minimum(starts + block, span[1]) - starts - 1) / 2


@records_params
@bounded(max_side=Bound(2, 4096))
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
    ``|a - b|^2 = |a|^2 + |b|^2 - 2<a, b>`` in float64, except where that cancels: cells with
    ``|a - b|^2 < 1e-6 (|a|^2 + |b|^2)`` are recomputed directly as ``|a - b|`` (cell by cell,
    so ``d(i, i) == 0`` exactly), which keeps every cell's relative error below ~1e-9.

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
            inner = _distances(a, a_sq, b, b_sq, inner, exact=block == 1)
        parts.append(inner)
    return SimilarityMap(
        values=np.concatenate(parts, axis=1),
        row_positions=_block_centers(spans[0], block),
        col_positions=_block_centers(spans[1], block),
        block=int(block),
        rows=(int(spans[0][0]), int(spans[0][1])),
        cols=(int(spans[1][0]), int(spans[1][1])),
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
@bounded(max_tiles=Bound(1, 64), max_side=Bound(2, 4096))
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
    row_sums = autocorrelation(cube.reshape(height, -1))
    col_sums = autocorrelation(cube.transpose(1, 0, 2).reshape(width, -1))
    return GridSimilarity(
        tiles=tiles,
        tile_rows=rows,
        tile_cols=cols,
        row_profile=row_sums / (width * np.arange(height, 0, -1)),
        col_profile=col_sums / (height * np.arange(width, 0, -1)),
    )
