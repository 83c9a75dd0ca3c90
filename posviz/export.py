"""What an export carries: the numbers plus every setting that changed them."""

from __future__ import annotations

import json
import math
from io import StringIO
from typing import TYPE_CHECKING, Any

import numpy as np

from posviz import __version__
from posviz.embedding import Embedding

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "column_label",
    "export_settings",
    "from_csv",
    "to_csv",
    "to_json",
]


def export_settings(table: Embedding, **options: Any) -> dict[str, Any]:
    """The header of every export: posviz version, the table's provenance and the options used.

    Examples
    --------
    >>> t = Embedding.from_array(np.eye(12, 3), name="wpe", source="gpt2.safetensors")
    >>> s = export_settings(t, centered=True)
    >>> s["tensor"], s["rows"], s["centered"]
    ('wpe', 'rows 0-11 of 12', True)
    """
    return {"posviz_version": __version__, **table.settings(), **options}


def to_csv(frame: pd.DataFrame, settings: dict[str, Any]) -> str:
    """CSV with the settings as leading ``# key: value`` lines (pandas reads it with comment="#").

    Examples
    --------
    >>> import pandas as pd
    >>> print(to_csv(pd.DataFrame({"k": [1, 2]}), {"centered": True}), end="")
    # centered: true
    k
    1
    2
    """
    header = "".join(f"# {key}: {json.dumps(value)}\n" for key, value in settings.items())
    return header + frame.to_csv(index=False, lineterminator="\n", float_format="%.17g")


def from_csv(text: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read back what :func:`to_csv` wrote: the frame and its settings."""
    import pandas as pd

    lines = text.splitlines()
    settings = {}
    for line in lines:
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(": ")
        settings[key] = json.loads(value)
    return pd.read_csv(StringIO(text), comment="#"), settings


def to_json(frame: pd.DataFrame, settings: dict[str, Any]) -> str:
    """JSON ``{"settings": {...}, "columns": {name: [values]}}``, floats at full precision.

    Undefined values (NaN, infinities) are ``null``: JSON has no NaN.

    Examples
    --------
    >>> import pandas as pd
    >>> json.loads(to_json(pd.DataFrame({"r": [1.5, np.nan]}), {}))["columns"]
    {'r': [1.5, None]}
    """
    columns = {
        name: [_defined(v) for v in np.asarray(frame[name]).tolist()] for name in frame.columns
    }
    return json.dumps({"settings": settings, "columns": columns}, indent=1, allow_nan=False)


def _defined(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


#: Words of export keys written as a reader writes them on screen.
_WORDS = {
    "mae": "MAE",
    "r2": "R²",
    "sd": "sd over",
    "cka": "CKA",
    "pc": "PC",
    "ev": "explained variance",
    "cos2": "cos²",
    "n": "number",
}


def column_label(key: str) -> str:
    """How a table's column `key` is headed on screen; exports keep the key itself.

    Examples
    --------
    >>> column_label("mae_sd_folds"), column_label("n_above_noise"), column_label("median_C")
    ('MAE sd over folds', 'number above noise', 'median C')
    """
    return " ".join(_WORDS.get(word, word) for word in str(key).split("_"))
