"""Which offsets q − k each row of DeBERTa's rel_embeddings covers: against transformers' own
code (tests/data/deberta/row_offsets.json) and against answers worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from posviz.rows import RowLabels, deberta_buckets, row_offsets
from tests import ROOT

REFERENCE = json.loads((ROOT / "tests/data/deberta/row_offsets.json").read_text())["configs"]


def offsets_of(reference: dict):
    return row_offsets(
        position_buckets=reference["position_buckets"],
        max_relative_positions=reference["max_relative_positions"],
    )


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_every_row_covers_the_offsets_transformers_reads_it_for(name):
    reference = REFERENCE[name]
    mapped = offsets_of(reference)
    assert len(mapped.first) == reference["rows"] == 2 * reference["att_span"]
    assert mapped.record() == reference["row_offsets"]


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_each_offset_of_a_whole_sequence_falls_in_the_row_the_model_reads(name):
    reference = REFERENCE[name]
    mapped = offsets_of(reference)
    length = reference["config"]["max_position_embeddings"]
    offsets = np.arange(-(length - 1), length)
    # The row whose range holds each offset (ranges are disjoint and ordered).
    inside = (mapped.first[:, None] <= offsets) & (offsets <= mapped.last[:, None])
    assert (inside.sum(axis=0) == 1).all()
    np.testing.assert_array_equal(inside.argmax(axis=0), reference["rows_by_offset"])


def test_the_known_rows_of_256_buckets_over_512_positions():
    mapped = row_offsets(position_buckets=256, max_relative_positions=512)
    span = 256
    # The exact band: bucket b (row 256 + b) is offset b alone, for |b| ≤ 128.
    band = np.arange(-128, 129)
    np.testing.assert_array_equal(mapped.first[span + band], band)
    np.testing.assert_array_equal(mapped.last[span + band], band)
    # Beyond: one row, several offsets. Bucket 200 holds 278-280 (SCHEMES.md).
    assert mapped.record()[span + 200] == [278, 280]
    assert mapped.record()[span - 200] == [-280, -278]
    # Bucket 255 (the last row) every offset from 506; bucket −255 down to −506 … −511.
    assert mapped.text([511, 1]) == ["506 and beyond", "-511 … -506"]
    # Row 0 (bucket −256): only offsets of −512 and below, never within a 512-token sequence.
    assert mapped.record()[0] == [None, -512]
    within = np.arange(-511, 512)
    assert not ((mapped.first[0] <= within) & (within <= mapped.last[0])).any()
    assert mapped.reached.all()
    assert mapped.exact == 128


def test_without_log_buckets_rows_are_offsets_within_the_span():
    mapped = row_offsets(position_buckets=-1, max_relative_positions=512)
    rows = np.arange(1, 1023)
    np.testing.assert_array_equal(mapped.first[rows], rows - 512)
    np.testing.assert_array_equal(mapped.last[rows], rows - 512)
    assert mapped.text([0, 1023]) == ["-512 and beyond", "511 and beyond"]


def test_buckets_the_log_steps_skip_are_never_reached():
    # 64 buckets over 40 positions: past offset 32 the log steps jump several buckets.
    mapped = row_offsets(position_buckets=64, max_relative_positions=40)
    assert mapped.text([64 + 33, 64 + 34]) == ["never reached", "never reached"]
    assert mapped.record()[64 + 33] is None
    assert np.isnan(mapped.centres()[64 + 33])
    assert (~mapped.reached).sum() == 48


def test_buckets_agree_with_make_log_bucket_position_by_hand():
    # ceil(ln(280 / 128) / ln(511 / 128) · 127) + 128 = ceil(71.6) + 128 = 200; 281 gives 201.
    got = deberta_buckets(
        np.array([280, 281, -281]), position_buckets=256, max_relative_positions=512
    )
    assert got.tolist() == [200, 201, -201]


@pytest.mark.parametrize(
    ("buckets", "positions"), [(256, 129), (256, 100), (256, 0)], ids=["log-1", "below", "zero"]
)
def test_settings_the_formula_cannot_take_are_refused(buckets, positions):
    with pytest.raises(ValueError, match="max_relative_positions"):
        row_offsets(position_buckets=buckets, max_relative_positions=positions)


def test_labels_name_rows_by_their_offsets_and_draw_them_at_their_centres():
    mapped = row_offsets(position_buckets=256, max_relative_positions=512)
    labels = RowLabels(first_position=-256, offsets=mapped)
    rows = np.array([0, 1, 256, 456, 511])
    assert labels.text(rows) == [
        "-512 and beyond",
        "-511 … -506",
        "0",
        "278 … 280",
        "506 and beyond",
    ]
    np.testing.assert_array_equal(labels.x(rows), [-512, -508.5, 0, 279, 506])
    aliases = labels.aliases()
    assert aliases["200"] == "278 … 280"
    # Keyed as Plotly may write the bucket, written with Plotly's minus sign beside its numbers.
    assert aliases["\u2212200"] == aliases["-200"] == "\u2212280 … \u2212278"
    assert "5" not in aliases  # the exact band's buckets are their offsets
    plain = RowLabels(first_position=-3)
    assert plain.text([0, 5]) == ["-3", "2"]
    assert plain.x(np.array([0, 5])).tolist() == [-3, 2]
    assert plain.aliases() == {}
    assert plain.note("resample") == ""
    assert "bucket" in labels.note("resample")
