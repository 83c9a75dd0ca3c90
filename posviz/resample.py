"""What a table looks like stretched to a new length or a new 2-D grid (its file: `posviz.io`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from posviz._params import Bound, records_params
from posviz.embedding import MAX_ELEMENTS, Embedding, check_elements

# The writers moved to posviz.io; pages/resample.py still calls them from here.

__all__ = [
    "GRID_METHODS",
    "GRID_SIDES",
    "LENGTH_METHODS",
    "POSITION_RULES",
    "Resampled",
    "axis_weights",
    "resample_grid",
    "resample_length",
    "resampled_table",
    "rounding_note",
]

#: 1-D methods: interpolation between rows, or Longformer's copy of the table end to end.
LENGTH_METHODS = ("linear", "cubic", "tile")
#: Where new row p is read from the old table of L rows when resampling to L' rows.
POSITION_RULES = {
    "ends": "x = p·(L−1)/(L'−1): first and last rows kept",
    "scaled": "x = p·L/L': Position Interpolation (Chen et al. 2023), last rows extrapolated",
}
#: 2-D methods, as named by torch.nn.functional.interpolate.
GRID_METHODS = ("bicubic", "bilinear")
#: Patches a side of a resampled grid (ViTs: 14 to a few hundred).
GRID_SIDES = Bound(1, 1024)

#: Keys' cubic-convolution parameter of PyTorch's plain bicubic, and of its antialiased
#: bicubic (which follows Pillow).
_KEYS_A = {False: -0.75, True: -0.5}
#: Slices of work: rows (linear) or columns (cubic) are resampled this many blocks at a
#: time, so temporaries stay a small fraction of the table whatever its size.
N_BLOCKS = 32

#: How each method rounds, where it differs from weighted sums in the table's dtype.
_ROUNDING = {
    "cubic": "splines fitted in float64 and rounded once to it.",
    "tile": "rows copied as they are.",
}


def rounding_note(method: str, dtype: np.dtype | str) -> str:
    """How close a table resampled by `method` in `dtype` is to exact arithmetic.

    >>> rounding_note("tile", "float32")
    "Computed and kept in the table's dtype, float32: rows copied as they are."
    """
    rounding = _ROUNDING.get(
        method,
        "weighted sums of rows in that dtype, to a few units of its last digit "
        "(float32: ~1e-6 of the values' magnitude).",
    )
    return f"Computed and kept in the table's dtype, {np.dtype(dtype)}: {rounding}"


@dataclass(frozen=True)
class Resampled:
    """A resampled table (without prefix rows) and how it was made.

    Attributes
    ----------
    values : ndarray of shape (n_positions_new, d_model)
        Same float dtype as the input rows.
    grid : tuple of (int, int) or None
        (height, width) of the new grid for 2-D resampling, else None.
    description : str
        The method and options in words, for titles, captions and file metadata.
    params : dict
        The settings of :func:`resample_length` or :func:`resample_grid` that made it.
    """

    values: np.ndarray
    grid: tuple[int, int] | None
    description: str
    params: dict = field(default_factory=dict)


def _check_size(n_rows: int, d_model: int) -> None:
    if n_rows < 2:
        msg = f"The new table needs at least 2 rows, got {n_rows}."
        raise ValueError(msg)
    advice = f"pick a new length below {MAX_ELEMENTS // d_model:,}."
    check_elements("The new table", (n_rows, d_model), advice)


@records_params
def resample_length(
    values: np.ndarray,
    *,
    n_positions: int,
    method: str = "linear",
    positions: str = "ends",
    reserved: int = 0,
) -> Resampled:
    """Resample a 1-D table of L rows to `n_positions` rows L'.

    Parameters
    ----------
    values : ndarray of shape (L, d_model)
    n_positions : int
        New length L' (at least 2).
    method : {"linear", "cubic", "tile"}
        "linear": row interpolation; "cubic": scipy's not-a-knot ``CubicSpline`` through the
        rows; "tile": Longformer's copy, ``new[p] = old[r + (p - r) mod (L - r)]`` for
        ``p >= r`` and ``new[p] = old[p]`` for the `reserved` rows ``p < r``.
    positions : {"ends", "scaled"}
        For linear and cubic, where row p is read: ``x = p (L-1)/(L'-1)`` ("ends") or
        ``x = p L / L'`` ("scaled", Position Interpolation; rows beyond ``L - 1`` are
        extrapolated by the last linear piece or cubic).
    reserved : int
        For "tile": leading rows copied once and not repeated (RoBERTa's padding offset of 2).

    Notes
    -----
    The result has the input's dtype. "linear" computes ``a + t (b - a)`` in that dtype, a
    block of rows at a time: exact to a few units of its last place (float32: ~1e-7 of the
    rows' magnitude). "cubic" fits and evaluates the spline in float64 a block of columns at
    a time and rounds once to the input dtype. Working memory beyond the input and the
    result is about 1/`N_BLOCKS` of the table per temporary (the result itself is L'/L times
    the input's bytes).

    Both rules return the input when ``L' = L``: "linear" bit for bit in float64 (within 3
    units in the last place in float32, its arithmetic's rounding), "cubic" within 1 unit in
    the last place in float64 (the spline is refitted and evaluated; float32 rounds back to
    the input). Linear and cubic interpolation are exact
    on tables linear in position. Under "scaled", a sinusoid of angular frequency w becomes
    one of frequency ``w L / L'`` at the new positions (exactly at rows where x is an integer).

    Examples
    --------
    >>> ramp = np.arange(4.0)[:, None] * [1.0, -2.0]
    >>> resample_length(ramp, n_positions=7).values[:, 0].tolist()
    [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    >>> resample_length(ramp, n_positions=6, method="tile", reserved=1).values[:, 0].tolist()
    [0.0, 1.0, 2.0, 3.0, 1.0, 2.0]
    """
    n, d = values.shape
    _check_size(n_positions, d)
    if method == "tile":
        if not 0 <= reserved < n - 1:
            msg = f"Reserved rows must be between 0 and {n - 2} for a table of {n} rows."
            raise ValueError(msg)
        i = np.arange(n_positions)
        source_rows = np.where(i < reserved, i, reserved + (i - reserved) % (n - reserved))
        out = values[source_rows]
        words = f"tile to {n_positions} rows" + (f", {reserved} reserved" * bool(reserved))
        return Resampled(values=out, grid=None, description=words)
    if method not in LENGTH_METHODS:
        msg = f"Unknown method {method!r}; choose one of {', '.join(LENGTH_METHODS)}."
        raise ValueError(msg)
    if positions not in POSITION_RULES:
        msg = f"Unknown position rule {positions!r}; choose one of {', '.join(POSITION_RULES)}."
        raise ValueError(msg)
    p = np.arange(n_positions, dtype=np.float64)
    x = p * (n - 1) / (n_positions - 1) if positions == "ends" else p * n / n_positions
    out = np.empty((n_positions, d), dtype=values.dtype)
    if method == "linear":
        left = np.clip(np.floor(x).astype(np.intp), 0, n - 2)
        t = (x - left)[:, None].astype(values.dtype)
        # Row blocks written in place: whole-table temporaries were 4x the result's bytes.
        step = -(-n_positions // N_BLOCKS)
        for rows in (slice(start, start + step) for start in range(0, n_positions, step)):
            block = out[rows]
            np.subtract(values[left[rows] + 1], values[left[rows]], out=block)
            block *= t[rows]
            block += values[left[rows]]
    else:
        from scipy.interpolate import CubicSpline  # loads only when asked: slow to import

        # Columns are independent splines: blocks of columns keep the float64 coefficients
        # (4 per row and column) small; a whole-table fit made 24x the table's bytes.
        step = -(-d // N_BLOCKS)
        for cols in (slice(start, start + step) for start in range(0, d, step)):
            spline = CubicSpline(np.arange(n), values[:, cols], axis=0, extrapolate=True)
            out[:, cols] = spline(x)
    return Resampled(
        values=out,
        grid=None,
        description=f"{method} to {n_positions} rows, {POSITION_RULES[positions]}",
    )


def axis_weights(n_in: int, n_out: int, *, method: str, antialias: bool) -> np.ndarray:
    """PyTorch's interpolation along one axis as a matrix (``align_corners=False``).

    Row i holds the weights of the old samples that make new sample i, exactly as
    ``torch.nn.functional.interpolate`` computes them: half-pixel centres
    ``x = (i + 0.5) n_in / n_out - 0.5``. Without antialiasing: Keys' cubic convolution
    (a = -0.75) on the 4 nearest samples or the 2-sample linear hat, indices clamped at the
    border. With antialiasing (PyTorch's ``antialias=True``, after Pillow): the kernel
    (cubic a = -0.5, or the hat) is stretched by ``n_in / n_out`` when shrinking and each
    row is normalised to sum 1.

    Returns
    -------
    ndarray of shape (n_out, n_in)

    Examples
    --------
    >>> axis_weights(2, 4, method="bilinear", antialias=False).tolist()
    [[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]]
    """
    if method not in GRID_METHODS:
        msg = f"Unknown method {method!r}; choose one of {', '.join(GRID_METHODS)}."
        raise ValueError(msg)
    a, half_width = _KEYS_A[antialias], 2.0 if method == "bicubic" else 1.0

    def kernel(s: np.ndarray) -> np.ndarray:
        s = np.abs(s)
        if method == "bilinear":
            return np.maximum(0.0, 1.0 - s)
        inner = ((a + 2) * s - (a + 3)) * s * s + 1
        outer = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
        return np.where(s <= 1, inner, np.where(s < 2, outer, 0.0))

    scale = n_in / n_out
    weights = np.zeros((n_out, n_in))
    out = np.arange(n_out)
    if antialias:
        support = half_width * max(scale, 1.0)
        center = scale * (out + 0.5)
        # PyTorch truncates toward zero here; both bounds are then clamped to the axis.
        first = np.maximum(np.trunc(center - support + 0.5).astype(np.intp), 0)
        last = np.minimum(np.trunc(center + support + 0.5).astype(np.intp), n_in)
        for i in out:
            taps = np.arange(first[i], last[i])
            w = kernel((taps - center[i] + 0.5) / max(scale, 1.0))
            weights[i, taps] = w / w.sum()
        return weights
    source = scale * (out + 0.5) - 0.5
    if method == "bilinear":
        source = np.maximum(source, 0.0)  # PyTorch clamps linear (not cubic) sources at 0
    left = np.floor(source).astype(np.intp)
    for offset in range(-1, 3) if method == "bicubic" else range(2):
        taps = np.clip(left + offset, 0, n_in - 1)
        np.add.at(weights, (out, taps), kernel(source - (left + offset)))
    return weights


@records_params
def resample_grid(
    values: np.ndarray,
    grid: tuple[int, int],
    *,
    new_grid: tuple[int, int],
    method: str = "bicubic",
    antialias: bool = True,
) -> Resampled:
    """Resample a row-major H x W patch grid to H' x W' as PyTorch and timm do.

    Matches ``F.interpolate(g, size=new_grid, mode=method, align_corners=False,
    antialias=antialias)`` on the grid ``g`` of shape (1, d_model, H, W), which is what
    timm's ``resample_abs_pos_embed`` calls (with ``antialias=True`` by default). The
    interpolation is separable: ``W_h @ G @ W_w.T`` per dimension with the matrices of
    :func:`axis_weights`, computed in the table's dtype (float32 in, float32 out: within
    ~1e-6 of the values' magnitude, as PyTorch's own float32 result is), so the working
    memory is one intermediate of H' x W x d_model values next to the result.

    Parameters
    ----------
    values : ndarray of shape (H * W, d_model)
        Grid rows only (prefix tokens removed), row-major.
    grid, new_grid : tuple of (int, int)
        (H, W) and (H', W').
    method : {"bicubic", "bilinear"}
    antialias : bool
        PyTorch's flag: the Pillow-style antialiased kernels (also used when enlarging).

    Returns
    -------
    Resampled
        `values` of shape (H' * W', d_model), `grid` = (H', W').

    Examples
    --------
    >>> g = np.arange(4.0).reshape(4, 1) * [1.0, 1.0]
    >>> resample_grid(g, (2, 2), new_grid=(2, 2)).values[:, 0].tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    (h, w), (h_new, w_new) = grid, new_grid
    d = values.shape[1]
    if h * w != values.shape[0]:
        msg = f"Grid {h} x {w} does not match the {values.shape[0]} rows of the table."
        raise ValueError(msg)
    GRID_SIDES.check("new_grid's height", h_new)
    GRID_SIDES.check("new_grid's width", w_new)
    _check_size(h_new * w_new, d)
    w_h = axis_weights(h, h_new, method=method, antialias=antialias).astype(values.dtype)
    w_w = axis_weights(w, w_new, method=method, antialias=antialias).astype(values.dtype)
    rows = (w_h @ values.reshape(h, w * d)).reshape(h_new, w, d)
    out = np.matmul(w_w, rows).reshape(h_new * w_new, d)
    return Resampled(
        values=out,
        grid=(h_new, w_new),
        description=(
            f"{method} {h}x{w} → {h_new}x{w_new} (PyTorch align_corners=False, "
            f"antialias={antialias})"
        ),
    )


def resampled_table(table: Embedding, result: Resampled) -> Embedding:
    """The resampled rows as an Embedding with the table's prefix rows, name and stored dtype.

    Trailing rows trimmed from the source are not carried over. Relative positions (a table
    whose first row is not position 0) stretch with the rows: −256 … 255 resampled to 1024
    rows are −512 … 511.
    """
    prefix = table.prefix.astype(result.values.dtype)
    # Without prefix rows the result is used as it is: a concatenated copy would double it.
    return Embedding.from_array(
        np.concatenate([prefix, result.values]) if len(prefix) else result.values,
        name=table.name,
        source=f"{table.source} → {result.description}",
        dtype=table.dtype,
        row_start=table.row_start,
        grid=result.grid,
        first_position=round(table.first_position * len(result.values) / table.shape[0]),
    )
