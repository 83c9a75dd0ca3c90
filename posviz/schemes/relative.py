"""How a learned relative scheme biases attention: T5's bucketed bias per head, and
DeBERTa's table of relative-position embeddings."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from posviz._params import Bound, bounded, check_budget, records_params
from posviz.embedding import Embedding, LoadError
from posviz.rows import row_offsets
from posviz.schemes._values import given
from posviz.schemes.config import (
    RelativeBiasSpec,
    RelativeTableSpec,
    position_scheme,
    scheme_kind,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BUCKETS",
    "DISTANCES",
    "HEADS",
    "MAX_BIAS_TENSORS",
    "REL_EMBEDDINGS",
    "BucketLayouts",
    "RelativeBias",
    "bucket_layout",
    "bucket_layouts",
    "check_bias_shape",
    "check_relative_bias",
    "labelled",
    "relative_bias",
    "relative_rows",
    "relative_table",
    "relative_table_name",
    "t5_buckets",
]


#: T5's bounds: buckets (T5 and its kin: 32), the largest distance bucketed (128) and heads
#: (T5-11B: 128). Far past any model; a result they would still make larger than
#: `posviz._params.MAX_RESULT_BYTES` is refused. A bias tensor within them has at most 262,144
#: values, which the app's cache hashes whole (it samples arrays of 500,000 or more).
BUCKETS = Bound(4, 1024)
DISTANCES = Bound(1, 65536)
HEADS = Bound(1, 256)
#: Bias tensors read from one model (T5: one per stack; UMT5: one per layer and stack).
MAX_BIAS_TENSORS = 256


def t5_buckets(
    relative_position: np.ndarray,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> np.ndarray:
    """T5's bucket of each relative position (key − query), as ``_relative_position_bucket``.

    Bidirectional (encoder): half the buckets for keys ahead. Causal (decoder): keys ahead
    share bucket 0. Distances below half the (remaining) buckets get one bucket each; longer
    ones are log-spaced up to `max_distance`, beyond which they share the last bucket.

    The logarithm is taken in float32, as transformers does in torch, so distances on a bucket
    edge land where the model puts them.

    Examples
    --------
    >>> t5_buckets(np.array([-200, -20, -1, 0, 1, 100])).tolist()
    [15, 10, 1, 0, 17, 31]
    >>> t5_buckets(np.array([-20, 5]), bidirectional=False).tolist()
    [17, 0]
    """
    rel = np.asarray(relative_position, dtype=np.int64)
    n = num_buckets
    bucket = np.zeros_like(rel)
    if bidirectional:
        n //= 2
        bucket += (rel > 0) * n
        rel = np.abs(rel)
    else:
        rel = np.maximum(-rel, 0)
    exact = n // 2
    # Short distances take the exact bucket; 1 stands in for 0 so the unused log is finite.
    far = np.maximum(rel, 1).astype(np.float32)
    scaled = np.log(far / exact) / math.log(max_distance / exact)
    large = np.minimum(exact + (scaled * (n - exact)).astype(np.int64), n - 1)
    return bucket + np.where(rel < exact, rel, large)


def bucket_layout(
    distances: np.ndarray, *, num_buckets: int, max_distance: int, bidirectional: bool
) -> np.ndarray:
    """Each distance's kind of bucket: "exact" (one bucket per distance), "log-spaced", or
    "saturated" (at or beyond `max_distance`: the last bucket of its direction)."""
    n = num_buckets // 2 if bidirectional else num_buckets
    d = np.abs(np.asarray(distances))
    return np.where(d < n // 2, "exact", np.where(d >= max_distance, "saturated", "log-spaced"))


@dataclass(frozen=True)
class BucketLayouts:
    """T5's bucket of each relative position, by the encoder's and the decoder's rule.

    Attributes
    ----------
    relative_positions : ndarray of int64, shape (2 · max_distance + 1,)
        key − query, −max_distance … max_distance.
    layouts : dict of str to (ndarray of int64, ndarray of str)
        By rule ("encoder (bidirectional)", "decoder (causal)"): each position's bucket and
        its :func:`bucket_layout` kind, both shaped as `relative_positions`.
    """

    relative_positions: np.ndarray
    layouts: dict[str, tuple[np.ndarray, np.ndarray]]
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per relative position: its bucket and kind by each rule."""
        import pandas as pd

        frame = pd.DataFrame({"relative_position": self.relative_positions})
        for label, (buckets, layout) in self.layouts.items():
            rule = label.split()[0]  # encoder, decoder
            frame[f"{rule}_bucket"] = buckets
            frame[f"{rule}_kind"] = layout
        return frame


@records_params
def bucket_layouts(spec: RelativeBiasSpec) -> BucketLayouts:
    """Each relative position's bucket (−max_distance … max_distance) by the encoder's
    bidirectional and the decoder's causal rule, for the buckets `spec` (config.json) states.

    Raises
    ------
    LoadError
        As :func:`check_relative_bias`.

    Examples
    --------
    >>> b = bucket_layouts(RelativeBiasSpec(num_buckets=32, max_distance=128, n_heads=8))
    >>> b.relative_positions[[0, -1]].tolist(), b.to_frame().columns.tolist()[1:3]
    ([-128, 128], ['encoder_bucket', 'encoder_kind'])
    """
    check_relative_bias(spec)
    positions = np.arange(-spec.max_distance, spec.max_distance + 1)
    layouts = {}
    for label, bidirectional in (("encoder (bidirectional)", True), ("decoder (causal)", False)):
        b, n, m = bidirectional, spec.num_buckets, spec.max_distance
        layouts[label] = (
            t5_buckets(positions, bidirectional=b, num_buckets=n, max_distance=m),
            bucket_layout(positions, bidirectional=b, num_buckets=n, max_distance=m),
        )
    return BucketLayouts(positions, layouts)


@dataclass(frozen=True)
class RelativeBias:
    """A T5 bias tensor read through its buckets: each head's bias against signed distance.

    Attributes
    ----------
    relative_positions : ndarray of int64, shape (2 · max_distance + 1,)
        key − query, −max_distance … max_distance.
    buckets : ndarray of int64, same shape
    bias : ndarray of shape (n_heads, n_positions)
        ``weight[bucket, head]``: added to the unscaled logits.
    layout : ndarray of str, same shape as `relative_positions`
        :func:`bucket_layout` of each position.
    """

    relative_positions: np.ndarray
    buckets: np.ndarray
    bias: np.ndarray
    layout: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def n_heads(self) -> int:
        return self.bias.shape[0]

    def to_frame(self) -> pd.DataFrame:
        """One row per relative position: its bucket, kind, and each head's bias."""
        import pandas as pd

        frame = pd.DataFrame(
            {
                "relative_position": self.relative_positions,
                "bucket": self.buckets,
                "kind": self.layout,
            }
        )
        heads = pd.DataFrame(self.bias.T, columns=[f"head_{h}" for h in range(self.n_heads)])
        return pd.concat([frame, heads], axis=1)


@records_params
@bounded(max_distance=DISTANCES)
def relative_bias(
    weight: np.ndarray, *, bidirectional: bool = True, max_distance: int = 128
) -> RelativeBias:
    """Each head's bias against signed relative distance from ``relative_attention_bias``.

    Parameters
    ----------
    weight : ndarray of shape (num_buckets, n_heads)
        ``relative_attention_bias.weight``.
    bidirectional : bool
        True for an encoder, False for a decoder (causal buckets).
    max_distance : int
        ``relative_attention_max_distance`` (128 in T5).

    Raises
    ------
    LoadError
        If `weight` is not 2-D with `BUCKETS` buckets and `HEADS` heads, or holds NaN/Inf.
    Refused
        If `max_distance` is out of `DISTANCES`, or the bias would take more than
        `posviz._params.MAX_RESULT_BYTES`.

    Examples
    --------
    >>> w = np.arange(32.0)[:, None] * [1.0, -1.0]
    >>> r = relative_bias(w, max_distance=128)
    >>> r.bias.shape, r.bias[:, 128 + 1].tolist()
    ((2, 257), [17.0, -17.0])
    """
    check_bias_shape(np.shape(weight))
    check_budget(
        8 * np.shape(weight)[1] * (2 * max_distance + 1),
        f"The bias of {np.shape(weight)[1]:,} heads to distance {max_distance:,}",
    )
    weight = np.asarray(weight, dtype=np.float64)
    if not np.isfinite(weight).all():
        msg = "relative_attention_bias holds NaN/Inf values."
        raise LoadError(msg)
    num_buckets = weight.shape[0]
    positions = np.arange(-max_distance, max_distance + 1, dtype=np.int64)
    buckets = t5_buckets(
        positions, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    layout = bucket_layout(
        positions, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional
    )
    return RelativeBias(positions, buckets, weight[buckets].T, layout)


def check_relative_bias(spec: RelativeBiasSpec) -> None:
    """Refuse T5 buckets, a distance or heads out of `BUCKETS`, `DISTANCES`, `HEADS`, named
    by their config.json keys, before anything is built or read.

    Raises
    ------
    LoadError
        Naming the key, its value and the bound.
    """
    BUCKETS.check(
        "relative_attention_num_buckets in config.json", spec.num_buckets, error=LoadError
    )
    DISTANCES.check(
        "relative_attention_max_distance in config.json", spec.max_distance, error=LoadError
    )
    HEADS.check("num_heads in config.json", spec.n_heads, error=LoadError)


def check_bias_shape(shape: tuple[int, ...], spec: RelativeBiasSpec | None = None) -> None:
    """Refuse a ``relative_attention_bias`` shape that is not (num_buckets, n_heads) within
    `BUCKETS` and `HEADS` (and, given the `spec` config.json states, not its own).

    Raises
    ------
    LoadError
        Naming the shape and what was expected.
    """
    expected = "(num_buckets, n_heads)" if spec is None else f"({spec.num_buckets}, {spec.n_heads})"
    wrong = len(shape) != 2
    if not wrong:
        buckets, heads = shape
        wrong = buckets not in BUCKETS or heads not in HEADS
        if spec is not None:
            wrong = wrong or (buckets, heads) != (spec.num_buckets, spec.n_heads)
    if wrong:
        msg = (
            f"relative_attention_bias has shape {tuple(shape)}; expected {expected} with "
            f"{BUCKETS.low} to {BUCKETS.high:,} buckets and {HEADS.low} to {HEADS.high:,} heads."
        )
        raise LoadError(msg)


def relative_table(
    weight: np.ndarray, *, name: str, source: str, spec: RelativeTableSpec
) -> tuple[Embedding, list[int]]:
    """DeBERTa's ``rel_embeddings`` as a table whose rows are its buckets of relative offsets.

    Row r is bucket ``r − span`` (DeBERTa reads row ``clamp(bucket(q − k) + span, 0,
    2 · span − 1)``), which covers the offsets q − k `posviz.rows.row_offsets` gives: one in the
    exact band, a range in the log-bucketed band, every offset beyond at the two end rows.

    Returns
    -------
    (Embedding, [first, last]) : the table and the buckets of its first and last row.

    Examples
    --------
    >>> spec = RelativeTableSpec(span=256, hidden_size=8, absolute_too=False,
    ...                          position_buckets=256, max_relative_positions=512)
    >>> t, span = relative_table(np.eye(512, 8), name="rel", source="s", spec=spec)
    >>> t.shape, span, t.positions[[0, -1]].tolist(), t.labels.text([0, 456, 511])
    ((512, 8), [-256, 255], [-256, 255], ['-512 and beyond', '278 … 280', '506 and beyond'])
    """  # fmt: skip
    table = relative_rows(Embedding.from_array(weight, name=name, source=source), spec)
    return table, [int(table.positions[0]), int(table.positions[-1])]


#: How DeBERTa-v2/v3 checkpoints name the relative table (``deberta.encoder.rel_embeddings``).
REL_EMBEDDINGS = "rel_embeddings.weight"


def relative_table_name(config: dict, names: Iterable[str]) -> str | None:
    """The tensor of `names` that is the model's table of relative positions, when its
    `config` names relative attention (DeBERTa's ``rel_embeddings``): what a loader opens when
    no tensor is named.

    >>> relative_table_name({"relative_attention": True}, ["emb", "e.rel_embeddings.weight"])
    'e.rel_embeddings.weight'
    """
    if scheme_kind(config)[0] != "relative_table":
        return None
    return next((name for name in names if name.endswith(REL_EMBEDDINGS)), None)


def labelled(table: Embedding, config: dict) -> Embedding:
    """`table` with its rows labelled as the model's `config` says: DeBERTa's
    ``rel_embeddings`` of a model with relative attention as the buckets of offsets they are
    (:func:`relative_rows`); any other table as it is. Every loader (Hub, local checkpoint)
    passes its tables through here.

    Raises
    ------
    LoadError
        As :func:`relative_rows`, or when config.json's relative settings are refused.

    Examples
    --------
    >>> t = Embedding.from_array(np.eye(16, 2), name="deberta.encoder.rel_embeddings.weight",
    ...                          source="s")
    >>> labelled(t, {"relative_attention": True, "position_buckets": 8, "hidden_size": 2,
    ...              "max_position_embeddings": 32}).first_position
    -8
    >>> labelled(t, {"model_type": "gpt2"}).first_position
    0
    """  # fmt: skip
    relative = scheme_kind(config)[0] == "relative_table" and table.name.endswith(REL_EMBEDDINGS)
    if not relative:
        return table
    return relative_rows(table, given(position_scheme(config).relative_table, "the relative table"))


def relative_rows(table: Embedding, spec: RelativeTableSpec) -> Embedding:
    """`table`, DeBERTa's ``rel_embeddings`` (all its rows or some), with its rows labelled as
    the buckets they are: source row r is bucket ``r − span``, and covers the offsets
    :func:`posviz.rows.row_offsets` gives for `spec` (config.json's settings).

    Raises
    ------
    LoadError
        If the source tensor does not have the 2 · span rows `spec` says.

    Examples
    --------
    >>> spec = RelativeTableSpec(span=32, hidden_size=4, absolute_too=False,
    ...                          max_relative_positions=32)
    >>> rows = relative_rows(Embedding.from_array(np.eye(64, 4), name="r", source="s",
    ...                                           row_start=8, row_stop=40), spec)
    >>> rows.positions[[0, -1]].tolist(), rows.labels.text([0, 31])
    ([-24, 7], ['-24', '7'])
    """  # fmt: skip
    rows = table.n_source_rows
    if rows != 2 * spec.span:
        msg = (
            f"{table.name} has {rows} rows; config.json's relative settings (position_buckets "
            f"{spec.position_buckets}, max_relative_positions {spec.max_relative_positions}) "
            f"say 2 · {spec.span} = {2 * spec.span}. Load it without its config.json to look at "
            "its rows as they are."
        )
        raise LoadError(msg)
    offsets = row_offsets(
        position_buckets=spec.position_buckets, max_relative_positions=spec.max_relative_positions
    ).rows(table.row_start, table.row_start + table.shape[0])
    return replace(table, first_position=table.row_start - spec.span, row_offsets=offsets)
