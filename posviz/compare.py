"""How alike are two position tables: spectra side by side, CKA, principal angles, Procrustes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import eigh, subspace_angles, svdvals

from posviz._linalg import centered, float64_blocks, gram, tall_times
from posviz._params import records_params
from posviz.spectrum import Spectrum

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFINITIONS",
    "MAX_COMPONENTS",
    "OVERLAY_MAX_OFFSET",
    "Comparison",
    "compare",
    "largest_k",
    "linear_cka",
    "metrics_table",
    "position_components",
    "procrustes_error",
]


#: Most components offered: the angles beyond are rarely read and each costs an eigenvector.
MAX_COMPONENTS = 64
#: Largest offset of the two tables' overlaid offset profiles (Compare, and Resample's before
#: and after): their spread over i costs n_positions x k x d_model each.
OVERLAY_MAX_OFFSET = 512

#: What each of the Compare page's measures is, for its help texts and the report.
DEFINITIONS = {
    "cka": "Linear CKA (Kornblith et al. 2019): ‖Xᵀ Y‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F) of the tables "
    "with their mean rows removed (uncentred: the RV coefficient). 1 when one table is a "
    "rotation and/or scaling of the other, 0 when their dimensions are uncorrelated.",
    "angles": "Principal angles between the spans of the top-k principal components over "
    "positions (left singular vectors, one value per position) of the two tables "
    "(scipy.linalg.subspace_angles). 0° = the same k-dimensional positional signal.",
    "procrustes": "‖Ŷ R − X̂‖_F with X̂ = X/‖X‖_F, Ŷ = Y/‖Y‖_F and R the orthogonal matrix "
    "minimising it (the residual of scipy.linalg.orthogonal_procrustes, computed as "
    "√(2 − 2‖ŶᵀX̂‖_*): exact to ~1e-6). 0 for a rotated or scaled copy, at most 2. Needs "
    "equal widths.",
    "metric": "Cosine: ⟨x_i, x_j⟩ / (‖x_i‖ ‖x_j‖). Dot: ⟨x_i, x_j⟩.",
}


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
    """

    cka: float
    principal_angles: np.ndarray
    procrustes_error: float | None
    n_positions: int
    params: dict = field(default_factory=dict)

    @property
    def degrees(self) -> np.ndarray:
        """`principal_angles` in degrees, ndarray of shape (k,)."""
        return np.degrees(self.principal_angles)

    def metrics(self) -> dict[str, float | None]:
        """CKA, the mean and largest principal angle (degrees) and the Procrustes error."""
        return {
            "cka": self.cka,
            "mean_angle_degrees": float(self.degrees.mean()),
            "max_angle_degrees": float(self.degrees.max()),
            "procrustes_error": self.procrustes_error,
        }

    def to_frame(self) -> pd.DataFrame:
        """The measures in one row, as exported: CKA and Procrustes error."""
        import pandas as pd

        return pd.DataFrame({"cka": [self.cka], "procrustes_error": [self.procrustes_error]})

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


def _gram_summary(values: np.ndarray, k: int, *, center: bool) -> tuple[np.ndarray, float, float]:
    """A tall table's top-k components over positions, ``||Xᵀ X||_F`` and ``||X||_F²``."""
    g = gram(values, center=center)
    norm, trace = np.linalg.norm(g), np.trace(g)
    return _components(values, g, k, center=center), norm, trace


def _tall(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether Gram matrices are smaller on the dimension side than on the position side."""
    return len(x) >= max(x.shape[1], y.shape[1])


def _cka(cross_sq: float, norm_x: float, norm_y: float) -> float:
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
    if lam[0] <= lam[-1] * len(g) * np.finfo(np.float64).eps:
        msg = f"The table has fewer than k = {k} non-zero components; pick a smaller k."
        raise ValueError(msg)
    return lam[::-1], vectors[:, ::-1]


def _components(values: np.ndarray, g: np.ndarray, k: int, *, center: bool) -> np.ndarray:
    """Top-k left singular vectors ``U = X V / σ`` of a tall table from its Gram ``g = Xᵀ X``."""
    lam, vectors = _top_eigenvectors(g, k, values.shape)
    weights = vectors / np.sqrt(lam)
    return tall_times(values, weights, center=center)


def _procrustes(nuclear: float, sq_norm_x: float, sq_norm_y: float) -> float:
    """sqrt(2 - 2 ||Yᵀ X||_* / (||X|| ||Y||)): the Procrustes residual of unit-norm tables."""
    return float(np.sqrt(max(2.0 - 2.0 * nuclear / np.sqrt(sq_norm_x * sq_norm_y), 0.0)))


def linear_cka(x: np.ndarray, y: np.ndarray, *, center: bool = True) -> float:
    """Linear CKA between two tables with the same rows (positions).

    ``||Xᵀ Y||_F^2 / (||Xᵀ X||_F ||Yᵀ Y||_F)`` after removing the mean row of each table:
    1 when Y is an orthogonal transform and/or scaling of X, 0 when their columns are
    uncorrelated. Without centring this is the RV coefficient. Computed in float64 on the
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
    _check_same_length(x, y)
    if _tall(x, y):
        cross_sq = np.linalg.norm(_product(x, y, center=center)) ** 2
        return _cka(cross_sq, *(np.linalg.norm(gram(v, center=center)) for v in (x, y)))
    xs, ys = centered(x, center=center), centered(y, center=center)
    gx, gy = xs @ xs.T, ys @ ys.T
    return _cka(np.vdot(gx, gy), np.linalg.norm(gx), np.linalg.norm(gy))


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
    _check_same_length(x, y)
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
def compare(
    x: np.ndarray, y: np.ndarray, *, n_components: int = 10, center: bool = True
) -> Comparison:
    """CKA, principal angles of the top-k components and Procrustes error of two tables.

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

    Examples
    --------
    >>> x = np.random.default_rng(0).standard_normal((30, 6))
    >>> c = compare(x, x[:, ::-1], n_components=3)
    >>> round(c.cka, 12), bool(np.allclose(c.principal_angles, 0, atol=1e-6))
    (1.0, True)
    """
    _check_same_length(x, y)
    k = n_components
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
        procrustes_error=_procrustes(nuclear, sq_norm_x, sq_norm_y) if same_width else None,
        n_positions=len(x),
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
