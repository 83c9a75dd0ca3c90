"""What each row of a table stands for: position ``first_position + p``, or, in DeBERTa's table
of relative embeddings, the relative offsets (query − key) its bucket covers.

DeBERTa-v2/v3 read ``rel_embeddings`` row ``clamp(bucket(q − k) + span, 0, 2 · span − 1)``
(transformers' ``make_log_bucket_position`` and ``DisentangledSelfAttention``): a row is one
offset within the exact band, a range of offsets in the log-bucketed band beyond it, and the two
end rows take every offset beyond them. This module sits beside `posviz.embedding` (not in
`posviz.schemes`) because every export labels its rows from a provenance alone
(`posviz.export.labelled`), below the schemes' layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

__all__ = [
    "AS_POSITIONS",
    "MAX_SPAN",
    "RowLabels",
    "RowOffsets",
    "deberta_buckets",
    "row_offsets",
    "table_span",
]

#: Largest span (rows / 2) of a relative table posviz maps: DeBERTa's is 256 or 512 (no log
#: buckets: max_position_embeddings). Beyond it a config alone would ask `posviz summary` for
#: a row_offsets list of megabytes.
MAX_SPAN = 2**17

#: Largest offset searched for a bucket's first offset: a bucket first reached further out is
#: taken as never reached (float32's integers end at 2**24; the log rule passes every bucket of
#: a DeBERTa config within a few max_relative_positions).
_FARTHEST = 2**40

#: How each analysis that assumes evenly spaced positions reads a table whose rows are buckets,
#: shown on its page and carried by every export's provenance (``row_labels``). Every one
#: treats a row as one position; only the figures draw rows at their offsets (docs/schemes.md
#: says why, per analysis).
AS_POSITIONS = {
    "offset_profile": "The offset profile and its scores treat each row (bucket) as one "
    "position: lag k is k rows, which is k offsets only within the exact band; beyond it one "
    "lag spans several offsets.",
    "fit_sinusoids": "The sinusoid fits, periodogram and sinusoid likeness treat each row "
    "(bucket) as one position: frequencies are cycles over the rows, not over offsets. The "
    "figures draw each row at the centre of its offsets, so a fitted wave looks stretched "
    "where buckets cover many offsets.",
    "boundary": "Flags and change points treat each row (bucket) as one position: windows "
    "and steps are counted in rows, and a step lies between two adjacent rows whatever "
    "offsets they cover.",
    "probes": "The absolute probe predicts each row's index (bucket), not an offset: its "
    "MAE is in rows.",
    "resample": "Resampling treats each row (bucket) as one position: the resampled rows are "
    "evenly spaced stand-ins, no longer the buckets of any DeBERTa config, and are labelled as "
    "relative positions −n/2 … n/2 − 1.",
}
_NOTE = (
    "Rows are buckets: analyses that assume evenly spaced positions (offset profile, sinusoid "
    "fits, flags and change points, probes, resampling) treat each row as one position; "
    "figures draw each row at the centre of the offsets it covers."
)


def deberta_buckets(
    offsets: np.ndarray, *, position_buckets: int, max_relative_positions: int
) -> np.ndarray:
    """DeBERTa-v2's bucket of each relative offset δ = query − key (transformers'
    ``make_log_bucket_position``).

    With mid = position_buckets // 2: |δ| ≤ mid is its own bucket; beyond,
    ``sign(δ) · (ceil(ln(|δ| / mid) / ln((max_relative_positions − 1) / mid) · (mid − 1)) + mid)``,
    in float32 as transformers computes it in torch, so offsets on a bucket's edge land where the
    model puts them.

    Examples
    --------
    >>> deberta_buckets(np.array([-600, -511, 5, 129, 132, 280, 505, 506]), position_buckets=256,
    ...                 max_relative_positions=512).tolist()
    [-270, -255, 5, 129, 131, 200, 254, 255]
    """  # fmt: skip
    rel = np.asarray(offsets, dtype=np.int64)
    mid = position_buckets // 2
    # Inside the band transformers takes mid − 1 for the (unused) log: finite, like here.
    far = np.where(np.abs(rel) < mid, mid - 1, np.abs(rel)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):  # log 0 inside a band of 1: unused
        ratio = _log32(far / np.float32(mid)) / _log32(
            np.float32((max_relative_positions - 1) / mid)
        )
    log_pos = np.ceil(ratio * np.float32(mid - 1)) + np.float32(mid)
    return np.where(far <= mid, rel, np.sign(rel) * log_pos.astype(np.int64))


def _log32(x: np.ndarray | np.float32) -> np.ndarray:
    """float32 natural log, taken in float64 and rounded: the same on every CPU (numpy's own
    float32 log varies with the machine's vector unit). It agrees with torch's on every offset
    of ±2**20 for 256 buckets over 512 but ±403,269 (docs/schemes.md), far past the clamp."""
    return np.log(np.asarray(x, dtype=np.float64)).astype(np.float32)


def table_span(position_buckets: int, max_relative_positions: int) -> int:
    """The span (rows / 2) of the relative table these settings describe (`position_buckets`
    when > 0, else `max_relative_positions`).

    Raises
    ------
    ValueError
        When transformers' formula is undefined for them (its log of (max − 1) / mid is not
        positive) or the span is beyond `MAX_SPAN`.

    >>> table_span(256, 512), table_span(-1, 512)
    (256, 512)
    """
    if max_relative_positions < 1:
        msg = f"max_relative_positions is {max_relative_positions}; it must be at least 1."
        raise ValueError(msg)
    span = position_buckets if position_buckets > 0 else max_relative_positions
    if span > MAX_SPAN:
        msg = f"A relative table of 2 · {span:,} rows is beyond posviz's limit of 2 · {MAX_SPAN:,}."
        raise ValueError(msg)
    if position_buckets > 0 and max_relative_positions - 1 <= max(position_buckets // 2, 1):
        msg = (
            f"position_buckets {position_buckets} needs max_relative_positions above "
            f"{position_buckets // 2 + 1} (it is {max_relative_positions}): DeBERTa's log "
            "buckets divide by ln((max_relative_positions − 1) / (position_buckets // 2))."
        )
        raise ValueError(msg)
    return span


def _first_offsets(position_buckets: int, max_relative_positions: int) -> np.ndarray:
    """g[b] for b = 0 … position_buckets: the least offset δ ≥ 0 whose bucket is at least b
    (inf when none below `_FARTHEST` is). Buckets never fall as δ grows (float32 rounding keeps
    order), so a vectorised bisection per bucket finds them exactly."""
    mid = position_buckets // 2
    starts = np.arange(position_buckets + 1, dtype=np.float64)
    wanted = np.arange(mid + 1, position_buckets + 1)
    if not wanted.size:
        return starts

    def bucket(delta: np.ndarray) -> np.ndarray:
        return deberta_buckets(
            delta, position_buckets=position_buckets, max_relative_positions=max_relative_positions
        )

    reached = bucket(np.full(wanted.shape, _FARTHEST)) >= wanted
    low = np.full(wanted.shape, mid, dtype=np.int64)  # bucket(mid) = mid < every wanted b
    high = np.full(wanted.shape, _FARTHEST, dtype=np.int64)
    while np.any(high - low > 1):
        middle = (low + high) // 2
        up = bucket(middle) >= wanted
        high, low = np.where(up, middle, high), np.where(up, low, middle)
    starts[wanted] = np.where(reached, high, np.inf)
    return starts


@dataclass(frozen=True, eq=False)
class RowOffsets:
    """The offsets q − k (query − key) each row of DeBERTa's ``rel_embeddings`` stands for.

    Attributes
    ----------
    first, last : ndarray of float64, shape (n_rows,)
        The first and last offset a row covers (equal in the exact band): −inf / +inf where
        the row takes every offset beyond (the clamped end rows), NaN for a row no offset
        reads.
    position_buckets : int
        The config's (≤ 0: no log buckets, every row one offset within ±span).
    max_relative_positions : int
        As the model uses it (``max_position_embeddings`` when the config says −1).
    """

    first: np.ndarray
    last: np.ndarray
    position_buckets: int
    max_relative_positions: int

    @property
    def span(self) -> int:
        """Half the source table's rows: bucket 0 (offset 0) is source row `span`."""
        return self.position_buckets if self.position_buckets > 0 else self.max_relative_positions

    @property
    def exact(self) -> int:
        """The exact band's half-width: every offset within ±exact has a row of its own."""
        return self.position_buckets // 2 if self.position_buckets > 0 else self.span - 1

    @property
    def reached(self) -> np.ndarray:
        """Rows some offset reads (bool, shape (n_rows,))."""
        return ~np.isnan(self.first)

    def rows(self, start: int, stop: int) -> RowOffsets:
        """Rows `start` … `stop` − 1 of these (a trimmed table's)."""
        return replace(self, first=self.first[start:stop], last=self.last[start:stop])

    def centres(self) -> np.ndarray:
        """Where a row stands on an offset axis: the middle of its offsets; an end row that
        takes every offset beyond, at the nearest one it takes; NaN for a row never read."""
        first, last = self.first, self.last
        with np.errstate(invalid="ignore"):  # inf − inf of no row: an end row is finite at one end
            middle = (first + last) / 2
        return np.where(np.isinf(first), last, np.where(np.isinf(last), first, middle))

    def text(self, rows: Sequence[int] | np.ndarray | None = None) -> list[str]:
        """Each row's offsets in words: ``"5"``, ``"278 … 280"``, ``"506 and beyond"``,
        ``"never reached"``.

        >>> row_offsets(position_buckets=256, max_relative_positions=512).text([0, 261, 456, 511])
        ['-512 and beyond', '5', '278 … 280', '506 and beyond']
        """
        which = np.arange(len(self.first)) if rows is None else np.asarray(rows, dtype=np.int64)
        return [_words(self.first[r], self.last[r]) for r in which.tolist()]

    def record(self) -> list[list[int | None] | None]:
        """Per row ``[first, last]`` (``null`` for an end taking every offset beyond), or
        ``null`` for a row never read: ``posviz summary --json``'s ``row_offsets``."""
        return [
            None if math.isnan(a) else [_integer(a), _integer(b)]
            for a, b in zip(self.first.tolist(), self.last.tolist(), strict=True)
        ]

    def rule(self) -> dict[str, object]:
        """What labels the rows, as a provenance records it (``row_labels``): enough to make
        them again (:func:`row_offsets`), and how analyses read them."""
        return {
            "offset": "query − key",
            "rule": "DeBERTa-v2 rel_embeddings row clamp(bucket + span, 0, 2 · span − 1)"
            + (", make_log_bucket_position" if self.position_buckets > 0 else ", no log buckets"),
            "position_buckets": self.position_buckets,
            "max_relative_positions": self.max_relative_positions,
            "as_positions": _NOTE,
        }

    def describe(self) -> str:
        """The rows' offsets in a few words, for captions.

        >>> row_offsets(position_buckets=256, max_relative_positions=512).describe()
        'offsets q − k: one per row within ±128, log-bucketed ranges beyond; -512 and beyond, 506 and beyond at the ends'
        >>> row_offsets(position_buckets=-1, max_relative_positions=512).describe()
        'offsets q − k: one per row; -512 and beyond, 511 and beyond at the ends'
        """  # noqa: E501
        text = "offsets q − k: one per row"
        if self.position_buckets > 0:
            text += f" within ±{self.exact}, log-bucketed ranges beyond"
        n = len(self.first)
        ends = [r for r in (0, n - 1) if self.reached[r] and np.isinf(self.first[r] * self.last[r])]
        if ends:
            text += f"; {', '.join(self.text(ends))} at the end{'s' * (len(ends) > 1)}"
        return text


def _integer(value: float) -> int | None:
    return None if math.isinf(value) else int(value)


def _words(first: float, last: float) -> str:
    if math.isnan(first):
        return "never reached"
    if math.isinf(first):
        return f"{int(last)} and beyond"
    if math.isinf(last):
        return f"{int(first)} and beyond"
    if first == last:
        return str(int(first))
    return f"{int(first)} … {int(last)}"


def row_offsets(*, position_buckets: int, max_relative_positions: int) -> RowOffsets:
    """Which offsets q − k each row of a DeBERTa ``rel_embeddings`` covers, as the model reads
    it: row ``clamp(bucket(q − k) + span, 0, 2 · span − 1)`` with span = `position_buckets`
    (log buckets, :func:`deberta_buckets`) or, when it is ≤ 0, `max_relative_positions` (no
    buckets: the bucket is the offset).

    Parameters
    ----------
    position_buckets : int
        config.json's ``position_buckets`` (−1, DebertaV2Config's default: no log buckets).
    max_relative_positions : int
        As the model uses it: config.json's, or ``max_position_embeddings`` when that is < 1.

    Raises
    ------
    ValueError
        If the formula is undefined for these settings or the span is beyond `MAX_SPAN`
        (:func:`table_span`).

    Examples
    --------
    >>> r = row_offsets(position_buckets=256, max_relative_positions=512)
    >>> len(r.first), r.record()[456], r.record()[511], r.record()[0]
    (512, [278, 280], [506, None], [None, -512])
    >>> plain = row_offsets(position_buckets=-1, max_relative_positions=4)
    >>> plain.text()
    ['-4 and beyond', '-3', '-2', '-1', '0', '1', '2', '3 and beyond']
    """
    span = table_span(position_buckets, max_relative_positions)
    if position_buckets > 0:
        starts = _first_offsets(position_buckets, max_relative_positions)
    else:
        starts = np.arange(span + 1, dtype=np.float64)
    # Row span + b (b ≥ 0) takes the offsets whose bucket is b; the last row every bucket from
    # span − 1 on (clamped). Row span − b takes their negatives; row 0 every bucket ≤ −span.
    first_up, last_up = starts[:span], starts[1:] - 1
    last_up[-1] = np.inf
    first_down, last_down = -(starts[2:] - 1), -starts[1:span]
    first = np.concatenate([[-np.inf], first_down[::-1], first_up])
    last = np.concatenate([[-starts[span]], last_down[::-1], last_up])
    # Empty: a bucket the log steps skip (first > last), or one no offset reaches (both inf).
    never = (first > last) | (np.isinf(first) & (first == last))
    first[never], last[never] = np.nan, np.nan
    return RowOffsets(first, last, position_buckets, max_relative_positions)


@dataclass(frozen=True, eq=False)
class RowLabels:
    """How figures and tables name rows 0 … n − 1 of the analysed table: positions
    ``first_position + p``, or (DeBERTa's relative table) the offsets each row covers.

    Attributes
    ----------
    first_position : int
        The position (bucket) row 0 stands for.
    offsets : RowOffsets or None
        The analysed rows' offsets; None when rows are positions.
    """

    first_position: int = 0
    offsets: RowOffsets | None = field(default=None)

    @property
    def bucketed(self) -> bool:
        """Whether rows stand for ranges of offsets rather than one position each."""
        return self.offsets is not None

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Each row's position (a relative table's bucket): one cell per row on a map."""
        return np.asarray(rows) + self.first_position

    def x(self, rows: np.ndarray) -> np.ndarray:
        """Where a line over position draws each row: its position, or the centre of its
        offsets (NaN for a row never read: a gap)."""
        if self.offsets is None:
            return self.positions(rows).astype(np.int32)
        return self.offsets.centres()[np.asarray(rows)].astype(np.float32)

    def text(self, rows: Sequence[int] | np.ndarray) -> list[str]:
        """Each row's label: its position, or its offsets in words."""
        if self.offsets is None:
            return [str(p) for p in self.positions(np.asarray(rows, dtype=np.int64)).tolist()]
        return self.offsets.text(rows)

    def label(self, row: int) -> str:
        """One row's label, as :meth:`text`."""
        return self.text([row])[0]

    def named(self, row: int) -> str:
        """One row in words: ``"position 5"``; ``"offset 5"``, ``"offsets 278 … 280"``.

        >>> labels = RowLabels(-256, row_offsets(position_buckets=256, max_relative_positions=512))
        >>> labels.named(261), labels.named(456), RowLabels().named(3)
        ('offset 5', 'offsets 278 … 280', 'position 3')
        """
        label = self.label(row)
        if self.offsets is None:
            return f"position {label}"
        one = self.offsets.first[row] == self.offsets.last[row]
        return f"offset {label}" if one else f"offsets {label}"

    @property
    def axis_title(self) -> str:
        """A line plot's position axis."""
        if self.offsets is None:
            return "position p"
        return "offset q − k (each bucket at the centre of its offsets)"

    def cell_title(self, name: str) -> str:
        """A map's axis of rows `name` (i or j): one cell per row."""
        if self.offsets is None:
            return f"position {name}"
        return f"offset q − k of bucket {name} (one cell per bucket)"

    @property
    def hover_name(self) -> str:
        """How a hover names a row before its label."""
        return "p=" if self.offsets is None else "offsets "

    def aliases(self) -> dict[str, str]:
        """Plotly's ``labelalias`` for a map's axis of row positions: each bucket's position,
        as Plotly writes it on ticks and in hovers, replaced by its offsets. Empty for
        positions; buckets whose offset is the bucket itself are left out."""
        if self.offsets is None:
            return {}
        labels = self.offsets.text()
        aliases = {}
        for position, text in zip(
            self.positions(np.arange(len(labels))).tolist(), labels, strict=True
        ):
            if text != str(position):
                # Written as Plotly writes its own numbers beside them: with a minus sign.
                shown = text.replace("-", "\u2212")
                aliases[str(position)] = shown
                if position < 0:  # Plotly writes a minus sign, not a hyphen
                    aliases["\u2212" + str(-position)] = shown
        return aliases

    def note(self, analysis: str) -> str:
        """What `analysis` (a key of `AS_POSITIONS`) does with rows that are buckets; empty
        when rows are positions."""
        return AS_POSITIONS[analysis] if self.offsets is not None else ""
