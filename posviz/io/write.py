"""Writing a table back as .npy or .safetensors bytes, in the dtype it was stored in."""

from __future__ import annotations

import json
from io import BytesIO

import numpy as np
import safetensors.numpy

from posviz.embedding import Embedding
from posviz.io._safetensors import _SAFETENSORS_DTYPES


def storage_dtype(table: Embedding) -> tuple[np.dtype, str]:
    """The dtype to write `table` in, and a note when it is not the stored dtype.

    The stored dtype when numpy holds it (float16/32/64, by numpy or safetensors name) and
    the values fit it; otherwise the analysed dtype (BF16 and integer tables, or float16
    overflow), with a note saying so.
    """
    name = table.dtype
    try:
        stored = np.dtype(_SAFETENSORS_DTYPES.get(name.upper(), name))
    except TypeError:
        stored = None
    analysed = table.values.dtype
    if stored is None or stored.kind != "f":
        return analysed, f"written as {analysed} (stored {name} has no numpy float equivalent)"
    if stored.itemsize < 4:
        peak = max(np.abs(table.values).max(), np.abs(table.prefix).max(initial=0.0))
        if peak > np.finfo(stored).max:
            return analysed, f"written as {analysed}: values up to {peak:.3g} overflow {name}"
    return stored, ""


def _full_array(table: Embedding, *, batch_axis: bool) -> np.ndarray:
    dtype, _ = storage_dtype(table)
    full = np.concatenate([table.prefix, table.values]).astype(dtype)
    return full[None] if batch_axis else full


def to_npy(table: Embedding, *, batch_axis: bool = False) -> bytes:
    """The table with its prefix rows as .npy bytes, in :func:`storage_dtype`.

    `batch_axis` writes shape (1, n_rows, d_model), the layout of timm's ``pos_embed``.
    """
    buffer = BytesIO()
    np.save(buffer, _full_array(table, batch_axis=batch_axis), allow_pickle=False)
    return buffer.getvalue()


def to_safetensors(table: Embedding, *, batch_axis: bool = False) -> bytes:
    """The table with its prefix rows as .safetensors bytes under the table's tensor name.

    The file's metadata holds the table's source (which says how it was resampled).

    Examples
    --------
    >>> t = Embedding.from_array(np.eye(12, 3), name="wpe", source="s", dtype="F16")
    >>> safetensors.numpy.load(to_safetensors(t))["wpe"].dtype
    dtype('float16')
    """
    return safetensors.numpy.save(
        {table.name: _full_array(table, batch_axis=batch_axis)},
        metadata={"posviz": json.dumps(table.provenance())},
    )
