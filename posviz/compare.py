"""How alike are two position tables: spectra side by side, CKA, principal angles, Procrustes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import eigh, subspace_angles, svdvals

from posviz._linalg import centered, float64_blocks, gram, tall_times
from posviz._params import SEED, Bound, bounded, records_params
from posviz.spectrum import Spectrum

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFINITIONS",
    "MAX_COMPONENTS",
    "OVERLAY_MAX_OFFSET",
    "CkaNull",
    "Comparison",
    "cka_null",
    "compare",
    "debiased_cka",
    "largest_k",
    "linear_cka",
    "metrics_table",
    "position_components",
    "procrustes_error",
]


#: A float64 scalar as numpy's reductions return it (``np.linalg.norm``) or a Python float.
_Scalar = float | np.floating

#: Most components offered: the angles beyond are rarely read and each costs an eigenvector.
MAX_COMPONENTS = 64
#: Largest offset of the two tables' overlaid offset profiles (Compare, and Resample's before
#: and after): their spread over i costs n_positions x k x d_model each.
OVERLAY_MAX_OFFSET = 512

#: What each of the Compare page's measures is, for its help texts and the report.
DEFINITIONS = {
    "cka": "Classic linear CKA (Kornblith et al. 2019): ‖Xᵀ Y‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F) of "
    "the tables with their mean rows removed (uncentred: the RV coefficient). 1 when one table "
    "is a rotation and/or scaling of the other. A biased estimator: even independent tables "
    "score well above 0, more so the wider they are for their length (0.20 for two Gaussian "
    "512 x 128 tables, 0.43 at 512 x 384); read it against its permutation null.",
    "cka_debiased": "Debiased linear CKA: the same ratio of the unbiased HSIC estimator (Song "
    "et al. 2012), as Nguyen et al. (2021) use it: about 0 (either sign) for independent "
    "tables of any shape, 1 for a rotated or scaled copy. Always on centred rows (it does not "
    "change when a table is shifted).",
    "angles": "Principal angles between the spans of the top-k principal components over "
    "positions (left singular vectors, one value per position) of the two tables "
    "(scipy.linalg.subspace_angles). 0° = the same k-dimensional positional signal.",
    "procrustes": "‖Ŷ R − X̂‖_F with X̂ = X/‖X‖_F, Ŷ = Y/‖Y‖_F and R the orthogonal matrix "
    "minimising it (the residual of scipy.linalg.orthogonal_procrustes, computed as "
    "√(2 − 2s), s = ‖ŶᵀX̂‖_*: exact to ~1e-6). 0 for a rotated or scaled copy, at most 2. "
    "Rotation only: not the square root of scipy.spatial.procrustes's disparity, which also "
    "fits a scale (disparity = 1 − s²). Needs equal widths.",
    "metric": "Cosine: ⟨x_i, x_j⟩ / (‖x_i‖ ‖x_j‖). Dot: ⟨x_i, x_j⟩.",
}


@dataclass(frozen=True)
class CkaNull:
    """Both CKA estimators with the rows of the second table shuffled: their chance level.

    Attributes
    ----------
    cka, cka_debiased : ndarray of shape (n_permutations,)
        Classic and debiased CKA of the first table with each row permutation of the second.
    observed_cka, observed_cka_debiased : float
        The two estimators on the tables as they are.
    seed : int
        Seed of ``numpy.random.default_rng`` for the permutations.
    """

    cka: np.ndarray
    cka_debiased: np.ndarray
    observed_cka: float
    observed_cka_debiased: float
    seed: int

    @property
    def n_permutations(self) -> int:
        """Row permutations drawn."""
        return len(self.cka)

    def p_value(self, estimator: str = "cka_debiased") -> float:
        """``(1 + #permutations scoring >= the observed) / (1 + #permutations)``."""
        null, observed = getattr(self, estimator), getattr(self, f"observed_{estimator}")
        return float((1 + np.sum(null >= observed)) / (1 + len(null)))

    def summary(self) -> dict[str, float]:
        """Mean and 95th percentile of each estimator's null, and its p-value."""
        out: dict[str, float] = {}
        for name in ("cka", "cka_debiased"):
            null = getattr(self, name)
            out |= {
                f"{name}_null_mean": float(null.mean()),
                f"{name}_null_p95": float(np.percentile(null, 95)),
                f"{name}_p_value": self.p_value(name),
            }
        return out

    def procedure(self) -> str:
        """The null, in words."""
        n = self.n_permutations
        return (
            f"Permutation null: the second table's rows shuffled {n} times (seed {self.seed}), "
            "both CKAs computed on each; mean and 95th percentile of those, and p = (1 + "
            f"#shuffles scoring at least the observed) / (1 + {n})."
        )


@dataclass(frozen=True)
class Comparison:
    """Two tables of the same length compared as functions of position.

    Attributes
    ----------
    cka : float
        Linear CKA (Kornblith et al. 2019) of the two tables, in [0, 1]; with uncentred rows
        it is the RV coefficient.
    principal_angles : ndarray of shape (k,)
        Angles in radians, ascending, between the spans of the top-k principal components
        over positions (left singular vectors, length n_positions) of the two tables.
    procrustes_error : float or None
        ``min_R ||Y R / ||Y||_F - X / ||X||_F||_F`` over orthogonal R, in [0, 2], to about
        1e-6 absolute (see :func:`procrustes_error`); None when the widths differ.
    n_positions : int
        Rows of each table.
    params : dict
        The settings of :func:`compare` (``n_components``, ``center``).
    cka_debiased : float
        Debiased linear CKA (see :func:`debiased_cka`): about 0 for independent tables.
    null : CkaNull or None
        Both CKAs with the second table's rows shuffled (None when no permutations).
    """

    cka: float
    principal_angles: np.ndarray
    procrustes_error: float | None
    n_positions: int
    cka_debiased: float = float("nan")
    null: CkaNull | None = None
    params: dict = field(default_factory=dict)

    @property
    def degrees(self) -> np.ndarray:
        """`principal_angles` in degrees, ndarray of shape (k,)."""
        return np.degrees(self.principal_angles)

    def metrics(self) -> dict[str, float | None]:
        """CKA, the mean and largest principal angle (degrees) and the Procrustes error."""
        null = self.null.summary() if self.null is not None else {}
        return {
            "cka": self.cka,
            "cka_debiased": self.cka_debiased,
            **null,
            "mean_angle_degrees": float(self.degrees.mean()),
            "max_angle_degrees": float(self.degrees.max()),
            "procrustes_error": self.procrustes_error,
        }

    def to_frame(self) -> pd.DataFrame:
        """The measures in one row, as exported: both CKAs and their null, Procrustes error."""
        import pandas as pd

        null = self.null.summary() if self.null is not None else {}
        return pd.DataFrame(
            [
                {
                    "cka": self.cka,
                    "cka_debiased": self.cka_debiased,
                    **null,
                    "procrustes_error": self.procrustes_error,
                }
            ]
        )

    def angles_table(self) -> pd.DataFrame:
        """One row per principal angle, smallest first: in radians and degrees."""
        import pandas as pd

        return pd.DataFrame(
            {
                "angle": np.arange(1, len(self.principal_angles) + 1),
                "radians": self.principal_angles,
                "degrees": self.degrees,
            }
        )


def largest_k(first: tuple[int, int], second: tuple[int, int]) -> int:
    """Most components two tables of these shapes (same length) can compare, at most
    `MAX_COMPONENTS`.

    >>> largest_k((100, 16), (100, 24)), largest_k((1024, 768), (1024, 768))
    (16, 64)
    """
    return min(first[0] - 1, first[1], second[1], MAX_COMPONENTS)


def _product(x: np.ndarray, y: np.ndarray, *, center: bool) -> np.ndarray:
    """``Yᵀ X`` of two tall tables in float64, summed over their row blocks."""
    pairs = zip(float64_blocks(x, center=center), float64_blocks(y, center=center), strict=True)
    total = (first := next(pairs))[1].T @ first[0]
    for xb, yb in pairs:
        total += yb.T @ xb  # each block's product freed as soon as added
    return total


def _gram_summary(
    values: np.ndarray, k: int, *, center: bool
) -> tuple[np.ndarray, _Scalar, _Scalar]:
    """A tall table's top-k components over positions, ``||Xᵀ X||_F`` and ``||X||_F²``."""
    g = gram(values, center=center)
    norm, trace = np.linalg.norm(g), np.trace(g)
    return _components(values, g, k, center=center), norm, trace


def _tall(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether Gram matrices are smaller on the dimension side than on the position side."""
    return len(x) >= max(x.shape[1], y.shape[1])


def _cka(cross_sq: _Scalar, norm_x: _Scalar, norm_y: _Scalar) -> float:
    """||Yᵀ X||_F² / (||Xᵀ X||_F ||Yᵀ Y||_F), from either side's Grams."""
    return float(cross_sq / (norm_x * norm_y))


def _nuclear_norm(cross: np.ndarray) -> float:
    # All singular values (LAPACK gesdd): exact, and the largest cost of compare() at d = 768.
    return float(svdvals(cross).sum())


def _top_eigenvectors(g: np.ndarray, k: int, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """The k largest eigenvalues of the Gram `g` of a table of `shape`, descending, and vectors.

    `g` is overwritten: a copy would be twice a square float32 table's bytes.
    """
    n, d = shape
    if not 1 <= k <= min(n - 1, d):
        msg = f"k = {k} components do not fit a {n} x {d} table; pick 1..{min(n - 1, d)}."
        raise ValueError(msg)
    # Exact top-k of the dense symmetric matrix (LAPACK syevr: one tridiagonalisation).
    lam, vectors = eigh(g, subset_by_index=[len(g) - k, len(g) - 1], overwrite_a=True)
    rank = int(np.count_nonzero(lam > lam[-1] * len(g) * np.finfo(np.float64).eps))
    if rank < k:
        msg = f"The table has {rank} non-zero components, fewer than k = {k}; pick k up to {rank}."
        raise ValueError(msg)
    return lam[::-1], vectors[:, ::-1]


def _components(values: np.ndarray, g: np.ndarray, k: int, *, center: bool) -> np.ndarray:
    """Top-k left singular vectors ``U = X V / σ`` of a tall table from its Gram ``g = Xᵀ X``."""
    lam, vectors = _top_eigenvectors(g, k, values.shape)
    weights = vectors / np.sqrt(lam)
    return tall_times(values, weights, center=center)


def _procrustes(nuclear: float, sq_norm_x: _Scalar, sq_norm_y: _Scalar) -> float:
    """sqrt(2 - 2 ||Yᵀ X||_* / (||X|| ||Y||)): the Procrustes residual of unit-norm tables."""
    return float(np.sqrt(max(2.0 - 2.0 * nuclear / np.sqrt(sq_norm_x * sq_norm_y), 0.0)))


def linear_cka(x: np.ndarray, y: np.ndarray, *, center: bool = True) -> float:
    """Linear CKA between two tables with the same rows (positions).

    ``||Xᵀ Y||_F^2 / (||Xᵀ X||_F ||Yᵀ Y||_F)`` after removing the mean row of each table:
    1 when Y is an orthogonal transform and/or scaling of X. A biased estimator: independent
    tables score well above 0 (about 0.2 for two Gaussian 512 x 128 tables, growing with
    width over length); :func:`debiased_cka` removes that bias. Without centring this is the
    RV coefficient. Computed in float64 on the
    dimension side, or on the position side (``X Xᵀ``, the same norms) for wide tables.

    Parameters
    ----------
    x : ndarray of shape (n_positions, d_x)
    y : ndarray of shape (n_positions, d_y)
    center : bool
        Remove each table's mean row first (CKA as defined; off: the RV coefficient).

    Examples
    --------
    >>> x = np.random.default_rng(0).standard_normal((50, 4))
    >>> round(linear_cka(x, 3 * x[:, ::-1]), 12)
    1.0
    """
    _check_comparable(x, y, center=center)
    if _tall(x, y):
        cross_sq = np.linalg.norm(_product(x, y, center=center)) ** 2
        return _cka(cross_sq, *(np.linalg.norm(gram(v, center=center)) for v in (x, y)))
    xs, ys = centered(x, center=center), centered(y, center=center)
    gx, gy = xs @ xs.T, ys @ ys.T
    return _cka(np.vdot(gx, gy), np.linalg.norm(gx), np.linalg.norm(gy))


def _hsic_terms(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A table's centred float64 rows and their squared norms (the Gram diagonal)."""
    xs = centered(x, center=True)
    return xs, np.einsum("ij,ij->i", xs, xs)


def _unbiased_hsic(inner_sq: _Scalar, kx: np.ndarray, ky: np.ndarray) -> float:
    """Song et al. (2012)'s unbiased HSIC of linear kernels ``K = X Xᵀ``, ``L = Y Yᵀ``.

    For centred rows (``K 1 = 0``) with ``inner_sq = <K, L>_F`` and the diagonals kx, ky:
    ``[tr(K̃ L̃) + 1ᵀK̃1 1ᵀL̃1 / ((n-1)(n-2)) - 2 1ᵀK̃L̃1 / (n-2)] / (n (n-3))`` with K̃, L̃
    the kernels with zeroed diagonals, so ``K̃ 1 = -kx``: every term from kx, ky and
    ``<K, L>``.
    """
    n = len(kx)
    kl = float(kx @ ky)
    trace = inner_sq - kl
    return (trace + kx.sum() * ky.sum() / ((n - 1) * (n - 2)) - 2 * kl / (n - 2)) / (n * (n - 3))


def _debiased(
    inner_sq: _Scalar, sq_x: _Scalar, sq_y: _Scalar, kx: np.ndarray, ky: np.ndarray
) -> float:
    """Debiased CKA from ``<K, L>``, ``||K||²``, ``||L||²`` and the kernels' diagonals."""
    denominator = _unbiased_hsic(sq_x, kx, kx) * _unbiased_hsic(sq_y, ky, ky)
    if denominator <= 0:
        return float("nan")
    return float(_unbiased_hsic(inner_sq, kx, ky) / np.sqrt(denominator))


def _check_hsic_rows(n: int) -> None:
    if n < 4:
        msg = f"The debiased CKA needs at least 4 positions, got {n}."
        raise ValueError(msg)


def debiased_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Debiased linear CKA (unbiased HSIC, Song et al. 2012; Nguyen et al. 2021).

    The ratio ``HSIC_1(K, L) / sqrt(HSIC_1(K, K) HSIC_1(L, L))`` of the unbiased HSIC
    estimator with linear kernels ``K = X Xᵀ``, ``L = Y Yᵀ``: about 0 (either sign) for
    independent tables of any shape, where the classic :func:`linear_cka` grows with width
    over length; 1 for a rotated or scaled copy. It does not change when a table is shifted,
    so rows are always centred. NaN when a table has no variance.

    Parameters
    ----------
    x : ndarray of shape (n_positions, d_x)
    y : ndarray of shape (n_positions, d_y)
        At least 4 positions.

    Notes
    -----
    Every term comes from ``||Xᵀ Y||²_F``, ``||Xᵀ X||²_F``, ``||Yᵀ Y||²_F`` and the row
    norms (see :func:`_unbiased_hsic`): no n x n kernel is formed.

    Examples
    --------
    >>> x = np.random.default_rng(0).standard_normal((50, 4))
    >>> round(debiased_cka(x, 3 * x[:, ::-1] + 1), 12)
    1.0
    """
    _check_same_length(x, y)
    _check_hsic_rows(len(x))
    (xs, kx), (ys, ky) = _hsic_terms(x), _hsic_terms(y)
    inner, sq_x, sq_y = (np.linalg.norm(a.T @ b) ** 2 for a, b in ((xs, ys), (xs, xs), (ys, ys)))
    return _debiased(inner, sq_x, sq_y, kx, ky)


#: Above this many positions the null is computed on the dimension side (``||Xᵀ Y_π||²``
#: by products), below it on the position side (``<K, L_π>`` by gathering the n x n kernel)
#: when that is cheaper: a float32 gather and product of n² values costs about 2 ns each
#: (1024 x 1024: 2 ms), a product 2 n d_x d_y flops at ~50 GFLOP/s; the kernels must fit
#: in memory (2 x 64 MB at 4096).
_POSITION_SIDE_MAX = 4096


def _permuted_inner(xs: np.ndarray, ys: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """``||Xᵀ Y[π]||²_F`` for each row order π in `orders`, on the cheaper side."""
    n, (dx, dy) = len(xs), (xs.shape[1], ys.shape[1])
    if n <= _POSITION_SIDE_MAX and 2e-9 * n * n < 2 * n * dx * dy / 5e10:
        # float32 kernels halve the gather's memory traffic; each sum is pairwise in float64
        # (about 1e-7 relative: a null needs no more).
        kx, ly = (xs @ xs.T).astype(np.float32), (ys @ ys.T).astype(np.float32)
        return np.array([np.sum(kx * ly.take(o, 0).take(o, 1), dtype=np.float64) for o in orders])
    # Dimension side, several permutations per product: Xᵀ [Y[π_1] ... Y[π_m]].
    batch = max(1, 4096 // dy)
    out = []
    for first in range(0, len(orders), batch):
        chunk = orders[first : first + batch]
        product = xs.T @ np.concatenate([ys[o] for o in chunk], axis=1)
        out.extend(np.sum(product.reshape(dx, len(chunk), dy) ** 2, axis=(0, 2)))
    return np.array(out)


def cka_null(
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_permutations: int = 200,
    seed: int = 0,
    center: bool = True,
) -> CkaNull:
    """Classic and debiased CKA with the second table's rows shuffled: their chance level.

    Parameters
    ----------
    x : ndarray of shape (n_positions, d_x)
    y : ndarray of shape (n_positions, d_y)
    n_permutations : int
        Row permutations of `y` drawn (seeded).
    seed : int
        Seed of ``numpy.random.default_rng`` for the permutations.
    center : bool
        Centring of the classic CKA (the debiased one always centres).

    Notes
    -----
    A row permutation leaves each table's own terms unchanged and the rows centred, so each
    draw costs one ``||Xᵀ Y_π||²_F`` (two when uncentred): a gather of the n x n kernel on
    the position side or a product on the dimension side, whichever is cheaper
    (``_POSITION_SIDE_MAX``): about 2-4 ms a draw at 1024 x 768.

    Examples
    --------
    >>> x, y = np.random.default_rng(0).standard_normal((2, 64, 8))
    >>> null = cka_null(x, y, n_permutations=19)
    >>> null.n_permutations, 0.05 <= null.p_value() <= 1
    (19, True)
    """
    _check_comparable(x, y, center=center)
    _check_hsic_rows(len(x))
    if n_permutations < 1:
        msg = f"n_permutations must be at least 1, got {n_permutations}."
        raise ValueError(msg)
    rng = np.random.default_rng(seed)
    orders = np.array([rng.permutation(len(x)) for _ in range(n_permutations)])
    (xs, kx), (ys, ky) = _hsic_terms(x), _hsic_terms(y)
    sq_x, sq_y = np.linalg.norm(xs.T @ xs) ** 2, np.linalg.norm(ys.T @ ys) ** 2
    inner = _permuted_inner(xs, ys, orders)
    debiased = np.array(
        [_debiased(c, sq_x, sq_y, kx, ky[o]) for c, o in zip(inner, orders, strict=True)]
    )
    if center:
        classic, classic_observed = inner, np.linalg.norm(xs.T @ ys) ** 2
        norms = np.sqrt(sq_x * sq_y)
    else:  # the uncentred kernels: their own gathers
        xu, yu = centered(x, center=False), centered(y, center=False)
        classic = _permuted_inner(xu, yu, orders)
        classic_observed = np.linalg.norm(xu.T @ yu) ** 2
        norms = np.linalg.norm(xu.T @ xu) * np.linalg.norm(yu.T @ yu)
    return CkaNull(
        cka=classic / norms,
        cka_debiased=debiased,
        observed_cka=float(classic_observed / norms),
        observed_cka_debiased=_debiased(np.linalg.norm(xs.T @ ys) ** 2, sq_x, sq_y, kx, ky),
        seed=seed,
    )


def position_components(values: np.ndarray, k: int, *, center: bool = True) -> np.ndarray:
    """The top-k principal components over positions: unit left singular vectors.

    Parameters
    ----------
    values : ndarray of shape (n_positions, d_model)
    k : int
        Number of components, at most ``min(n_positions - 1, d_model)``.
    center : bool
        Subtract the mean row first (PCA).

    Returns
    -------
    ndarray of shape (n_positions, k)
        Orthonormal columns, by descending singular value.

    Notes
    -----
    From the top eigenvectors of the float64 Gram matrix on the smaller side
    (``scipy.linalg.eigh`` with ``subset_by_index``); on the dimension side ``U = X V / σ``.
    """
    if _tall(values, values):
        return _components(values, gram(values, center=center), k, center=center)
    x = centered(values, center=center)
    return _top_eigenvectors(x @ x.T, k, x.shape)[1]


def procrustes_error(x: np.ndarray, y: np.ndarray, *, center: bool = True) -> float:
    """Relative error left after rotating Y onto X: a scale- and rotation-free distance.

    Rotation only, after scaling both to unit norm: ``sqrt(2 - 2 nu)`` with
    ``nu = ||Ŷᵀ X̂||_*``. Not the square root of ``scipy.spatial.procrustes``'s disparity,
    which also fits a scale factor and centres: that is ``1 - nu²`` (the two agree to first
    order for near-copies).

    ``||Ŷ R - X̂||_F`` with ``X̂ = X / ||X||_F``, ``Ŷ = Y / ||Y||_F`` (after centring if
    `center`) and R the orthogonal matrix minimising it, the residual of
    ``scipy.linalg.orthogonal_procrustes(Ŷ, X̂)``. 0 for a rotated or scaled copy, at most 2.

    Parameters
    ----------
    x, y : ndarray of shape (n_positions, d_model)

    Notes
    -----
    For unit-norm X̂, Ŷ the minimum is ``sqrt(2 - 2 ||Ŷᵀ X̂||_*)`` (nuclear norm: the sum of
    singular values of a d x d matrix), so no rotation is formed: at 8192 x 4096 this saves a
    full 4096 x 4096 SVD and a table-sized product. The subtraction limits the absolute
    accuracy to about ``sqrt(d_model * eps)`` (~1e-6): smaller errors read as 0 to that.

    Examples
    --------
    >>> x = np.random.default_rng(0).standard_normal((20, 3))
    >>> q = np.linalg.qr(np.random.default_rng(1).standard_normal((3, 3)))[0]
    >>> procrustes_error(x, 2 * x @ q) < 1e-6
    True
    """
    _check_comparable(x, y, center=center)
    if x.shape[1] != y.shape[1]:
        msg = f"Procrustes needs equal widths; got {x.shape[1]} and {y.shape[1]} dimensions."
        raise ValueError(msg)
    if _tall(x, y):
        cross = _product(x, y, center=center)
    else:
        cross = centered(y, center=center).T @ centered(x, center=center)
    sq_norms = [sum(np.vdot(b, b) for b in float64_blocks(v, center=center)) for v in (x, y)]
    return _procrustes(_nuclear_norm(cross), *sq_norms)


@records_params
@bounded(n_components=Bound(1, None), n_permutations=Bound(0, 10_000), seed=SEED)
def compare(
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_components: int = 10,
    center: bool = True,
    n_permutations: int = 200,
    seed: int = 0,
) -> Comparison:
    """CKA (classic and debiased, with a permutation null), principal angles of the top-k
    components and Procrustes error of two tables.

    The same as :func:`linear_cka`, :func:`position_components` (twice) with
    ``scipy.linalg.subspace_angles``, and :func:`procrustes_error`, but sharing one set of
    float64 Gram matrices: three table-sized products instead of seven.

    Tall tables (more positions than dimensions, the usual case) are read in float64 row
    blocks (:func:`posviz._linalg.float64_blocks`), and ``Yᵀ X``, ``Xᵀ X`` and ``Yᵀ Y`` are
    formed one after the other and dropped once measured, so the working memory beyond the
    inputs is two blocks, two d x d matrices and the n x k components; wide tables are copied
    whole in float64 (their Grams span positions).

    Parameters
    ----------
    x : ndarray of shape (n_positions, d_x)
    y : ndarray of shape (n_positions, d_y)
    n_components : int
        k, the principal components over positions whose spans are compared.
    center : bool
        Remove each table's mean row before every measure.
    n_permutations : int
        Row shuffles of the second table for both CKAs' null (:func:`cka_null`); 0: none.
    seed : int
        Seed of those shuffles.

    Examples
    --------
    >>> x = np.random.default_rng(0).standard_normal((30, 6))
    >>> c = compare(x, x[:, ::-1], n_components=3, n_permutations=0)
    >>> round(c.cka, 12), bool(np.allclose(c.principal_angles, 0, atol=1e-6))
    (1.0, True)
    """
    _check_comparable(x, y, center=center)
    k = n_components
    null = (
        cka_null(x, y, n_permutations=n_permutations, seed=seed, center=center)
        if n_permutations
        else None
    )
    same_width = x.shape[1] == y.shape[1]
    if _tall(x, y):
        cross = _product(x, y, center=center)
        cross_sq = np.linalg.norm(cross) ** 2
        nuclear = _nuclear_norm(cross) if same_width else None
        del cross  # one d x d matrix at a time: at d = 768 each is 1.5x a 1024-row table
        ux, norm_x, sq_norm_x = _gram_summary(x, k, center=center)
        uy, norm_y, sq_norm_y = _gram_summary(y, k, center=center)
        cka = _cka(cross_sq, norm_x, norm_y)
    else:
        xs, ys = centered(x, center=center), centered(y, center=center)
        gx, gy = xs @ xs.T, ys @ ys.T
        cka = _cka(np.vdot(gx, gy), np.linalg.norm(gx), np.linalg.norm(gy))
        sq_norm_x, sq_norm_y = np.trace(gx), np.trace(gy)
        ux, uy = _top_eigenvectors(gx, k, x.shape)[1], _top_eigenvectors(gy, k, y.shape)[1]
        nuclear = _nuclear_norm(ys.T @ xs) if same_width else None
    return Comparison(
        cka=cka,
        principal_angles=np.sort(subspace_angles(ux, uy)),
        procrustes_error=None if nuclear is None else _procrustes(nuclear, sq_norm_x, sq_norm_y),
        n_positions=len(x),
        cka_debiased=null.observed_cka_debiased if null is not None else debiased_cka(x, y),
        null=null,
    )


def metrics_table(first: Spectrum, second: Spectrum) -> pd.DataFrame:
    """The spectrum metrics of two tables in one frame with a ``second - first`` column.

    Examples
    --------
    >>> from posviz.spectrum import spectrum
    >>> t = metrics_table(spectrum(np.eye(3)), spectrum(np.eye(3)))
    >>> t.loc[t.metric == "stable_rank", "difference"].item()
    0.0
    """
    import pandas as pd

    # Undefined metrics (a table without variance) are None: NaN here, null in JSON exports.
    a, b = (
        {k: np.nan if v is None else float(v) for k, v in s.metrics().items()}
        for s in (first, second)
    )
    return pd.DataFrame(
        {
            "metric": list(a),
            "first": list(a.values()),
            "second": [b[key] for key in a],
            "difference": [b[key] - a[key] for key in a],
        }
    )


def _check_same_length(x: np.ndarray, y: np.ndarray) -> None:
    if x.shape[0] != y.shape[0]:
        msg = (
            f"The tables have {x.shape[0]} and {y.shape[0]} positions; resample one to the "
            "other's length first."
        )
        raise ValueError(msg)


def _check_comparable(x: np.ndarray, y: np.ndarray, *, center: bool) -> None:
    """Both tables cover the same positions and each varies over them: without variance
    CKA, the angles and Procrustes divide 0 by 0 (the debiased CKA alone says NaN)."""
    _check_same_length(x, y)
    for which, table in (("first", x), ("second", y)):
        if not (np.ptp(table, axis=0).any() if center else table.any()):
            flat = "every row is the same, so it centres to 0" if center else "every entry is 0"
            msg = (
                f"The {which} table has no variance ({flat}): "
                "CKA, principal angles and the Procrustes error are 0 / 0 against it, undefined. "
                "Compare tables whose rows differ."
            )
            raise ValueError(msg)
