"""The table every analysis takes: a position-embedding matrix and where it came from."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from posviz._version import __version__
from posviz.rows import RowLabels, RowOffsets
from posviz.source import LoadError, Simulation, Source

__all__ = [
    "MAX_ELEMENTS",
    "MIN_DIMS",
    "MIN_POSITIONS",
    "Embedding",
    "LoadError",
    "as_table",
    "check_elements",
    "numpy_dtype_name",
]

#: Largest table accepted (elements). 2**26 floats = 256 MiB as float32: far above any
#: position table (GPT-2: 786k) and above a 50k-token vocabulary (38.6M), far below RAM.
MAX_ELEMENTS = 2**26
#: Smallest table analysed. 10 positions: the probes' 5-fold cross-validation needs 2 positions
#: per fold, and at 10 every other analysis (offset profile, boundary summary, sinusoid fits)
#: is defined too, so every page and the report show all their numbers. No trained position
#: table is shorter; 2 dimensions are the fewest that have a direction.
MIN_POSITIONS = 10
MIN_DIMS = 2
#: Largest magnitude accepted: sums of 2**26 products of two such values stay finite in
#: float64 (and their inverse's squares stay normal).
_LARGEST = 1e150


def check_elements(what: str, shape: tuple[int, ...], advice: str) -> None:
    """Refuse an array of more than `MAX_ELEMENTS` values, before memory is allocated for it.

    Raises
    ------
    LoadError
        Naming `what`, its shape and size, the limit, and then `advice` (what to do instead).
    """
    size = math.prod(shape)
    if size > MAX_ELEMENTS:
        msg = (
            f"{what} has shape {shape} ({size:,} values), above the limit of {MAX_ELEMENTS:,}; "
            f"{advice}"
        )
        raise LoadError(msg)


#: safetensors' dtype names -> numpy's (bfloat16 and float8 as ml_dtypes names them).
_NUMPY_NAMES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
}


def numpy_dtype_name(stored: str) -> str:
    """A stored dtype by numpy's name, the one vocabulary posviz shows (names it does not know
    are kept as they are).

    Examples
    --------
    >>> numpy_dtype_name("BF16"), numpy_dtype_name("F32"), numpy_dtype_name("float32")
    ('bfloat16', 'float32', 'float32')
    """
    return _NUMPY_NAMES.get(stored, stored)


def as_table(array: np.ndarray, *, what: str = "tensor") -> np.ndarray:
    """Check that `array` is a usable position table and return it as float32/float64.

    Leading singleton axes are squeezed ((1, N, d) -> (N, d)). float64, float128 and 32/64-bit
    integers become float64 (exact but for float128's extra digits); every other real dtype
    becomes float32.

    Parameters
    ----------
    array : ndarray
        Candidate table.
    what : str
        How to name the array in error messages (e.g. "tensor 'wpe.weight'").

    Raises
    ------
    LoadError
        If it is not numeric, complex, not 2-D after squeezing, smaller than
        `MIN_POSITIONS` x `MIN_DIMS`, larger
        than `MAX_ELEMENTS`, holds NaN/Inf (the count and the first (row, column) are given),
        or its largest magnitude is beyond 1e150 or (unless all zero) below 1e-150.

    Examples
    --------
    >>> as_table(np.ones((1, 10, 2), dtype=np.float16)).shape
    (10, 2)
    >>> as_table(np.array([1.0, 2.0]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    posviz.source.LoadError: tensor is 1-D with shape (2,); a position table is 2-D ...
    """
    shape = tuple(int(s) for s in array.shape)
    if array.dtype.kind == "c":
        msg = f"{what} is complex ({array.dtype}); position tables are real-valued."
        raise LoadError(msg)
    if array.dtype.kind not in "fiub":
        msg = f"{what} has non-numeric dtype {array.dtype}; expected floats or integers."
        raise LoadError(msg)
    while len(shape) > 2 and shape[0] == 1:
        shape = shape[1:]
    if len(shape) != 2:
        msg = (
            f"{what} is {len(shape)}-D with shape {tuple(array.shape)}; "
            "a position table is 2-D (n_positions, d_model)."
        )
        raise LoadError(msg)
    if shape[0] < MIN_POSITIONS or shape[1] < MIN_DIMS:
        msg = (
            f"{what} has shape {shape}; posviz analyses tables of at least {MIN_POSITIONS} "
            f"positions (rows) and {MIN_DIMS} dimensions (columns)."
        )
        raise LoadError(msg)
    check_elements(what, shape, "pick a smaller tensor or a row range.")
    # float128 narrows to float64, whose range covers every value accepted below.
    wide = array.dtype.itemsize >= 8 if array.dtype.kind == "f" else array.dtype.itemsize >= 4
    with np.errstate(over="ignore"):  # overflow is reported below, with where it happened
        table = np.asarray(array.reshape(shape), dtype=np.float64 if wide else np.float32)
    # min and max see NaN and Inf too, with no temporary the size of the table.
    low, high = float(table.min()), float(table.max())
    if not np.isfinite(low) or not np.isfinite(high):
        bad = np.argwhere(~np.isfinite(table))
        row, col = (int(v) for v in bad[0])
        stored = array.reshape(shape)[row, col]
        if np.isfinite(stored):  # finite as stored, beyond float64: a float128 table
            msg = (
                f"{what} has values beyond float64's range (first at row {row}, column {col}: "
                f"{np.format_float_scientific(stored, precision=3)}). Rescale the table (e.g. "
                "divide by its largest value) before loading."
            )
            raise LoadError(msg)
        msg = (
            f"{what} holds {len(bad):,} NaN/Inf values (first at row {row}, column {col}); "
            "fix or drop those rows before loading."
        )
        raise LoadError(msg)
    largest = max(high, -low)
    if largest > _LARGEST or 0 < largest < 1 / _LARGEST:
        msg = (
            f"{what} has values of magnitude up to {largest:.3g}: their products "
            f"{'overflow' if largest > 1 else 'underflow'} float64 in the analyses. Rescale the "
            "table (e.g. divide by its largest value) before loading."
        )
        raise LoadError(msg)
    return table


@dataclass(frozen=True, eq=False)
class Embedding:
    """A position-embedding table ready for analysis.

    Build it with :meth:`from_array`, which checks the array and computes `sha256`.

    Attributes
    ----------
    values : ndarray of shape (n_positions, d_model)
        float32 or float64, read-only: the rows being analysed.
    name : str
        Tensor name in its source (e.g. ``"transformer.wpe.weight"``).
    source : str
        File name, or the simulator call that made the table.
    dtype : str
        dtype as stored in the source, before any upcast, by numpy's name (``"bfloat16"``
        for safetensors' ``"BF16"``: see :func:`numpy_dtype_name`).
    row_start : int
        Row of the source tensor that ``values[0]`` is: rows before it were trimmed as
        prefix (class / distillation tokens) or reserved (RoBERTa's offset of 2) rows.
    n_source_rows : int
        Rows of the source tensor.
    prefix : ndarray of shape (row_start, d_model)
        The trimmed leading rows, kept so a resampled table can be written back with them.
    grid : tuple of (int, int) or None
        (height, width) when the rows are a row-major 2-D patch grid (ViT), else None.
    sha256 : str
        Hex digest of the values' dtype, shape and bytes: the key of every cache.
    first_position : int
        The position ``values[0]`` stands for: analyses index rows 0 … n − 1, and every
        position axis, hover, exported ``position`` column and report labels row p as position
        ``first_position + p`` (:attr:`positions`). 0, except for a table whose rows are
        relative positions (DeBERTa's ``rel_embeddings``: −span, so row p is bucket
        ``first_position + p``).
    row_offsets : RowOffsets or None
        For DeBERTa's ``rel_embeddings``: the offsets q − k each analysed row covers (one in
        the exact band, a range beyond, every offset beyond at the clamped ends), which every
        axis, hover, export and the report show beside the bucket. None for other tables.
    simulated : dict or None
        ``{"generator": <a posviz.simulate function's name>, "params": <its arguments>}`` for
        a simulated table (what `posviz rerun` makes it again from), else None.
    origin : Source or None
        Where the whole tensor was read from (`posviz.source`), as `posviz.load` opened it (a
        Hub model at the commit read, an upload by its name): what a report reads the table's
        model from; a simulation's generator and arguments. None for a table made from arrays
        (a page's resampled table). Exports name the source by `provenance`, unchanged.
    """

    values: np.ndarray
    name: str
    source: str
    dtype: str
    row_start: int
    n_source_rows: int
    prefix: np.ndarray
    grid: tuple[int, int] | None
    sha256: str = field(repr=False)
    first_position: int = 0
    row_offsets: RowOffsets | None = None
    simulated: dict[str, Any] | None = None
    origin: Source | None = None

    @classmethod
    def from_array(
        cls,
        array: np.ndarray,
        *,
        name: str,
        source: str,
        dtype: str | None = None,
        row_start: int = 0,
        row_stop: int | None = None,
        grid: tuple[int, int] | None = None,
        first_position: int = 0,
        simulated: dict[str, Any] | None = None,
    ) -> Embedding:
        """Check `array`, keep rows ``[row_start, row_stop)`` and wrap them; the first kept row
        stands for position `first_position`; `simulated` says which simulation made it.

        Raises
        ------
        LoadError
            If the array is not a usable table (see :func:`as_table`), the row range is
            empty or out of bounds, or `grid` does not match the number of kept rows.

        Examples
        --------
        >>> e = Embedding.from_array(np.eye(12, 4), name="t", source="s", row_start=1)
        >>> e.shape, e.row_start, e.prefix.shape, e.describe_rows()
        ((11, 4), 1, (1, 4), 'rows 1-11 of 12 (1 leading row trimmed)')
        """
        full = as_table(array, what=f"tensor '{name}'")
        n = full.shape[0]
        stop = n if row_stop is None else row_stop
        if not 0 <= row_start < stop <= n or stop - row_start < MIN_POSITIONS:
            msg = (
                f"Row range {row_start}:{stop} does not fit tensor '{name}' with {n} rows; "
                f"keep at least {MIN_POSITIONS} rows inside 0..{n}."
            )
            raise LoadError(msg)
        values = np.ascontiguousarray(full[row_start:stop])
        values.flags.writeable = False
        if grid is not None and grid[0] * grid[1] != values.shape[0]:
            msg = f"Grid {grid[0]} x {grid[1]} does not match the {values.shape[0]} kept rows."
            raise LoadError(msg)
        prefix = np.array(full[:row_start])
        prefix.flags.writeable = False
        digest = hashlib.sha256(f"{values.dtype.str}{values.shape}".encode())
        digest.update(values.data.cast("B"))
        return cls(
            values=values,
            name=name,
            source=source,
            dtype=numpy_dtype_name(dtype) if dtype else str(np.asarray(array).dtype),
            row_start=row_start,
            n_source_rows=n,
            prefix=prefix,
            grid=grid,
            sha256=digest.hexdigest(),
            first_position=int(first_position),
            simulated=simulated,
            # A simulation is its own source: what makes it again (posviz.source).
            origin=Simulation(simulated["generator"], tuple(simulated["params"].items()))
            if simulated
            else None,
        )

    @property
    def shape(self) -> tuple[int, int]:
        """(n_positions, d_model) of the analysed rows."""
        return tuple(self.values.shape)

    @property
    def positions(self) -> np.ndarray:
        """The position each row stands for: ``first_position + arange(n_positions)``.

        >>> Embedding.from_array(np.eye(12, 2), name="r", source="s", first_position=-6).positions
        array([-6, -5, -4, -3, -2, -1,  0,  1,  2,  3,  4,  5])
        """
        return np.arange(self.shape[0]) + self.first_position

    @property
    def labels(self) -> RowLabels:
        """How figures name the rows: positions, or the offsets each bucket covers."""
        return RowLabels(self.first_position, self.row_offsets)

    def describe_rows(self) -> str:
        """Which rows of the source are analysed, in words, for titles and exports."""
        n, stop = self.n_source_rows, self.row_start + self.shape[0]
        text = f"rows {self.row_start}-{stop - 1} of {n}"
        trimmed = []
        if self.row_start:
            trimmed.append(f"{self.row_start} leading row{'s' * (self.row_start > 1)}")
        if stop < n:
            trimmed.append(f"{n - stop} trailing row{'s' * (n - stop > 1)}")
        if trimmed:
            text += f" ({' and '.join(trimmed)} trimmed)"
        if self.first_position:
            last = self.first_position + self.shape[0] - 1
            kind = "buckets" if self.row_offsets is not None else "positions"
            text += f", {kind} {self.first_position} … {last}"
        if self.row_offsets is not None:
            text += f" ({self.row_offsets.describe()})"
        return text

    def provenance(self) -> dict[str, object]:
        """Where this table came from, as every export carries it (never mixed with params).

        A table read from the Hub (source ``hf:REPO@REVISION · commit SHA · FILE``) also
        names its repo id and the commit it was read at, so it can be read again.

        Examples
        --------
        >>> source = "hf:gpt2@main · commit " + "a" * 40 + " · model.safetensors"
        >>> p = Embedding.from_array(np.eye(12, 2), name="wpe", source=source).provenance()
        >>> p["tensor"], p["rows"], p["repo"], p["commit"] == "a" * 40
        ('wpe', 'rows 0-11 of 12', 'gpt2', True)
        """
        out: dict[str, object] = {
            "source": self.source,
            "tensor": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "rows": self.describe_rows(),
            "row_start": self.row_start,
            "grid": list(self.grid) if self.grid else None,
            "sha256": self.sha256,
            "posviz_version": __version__,
        }
        if self.first_position:  # rows are not positions 0 … n − 1 (a relative table)
            out["first_position"] = self.first_position
        if self.row_offsets is not None:  # what labels the rows: their offsets, made again
            out["row_labels"] = self.row_offsets.rule()
        if self.simulated:
            out["simulated"] = self.simulated
        parts = self.source.split(" · ")
        if self.source.startswith("hf:") and len(parts) >= 3 and parts[1].startswith("commit "):
            out["repo"] = parts[0].removeprefix("hf:").removeprefix("//").partition("@")[0]
            out["commit"] = parts[1].removeprefix("commit ")
            if parts[2].lower().endswith(".gguf"):  # a repo of several: the one read
                out["file"] = parts[2]
        return out
