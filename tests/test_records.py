"""posviz.records: a scheme's numbers as the one JSON record `posviz summary` prints and `posviz
rerun` recomputes, checked against the formulas by hand (ALiBi's slopes, GPT-J's inv_freq, T5's
bias read through its buckets), each layer's own frequencies only where they differ, a stored
inv_freq judged at bfloat16's precision, and no NaN left for JSON."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posviz import records, simulate
from posviz.embedding import Embedding, LoadError
from posviz.schemes.config import KINDS, RelativeBiasSpec, position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.relative import t5_buckets
from posviz.spectrum import NO_VARIANCE, spectrum

PROVENANCE = {"config": "config.json", "sha256": "0" * 64}


def record_of(name: str, **settings) -> dict:
    return records.scheme_record(position_scheme(PRESETS[name]), PROVENANCE, **settings)


def test_a_record_is_an_export_of_the_step_that_makes_it_again():
    record = record_of("bigscience/bloom")
    assert (record["scheme"], record["description"]) == ("alibi", KINDS["alibi"])
    assert record["analysis"] == "scheme_record"
    assert record["params"] == {
        "context": None,
        "positions": None,
        "center": True,
        "check_inv_freq": False,
    }
    assert record["provenance"] == PROVENANCE


def test_alibis_slopes_by_hand_for_bloom_176b():
    # 112 heads: the 64 of the next lower power of two, 2^(-k/8), then the odd ones of 128's.
    record = record_of("bigscience/bloom")
    assert (record["n_heads"], record["alibi_bias_max"]) == (112, 8.0)
    expected = [2 ** (-k / 8) for k in range(1, 65)] + [2 ** (-k / 16) for k in range(1, 96, 2)]
    np.testing.assert_allclose(record["slopes"], expected, rtol=1e-15)


def test_a_rotary_record_holds_the_frequencies_by_hand_and_its_tables_summary():
    record = record_of("EleutherAI/gpt-j-6b", positions=100)
    assert (record["rope_type"], record["rotary_dim"], record["interleaved"]) == (
        "default",
        64,
        True,
    )
    np.testing.assert_allclose(record["inv_freq"], 10000.0 ** (-np.arange(0, 64, 2) / 64))
    assert record["rows"] == 100
    # Its table's spectrum: rows cos then sin of p θ, centred, by numpy's SVD.
    angles = np.arange(100)[:, None] * 10000.0 ** (-np.arange(0, 64, 2) / 64)
    rows = np.hstack([np.cos(angles), np.sin(angles)])
    expected = np.linalg.svd(rows - rows.mean(axis=0), compute_uv=False)
    table = record["table"]
    assert (table["analysis"], table["params"]) == ("spectrum", {"center": True})
    np.testing.assert_allclose(
        table["numbers"]["singular_values"], expected[: records.N_SINGULAR_VALUES], rtol=1e-10
    )
    assert record["stored_inv_freq"] is None  # not asked for


@pytest.mark.parametrize(("scale", "matches"), [(1 + 2**-9, True), (1.01, False)])
def test_a_stored_inv_freq_passes_at_bfloat16s_precision(scale, matches):
    (spec,) = position_scheme(PRESETS["EleutherAI/gpt-j-6b"]).rotary
    inv_freq = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    stored = ("rotary_emb.inv_freq", inv_freq * scale)
    record = records.rotary_record(spec, positions=16, stored_inv_freq=stored)
    assert record["stored_inv_freq"]["tensor"] == "rotary_emb.inv_freq"
    assert record["stored_inv_freq"]["max_relative_difference"] == pytest.approx(scale - 1)
    assert record["stored_inv_freq"]["matches"] is matches


def test_each_layer_lists_its_own_frequencies_only_where_they_differ_from_the_main_rules():
    # Gemma 3 4B: 34 layers, every sixth full (θ = 1e6, linear factor 8), the rest sliding
    # (θ = 1e4).
    record = record_of("google/gemma-3-4b-it")
    assert record["base"] == 1e6
    sliding = [e for e in record["layers"] if e["layer_type"] == "sliding_attention"]
    full = [e for e in record["layers"] if e["layer_type"] == "full_attention"]
    assert [e["layer"] for e in full] == [5, 11, 17, 23, 29]
    assert len(sliding) == 29
    assert all("inv_freq" not in e for e in full)
    np.testing.assert_allclose(sliding[0]["inv_freq"], 1e4 ** (-np.arange(0, 256, 2) / 256))
    assert record["other_layer_types"]["sliding_attention"]["base"] == 1e4


def test_t5s_bias_is_each_heads_weight_read_through_the_buckets():
    spec = RelativeBiasSpec(num_buckets=32, max_distance=128, n_heads=2)
    weight = np.arange(64.0).reshape(32, 2)
    name = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    decoder = name.replace("encoder", "decoder")
    record = records.relative_bias_record(spec, {name: weight, decoder: -weight})
    positions = np.arange(-128, 129)
    assert record["relative_positions"] == positions.tolist()
    encoder_buckets = t5_buckets(positions)
    causal_buckets = t5_buckets(positions, bidirectional=False)
    assert record["buckets"] == {name: encoder_buckets.tolist(), decoder: causal_buckets.tolist()}
    np.testing.assert_array_equal(record["bias"][name], weight[encoder_buckets].T)
    np.testing.assert_array_equal(record["bias"][decoder], -weight[causal_buckets].T)
    with pytest.raises(LoadError, match=r"\(32, 2\)"):
        records.relative_bias_record(spec, {name: weight.T})


def test_t5_from_its_config_alone_gives_both_rules_buckets_and_no_bias():
    record = record_of("google-t5/t5-small")
    spec = position_scheme(PRESETS["google-t5/t5-small"]).relative_bias
    positions = np.arange(-spec.max_distance, spec.max_distance + 1)
    assert record["buckets"]["encoder"] == t5_buckets(positions).tolist()
    assert record["buckets"]["decoder"] == t5_buckets(positions, bidirectional=False).tolist()
    assert (record["bias"], record["tensors"]) == ({}, [])


def test_a_table_without_variance_says_what_its_numbers_lack():
    flat = Embedding.from_array(np.ones((16, 4)), name="flat", source="s")
    record = records.table_record(flat, spectrum(flat.values))
    assert record["undefined"] == NO_VARIANCE
    varied = simulate.learned_like(16, 4)
    assert "undefined" not in records.table_record(varied, spectrum(varied.values))


def test_finite_turns_every_nan_and_infinity_into_none_at_any_depth():
    record = {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf}], "d": "nan", "e": 0.0}
    assert records.finite(record) == {
        "a": None,
        "b": [1.0, None, {"c": None}],
        "d": "nan",
        "e": 0.0,
    }


@pytest.mark.parametrize(
    ("numbers", "expected"),
    [
        ([1.0, 2, True], [1.0, 2, True]),  # all finite: the sum's short way
        ([1e308, 1e308], [1e308, 1e308]),  # finite, but their sum overflows: the long way
        ([1e308, 1e308, math.nan], [1e308, 1e308, None]),
        ([math.inf, -math.inf, 1.0], [None, None, 1.0]),  # inf - inf: a NaN sum
        ([10**400, math.nan], [10**400, None]),  # a sum no float holds
        ([np.float64(math.nan), 1.0], [None, 1.0]),
        ([], []),
    ],
)
def test_finite_lists_of_numbers_the_short_way_and_the_long_agree(numbers, expected):
    out = records.finite(numbers)
    assert out == expected
    assert out is not numbers
