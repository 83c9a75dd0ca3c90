"""Tables of numbers as a reader sees them (the app, the report): rounding noise as the 0 it is.

The downloads keep every number as computed; only the screen rounds. A sum that cancels (a
fitted offset of a centred trajectory, the spread of a cosine at offset 0) comes out of float64
as ±1e-16 of its terms, which a table prints in full (``0.0000000000000002``): a digit the
computation cannot resolve, read as a finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["NOISE", "on_screen"]

#: A value at most this share of its scale is rounding noise: float64 resolves 2.2e-16 of a
#: sum's terms, and a thousandfold margin covers the rounding of long sums and solves.
NOISE = 1e-12
#: Columns that name each row's statistic: such a table's rows are different quantities, each
#: with its own scale.
_ROW_KEYS = ("metric", "statistic")


def on_screen(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its rounding noise set to 0: a float at most `NOISE` times its column's
    largest magnitude (its row's, in a table whose rows are named statistics), or in a column
    whose largest is itself noise beside the table's largest.

    Examples
    --------
    >>> import pandas as pd
    >>> fits = pd.DataFrame({"amplitude": [7.3, 5.9], "offset": [-2.0e-15, -0.68]})
    >>> on_screen(fits)["offset"].tolist()
    [0.0, -0.68]
    >>> on_screen(pd.DataFrame({"a": [7.0, 5.0], "b": [2e-16, -1e-16]}))["b"].tolist()
    [0.0, 0.0]
    >>> on_screen(pd.DataFrame({"small": [3e-9, 1e-9]}))["small"].tolist()  # no scale: kept
    [3e-09, 1e-09]
    """
    floats = [c for c in frame.columns if frame[c].dtype.kind == "f"]
    if not floats:
        return frame
    values = frame[floats].to_numpy(dtype=np.float64, copy=True)
    magnitude = np.abs(np.where(np.isfinite(values), values, 0.0))
    if any(key in frame.columns for key in _ROW_KEYS):
        scale = magnitude.max(axis=1, keepdims=True)
    else:
        scale = magnitude.max(axis=0, keepdims=True)
        # A column of noise only (every offset of a pure sinusoid's fits): beside the table.
        scale = np.where(scale <= NOISE * magnitude.max(), magnitude.max(), scale)
    noise = (magnitude > 0) & (magnitude <= NOISE * scale)
    if not noise.any():
        return frame
    values[noise] = 0.0
    shown = frame.copy()
    shown[floats] = values
    return shown
