"""posviz.schemes.relative: T5's buckets at chosen distances by hand and the bias per head read
through them; DeBERTa's relative table, its rows labelled by the offsets they cover."""

from __future__ import annotations

import numpy as np
import pytest

from posviz.embedding import LoadError
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.relative import relative_bias, relative_table, t5_buckets


def test_t5_buckets_at_chosen_distances():
    rel = np.array([-1000, -200, -20, -8, -7, -1, 0, 1, 7, 8, 20, 100, 1000])
    # Encoder (bidirectional, 32 buckets, max_distance 128): 16 per direction, 8 exact;
    # |rel| >= 8 -> 8 + int(ln(|rel|/8) / ln(16) · 8): 20 -> 8 + int(2.64) = 10,
    # 100 -> 8 + int(7.29) = 15, 200 -> 8 + int(9.29) = 17 -> capped at 15; keys ahead + 16.
    assert t5_buckets(rel).tolist() == [15, 15, 10, 8, 7, 1, 0, 17, 23, 24, 26, 31, 31]
    # Decoder (causal): keys ahead -> 0; 16 exact; 20 -> 16 + int(ln(20/16) / ln(8) · 16) = 17.
    causal = t5_buckets(rel, bidirectional=False)
    assert causal.tolist() == [31, 31, 17, 8, 7, 1, 0, 0, 0, 0, 0, 0, 0]


def test_t5_bias_per_head_through_the_buckets():
    weight = np.arange(64.0).reshape(32, 2)
    r = relative_bias(weight, max_distance=128)
    assert r.bias.shape == (2, 257)
    assert r.relative_positions[0] == -128
    middle = 128
    assert r.bias[:, middle].tolist() == [0.0, 1.0]  # bucket 0
    assert r.bias[:, middle + 20].tolist() == weight[26].tolist()
    assert r.layout[middle + 3] == "exact"
    assert r.layout[middle + 20] == "log-spaced"
    assert r.layout[0] == "saturated"
    decoder = relative_bias(weight, bidirectional=False, max_distance=128)
    assert decoder.bias[0, middle + 5] == 0.0  # a key ahead shares bucket 0
    with pytest.raises(LoadError, match="num_buckets, n_heads"):
        relative_bias(np.ones(32))


def test_deberta_relative_table():
    spec = position_scheme(PRESETS["microsoft/deberta-v3-base"]).relative_table
    assert (spec.span, spec.position_buckets, spec.max_relative_positions) == (256, 256, 512)
    table, span = relative_table(np.random.default_rng(0).normal(size=(512, 16)), name="r",
                                 source="s", spec=spec)  # fmt: skip
    assert table.shape == (512, 16)
    assert span == [-256, 255]
    assert table.source == "s"  # the rows' positions are the table's, not words in its source
    assert (table.first_position, table.positions[-1]) == (-256, 255)
    assert table.labels.text([0, 456, 511]) == ["-512 and beyond", "278 … 280", "506 and beyond"]
