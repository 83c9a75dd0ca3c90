"""Low-level float64 linear algebra shared by the analyses: blocks, centring, Gram products.

Private: the analyses' public functions are the API. Everything here reads a float32 or
float64 table a slice at a time in float64, so no analysis makes a float64 copy of a large
table (twice a float32 table's bytes) unless it needs one whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import numpy as np
from scipy.linalg import blas

__all__ = [
    "BLOCK_BYTES",
    "N_BLOCKS",
    "autocorrelation",
    "block_rows",
    "centered",
    "evenly_spaced",
    "float64_blocks",
    "float64_rows",
    "gram",
    "gram_of_blocks",
    "mean_row",
    "row_blocks",
    "tall_times",
]

#: A table is read in at least `N_BLOCKS` slices, each of at most `BLOCK_BYTES` of float64.
N_BLOCKS = 8
BLOCK_BYTES = 32 * 2**20
#: Columns of a Gram matrix mirrored at a time (its upper triangle from the lower).
_MIRROR_COLUMNS = 256
#: Columns transformed per FFT call: bounds the FFT scratch to ~2L x 16 complex values.
_FFT_COLUMNS = 16


def block_rows(n_rows: int, width: int) -> int:
    """Rows per float64 slice of an `n_rows` x `width` table: `N_BLOCKS` slices or more.

    Read at call time, so tests can shrink `N_BLOCKS` and `BLOCK_BYTES` to cross block edges.
    """
    return min(-(-n_rows // N_BLOCKS), max(1, BLOCK_BYTES // (8 * width)))


def mean_row(values: np.ndarray, *, center: bool) -> np.ndarray:
    """The float64 mean row of `values` when `center`, else a row of zeros (nothing removed)."""
    return values.mean(axis=0, dtype=np.float64) if center else np.zeros(values.shape[1])


def float64_rows(
    rows: np.ndarray, mean: np.ndarray | None = None, scale: np.ndarray | None = None
) -> np.ndarray:
    """A float64 copy of `rows`, minus `mean` and each row then times its `scale` if given."""
    x = np.array(rows, dtype=np.float64)
    if mean is not None:
        x -= mean
    if scale is not None:
        x *= scale[:, None]
    return x


def centered(values: np.ndarray, *, center: bool) -> np.ndarray:
    """The whole table as a float64 copy, its mean row removed if `center`.

    For products on the position side (``X Xᵀ``), which need every row at once.
    """
    return float64_rows(values, mean_row(values, center=center))


def row_blocks(
    values: np.ndarray, mean: np.ndarray | None = None, row_scale: np.ndarray | None = None
) -> Iterator[np.ndarray]:
    """Rows of `values` in float64 slices (:func:`block_rows`), minus `mean`, times `row_scale`."""
    step = block_rows(len(values), values.shape[1])
    for start in range(0, len(values), step):
        scale = None if row_scale is None else row_scale[start : start + step]
        yield float64_rows(values[start : start + step], mean, scale)


def float64_blocks(
    values: np.ndarray, *, center: bool, row_scale: np.ndarray | None = None
) -> Iterator[np.ndarray]:
    """The table in float64 slices, oriented tall and column-centred if asked.

    Slices of rows of X when it has at least as many rows as columns, else of rows of X^T
    (columns of X), `N_BLOCKS` of them, or more to keep each within `BLOCK_BYTES`: converting
    and centring a slice at a time makes no float64 copy of the whole table. Always float64:
    a float32 Gram matrix loses ~1% at 3e-4 of the largest value. `row_scale`, one factor per
    row of X, multiplies the centred rows (e.g. to unit norm, for cosine similarity).
    """
    mean = mean_row(values, center=center)
    if values.shape[0] >= values.shape[1]:
        yield from row_blocks(values, mean, row_scale)
        return
    tall = values.T
    step = block_rows(len(tall), tall.shape[1])
    for start in range(0, len(tall), step):
        block = float64_rows(tall[start : start + step], mean[start : start + step, None])
        if row_scale is not None:
            block *= row_scale
        yield block


def tall_times(values: np.ndarray, matrix: np.ndarray, *, center: bool) -> np.ndarray:
    """The table in its tall orientation (see :func:`float64_blocks`) times `matrix`, in float64.

    ``X M`` for tall tables, ``Xᵀ M`` for wide ones (centred first if `center`), a slice at a
    time: e.g. the scores ``X V`` of principal directions, or ``V = Xᵀ U / S`` from ``U``.
    """
    return np.concatenate([block @ matrix for block in float64_blocks(values, center=center)])


def gram_of_blocks(blocks: Iterable[np.ndarray], size: int) -> np.ndarray:
    """``sum Bᵀ B`` over float64 `blocks` of `size` columns: Fortran-ordered, symmetric.

    Accumulated in place by BLAS ``dsyrk`` (one triangle, no temporary per block), then
    mirrored: faster than adding numpy products of the blocks, and from the same BLAS as the
    LAPACK calls made on the result.
    """
    g = np.zeros((size, size), order="F")
    for block in blocks:
        # A C-ordered block is its transpose in Fortran order: no copy for BLAS.
        g = blas.dsyrk(1.0, block.T, beta=1.0, c=g, lower=1, overwrite_c=1)
    for start in range(0, size, _MIRROR_COLUMNS):
        stop = start + _MIRROR_COLUMNS
        g[start:stop, stop:] = g[stop:, start:stop].T
        corner = g[start:stop, start:stop]
        corner += np.tril(corner, -1).T
    return g


def gram(values: np.ndarray, *, center: bool, row_scale: np.ndarray | None = None) -> np.ndarray:
    """The float64 Gram matrix on the smaller side of the (optionally column-centred) table.

    ``X.T @ X`` for tall tables, ``X @ X.T`` for wide ones; both have the squared singular
    values of X as eigenvalues. Fortran-ordered, symmetric. `row_scale`: see
    :func:`float64_blocks`.
    """
    blocks = float64_blocks(values, center=center, row_scale=row_scale)
    return gram_of_blocks(blocks, min(values.shape))


def evenly_spaced(n: int, k: int) -> np.ndarray:
    """At most `k` evenly spaced indices from 0 to n - 1, both ends included, ascending.

    All of ``0..n-1`` when ``n <= k``; otherwise ``k`` points of ``linspace(0, n - 1)``
    rounded to the nearest index (fewer only if two round alike).

    Examples
    --------
    >>> evenly_spaced(10, 4).tolist(), evenly_spaced(3, 5).tolist()
    ([0, 3, 6, 9], [0, 1, 2])
    """
    if n <= k:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))


class Sliceable(Protocol):
    """A table sliced like an array (``x[:, a:b]``) without being one: rows made on demand."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __len__(self) -> int: ...

    def __getitem__(self, key: Any) -> np.ndarray: ...


def autocorrelation(x: np.ndarray | Sliceable) -> np.ndarray:
    """``sum_i <x_i, x_{i+k}>`` for k = 0..len(x)-1, by float64 FFT of each column.

    `x` is an array or anything sliced like one (``x[:, a:b]``), e.g. prepared rows made a
    slice at a time. The offset profile and the grid profiles both sum along it.
    """
    import scipy.fft  # here: slow to load, and a first open needs no offset profile

    n = len(x)
    n_fft = scipy.fft.next_fast_len(2 * n - 1, real=True)
    power = np.zeros(n_fft // 2 + 1)
    for start in range(0, x.shape[1], _FFT_COLUMNS):
        # Columns made contiguous first: an FFT along contiguous rows beats strided columns.
        columns = np.ascontiguousarray(x[:, start : start + _FFT_COLUMNS].T)
        spectrum = scipy.fft.rfft(columns, n=n_fft)
        power += (spectrum.real**2 + spectrum.imag**2).sum(axis=0)
    return scipy.fft.irfft(power, n=n_fft)[:n]
