"""What an export carries: the numbers, the analysis and settings that made them, and the table.

Every export (CSV ``#`` lines, JSON, the report, ``posviz summary --json``) opens with the
same header, :func:`header`: ``{"analysis": <pipeline step>, "params": <its settings, by the
core's argument names>, "provenance": <the table's provenance>}``, all three read from the
result and its sources (a result records the step that made it: `posviz._params.step_of`).
That is what ``posviz rerun`` reads to recompute the numbers.
"""

from __future__ import annotations

import json
import math
from io import StringIO
from typing import TYPE_CHECKING, Any

import numpy as np

from posviz._params import step_of
from posviz.embedding import Embedding
from posviz.rows import row_offsets

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "column_label",
    "columns",
    "from_csv",
    "header",
    "labelled",
    "step_header",
    "to_csv",
    "to_json",
]


def header(result: Any, *sources: Embedding | dict[str, Any]) -> dict[str, Any]:
    """The header of every export: which pipeline step made `result`, with which params, from
    which sources.

    Parameters
    ----------
    result : a result of a core function decorated with `records_params`
        It records its settings and the step that made it.
    *sources : Embedding or dict
        The table (two for a comparison: their provenances as a list, in order), or the
        config.json provenance of a position scheme
        (`posviz.records.config_provenance`, with where in it: a layer type, a tensor),
        several for several models.

    Examples
    --------
    >>> from posviz.spectrum import spectrum
    >>> t = Embedding.from_array(np.eye(12, 3), name="wpe", source="gpt2.safetensors")
    >>> h = header(spectrum(t.values, center=False), t)
    >>> h["analysis"], h["params"], h["provenance"]["tensor"], h["provenance"]["rows"]
    ('spectrum', {'center': False}, 'wpe', 'rows 0-11 of 12')
    """
    return step_header(step_of(result), result.params, *sources)


def step_header(
    analysis: str, params: dict[str, Any], *sources: Embedding | dict[str, Any]
) -> dict[str, Any]:
    """:func:`header` of what no result records: a step's name and `params` as given (a
    resampled table's download, which is a table, not a result of numbers)."""
    provenance = [s.provenance() if isinstance(s, Embedding) else s for s in sources]
    return {
        "analysis": analysis,
        "params": dict(params),
        "provenance": provenance[0] if len(provenance) == 1 else provenance,
    }


def labelled(frame: pd.DataFrame, settings: dict[str, Any]) -> pd.DataFrame:
    """`frame` with its ``position`` column as the positions the rows stand for: results count
    rows from 0; a table whose first row is another position (DeBERTa's relative table) says
    so in its provenance's ``first_position``. Where the provenance says the rows are buckets
    of offsets (``row_labels``), ``offset_first``, ``offset_last`` (∓inf for an end that takes
    every offset beyond: ``-inf``/``inf`` in CSV, ``null`` in JSON; NaN, empty or ``null``,
    for a row never reached) and ``offsets`` (in words) follow ``position``. Pages, the report
    and `posviz rerun` label alike.

    Examples
    --------
    >>> import pandas as pd
    >>> settings = {"provenance": {"first_position": -256}}
    >>> labelled(pd.DataFrame({"position": [0, 511]}), settings)["position"].tolist()
    [-256, 255]
    >>> rule = {"position_buckets": 256, "max_relative_positions": 512}
    >>> settings = {"provenance": {"first_position": -256, "row_start": 0, "row_labels": rule}}
    >>> labelled(pd.DataFrame({"position": [456, 511]}), settings).to_dict("list")
    {'position': [200, 255], 'offset_first': [278.0, 506.0], 'offset_last': [280.0, inf], \
'offsets': ['278 … 280', '506 and beyond']}
    """
    provenance = settings.get("provenance")
    provenance = provenance if isinstance(provenance, dict) else {}
    first = provenance.get("first_position", 0)
    if not first or "position" not in frame:
        return frame
    out = frame.assign(position=frame["position"] + first)
    rule = provenance.get("row_labels")
    if not isinstance(rule, dict):
        return out
    full = row_offsets(
        position_buckets=int(rule["position_buckets"]),
        max_relative_positions=int(rule["max_relative_positions"]),
    )
    source = np.asarray(frame["position"], dtype=np.int64) + int(provenance.get("row_start", 0))
    at = out.columns.get_loc("position") + 1
    columns = {
        "offset_first": full.first[source],
        "offset_last": full.last[source],
        "offsets": full.text(source),
    }
    for offset, (name, values) in enumerate(columns.items()):
        out.insert(at + offset, name, values)
    return out


def to_csv(frame: pd.DataFrame, settings: dict[str, Any]) -> str:
    """CSV with the settings as leading ``# key: value`` lines (pandas reads it with comment="#").

    Examples
    --------
    >>> import pandas as pd
    >>> print(to_csv(pd.DataFrame({"k": [1, 2]}), {"params": {"center": True}}), end="")
    # params: {"center": true}
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
    """JSON ``{<the header's keys>..., "columns": {name: [values]}}``, floats at full precision.

    Undefined values (NaN, infinities) are ``null``: JSON has no NaN.

    Examples
    --------
    >>> import pandas as pd
    >>> json.loads(to_json(pd.DataFrame({"r": [1.5, np.nan]}), {}))["columns"]
    {'r': [1.5, None]}
    """
    return json.dumps({**settings, "columns": columns(frame)}, indent=1, allow_nan=False)


def columns(frame: pd.DataFrame) -> dict[str, list[Any]]:
    """`frame` as ``{name: [values]}`` of plain Python values, NaN and infinities as None."""
    return {name: [_defined(v) for v in np.asarray(frame[name]).tolist()] for name in frame.columns}


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
#: Whole keys that read wrongly word by word.
_LABELS = {
    "n_positions": "positions",
    "d_model": "d_model",
    "gavish_donoho_threshold": "Gavish-Donoho threshold",
}


def column_label(key: str) -> str:
    """How a table's column `key` is headed on screen; exports keep the key itself.

    Examples
    --------
    >>> column_label("mae_sd_folds"), column_label("n_above_noise"), column_label("median_C")
    ('MAE sd over folds', 'number above noise', 'median C')
    >>> column_label("n_positions"), column_label("d_model")
    ('positions', 'd_model')
    """
    key = str(key)
    return _LABELS.get(key) or " ".join(_WORDS.get(word, word) for word in key.split("_"))
