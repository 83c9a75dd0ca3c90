"""What shapes do positions trace along the principal components, and how sinusoidal are they?"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
from scipy.linalg import blas

from posviz._linalg import gram, tall_times
from posviz._params import SEED, Bound, bounded, records_params

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFINITIONS",
    "PrincipalComponents",
    "SinusoidFits",
    "SubspaceLikeness",
    "fit_sinusoids",
    "max_components",
    "periodogram",
    "principal_components",
    "sinusoid_basis",
    "sinusoid_likeness",
]

#: The model fitted to each component, what a fit's R² is and how the fit is found, and what
#: the sinusoid likeness measures: for help texts and the report.
DEFINITIONS = {
    "fit": "a*cos(2*pi*f*p/n + phi) + c, least squares",
    "r2": "R² = 1 − Σ(s − fit)² / Σ(s − mean s)²: the share of the PC trajectory's variance about "
    "its mean explained by the best a·cos(2π f p / n + φ) + c: the global least-squares "
    "optimum over all f in [½, n/2] cycles (exact residuals on a 1/16-bin grid, the 5 deepest "
    "dips refined), not the periodogram peak, which can sit bins away. f is bounded below by "
    "half a cycle over the table (the slowest wave, monotone over it): slower, a cosine is "
    "nearly a constant plus a line and the fit trades a huge amplitude against the offset. A "
    "fit at that bound is flagged: the trajectory is a trend, not an oscillation.",
    "likeness": "Mean of cos² over the principal angles (scipy.linalg.subspace_angles) "
    "between the span of the top-k PC trajectories and the span of cos/sin(π f p / n), "
    "f = 1..m: 1 when one span lies in the other; about 2m / n for a random subspace.",
}
#: Points per periodogram bin of the zero-padded grid on which the least-squares error is
#: computed exactly before refining: a least-squares dip is about one bin wide.
_GRID_PER_BIN = 16
#: Local minima of that grid refined (the best ones): two close frequencies or a drifting one
#: leave several dips of nearly the same depth.
_CANDIDATES = 5


def max_components(shape: tuple[int, int], *, center: bool) -> int:
    """Most principal components a table of `shape` can have (centring removes one)."""
    return min(shape[0] - int(center), shape[1])


@dataclass(frozen=True)
class PrincipalComponents:
    """The top principal components of a position table and each position's projection on them.

    Attributes
    ----------
    scores : ndarray of shape (n_positions, k)
        Projection of every (centred) row on each component: the columns of ``U * S`` of the
        thin SVD ``X = U S V^T``. Column c is the trajectory of PC c + 1 over position.
    loadings : ndarray of shape (d_model, k)
        Unit principal directions (columns of V). Sign convention: the entry of largest
        absolute value in each column is positive (the first such entry on ties), so plots do
        not flip between runs or machines.
    singular_values : ndarray of shape (k,)
        Descending; ``scores[:, c]`` has norm ``singular_values[c]``.
    explained_variance : ndarray of shape (k,)
        Each component's share of the table's total variance: ``sigma_c^2 / ||X||_F^2``, the
        first k entries of :attr:`posviz.spectrum.Spectrum.explained_variance`.
    params : dict
        The settings of :func:`principal_components` (``n_components``, ``center``).
    """

    scores: np.ndarray
    loadings: np.ndarray
    singular_values: np.ndarray
    explained_variance: np.ndarray
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """Each position's projection on every component: columns position, PC1..PCk."""
        import pandas as pd

        columns = {f"PC{c + 1}": self.scores[:, c] for c in range(self.scores.shape[1])}
        return pd.DataFrame({"position": np.arange(len(self.scores))} | columns)


def _signs(loadings: np.ndarray) -> np.ndarray:
    """Per column, the sign that makes its largest-magnitude entry positive (a fixed choice)."""
    largest = np.take_along_axis(loadings, np.abs(loadings).argmax(axis=0)[None, :], axis=0)
    return np.where(largest < 0, -1.0, 1.0)


@records_params
@bounded(n_components=Bound(1, None))
def principal_components(
    values: np.ndarray, *, n_components: int = 6, center: bool = True
) -> PrincipalComponents:
    """Top-`n_components` principal components of a position table.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    n_components : int
        Number of components k, ``1 <= k <=`` :func:`max_components`.
    center : bool
        Subtract the mean row first (PCA). Stated wherever the result is shown.

    Notes
    -----
    Top-k eigenvectors of the float64 Gram matrix on the smaller side
    (``posviz._linalg.gram``; Lanczos, ``scipy.sparse.linalg.eigsh``, from a side of
    :data:`KRYLOV_MIN_SIZE` when its answer is certified to be the top k within 1e-11 of the
    exact vectors, else ``scipy.linalg.eigh(..., subset_by_index=...)``): no full SVD is
    formed, which at 50257 x 768 would need a 20 GB U. Tall tables project the rows on the
    eigenvectors (``X V``); wide ones scale the eigenvectors (``U S``) and recover
    ``V = X^T U / S``. The trace of the Gram matrix is the total variance, so the shares equal
    those of :func:`posviz.spectrum.spectrum` to rounding.

    Examples
    --------
    >>> x = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    >>> pc = principal_components(x, n_components=2, center=False)
    >>> pc.singular_values.tolist(), pc.explained_variance.tolist()
    ([2.8284271247461903, 1.4142135623730951], [0.8, 0.2])
    >>> pc.scores[:, 0].tolist()
    [2.0, -2.0, 0.0, 0.0]
    """
    n, d = values.shape
    k = n_components
    top = max_components((n, d), center=center)
    if not 1 <= k <= top:
        msg = (
            f"n_components={k} components asked of a {n} x {d} table"
            f"{' (centred)' if center else ''}; choose n_components between 1 and {top}."
        )
        raise ValueError(msg)
    g = gram(values, center=center)
    total = np.trace(g)
    lam, vectors = _top_eigenpairs(g, k, values, center=center)
    lam = np.clip(lam, 0.0, None)
    sigma = np.sqrt(lam)
    # The centred table times the eigenvectors, a float64 slice at a time: X V for tall
    # tables (their scores), X^T U for wide ones (V = X^T U / S, their loadings).
    if n >= d:
        loadings = vectors * _signs(vectors)
        scores = tall_times(values, loadings, center=center)
    else:
        product = tall_times(values, vectors, center=center)
        # A zero singular value (k beyond the rank) has no direction: keep 0.
        loadings = np.divide(product, sigma, out=np.zeros((d, k)), where=sigma > 0)
        signs = _signs(loadings)
        loadings, scores = loadings * signs, vectors * (sigma * signs)
    return PrincipalComponents(
        scores=scores,
        loadings=loadings,
        singular_values=sigma,
        # 0 / 0 on a table without variance: NaN, as the spectrum's shares.
        explained_variance=np.divide(lam, total, out=np.full_like(lam, np.nan), where=total > 0),
    )


#: Gram sizes from which the top-k eigenpairs are computed by Lanczos (when certified): below
#: it the dense solver takes milliseconds too.
KRYLOV_MIN_SIZE = 2048
#: Largest accepted bound on a Lanczos eigenvector's error (Davis-Kahan: residual norm over
#: the distance to the rest of the spectrum); the dense solver's own error is of this order
#: only for eigenvalues about as close.
_VECTOR_ERROR = 1e-11
#: Lanczos vectors kept between restarts (ARPACK's ncv) for the default k.
_KRYLOV_VECTORS = 64


def _top_eigenpairs(
    g: np.ndarray, k: int, values: np.ndarray, *, center: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The k largest eigenvalues (descending) and eigenvectors of the Gram matrix `g` of
    `values`; `g` is overwritten.

    Lanczos (ARPACK) when its answer is certified (:func:`_lanczos_pairs`): at d = 4096 it is
    tens of times faster than the dense ``eigh``, whose tridiagonal reduction touches the
    whole matrix. Otherwise (close or repeated eigenvalues, k beyond the rank, small
    matrices) the dense solver, on the Gram matrix formed again if the check consumed it.
    """
    size = g.shape[0]
    if size >= KRYLOV_MIN_SIZE and k + 1 < size // 2:
        pairs = _lanczos_pairs(g, k)
        if pairs is not None:
            return pairs
        g = gram(values, center=center)
    # Overwritten: a copy would be twice a square float32 table's bytes.
    lam, vectors = scipy.linalg.eigh(g, subset_by_index=[size - k, size - 1], overwrite_a=True)
    return lam[::-1], vectors[:, ::-1]


def _lanczos_pairs(g: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The top k eigenpairs of symmetric `g` by ``scipy.sparse.linalg.eigsh``, or None unless
    they are certified to be the top k and within `_VECTOR_ERROR` of the exact eigenvectors.

    Lanczos returns accurate pairs, but a single start vector can miss a copy of a repeated
    eigenvalue. So k + 1 pairs are computed, and with sigma halfway between the k-th and the
    (k + 1)-th value: (1) each residual ``|g v - lambda v|`` over the distance from lambda to
    the other k - 1 values and to sigma is at most `_VECTOR_ERROR` (Davis-Kahan); (2)
    ``sigma I - g + V diag(lambda) V^T`` has a Cholesky factor, i.e. no eigenvalue of `g` other
    than the k found lies above sigma (the found ones are moved to sigma). (2) overwrites `g`.
    """
    from scipy.sparse.linalg import ArpackError, eigsh  # only here: scipy.sparse is slow to load

    size = g.shape[0]
    # A fixed start vector, so the same table gives the same numbers; pseudo-random, so no
    # structure of the table (a centred wide table's Gram matrix annihilates ones) hides a
    # direction from it. The certificate does not depend on it.
    start = np.random.default_rng(0).standard_normal(size)
    try:
        # A wide Krylov space: a table's flat noise spectrum (clustered values) then converges
        # in few restarts; a decaying one barely notices.
        ncv = min(size - 1, max(_KRYLOV_VECTORS, 3 * (k + 1)))
        lam, vectors = eigsh(g, k=k + 1, which="LA", v0=start, tol=0, ncv=ncv)
    except ArpackError:  # no convergence included
        return None
    order = np.argsort(lam)[::-1]
    lam, vectors = lam[order], vectors[:, order]
    residual = np.linalg.norm(g @ vectors[:, :k] - vectors[:, :k] * lam[:k], axis=0)
    top, sigma = lam[:k], (lam[k - 1] + lam[k]) / 2
    apart = np.abs(top[:, None] - top[None, :]) + np.diag(np.full(k, np.inf))
    gap = np.minimum(apart.min(axis=1), top - sigma)
    if not (sigma > 0 and np.all(residual <= _VECTOR_ERROR * gap)):
        return None
    g *= -1.0
    g.flat[:: size + 1] += sigma
    g = blas.dsyrk(1.0, vectors[:, :k] * np.sqrt(top), beta=1.0, c=g, lower=1, overwrite_c=1)
    try:
        scipy.linalg.cholesky(g, lower=True, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    return top, vectors[:, :k]


def periodogram(scores: np.ndarray) -> np.ndarray:
    """Each trajectory's share of its sum of squares at each frequency (Parseval).

    Parameters
    ----------
    scores : ndarray of shape (n_positions, k)
        One trajectory per column.

    Returns
    -------
    ndarray of shape (k, n_positions // 2 + 1)
        Entry ``[c, j]`` is the share of ``sum_p scores[p, c]^2`` at ``j`` cycles over the
        table length (``|rfft|^2``, doubled for bins other than 0 and Nyquist, over
        ``n * sum^2``); each row sums to 1 (0 for an all-zero trajectory).

    Examples
    --------
    >>> p = np.arange(8)
    >>> periodogram(np.cos(2 * np.pi * 3 * p / 8)[:, None]).round(12).tolist()
    [[0.0, 0.0, 0.0, 1.0, 0.0]]
    """
    n = scores.shape[0]
    power = np.abs(np.fft.rfft(scores, axis=0).T) ** 2
    power[:, 1 : (n + 1) // 2] *= 2
    total = np.sum(scores**2, axis=0)[:, None]
    return np.divide(power / n, total, out=np.zeros_like(power), where=total > 0)


@dataclass(frozen=True)
class SinusoidFits:
    """The best sinusoid ``amplitude * cos(2 pi frequency p / n + phase) + offset`` per trajectory.

    Positions are ``p = 0..n-1`` and frequencies are in cycles over the table length ``n``.

    Attributes
    ----------
    power : ndarray of shape (k, n_positions // 2 + 1)
        :func:`periodogram` of each trajectory: share of its sum of squares at ``j`` cycles.
    peak : ndarray of shape (k,)
        Integer frequency (cycles) of the largest periodogram bin other than 0.
    frequency : ndarray of shape (k,)
        Least-squares frequency (cycles over the table, in ``[min_cycles, n/2]``): the global
        optimum over those frequencies (see :func:`fit_sinusoids`).
    at_lower_bound : ndarray of bool, shape (k,)
        Whether that optimum sits on the lower bound `min_cycles` (within 1e-6 cycles): the
        trajectory is better read as a trend than as an oscillation.
    min_cycles : float
        The lower bound on the frequency.
    amplitude, phase, offset : ndarray of shape (k,)
        Linear least-squares coefficients at that frequency; amplitude >= 0, phase in
        (-pi, pi] radians.
    r2 : ndarray of shape (k,)
        ``1 - sum (s - fit)^2 / sum (s - mean s)^2``: the share of the trajectory's variance
        about its mean that the sinusoid explains (NaN for a constant trajectory).
    fitted : ndarray of shape (n_positions, k)
        The fitted sinusoids at every position.
    explained_variance : ndarray of shape (k,)
        Each fitted component's share of the table's variance (from the components fitted).
    params : dict
        The settings of the components fitted (see :func:`fit_sinusoids`).
    """

    power: np.ndarray
    peak: np.ndarray
    frequency: np.ndarray
    amplitude: np.ndarray
    phase: np.ndarray
    offset: np.ndarray
    r2: np.ndarray
    fitted: np.ndarray
    explained_variance: np.ndarray
    at_lower_bound: np.ndarray
    min_cycles: float
    params: dict = field(default_factory=dict)

    @property
    def median_r2(self) -> float:
        """Median R² over the components: how sinusoidal the top-k are as a whole."""
        return float(np.median(self.r2))

    def to_frame(self) -> pd.DataFrame:
        """One row per component: its variance share and its fitted sinusoid's parameters and R²."""
        import pandas as pd

        return pd.DataFrame(
            {
                "component": np.arange(1, len(self.r2) + 1),
                "explained_variance": self.explained_variance,
                "periodogram_peak_cycles": self.peak,
                "frequency_cycles": self.frequency,
                "at_lower_bound": self.at_lower_bound,
                "amplitude": self.amplitude,
                "phase_rad": self.phase,
                "offset": self.offset,
                "r2": self.r2,
            }
        )

    def periodogram_table(self) -> pd.DataFrame:
        """:attr:`power` by frequency: columns cycles, PC1..PCk (each PC's share per bin)."""
        import pandas as pd

        columns = {f"PC{c + 1}": self.power[c] for c in range(len(self.power))}
        return pd.DataFrame({"cycles": np.arange(self.power.shape[1])} | columns)


def _design(n: int, cycles: float) -> np.ndarray:
    angle = 2 * np.pi * cycles * np.arange(n) / n
    return np.column_stack([np.cos(angle), np.sin(angle), np.ones(n)])


def _residual(trajectory: np.ndarray, cycles: float) -> float:
    design = _design(len(trajectory), cycles)
    coef = np.linalg.lstsq(design, trajectory, rcond=None)[0]
    return float(np.sum((trajectory - design @ coef) ** 2))


def _grid_residuals(scores: np.ndarray, per_bin: int) -> np.ndarray:
    """Least-squares residual of ``[cos, sin, 1]`` at ``j / per_bin`` cycles, j = 0..per_bin n/2.

    Returns an array of shape (k, per_bin * n // 2 + 1). Exact (to rounding) at every grid
    point, from zero-padded FFTs: the normal equations need ``sum y e^{iwp}`` (the padded FFT
    of y), ``sum e^{iwp}`` and ``sum e^{2iwp}`` (the padded FFT of ones, at j and 2j).
    """
    n = len(scores)
    size = per_bin * n
    j = np.arange(per_bin * n // 2 + 1)
    ones = np.conj(np.fft.fft(np.ones(n), size))
    e1, e2 = ones[j], ones[(2 * j) % size]
    gram = np.empty((len(j), 3, 3))
    gram[:, 0, 0] = (n + e2.real) / 2
    gram[:, 1, 1] = (n - e2.real) / 2
    gram[:, 0, 1] = gram[:, 1, 0] = e2.imag / 2
    gram[:, 0, 2] = gram[:, 2, 0] = e1.real
    gram[:, 1, 2] = gram[:, 2, 1] = e1.imag
    gram[:, 2, 2] = n
    # At 0 and n/2 cycles the sine vanishes: the pseudo-inverse gives the least squares there.
    inverse = np.linalg.pinv(gram, hermitian=True)
    y = np.conj(np.fft.rfft(scores, size, axis=0))[: len(j)].T  # (k, grid)
    b = np.stack([y.real, y.imag, np.broadcast_to(scores.sum(axis=0)[:, None], y.shape)], -1)
    explained = np.einsum("kgi,gij,kgj->kg", b, inverse, b)
    return np.sum(scores**2, axis=0)[:, None] - explained


def _best_frequency(trajectory: np.ndarray, grid: np.ndarray, per_bin: int, lowest: float) -> float:
    """The global least-squares frequency at or above `lowest` cycles: the best of the grid's
    deepest local minima there, each refined between its grid neighbours."""
    import scipy.optimize  # here: slow to load, and a first open fits no sinusoid

    nyquist = len(trajectory) / 2
    start = int(np.ceil(lowest * per_bin))  # the first grid point at or above the bound
    grid = np.concatenate([np.full(start, np.inf), grid[start:]])
    inner = (grid[1:-1] <= grid[:-2]) & (grid[1:-1] <= grid[2:])
    minima = np.flatnonzero(np.concatenate([[grid[0] <= grid[1]], inner, [grid[-1] <= grid[-2]]]))
    best_f, best_rss = 0.0, np.inf
    minima = minima[minima >= start]  # none below the bound (their residuals are inf)
    for j in minima[np.argsort(grid[minima])[:_CANDIDATES]]:
        f = j / per_bin
        bounds = (max(f - 1 / per_bin, lowest), min(f + 1 / per_bin, nyquist))
        refined = scipy.optimize.minimize_scalar(
            lambda x, t=trajectory: _residual(t, x),
            bounds=bounds,
            method="bounded",
            options={"xatol": 1e-10},
        )
        for candidate in (max(f, lowest), refined.x):
            rss = _residual(trajectory, candidate)
            if rss < best_rss:
                best_f, best_rss = float(candidate), rss
    return best_f


@records_params
@bounded(min_cycles=Bound(0.0, None, whole=False))
def fit_sinusoids(pc: PrincipalComponents, *, min_cycles: float = 0.5) -> SinusoidFits:
    """Fit the best sinusoid to each component's trajectory: the global least-squares optimum.

    Parameters
    ----------
    pc : PrincipalComponents
        One trajectory per column of :attr:`PrincipalComponents.scores`, n >= 3.
    min_cycles : float
        Lowest frequency fitted, in cycles over the table (half a cycle: the slowest wave,
        monotone over the table). Slower cosines are nearly a constant plus a line, and the
        least squares would trade an unbounded amplitude against the offset (a monotone
        trajectory gave amplitude 9e8). Fits on this bound are flagged (`at_lower_bound`).

    Notes
    -----
    The residual sum of squares of the linear fit ``[cos, sin, 1]`` is computed exactly on a
    grid of 1/16 bin over all frequencies ``[min_cycles, n/2]`` (zero-padded FFTs, see
    :func:`_grid_residuals`); its 5 deepest local minima are refined with
    ``scipy.optimize.minimize_scalar`` between their grid neighbours, and the best point found
    is the frequency. The periodogram peak alone can sit bins away from the optimum (a
    slowly drifting frequency, two close ones). The coefficients at that frequency give
    amplitude, phase and offset.

    Examples
    --------
    >>> p = np.arange(64)
    >>> wave = 3 * np.cos(2 * np.pi * 2.25 * p / 64 + 0.5) + 1  # the only PC of this table:
    >>> pc = principal_components(np.column_stack([wave, 0 * p]), n_components=1, center=False)
    >>> fit = fit_sinusoids(pc)
    >>> fit.peak.tolist(), fit.frequency.round(6).tolist(), fit.amplitude.round(6).tolist()
    ([2], [2.25], [3.0])
    >>> fit.phase.round(6).tolist(), fit.offset.round(6).tolist(), fit.r2.round(9).tolist()
    ([0.5], [1.0], [1.0])
    """
    n, k = pc.scores.shape
    if n < 3:
        msg = f"A sinusoid has 3 free coefficients; fitting needs at least 3 positions, got {n}."
        raise ValueError(msg)
    if not 0 < min_cycles < n / 2:
        msg = f"min_cycles must be above 0 and below n / 2 = {n / 2:g} cycles, got {min_cycles}."
        raise ValueError(msg)
    scores = np.asarray(pc.scores, dtype=np.float64)
    power = periodogram(scores)
    peak = power[:, 1:].argmax(axis=1) + 1
    grid = _grid_residuals(scores, _GRID_PER_BIN)
    frequency, coefs, fitted = np.empty(k), np.empty((k, 3)), np.empty((n, k))
    for c in range(k):
        frequency[c] = _best_frequency(scores[:, c], grid[c], _GRID_PER_BIN, min_cycles)
        design = _design(n, frequency[c])
        coefs[c] = np.linalg.lstsq(design, scores[:, c], rcond=None)[0]
        fitted[:, c] = design @ coefs[c]
    # a cos(wp + phi) = a cos(phi) cos(wp) - a sin(phi) sin(wp)
    amplitude = np.hypot(coefs[:, 0], coefs[:, 1])
    phase = np.arctan2(-coefs[:, 1], coefs[:, 0])
    spread = np.sum((scores - scores.mean(axis=0)) ** 2, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(spread > 0, 1 - np.sum((scores - fitted) ** 2, axis=0) / spread, np.nan)
    return SinusoidFits(
        power=power,
        peak=peak,
        frequency=frequency,
        amplitude=amplitude,
        phase=phase,
        offset=coefs[:, 2],
        r2=r2,
        fitted=fitted,
        explained_variance=pc.explained_variance,
        at_lower_bound=frequency <= min_cycles + 1e-6,
        min_cycles=min_cycles,
    )


def sinusoid_basis(n_positions: int, n_frequencies: int) -> np.ndarray:
    """Low-frequency sinusoids over position: ``cos, sin(pi f p / n)`` for ``f = 1..m``.

    Frequency f is ``f / 2`` cycles over the table, the waves of trained tables (and of
    :func:`posviz.simulate.learned_like`).

    Returns
    -------
    ndarray of shape (n_positions, 2 * n_frequencies)
        Columns ``cos f=1, sin f=1, cos f=2, ...``.
    """
    angle = np.pi * np.arange(n_positions)[:, None] * np.arange(1, n_frequencies + 1) / n_positions
    return np.stack([np.cos(angle), np.sin(angle)], axis=2).reshape(n_positions, -1)


@dataclass(frozen=True)
class SubspaceLikeness:
    """How close the span of the PC trajectories is to the span of low-frequency sinusoids.

    Attributes
    ----------
    angles : ndarray of shape (min(k, 2 m),)
        Principal angles (radians, descending, ``scipy.linalg.subspace_angles``) between the
        span of the k trajectories and the span of :func:`sinusoid_basis` with m frequencies.
    mean_cos2 : float
        Mean squared cosine of `angles`: 1 when one span contains the other, about
        ``2 m / n_positions`` for a random subspace.
    shuffled : ndarray of shape (n_shuffles,)
        `mean_cos2` after shuffling the table's rows (seeded): the chance level.
    n_frequencies : int
        m, the sinusoid basis' number of frequencies used (the setting, at most
        ``n_positions // 2``).
    n_positions : int
        Positions of the trajectories.
    params : dict
        The settings of :func:`sinusoid_likeness` and of the components compared.
    """

    angles: np.ndarray
    mean_cos2: float
    shuffled: np.ndarray
    n_frequencies: int
    n_positions: int
    params: dict = field(default_factory=dict)

    @property
    def p_value(self) -> float:
        """``(1 + #shuffles with mean cos² >= the table's) / (1 + #shuffles)``: the share of
        shuffles at least as sinusoid-like as the table, counting the table itself."""
        return float((1 + np.sum(self.shuffled >= self.mean_cos2)) / (1 + len(self.shuffled)))

    @property
    def p_text(self) -> str:
        """The p-value in words: "p ≤ 0.001 (999 shuffles, none as sinusoid-like)" when no
        shuffle reached the table (the smallest p this many shuffles can give)."""
        n = len(self.shuffled)
        if self.p_value <= self.smallest_p_value:
            return f"p ≤ {self.p_value:.2g} ({n} shuffles, none as sinusoid-like)"
        return f"p = {self.p_value:.2g} ({n} shuffles)"

    def procedure(self) -> str:
        """The null, in words: what was shuffled, how often, and how p is counted."""
        return (
            f"Null: the table's rows shuffled {len(self.shuffled)} times (seed "
            f"{self.params.get('seed', 0)}), "
            "the same mean cos² on each; p = (1 + #shuffles at least as sinusoid-like) / "
            f"(1 + {len(self.shuffled)})."
        )

    @property
    def shuffled_mean(self) -> float:
        """The chance level: :attr:`mean_cos2` averaged over the row shuffles."""
        return float(self.shuffled.mean())

    @property
    def smallest_p_value(self) -> float:
        """The smallest :attr:`p_value` this many shuffles can give: 1 / (shuffles + 1)."""
        return 1 / (len(self.shuffled) + 1)

    @property
    def random_level(self) -> float:
        """About the mean cos² of a random subspace: 2 m / n_positions."""
        return 2 * self.n_frequencies / self.n_positions

    @property
    def cos2(self) -> np.ndarray:
        """ndarray of shape (len(angles),): cos² of each principal angle, smallest angle first."""
        return np.cos(self.angles[::-1]) ** 2

    def to_frame(self) -> pd.DataFrame:
        """One row: m, the table's mean cos², its shuffled-rows null (mean, spread), p-value."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "n_frequencies": self.n_frequencies,
                    "mean_cos2": self.mean_cos2,
                    "shuffled_mean_cos2": self.shuffled_mean,
                    "shuffled_std_cos2": float(self.shuffled.std()),
                    "p_value": self.p_value,
                }
            ]
        )

    def angles_table(self) -> pd.DataFrame:
        """One row per principal angle, smallest first: the angle in radians and its cos²."""
        import pandas as pd

        return pd.DataFrame(
            {
                "angle": np.arange(1, len(self.angles) + 1),
                "angle_rad": self.angles[::-1],
                "cos2": self.cos2,
            }
        )

    def shuffled_table(self) -> pd.DataFrame:
        """The null: the mean cos² of each row shuffle."""
        import pandas as pd

        return pd.DataFrame(
            {"shuffle": np.arange(1, len(self.shuffled) + 1), "mean_cos2": self.shuffled}
        )


@records_params
@bounded(n_shuffles=Bound(1, 99_999), seed=SEED)
def sinusoid_likeness(
    pc: PrincipalComponents,
    *,
    n_frequencies: int = 8,
    n_shuffles: int = 999,
    seed: int = 0,
) -> SubspaceLikeness:
    """Principal angles between the PC trajectories' span and low-frequency sinusoids.

    Parameters
    ----------
    pc : PrincipalComponents
        Its trajectories (:attr:`PrincipalComponents.scores`) span the subspace compared.
    n_frequencies : int
        m: the basis holds ``cos, sin(π f p / n)`` for ``f = 1..m`` (f / 2 cycles over the
        table): 2m vectors; at most ``n_positions // 2`` are used (the result states m).
    n_shuffles : int
        Row shuffles for the chance level.
    seed : int
        Seed of ``numpy.random.default_rng`` for the shuffles.

    Notes
    -----
    Shuffling a table's rows permutes the rows of its SVD's U and leaves S and V unchanged
    (centring commutes with a row permutation), so the control shuffles the trajectories'
    rows rather than recomputing components: the same numbers, exactly, at no cost. A
    permuted orthonormal basis of the span is an orthonormal basis of the permuted span, so
    each shuffle costs a gather and one k x 2m product: the mean cos² of the principal angles
    is the squared Frobenius norm of that product over its number of singular values, so
    even the default 999 shuffles take milliseconds.

    Examples
    --------
    >>> table = sinusoid_basis(100, 3)[:, :2] @ np.array([[3.0, 0.0, 1.0], [0.0, 2.0, 1.0]])
    >>> pc = principal_components(table, n_components=2, center=False)
    >>> round(sinusoid_likeness(pc, n_frequencies=3, n_shuffles=5).mean_cos2, 12)
    1.0
    """
    scores = pc.scores
    n = scores.shape[0]
    if n_frequencies < 1 or n < 2:
        msg = f"{n_frequencies} frequencies over {n} positions; choose between 1 and {n // 2}."
        raise ValueError(msg)
    n_frequencies = min(n_frequencies, n // 2)  # a short table: every frequency it has
    basis = sinusoid_basis(n, n_frequencies)
    angles = scipy.linalg.subspace_angles(scores, basis)
    span, sinusoids = scipy.linalg.orth(scores), scipy.linalg.orth(basis)
    rng = np.random.default_rng(seed)
    n_angles = min(span.shape[1], sinusoids.shape[1])
    if not n_angles:  # components of a table without variance span nothing: no angle, 0 / 0
        return SubspaceLikeness(
            angles=angles,
            mean_cos2=float("nan"),
            shuffled=np.full(n_shuffles, np.nan),
            n_frequencies=n_frequencies,
            n_positions=n,
        )
    shuffled = [
        np.sum((span[rng.permutation(n)].T @ sinusoids) ** 2) / n_angles for _ in range(n_shuffles)
    ]
    return SubspaceLikeness(
        angles=angles,
        mean_cos2=float(np.mean(np.cos(angles) ** 2)),
        shuffled=np.array(shuffled),
        n_frequencies=n_frequencies,
        n_positions=n,
    )
