"""Which tensor is the position table, and which of its leading rows are not positions."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np

from posviz.embedding import MIN_POSITIONS, Embedding, LoadError
from posviz.io._file import TensorInfo

#: Name components that mark a position table, across GPT-2, BERT/RoBERTa, BART/OPT, ViT/timm,
#: torchvision, CLIP/OpenCLIP and GGUF exports.
POSITION_NAMES = frozenset(
    {
        "wpe",
        "position_embeddings",
        "position_embedding",
        "pos_embed",
        "pos_embedding",
        "embed_positions",
        "position_embd",
        "pos_emb",
        "positional_embedding",
        "positional_encoding",
    }
)
_VISION_HINTS = ("pos_embed", "vision", "visual", "vit")
#: ViT row layouts, tried in this order: (prefix rows, description).
_VIT_LAYOUTS = (
    (1, "1 class token + {g}x{g} patch grid"),
    (2, "class + distillation tokens + {g}x{g} patch grid"),
    (0, "{g}x{g} patch grid, no class token"),
)
#: Leading rows searched for an all-zero (padding) row.
ZERO_ROWS_SEARCHED = 4


@dataclass(frozen=True)
class Trim:
    """Rows to drop before analysis, as suggested from a tensor's name and shape.

    Attributes
    ----------
    row_start : int
        Leading rows that are not positions (class/distillation tokens, reserved rows).
    grid : tuple of (int, int) or None
        (height, width) when the kept rows are a square ViT patch grid.
    reason : str
        One sentence for the user; ``""`` when there is nothing to suggest.
    """

    row_start: int
    grid: tuple[int, int] | None
    reason: str


def detect_position_tensor(infos: list[TensorInfo]) -> str | None:
    """Name of the position table among `infos`, or None if unsure.

    A usable 2-D tensor (see :attr:`TensorInfo.table_shape`) whose dotted name has a
    component in `POSITION_NAMES` wins if it is the only one; otherwise the only usable 2-D
    tensor of the file. Two name matches (CLIP's text and vision tables) give None.

    Examples
    --------
    >>> detect_position_tensor([
    ...     TensorInfo("transformer.wte.weight", (50257, 768), "F32"),
    ...     TensorInfo("transformer.wpe.weight", (1024, 768), "F32"),
    ... ])
    'transformer.wpe.weight'
    """
    usable = [info.name for info in infos if info.table_shape is not None]
    named = [name for name in usable if POSITION_NAMES.intersection(re.split(r"[./:]", name))]
    if named:
        return named[0] if len(named) == 1 else None
    return usable[0] if len(usable) == 1 else None


def suggest_trim(name: str, shape: tuple[int, ...]) -> Trim:
    """Leading rows of a position tensor that are not positions, from its name and shape.

    Rules, in order, for a table of n rows:

    - Vision tables (stored with a leading batch axis, like ``(1, 197, 768)``, or named with
      ``pos_embed``, ``vision``, ``visual`` or ``vit``): ``1 + g*g`` rows are a class token
      and a g x g patch grid, ``2 + g*g`` class and distillation tokens (DeiT) and a grid,
      ``g*g`` a grid alone (g >= 2). Nothing else is suggested for them.
    - RoBERTa/BART/OPT reserve 2 rows for the padding offset: suggested when ``n - 2`` is a
      power of two of at least 64 (514, 1026, 2050), or when the name contains
      ``embed_positions`` and ``n - 2`` is a multiple of 64.

    Examples
    --------
    >>> suggest_trim("pos_embed", (1, 197, 768))
    Trim(row_start=1, grid=(14, 14), reason='ViT pos_embed: 1 class token + 14x14 patch grid')
    >>> suggest_trim("transformer.wpe.weight", (1024, 768)).row_start
    0
    """
    table = TensorInfo(name, tuple(shape), "").table_shape
    if table is None:
        return Trim(0, None, "")
    n = table[0]
    if len(shape) > 2 or any(hint in name.lower() for hint in _VISION_HINTS):
        return vit_layout(n) or Trim(0, None, "")
    body = n - 2
    power_of_two = body >= 64 and body & (body - 1) == 0
    if power_of_two or ("embed_positions" in name and body > 0 and body % 64 == 0):
        return Trim(2, None, f"RoBERTa/BART/OPT-style table: 2 reserved rows + {body} positions")
    return Trim(0, None, "")


def vit_layout(n_rows: int) -> Trim | None:
    """Prefix rows and a g x g patch grid (g >= 2) that make up `n_rows` rows, or None.

    Layouts are tried in the order class token, class and distillation tokens, no prefix.

    >>> vit_layout(197).row_start, vit_layout(198).grid, vit_layout(200)
    (1, (14, 14), None)
    """
    for prefix, layout in _VIT_LAYOUTS:
        g = math.isqrt(max(n_rows - prefix, 0))
        if g >= 2 and g * g == n_rows - prefix:
            return Trim(prefix, (g, g), "ViT pos_embed: " + layout.format(g=g))
    return None


def choose_tensor(infos: list[TensorInfo], label: str) -> str:
    """The tensor `load` reads when none is named: detected, or the file's only tensor; else
    a LoadError listing the candidates."""
    name = detect_position_tensor(infos)
    if name is None and len(infos) == 1:
        # Reading the only tensor gives the precise reason it is unusable, if it is.
        name = infos[0].name
    if name is None:
        usable = [f"{info.name} {info.shape}" for info in infos if info.table_shape is not None]
        more = f" and {len(usable) - 20} more" if len(usable) > 20 else ""
        msg = (
            f"{label} holds {len(infos)} tensors and none is clearly the position table; "
            f"choose one by name. 2-D candidates: {', '.join(usable[:20]) or 'none'}{more}."
        )
        raise LoadError(msg)
    return name


def zero_leading_rows(values: np.ndarray, *, max_rows: int = ZERO_ROWS_SEARCHED) -> int:
    """Leading rows that look reserved: through the last all-zero row among the first few.

    A padding position is never trained and stays exactly zero (RoBERTa's row 1, its
    ``padding_idx``); the rows before it are reserved offsets too.

    Examples
    --------
    >>> zero_leading_rows(np.array([[0.5, 1.0], [0.0, 0.0], [1.0, 2.0], [3.0, 1.0]]))
    2
    """
    zero = ~np.any(values[:max_rows] != 0, axis=1)
    return int(np.flatnonzero(zero)[-1]) + 1 if zero.any() else 0


@dataclass(frozen=True)
class ReservedRows:
    """Leading rows of a table that look reserved (not positions), and why.

    Attributes
    ----------
    rows : int
        Leading rows that look reserved (0: none).
    reasons : tuple of str
        Why, one reason per rule that found rows.
    by_name : posviz.io.Trim
        What the tensor's name and shape suggest (:func:`posviz.io.suggest_trim`); nothing for
        a table already trimmed.
    most : int
        The most leading rows that can be trimmed and leave `MIN_POSITIONS` positions (< 1:
        none).
    """

    rows: int
    reasons: tuple[str, ...]
    by_name: Trim
    most: int

    def trim(self, table: Embedding, rows: int) -> Embedding:
        """`table` with `rows` more leading rows trimmed; the name's grid kept when exactly the
        rows the name suggests are trimmed."""
        grid = self.by_name.grid if rows == self.by_name.row_start else None
        return trim_leading(table, rows, grid=grid)


def reserved_rows(table: Embedding) -> ReservedRows:
    """Leading rows of `table` that look reserved: by the tensor's name and shape (for an
    untrimmed table) or through the last all-zero row among the first few
    (:func:`zero_leading_rows`).

    Examples
    --------
    >>> rows = np.r_[np.zeros((2, 4)), np.eye(64, 4) + 1]
    >>> found = reserved_rows(Embedding.from_array(rows, name="wpe", source="s"))
    >>> found.rows, found.reasons[1]
    (2, 'row 1 is all zeros (an untrained padding row)')
    >>> found.reasons[0]
    'RoBERTa/BART/OPT-style table: 2 reserved rows + 64 positions'

    """
    by_name = Trim(0, None, "")
    if table.row_start == 0:
        by_name = suggest_trim(table.name, (table.n_source_rows, table.shape[1]))
    zero = zero_leading_rows(table.values)
    reasons = [by_name.reason] if by_name.row_start else []
    if zero:
        reasons.append(f"row {zero - 1} is all zeros (an untrained padding row)")
    return ReservedRows(
        rows=max(by_name.row_start, zero),
        reasons=tuple(reasons),
        by_name=by_name,
        most=table.shape[0] - MIN_POSITIONS,
    )


def trim_leading(table: Embedding, rows: int, *, grid: tuple[int, int] | None = None) -> Embedding:
    """The same source with `rows` more leading rows trimmed; the provenance says so.

    Examples
    --------
    >>> t = trim_leading(Embedding.from_array(np.eye(12, 3), name="t", source="s"), 2)
    >>> t.shape, t.describe_rows()
    ((10, 3), 'rows 2-11 of 12 (2 leading rows trimmed)')
    """
    trimmed = Embedding.from_array(
        np.concatenate([table.prefix, table.values]),
        name=table.name,
        source=table.source,
        dtype=table.dtype,
        row_start=table.row_start + rows,
        grid=grid,
    )
    return replace(trimmed, origin=table.origin)
