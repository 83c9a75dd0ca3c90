"""How low-rank is a table: singular values, explained variance, effective ranks, noise level."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
from scipy.linalg import blas, lapack

from posviz._linalg import float64_blocks, gram
from posviz._params import records_params

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFINITIONS",
    "NO_VARIANCE",
    "THRESHOLDS",
    "Spectrum",
    "hard_threshold_coefficient",
    "marchenko_pastur_median",
    "spectrum",
]

#: Explained-variance levels at which the number of components is reported.
THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.99)
#: What each rank and count of :meth:`Spectrum.metrics` is, for help texts and the report.
DEFINITIONS = {
    "effective_rank": "Roy & Vetterli (2007): exp(entropy of σ_i / Σσ_j). Equals r for r "
    "equal singular values.",
    "stable_rank": "Σσ_i² / σ_1²: squared Frobenius norm over squared spectral norm.",
    "participation_ratio": "(Σλ_i)² / Σλ_i², λ_i = σ_i²: how many components share the variance.",
    "n_above_noise": "Singular values above the Gavish & Donoho (2014) optimal hard threshold "
    "for an unknown noise level, ω(β)·median(σ), with β = min(m, d)/max(m, d) for m = n − 1 "
    "rows when centred (n when not), ω(1) ≈ 2.858 (exact ω from the Marchenko-Pastur median), and "
    "above the resolution floor. Pure i.i.d. noise stays below it.",
}
#: Relative accuracy of every singular value from 1e-6 of sigma_1 up (see `spectrum`).
_TARGET = 1e-9
#: The Gram route's error bound: each eigenvalue of the float64 Gram matrix is within
#: ``_GRAM_ERROR * eps * sigma_1**2`` of the exact one (largest seen: 4.6, centred sinusoidal
#: table 512 x 768; 2.9 learned-like 2048 x 2048). A singular value's relative error is then at
#: most ``_GRAM_ERROR * eps / 2 * (sigma_1 / sigma)**2``.
_GRAM_ERROR = 9.0
#: Singular values below this share of sigma_1 are refined (see `spectrum`): where the bound
#: above exceeds `_TARGET` (1.0e-3; at the former 1e-4 a value just above it was 2.4e-9 off).
_SPLIT = float(np.sqrt(_GRAM_ERROR * np.finfo(np.float64).eps / (2 * _TARGET)))


def _tridiagonal(g: np.ndarray) -> tuple[np.ndarray, ...]:
    """LAPACK ``dsytrd`` of symmetric `g` (lower): reflectors, diagonal, off-diagonal, tau.

    Given its optimal workspace: scipy's default runs the unblocked reduction, which is
    several times slower (it works a vector at a time instead of in BLAS-3 blocks).
    `g` is overwritten (if Fortran-ordered: else it is copied first).
    """
    lwork = int(lapack.dsytrd_lwork(len(g), lower=1)[0])
    reflectors, diagonal, off_diagonal, tau, _ = lapack.dsytrd(
        g, lower=1, lwork=lwork, overwrite_a=1
    )
    return reflectors, diagonal, off_diagonal, tau


def _back_transform(reflectors: np.ndarray, tau: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``Q @ z`` for the orthogonal Q of :func:`_tridiagonal`, acting on its rows 1..n-1.

    LAPACK's ``dormtr`` (not wrapped by scipy) calls ``dormqr`` on the reflectors from row 1,
    which f2py would copy (no leading-dimension argument: twice a float32 square table's
    bytes). The same memory read from one element later as an n x (n-1) matrix is that block
    with one extra last row, which reads the unused upper triangle's first row: zeroed, it
    makes the reflectors act on an n-th row of `z`'s padding and nowhere else.
    """
    n = len(reflectors)
    reflectors[0, 1:] = 0.0
    shifted = reflectors.ravel(order="F")[1 : 1 + n * (n - 1)].reshape((n, n - 1), order="F")
    padded = np.zeros((n, z.shape[1]), order="F")
    padded[:-1] = z
    query = lapack.dormqr(b"L", b"N", shifted, tau, padded, lwork=-1, overwrite_c=1)
    lwork = int(query[1][0])  # the blocked code's optimum
    q_z = lapack.dormqr(b"L", b"N", shifted, tau, padded, lwork=lwork, overwrite_c=1)[0]
    return q_z[:-1]


#: Inverse iterations per small eigenvalue (see `_inverse_iteration`).
_ITERATIONS = 2


def _inverse_iteration(
    diagonal: np.ndarray, off_diagonal: np.ndarray, shifts: np.ndarray, scale: float
) -> np.ndarray:
    """Orthonormal basis of the tridiagonal matrix's eigenvectors at its eigenvalues `shifts`.

    Inverse iteration from a seeded random start, one shift at a time (LAPACK ``dgttrf`` +
    ``dgttrs``: O(n) each), then one QR of all the vectors (BLAS-3) in place of ``dstein``'s
    vector-by-vector reorthogonalisation of a cluster (O(n k^2) in BLAS-1, and every value
    below the split is one cluster to it) and of the bisection (``dstebz``) it needs first:
    the shifts are ``dsterf``'s eigenvalues, accurate to the matrix's rounding. The basis
    serves a Rayleigh-Ritz step, which needs the span, not the individual vectors; a cluster
    whose span it misses shows there (see `spectrum`). `scale`: the matrix's norm (its largest
    eigenvalue). Returned of shape (n, k).
    """
    n = len(diagonal)
    if n < 3:  # scipy's dgttrf refuses a 2 x 2 (it sizes an array n - 2 long): exact vectors
        # of the smallest eigenvalues, which `shifts` are (spectrum refines the small ones).
        select = (0, len(shifts) - 1)
        return scipy.linalg.eigh_tridiagonal(
            diagonal, off_diagonal, select="i", select_range=select
        )[1]
    nudge = np.finfo(np.float64).eps * scale
    vectors = np.random.default_rng(0).standard_normal((len(shifts), n))
    for vector, shift in zip(vectors, shifts, strict=True):
        lower, main, upper, upper2, pivots, info = lapack.dgttrf(
            off_diagonal, diagonal - shift, off_diagonal
        )
        if info:  # the shift is an eigenvalue to the last bit: move it off by a rounding unit
            lower, main, upper, upper2, pivots, info = lapack.dgttrf(
                off_diagonal, diagonal - (shift - nudge), off_diagonal
            )
        column = vector[:, None]
        for _ in range(_ITERATIONS):
            column = lapack.dgttrs(lower, main, upper, upper2, pivots, column)[0]
            column /= np.linalg.norm(column)
        vector[:] = column[:, 0]
    return scipy.linalg.qr(vectors.T, mode="economic", overwrite_a=True, check_finite=False)[0]


def _splits(off_diagonal: np.ndarray, scale: float) -> bool:
    """Whether the tridiagonal matrix falls apart, at its off-diagonal entries below its
    rounding level (``eps * scale``, `scale` its norm), into blocks of at most half its size.

    MRRR (``dstemr``) then finds the small values' vectors block by block, far faster than
    inverse iteration, which pays a Python call and an O(n) solve per value: a sinusoidal
    table's 567 of 768 in 3 ms against 71 ms, a ViT grid's 180 of 196 in 0.4 against 7.6 ms.
    On a matrix that does not split, MRRR is the slower: 241 against 158 ms for learned-like
    2048 x 2048's 454 (benchmarks/claims.py).
    """
    ends = np.flatnonzero(np.abs(off_diagonal) <= np.finfo(np.float64).eps * scale)
    n = len(off_diagonal) + 1
    blocks = np.diff(np.concatenate([[0], ends + 1, [n]]))
    return bool(blocks.max() <= n // 2)


def _smallest_vectors(diagonal: np.ndarray, off_diagonal: np.ndarray, k: int) -> np.ndarray:
    """The tridiagonal matrix's eigenvectors of its `k` smallest eigenvalues, by MRRR
    (``dstemr``): exact to its rounding, of shape (n, k)."""
    return scipy.linalg.eigh_tridiagonal(
        diagonal, off_diagonal, select="i", select_range=(0, k - 1), lapack_driver="stemr"
    )[1]


def _ritz_values(
    values: np.ndarray,
    *,
    center: bool,
    reflectors: np.ndarray,
    tau: np.ndarray,
    z: np.ndarray,
) -> np.ndarray:
    """Eigenvalues (ascending) of the Gram matrix of ``X Q z``: Rayleigh-Ritz on the table.

    `z` holds orthonormal vectors of the tridiagonal form, brought back to the Gram matrix's
    coordinates by the reduction's reflectors (`_back_transform`), then multiplied by the
    table itself, whose product has a Gram matrix of only a few decades.
    """
    z = np.array(z, order="F")
    z[1:] = _back_transform(reflectors, tau, z[1:])
    k = z.shape[1]
    # The Gram matrix of X z, by scipy's BLAS like the rest (no hand-over to numpy's).
    part = np.zeros((k, k), order="F")
    for block in float64_blocks(values, center=center):
        projected = blas.dgemm(1.0, block.T, z, trans_a=1)
        part = blas.dsyrk(1.0, projected, beta=1.0, c=part, trans=1, lower=1, overwrite_c=1)
    return scipy.linalg.eigh(part, lower=True, eigvals_only=True)


#: Why a table's ranks and shares are undefined, for the page, the CLI and exports.
NO_VARIANCE = (
    "All singular values are 0 (every row equal, or all zero without centring): the shares of "
    "the variance and the ranks built on them are 0 / 0, undefined."
)


@dataclass(frozen=True)
class Spectrum:
    """Singular-value spectrum of a position table and the numbers derived from it.

    Attributes
    ----------
    singular_values : ndarray of shape (min(n_positions, d_model),)
        Descending, >= 0. Values below `floor` are rounding noise of the method.
    shape : tuple of (int, int)
        (n_positions, d_model) of the table.
    floor : float
        Resolution limit: singular values below it cannot be told from 0 by the method
        (the rounding level of the last Gram matrix formed, see :func:`spectrum`).
    params : dict
        The settings of :func:`spectrum` that made it (``center``).
    """

    singular_values: np.ndarray
    shape: tuple[int, int]
    floor: float
    params: dict = field(default_factory=dict)

    @property
    def eigenvalues(self) -> np.ndarray:
        """ndarray of shape (r,): squared singular values (variance along each component)."""
        return self.singular_values**2

    @property
    def explained_variance(self) -> np.ndarray:
        """ndarray of shape (r,): each component's share of the total variance.

        On an uncentred table (``centered=False``) this is a share of the sum of squares of
        the entries (the mean row included), not of the variance. NaN when there is none
        (0 / 0, see `NO_VARIANCE`).
        """
        lam = self.eigenvalues
        return np.divide(lam, lam.sum(), out=np.full_like(lam, np.nan), where=self.has_variance)

    @property
    def cumulative(self) -> np.ndarray:
        """ndarray of shape (r,): share of the variance in the first k components, k = 1..r."""
        return np.cumsum(self.explained_variance)

    @property
    def reconstruction_error(self) -> np.ndarray:
        """ndarray of shape (r + 1,): ``||X - X_k||_F / ||X||_F`` for rank k = 0..r.

        Summed from the tail rather than as ``1 - cumulative`` so small errors keep their digits.
        """
        lam = self.eigenvalues
        tail = np.concatenate([np.cumsum(lam[::-1])[::-1], [0.0]])
        return np.sqrt(tail / lam.sum())

    def k_at(self, threshold: float) -> int:
        """Fewest components that explain at least `threshold` of the variance."""
        return int(np.searchsorted(self.cumulative, threshold * (1 - 1e-12)) + 1)

    @property
    def effective_rank(self) -> float:
        """Roy & Vetterli (2007): exp of the entropy of the singular values normalised to sum 1."""
        p = self.singular_values / self.singular_values.sum()
        p = p[p > 0]
        return float(np.exp(-np.sum(p * np.log(p))))

    @property
    def stable_rank(self) -> float:
        """``sum sigma_i^2 / sigma_1^2``: squared Frobenius over squared spectral norm."""
        lam = self.eigenvalues
        return float(lam.sum() / lam[0])

    @property
    def participation_ratio(self) -> float:
        """``(sum lambda)^2 / sum lambda^2`` with ``lambda = sigma^2``."""
        lam = self.eigenvalues
        return float(lam.sum() ** 2 / np.sum(lam**2))

    @property
    def noise_shape(self) -> tuple[int, int]:
        """(m, d): the shape of an i.i.d. noise matrix with the same singular-value law.

        Centring projects the n rows onto the n - 1 dimensions orthogonal to the all-ones
        vector; Gaussian noise centred is again i.i.d. Gaussian in those n - 1 dimensions, so
        ``m = n - 1`` when centred, else n.
        """
        n, d = self.shape
        return n - int(self.params["center"]), d

    @property
    def noise_threshold(self) -> float:
        """Gavish & Donoho (2014) optimal hard threshold for an unknown noise level.

        ``omega(beta) * median(sigma)`` over the ``min(m, d)`` singular values of the
        :attr:`noise_shape` (the exact zero centring adds is not one of them), with
        ``beta = min(m, d) / max(m, d)`` and ``omega`` from :func:`hard_threshold_coefficient`.
        Pure i.i.d. noise of any variance has its largest singular value below it with
        probability tending to 1; a component above it carries more signal than noise.
        """
        m, d = self.noise_shape
        size = min(m, d)
        if size < 1:
            return float("inf")
        median = float(np.median(self.singular_values[:size]))
        return hard_threshold_coefficient(size / max(m, d)) * median

    @property
    def n_above_noise(self) -> int:
        """Components above :attr:`noise_threshold` and resolved (at least :attr:`floor`).

        The floor matters only for tables of exactly low rank, whose median singular value is
        rounding noise: the count is then their numerical rank.
        """
        return int(np.count_nonzero(self.singular_values > self.noise_cut))

    @property
    def noise_cut(self) -> float:
        """Where :attr:`n_above_noise` cuts: the noise threshold, or the floor when above it."""
        return max(self.noise_threshold, self.floor)

    @property
    def has_variance(self) -> bool:
        """False when every singular value is 0: every share of the variance is then 0 / 0."""
        return bool(self.singular_values.any())

    def metrics(self) -> dict[str, float | int | None]:
        """The headline numbers, by the names the CLI and exports use.

        None where undefined: the shares and ranks of a table without variance (see
        :attr:`has_variance` and `NO_VARIANCE`).
        """
        if not self.has_variance:
            return {f"k{round(t * 100)}": None for t in THRESHOLDS} | {
                "effective_rank": None,
                "stable_rank": None,
                "participation_ratio": None,
                "n_above_noise": 0,
                "noise_threshold": self.noise_cut,
                "gavish_donoho_threshold": self.noise_threshold,
                "resolution_floor": self.floor,
            }
        out: dict[str, float | int | None] = {
            f"k{round(t * 100)}": self.k_at(t) for t in THRESHOLDS
        }
        out |= {
            "effective_rank": self.effective_rank,
            "stable_rank": self.stable_rank,
            "participation_ratio": self.participation_ratio,
            "n_above_noise": self.n_above_noise,
            # The cut n_above_noise uses (the larger of the two below): count the values
            # above it and you get n_above_noise.
            "noise_threshold": self.noise_cut,
            "gavish_donoho_threshold": self.noise_threshold,
            "resolution_floor": self.floor,
        }
        return out

    def metrics_table(self) -> pd.DataFrame:
        """:meth:`metrics` as a one-row frame: the page's, the report's and exports' table."""
        import pandas as pd  # on first use: `posviz summary` prints without loading pandas

        return pd.DataFrame([self.metrics()])

    def to_frame(self) -> pd.DataFrame:
        """One row per component k: its singular value, share of the variance and cumulative."""
        import pandas as pd

        return pd.DataFrame(
            {
                "k": np.arange(1, len(self.singular_values) + 1),
                "singular_value": self.singular_values,
                "explained_variance": self.explained_variance,
                "cumulative": self.cumulative,
            }
        )


@lru_cache(maxsize=256)
def marchenko_pastur_median(beta: float) -> float:
    """Median of the Marchenko-Pastur law with aspect ratio `beta` in (0, 1] and variance 1.

    The limiting law of the eigenvalues of ``Z Z^T / d`` for an ``m x d`` matrix Z of i.i.d.
    unit-variance entries, ``beta = m / d``: density ``sqrt((b+ - x)(x - b-)) / (2 pi beta
    x)`` on ``[b-, b+]``, ``b+- = (1 +- sqrt(beta))^2``. Root of its distribution function
    (:func:`_marchenko_pastur_cdf`, in closed form), bisected to adjacent floats.
    """
    if not 0 < beta <= 1:
        msg = f"The aspect ratio beta must lie in (0, 1], got {beta}."
        raise ValueError(msg)
    # Bisection, not scipy.optimize.brentq on scipy.integrate.quad: those two packages were a
    # third of the CPU a first open spends importing beyond Streamlit's, for this one number.
    # About 60 halvings reach adjacent floats.
    low, high = 0.0, np.pi
    while (middle := (low + high) / 2) not in (low, high):
        if _marchenko_pastur_cdf(middle, beta) < 0.5:
            low = middle
        else:
            high = middle
    return float(1 + beta - 2 * np.sqrt(beta) * np.cos(middle))


def _marchenko_pastur_cdf(angle: float, beta: float) -> float:
    """The Marchenko-Pastur distribution function (see :func:`marchenko_pastur_median`) at
    ``x = 1 + beta - 2 sqrt(beta) cos(angle)``, `angle` in [0, pi], in closed form.

    With ``s = sqrt(beta)`` and ``y = s sin(angle) / (1 - s cos(angle))`` it is
    ``(angle + sin(angle) (s - cos(angle)) / (1 - s cos(angle)) + (1 - beta) (y - atan(y)) /
    beta) / pi``: the density's antiderivative, arranged so that no two terms of order
    ``1 / beta`` cancel (to ~1e-16 / sqrt(beta) absolute, where a quadrature gave ~1e-12).
    """
    s = np.sqrt(beta)
    sin, half = np.sin(angle), 2 * np.sin(angle / 2) ** 2  # half = 1 - cos(angle)
    # 1 - s cos(angle) and s - cos(angle) without cancelling when s is near 1 and angle small.
    below = (1 - s) + s * half
    y = s * sin / below
    total = angle + sin * ((s - 1) + half) / below + (1 - beta) * (y - np.arctan(y)) / beta
    return float(total / np.pi)


def hard_threshold_coefficient(beta: float) -> float:
    """omega(beta) of Gavish & Donoho (2014): threshold = omega * median singular value.

    ``lambda*(beta) / sqrt(mu_beta)``, where ``lambda*(beta) = sqrt(2 (beta + 1) + 8 beta /
    (beta + 1 + sqrt(beta^2 + 14 beta + 1)))`` is the optimal threshold for a known noise
    level and ``mu_beta`` the :func:`marchenko_pastur_median`. The paper's cubic
    ``0.56 beta^3 - 0.95 beta^2 + 1.82 beta + 1.43`` approximates it.

    Examples
    --------
    >>> round(hard_threshold_coefficient(1.0), 3)
    2.858
    """
    known = np.sqrt(2 * (beta + 1) + 8 * beta / (beta + 1 + np.sqrt(beta**2 + 14 * beta + 1)))
    return float(known / np.sqrt(marchenko_pastur_median(beta)))


@records_params
def spectrum(values: np.ndarray, *, center: bool = True) -> Spectrum:
    """Singular values of a position table.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    center : bool
        Subtract the mean row first (PCA). Stated wherever the result is shown.

    Notes
    -----
    Eigenvalues of the float64 Gram matrix on the smaller side: several times faster than a
    values-only SVD at the sizes users bring (one BLAS-3 product with the table and a small
    symmetric eigenproblem, where the SVD bidiagonalises the whole table) and exact
    to ~1e-15 of ``sigma_1**2`` -- but that absolute error would cost a value at 1e-6 of
    sigma_1 three digits. So the values below ``1e-3 sigma_1`` are computed again, from the
    table itself restricted to their eigenvectors (Rayleigh-Ritz on ``X @ V_small``, whose own
    Gram spans only a few decades): relative error below 1e-9 down to 1e-6 of sigma_1, at the
    cost of one more product with the table, paid only by tables that have such values; the
    values above the cut keep a relative error of about ``eps (sigma_1 / sigma)^2``, below
    1e-9 (tested against a float64 SVD).

    The Gram matrix is reduced to tridiagonal form once (LAPACK ``dsytrd``, blocked); all
    eigenvalues come from that form (``dsterf``), and a basis of the small ones' eigenvectors
    too (inverse iteration at those eigenvalues and one QR, see `_inverse_iteration`, or MRRR
    (``dstemr``) when the tridiagonal form splits into small blocks, see `_splits`; then the
    reduction's reflectors by ``dormqr``), so refining never reduces the matrix a second time
    and solves the tridiagonal eigenproblem once. Each Ritz value from inverse iteration must
    lie within the Gram route's bound (`_GRAM_ERROR`) of the eigenvalue it refines; if one
    does not, the basis missed part of a cluster and the vectors come from MRRR instead. That
    reduction is the cost floor at square shapes (it costs a few Gram products), while a very
    tall table's costs little next to its Gram product.

    Examples
    --------
    >>> s = spectrum(np.diag([3.0, 4.0]), center=False)
    >>> s.singular_values.tolist(), s.stable_rank
    ([4.0, 3.0], 1.5625)
    """
    # Two rows that differ settle it without reading the table (7% of the floor's time when
    # 50257 x 768); only a table whose first rows agree is read whole.
    if center and not np.ptp(values[:2], axis=0).any() and not np.ptp(values, axis=0).any():
        # Equal rows centre to exact zeros, not to the rounding residue of their float mean.
        return Spectrum(np.zeros(min(values.shape)), shape=values.shape, floor=0.0)
    reflectors, diagonal, off_diagonal, tau = _tridiagonal(gram(values, center=center))
    lam = scipy.linalg.eigvalsh_tridiagonal(diagonal, off_diagonal, lapack_driver="sterf")[::-1]
    # Centred rows sum to zero: a table with no more rows than columns then has one singular
    # value exactly 0, which needs no refining.
    zeros = int(center and values.shape[0] <= values.shape[1])
    n_small = int(np.count_nonzero(lam < _SPLIT**2 * lam[0]))
    if n_small > zeros:
        shifts = lam[: -n_small - 1 : -1]
        split = _splits(off_diagonal, lam[0])
        if split:
            basis = _smallest_vectors(diagonal, off_diagonal, n_small)
        else:
            basis = _inverse_iteration(diagonal, off_diagonal, shifts, lam[0])
        ritz = _ritz_values(values, center=center, reflectors=reflectors, tau=tau, z=basis)
        # Each Ritz value lies within the Gram route's bound of its Gram eigenvalue unless
        # inverse iteration's basis missed a direction (a cluster it could not separate):
        # then exact vectors.
        if not split and not np.all(
            np.abs(ritz - shifts) <= _GRAM_ERROR * np.finfo(np.float64).eps * lam[0]
        ):
            basis = _smallest_vectors(diagonal, off_diagonal, n_small)
            ritz = _ritz_values(values, center=center, reflectors=reflectors, tau=tau, z=basis)
        lam[-n_small:] = ritz[::-1]
    if zeros:
        lam[-1] = 0.0
    sigma = np.sqrt(np.clip(lam, 0.0, None))
    # Rounding level of the last Gram matrix formed: below it a value cannot be told from 0.
    top = sigma[0] * (_SPLIT if n_small > zeros else 1.0)
    eps = np.finfo(np.float64).eps
    floor = float(top * np.sqrt(min(values.shape) * eps))
    return Spectrum(singular_values=sigma, shape=tuple(values.shape), floor=floor)
