"""posviz.schemes.diff: two sources of one model's rotary positions compared: agreement within
float32 for a correct runtime (as transformers computes in float32), the first place they part
and the first position past the angle limit, checked analytically (the sources read from files
and the hints naming known mistakes: tests/models/test_sources.py)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from posviz._params import Refused
from posviz.embedding import LoadError
from posviz.schemes.diff import (
    from_inv_freq,
    from_spec,
    from_table,
    scheme_diff,
    split_pair,
    split_table,
)
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import RotarySpec, rotary_frequencies
from tests.schemes.runtime import float32_inv_freq, float32_table, spec_of

LLAMA = PRESETS["meta-llama/Llama-3.1-8B"]
PHI = PRESETS["microsoft/Phi-3.5-mini-instruct"]
#: What `posviz diff --json` prints: the issue's keys, with the settings and the hints, under
#: an export's header (the step `posviz rerun` runs again).
RECORD_KEYS = {
    "analysis", "agree", "first_difference", "fields", "inv_freq_max_relative_difference",
    "table_max_abs_difference", "first_position_over_0_01_rad", "pairs_differing",
    "provenance", "params", "hints",
}  # fmt: skip


def config_source(config: dict, **options):
    return from_spec(spec_of(config), label="config", provenance={"config": "c"}, **options)


def test_the_same_spec_agrees_exactly() -> None:
    d = scheme_diff(config_source(LLAMA), config_source(LLAMA))
    assert d.agree
    assert d.first_difference is None
    assert all(f["same"] for f in d.fields)
    assert d.inv_freq_max_relative_difference == 0.0
    assert d.table_max_abs_difference == 0.0
    assert d.first_position_over_0_01_rad is None
    assert d.pairs_differing == []
    assert list(d.positions[[0, -1]]) == [0, 32767]  # the shorter context, at most 32768


def test_a_float32_runtime_agrees_within_the_default_tolerance() -> None:
    spec = spec_of(LLAMA)
    inv = float32_inv_freq(spec)
    d = scheme_diff(config_source(LLAMA), from_inv_freq(inv, label="rt", provenance={}))
    assert d.agree
    assert 0 < d.inv_freq_max_relative_difference < 1e-6
    # float32 frequencies drift: their angle error grows as m · Δθ (fastest pair first).
    delta = np.abs(inv.astype(np.float64) - rotary_frequencies(spec).inv_freq)
    expected = math.ceil(0.01 / delta.max()) if delta.max() else None
    over = d.first_position_over_0_01_rad
    assert (over is None and (expected is None or expected > 32767)) or over in (
        expected - 1, expected, expected + 1)  # fmt: skip


def test_a_float32_table_agrees_and_its_frequencies_are_recovered() -> None:
    spec = spec_of(LLAMA)
    table = float32_table(rotary_frequencies(spec).inv_freq, 4096)
    cos, sin = split_table(table, "half-split")
    dump = from_table(cos, sin, label="t", provenance={}, layout="half-split")
    np.testing.assert_allclose(dump.inv_freq, rotary_frequencies(spec).inv_freq, rtol=2e-7)
    d = scheme_diff(config_source(LLAMA), dump)
    assert d.agree, d.first_difference
    assert list(d.positions[[0, -1]]) == [0, 4095]  # the dump's own positions
    assert 0 < d.table_max_abs_difference < 1e-3  # float32 angles at m ~ 4000
    layout = {f["field"]: f for f in d.fields}["layout"]
    assert (layout["a"], layout["b"], layout["same"]) == ("half-split", "half-split", None)


def test_the_first_position_over_the_angle_limit_is_exact() -> None:
    a = RotarySpec("default", 8, 10000.0, context=100000)
    b = dataclasses.replace(a, base=10000.0 * (1 + 1e-4))
    d = scheme_diff(
        from_spec(a, label="a", provenance={}), from_spec(b, label="b", provenance={}),
        positions=100000,
    )  # fmt: skip
    delta = np.abs(rotary_frequencies(a).inv_freq - rotary_frequencies(b).inv_freq)
    assert d.first_position_over_0_01_rad == math.floor(0.01 / delta.max()) + 1
    assert d.first_difference == "theta"


def test_an_attention_factor_alone_shows_in_the_table() -> None:
    a = RotarySpec("default", 8, 10000.0, context=512)
    b = dataclasses.replace(
        a, rope_type="yarn", factor=1.0, attention_factor=1.1, original_context=512
    )
    d = scheme_diff(from_spec(a, label="a", provenance={}), from_spec(b, label="b", provenance={}))
    assert d.first_difference == "rope_type"
    assert d.table_max_abs_difference == pytest.approx(0.1, rel=1e-12)  # at m = 0: cos = 1
    assert d.inv_freq_max_relative_difference == 0.0


def test_different_widths() -> None:
    a = from_spec(RotarySpec("default", 8, 10000.0, context=64), label="a", provenance={})
    b = from_inv_freq(np.ones(3), label="b", provenance={})
    d = scheme_diff(a, b)
    assert d.first_difference == "rotary_dim"
    record = d.record()
    assert record["inv_freq_max_relative_difference"] is None
    assert set(record) == RECORD_KEYS
    json.dumps(record, allow_nan=False)


def test_a_table_of_later_positions() -> None:
    inv = rotary_frequencies(RotarySpec("default", 16, 10000.0, context=512)).inv_freq
    angles = np.outer(np.arange(100, 200), inv)
    cos, sin = np.cos(angles), np.sin(angles)
    config = from_spec(RotarySpec("default", 16, 10000.0, context=512), label="c", provenance={})
    right = scheme_diff(config, from_table(cos, sin, label="t", provenance={}, layout="half-split",
                                           first_position=100))  # fmt: skip
    assert right.agree
    assert list(right.positions[[0, -1]]) == [100, 199]
    wrong = scheme_diff(config, from_table(cos, sin, label="t", provenance={}, layout="half-split"))
    assert wrong.inv_freq_max_relative_difference < 1e-12  # the slope is right
    assert wrong.pairs_differing == list(range(8))  # the angles are not: off by 100 θ
    assert wrong.first_difference == "table"


def test_pairs_and_fields_as_tables() -> None:
    d = scheme_diff(config_source(LLAMA), config_source(PRESETS["mistralai/Mistral-7B-v0.1"]))
    assert d.first_difference == "theta"
    frame = d.pair_table()
    assert list(frame.columns) == ["pair", "inv_freq_a", "inv_freq_b", "relative_difference"]
    assert d.field_frame()["same"].tolist()[0] is False


def test_split_pair_layouts() -> None:
    values = np.arange(8.0).reshape(1, 8)
    half = np.concatenate([values[:, :4], values[:, :4]], axis=1)
    assert split_pair(half, half, "half-split")[0].tolist() == [[0, 1, 2, 3]]
    interleaved = np.repeat(values[:, :4], 2, axis=1)
    assert split_pair(interleaved, interleaved, "interleaved")[0].tolist() == [[0, 1, 2, 3]]
    with pytest.raises(LoadError, match="layout 'rows'"):
        split_pair(half, half, "rows")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"tolerance": 0}, "tolerance is 0"),
        ({"tolerance": 2.0}, "tolerance is 2.0"),
        ({"positions": 0}, "positions is 0"),
        ({"positions": 2**20 + 1}, "positions is 1048577"),
    ],
)
def test_settings_out_of_range(options: dict, words: str) -> None:
    with pytest.raises(Refused, match=words):
        scheme_diff(config_source(LLAMA), config_source(LLAMA), **options)
