"""How much a quantized table (a GGUF's Q8_0, Q4_K, …) differs from the original it was made
from: the error's size, beside what rounding the original to float16 or bfloat16 would cost,
and what it does to the singular values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from posviz._params import Bound, bounded, records_params
from posviz.embedding import LoadError
from posviz.spectrum import spectrum

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFINITIONS", "QuantizationError", "is_quantized", "quantization_error"]

#: What each number is, for help texts and exports.
DEFINITIONS = {
    "relative_error": "‖Q − O‖_F / ‖O‖_F: the quantized table Q against the original O",
    "max_abs_error": "largest |Q − O| of one value",
    "rms_error": "root mean square of Q − O",
    "float16_relative_error": "the same ratio for O rounded to float16 (the null: what storing "
    "the original in half precision would cost)",
    "bfloat16_relative_error": "the same ratio for O rounded to bfloat16 (round to nearest even)",
    "singular_value_change": "largest |σᵢ(Q) − σᵢ(O)| / σ₁(O) over the first k singular values",
}
#: GGML type names that are quantized (not a plain float or integer).
_PLAIN = {"F64", "F32", "F16", "BF16", "I8", "I16", "I32", "I64"}


def is_quantized(dtype: str) -> bool:
    """Whether a table's stored type is one of GGML's quantizations (Q8_0, Q4_K, IQ2_XS, …).

    >>> is_quantized("Q4_K"), is_quantized("float16"), is_quantized("BF16")
    (True, False, False)
    """
    return dtype.isupper() and dtype not in _PLAIN and dtype[:1] in "QITMN"


@dataclass(frozen=True)
class QuantizationError:
    """A quantized table against its original.

    Attributes
    ----------
    relative_error, max_abs_error, rms_error : float
    float16_relative_error, bfloat16_relative_error : float
        The nulls beside `relative_error`: the original rounded to half precision.
    singular_values, singular_values_original : ndarray of shape (k,)
        The first k singular values of each (centred as `center` says).
    singular_value_change : float
    """

    relative_error: float
    max_abs_error: float
    rms_error: float
    float16_relative_error: float
    bfloat16_relative_error: float
    singular_values: np.ndarray
    singular_values_original: np.ndarray
    singular_value_change: float
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per number, with what it is."""
        import pandas as pd

        rows = [
            (key, getattr(self, key), DEFINITIONS[key])
            for key in (
                "relative_error",
                "max_abs_error",
                "rms_error",
                "float16_relative_error",
                "bfloat16_relative_error",
                "singular_value_change",
            )
        ]
        return pd.DataFrame(rows, columns=["measure", "value", "definition"])


def _bfloat16(values: np.ndarray) -> np.ndarray:
    """`values` rounded to bfloat16 (nearest, ties to even), as float64."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


@records_params
@bounded(k=Bound(1, None))
def quantization_error(
    quantized: np.ndarray, original: np.ndarray, *, k: int = 10, center: bool = True
) -> QuantizationError:
    """The quantized table `quantized` against `original` (the same rows and columns).

    Parameters
    ----------
    quantized, original : ndarray of shape (n_positions, d_model)
    k : int
        Singular values compared.
    center : bool
        Subtract each table's mean row before its singular values (as the Spectrum page).

    Examples
    --------
    >>> o = np.linspace(-1, 1, 600).reshape(60, 10)
    >>> e = quantization_error(o.astype(np.float16).astype(np.float64), o)
    >>> e.relative_error == e.float16_relative_error, e.relative_error < 1e-3
    (True, True)
    """
    q = np.asarray(quantized, dtype=np.float64)
    o = np.asarray(original, dtype=np.float64)
    if q.shape != o.shape:
        msg = (
            f"The quantized table is {q.shape[0]} x {q.shape[1]} and the original "
            f"{o.shape[0]} x {o.shape[1]}: compare a table with the one it was made from."
        )
        raise LoadError(msg)
    norm = float(np.linalg.norm(o))
    if norm == 0:
        msg = "The original table is all zeros: a relative error is undefined."
        raise LoadError(msg)
    error = q - o
    with np.errstate(over="ignore"):
        half = o.astype(np.float16).astype(np.float64)
    ours = spectrum(q, center=center).singular_values[:k]
    theirs = spectrum(o, center=center).singular_values[:k]
    n = min(len(ours), len(theirs))
    return QuantizationError(
        relative_error=float(np.linalg.norm(error)) / norm,
        max_abs_error=float(np.abs(error).max()),
        rms_error=float(np.sqrt(np.mean(error**2))),
        float16_relative_error=float(np.linalg.norm(half - o)) / norm,
        bfloat16_relative_error=float(np.linalg.norm(_bfloat16(o) - o)) / norm,
        singular_values=ours,
        singular_values_original=theirs,
        singular_value_change=float(np.abs(ours[:n] - theirs[:n]).max() / theirs[0])
        if n and theirs[0] > 0
        else 0.0,
    )
