"""Position schemes: known answers computed by hand from the papers' and transformers' rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posviz._params import Refused
from posviz.embedding import LoadError
from posviz.schemes.alibi import alibi_bias, alibi_slopes
from posviz.schemes.config import RelativeBiasSpec, position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.relative import relative_bias, relative_table, t5_buckets
from posviz.schemes.rotary import (
    RotarySpec,
    dynamic_base,
    inv_freq_difference,
    rotary_decay,
    rotary_frequencies,
    rotary_table,
)


def _rotary(config: dict) -> RotarySpec:
    (spec,) = position_scheme(config).rotary
    return spec


# --- rotary ----------------------------------------------------------------------------------


def test_llama31_keeps_29_blends_6_divides_29():
    f = rotary_frequencies(_rotary(PRESETS["meta-llama/Llama-3.1-8B"]))
    # By hand: wavelength 2π · 500000^(i/64) < 8192/4 = 2048 for i < 28.2 (29 pairs kept),
    # > 8192 for i > 34.98 (29 pairs divided by 8); 6 between.
    kept_below = 64 * math.log(2048 / (2 * math.pi)) / math.log(500000)
    divided_above = 64 * math.log(8192 / (2 * math.pi)) / math.log(500000)
    assert (math.floor(kept_below) + 1, 64 - math.ceil(divided_above)) == (29, 29)
    assert f.band_counts() == {"kept": 29, "blended": 6, "divided": 29}
    np.testing.assert_allclose(f.inv_freq[:29], f.inv_freq_unscaled[:29], rtol=0)
    np.testing.assert_allclose(f.inv_freq[35:], f.inv_freq_unscaled[35:] / 8, rtol=1e-15)
    # Blended pair 29: smooth = (8192/λ − 1) / 3, inv = (1 − smooth) inv/8 + smooth inv.
    inv = 500000 ** (-58 / 128)
    smooth = (8192 * inv / (2 * math.pi) - 1) / 3
    assert f.inv_freq[29] == pytest.approx((1 - smooth) * inv / 8 + smooth * inv, rel=1e-14)
    assert f.attention_factor == 1.0
    assert f.pairs_beyond_original_context == 29


def test_yarn_factor_4_without_mscale():
    spec = RotarySpec("yarn", 128, 10000.0, context=16384, original_context=4096, factor=4.0)
    f = rotary_frequencies(spec)
    assert f.attention_factor == pytest.approx(0.1 * math.log(4) + 1, rel=1e-15)
    # Correction range by hand: 128 ln(4096 / (2π · 32)) / (2 ln 10000) = 20.94 -> floor 20;
    # 128 ln(4096 / 2π) / (2 ln 10000) = 45.03 -> ceil 46.
    # A pair with ramp r is divided by 1 / (1 − r + r/s): 1 kept, s divided.
    assert f.division[20] == 1
    assert f.division[46] == pytest.approx(4, rel=1e-15)
    assert f.division[33] == pytest.approx(1 / (1 - 13 / 26 + 13 / 26 / 4), rel=1e-14)
    assert f.band_counts() == {"kept": 21, "blended": 25, "divided": 18}
    no_truncate = rotary_frequencies(RotarySpec(**{**spec.__dict__, "truncate": False}))
    low = 128 * math.log(4096 / (2 * math.pi * 32)) / (2 * math.log(10000))
    high = 128 * math.log(4096 / (2 * math.pi)) / (2 * math.log(10000))
    ramp = (30 - low) / (high - low)
    assert no_truncate.division[30] == pytest.approx(1 / (1 - ramp + ramp / 4), rel=1e-14)


def test_yarn_mscale_ratio_and_explicit_attention_factor():
    deepseek = rotary_frequencies(_rotary(PRESETS["deepseek-ai/DeepSeek-V3"]))
    assert deepseek.spec.rotary_dim == 64
    assert deepseek.spec.interleaved
    assert deepseek.attention_factor == 1.0  # mscale(40, 1) / mscale(40, 1)
    spec = RotarySpec("yarn", 64, 1e4, context=8192, factor=4.0, mscale=0.707, mscale_all_dim=1.0)
    expected = (0.1 * 0.707 * math.log(4) + 1) / (0.1 * math.log(4) + 1)
    assert rotary_frequencies(spec).attention_factor == pytest.approx(expected, rel=1e-15)
    explicit = RotarySpec("yarn", 64, 1e4, context=8192, factor=4.0, attention_factor=0.5)
    assert rotary_frequencies(explicit).attention_factor == 0.5


def test_default_linear_and_dynamic():
    default = rotary_frequencies(RotarySpec("default", 8, 10000.0))
    np.testing.assert_allclose(default.inv_freq, [1, 0.1, 0.01, 0.001], rtol=1e-15)
    linear = rotary_frequencies(RotarySpec("linear", 8, 10000.0, factor=4.0))
    np.testing.assert_allclose(linear.inv_freq, [0.25, 0.025, 0.0025, 0.00025], rtol=1e-15)
    spec = RotarySpec("dynamic", 128, 10000.0, context=4096, factor=2.0)
    assert rotary_frequencies(spec).base_applied == 10000.0  # within max_position_embeddings
    at_8192 = rotary_frequencies(spec, context=8192)
    base = 10000 * (2 * 8192 / 4096 - 1) ** (128 / 126)
    assert at_8192.base_applied == pytest.approx(base, rel=1e-14)
    np.testing.assert_allclose(at_8192.inv_freq, base ** (-np.arange(0, 128, 2) / 128))
    np.testing.assert_allclose(dynamic_base(spec, np.array([100, 4096, 8192])), [1e4, 1e4, base])


def test_longrope_short_within_and_long_beyond_the_original_context():
    spec = _rotary(PRESETS["microsoft/Phi-3.5-mini-instruct"])
    assert (spec.rotary_dim, spec.factor, spec.original_context) == (96, 32.0, 4096)
    short = rotary_frequencies(spec, context=4096)
    long = rotary_frequencies(spec, context=4097)
    np.testing.assert_allclose(short.inv_freq * spec.short_factor, short.inv_freq_unscaled)
    np.testing.assert_allclose(long.inv_freq * spec.long_factor, long.inv_freq_unscaled)
    assert long.attention_factor == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))
    # Bands from the division: short factors (1 to 2.84) are below the factor 32: blended;
    # long ones of 32 or more: divided.
    assert short.band[0] == "kept"
    assert short.band[1] == "blended"
    assert long.band_counts() == {"blended": 20, "divided": 28}
    np.testing.assert_array_equal(long.band == "divided", np.array(spec.long_factor) >= 32)


def test_content_free_similarity_and_roformer_bound():
    f = rotary_frequencies(RotarySpec("default", 128, 10000.0, context=2048))
    d = rotary_decay(f, max_distance=2048, n_distances=100)
    assert d.distances[:65].tolist() == list(range(65))
    assert d.distances[-1] == 2048
    assert np.all(np.diff(d.distances) > 0)
    assert len(d.distances) <= 65 + 100
    assert d.similarity[0] == 1.0
    assert d.bound[0] == pytest.approx((64 + 1) / 2)
    one_pair = rotary_decay(rotary_frequencies(RotarySpec("default", 2, 10.0)), max_distance=9)
    np.testing.assert_allclose(one_pair.similarity, np.cos(np.arange(10)), atol=1e-15)
    np.testing.assert_allclose(one_pair.bound, 1.0)  # |S_1| = |e^{iΔ}| = 1
    # Within the original context nothing changes; the scaled curve decays slower beyond it.
    scaled = rotary_decay(rotary_frequencies(_rotary(PRESETS["meta-llama/Llama-3.1-8B"])))
    assert scaled.similarity[0] == scaled.similarity_unscaled[0] == 1.0
    assert not np.allclose(scaled.similarity, scaled.similarity_unscaled)


def test_rotary_table_rows_are_cos_then_sin_and_gram_depends_on_offset_only():
    f = rotary_frequencies(RotarySpec("default", 16, 10000.0, context=64))
    t = rotary_table(f)
    assert t.shape == (64, 16)
    np.testing.assert_array_equal(t.values[0], [1.0] * 8 + [0.0] * 8)
    np.testing.assert_allclose(t.values[5, :8], np.cos(5 * f.inv_freq))
    np.testing.assert_allclose(t.values[5, 8:], np.sin(5 * f.inv_freq))
    # <row m, row n> = Σ cos((m − n) θ) = (d/2) · B(m − n).
    gram = t.values @ t.values.T
    d = rotary_decay(f, max_distance=63)
    np.testing.assert_allclose(np.diag(gram, 7), 8 * d.similarity[7], atol=1e-12)
    assert rotary_table(f, positions=10).shape == (10, 16)
    with pytest.raises(Refused, match=r"positions is 9000; .* from 10 to 8,192"):
        rotary_table(f, positions=9000)
    with pytest.raises(Refused, match=r"context is 0; .* from 1 to 2,147,483,648"):
        rotary_frequencies(f.spec, context=0)


def test_frequencies_record_their_params():
    spec = RotarySpec("dynamic", 64, 10000.0, context=1024, factor=2.0)
    f = rotary_frequencies(spec, context=4096)
    assert f.params == {"context": 4096}
    again = rotary_frequencies(spec, **f.params)
    np.testing.assert_array_equal(again.inv_freq, f.inv_freq)
    d = rotary_decay(f, max_distance=100)
    assert d.params == {"context": 4096, "max_distance": 100, "n_distances": 1024}


def test_stored_inv_freq_checked():
    f = rotary_frequencies(RotarySpec("default", 8, 10000.0))
    assert inv_freq_difference(f.inv_freq_unscaled.astype(np.float32), f) < 1e-7
    assert inv_freq_difference(np.array([1.0, 0.1, 0.01, 0.002]), f) == pytest.approx(1.0)
    with pytest.raises(LoadError, match="3 values"):
        inv_freq_difference(np.ones(3), f)


# --- reading config.json ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "dim", "base", "interleaved"),
    [
        ({"hidden_size": 5120, "num_attention_heads": 32, "head_dim": 128, "rope_theta": 1e6},
         128, 1e6, False),  # Mistral-Nemo: explicit head_dim wins over 5120 / 32 = 160
        ({"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32,
          "partial_rotary_factor": 0.4}, 32, 10000.0, False),  # Phi-2: 0.4 of 80
        (PRESETS["EleutherAI/gpt-neox-20b"], 24, 10000.0, False),  # 0.25 of 96
        (PRESETS["EleutherAI/gpt-j-6b"], 64, 10000.0, True),
        (PRESETS["deepseek-ai/DeepSeek-V3"], 64, 10000.0, True),
        ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4}, 16, 10000.0, False),
        ({"hidden_size": 64, "num_attention_heads": 4,
          "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}, 16, 5e5, False),
    ],
)  # fmt: skip
def test_rotary_width_and_base(config, dim, base, interleaved):
    spec = _rotary(config)
    assert (spec.rotary_dim, spec.base, spec.interleaved) == (dim, base, interleaved)


def test_legacy_type_key_and_v5_layer_types():
    legacy = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 512,
              "rope_scaling": {"type": "dynamic", "factor": 2.0}}  # fmt: skip
    assert _rotary(legacy).rope_type == "dynamic"
    v5 = {
        "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 4096,
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    }  # fmt: skip
    full, sliding = position_scheme(v5).rotary
    assert (full.layer_type, full.rope_type, full.base, full.factor) == (
        "full_attention", "linear", 1e6, 8.0)  # fmt: skip
    assert (sliding.layer_type, sliding.base) == ("sliding_attention", 1e4)
    gemma_full, gemma_local = position_scheme(PRESETS["google/gemma-3-4b-it"]).rotary
    assert (gemma_full.base, gemma_local.base, gemma_local.rope_type) == (1e6, 1e4, "default")


def test_contradictions_warned():
    config = {**PRESETS["deepseek-ai/DeepSeek-V3"], "max_position_embeddings": 32768}
    (warning,) = position_scheme(config).warnings
    assert "factor 40 differs" in warning
    assert "32768 / 4096 = 8" in warning
    config["max_position_embeddings"] = 2048
    warnings = position_scheme(config).warnings
    assert any("above max_position_embeddings" in w for w in warnings)
    assert position_scheme(PRESETS["deepseek-ai/DeepSeek-V3"]).warnings == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rope_theta": float("nan")}, "rope_theta .* finite number"),
        ({"rope_theta": -5.0}, "must not be negative"),
        ({"rope_theta": 1.0}, "above 1"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 0}}, "factor is 0;"),
        ({"rope_scaling": {"rope_type": "linear", "factor": "8"}}, "factor .* finite number"),
        ({"head_dim": 127}, "127 columns.*even"),
        ({"num_attention_heads": 0}, "num_attention_heads .* positive whole"),
        ({"rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 63,
                           "long_factor": [1.0] * 64}}, "short_factor has 63 values.*64"),
        ({"rope_scaling": {"rope_type": "su2"}}, "not one transformers 5 computes"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
                           "high_freq_factor": 1, "original_max_position_embeddings": 8192}},
         "low_freq_factor <= high_freq_factor"),
    ],
)  # fmt: skip
def test_bad_rotary_configs_refused(change, message):
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "max_position_embeddings": 8192, **change}  # fmt: skip
    with pytest.raises(LoadError, match=message):
        position_scheme(config)


def test_other_kinds():
    kinds = {name: position_scheme(c).kind for name, c in PRESETS.items()}
    assert kinds["bigscience/bloom"] == kinds["mosaicml/mpt-7b"] == "alibi"
    assert kinds["google-t5/t5-small"] == "relative_bias"
    assert kinds["microsoft/deberta-v3-base"] == "relative_table"
    table = position_scheme(PRESETS["microsoft/deberta-v3-base"]).relative_table
    assert (table.span, table.absolute_too) == (256, False)
    assert position_scheme({"model_type": "gpt2", "n_positions": 1024}).kind == "learned_absolute"
    # A learned table is read from the weights: an odd context in its config does not matter.
    assert position_scheme({"model_type": "gpt2", "n_positions": -1}).context is None
    assert position_scheme({"model_type": "mamba"}).kind == "none"
    assert position_scheme({"model_type": "marian"}).kind == "sinusoidal"
    assert position_scheme({"model_type": "falcon", "alibi": True, "n_head": 8}).kind == "alibi"
    falcon = {"model_type": "falcon", "alibi": False, "hidden_size": 64, "num_attention_heads": 2}
    assert position_scheme(falcon).kind == "rotary"
    mpt = {"model_type": "mpt", "n_heads": 8, "attn_config": {"alibi": True, "alibi_bias_max": 16}}
    assert position_scheme(mpt).alibi.alibi_bias_max == 16.0


# --- ALiBi -----------------------------------------------------------------------------------


def test_alibi_12_heads():
    expected = [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
    expected += [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]  # 0.7071, 0.3536, 0.1768, 0.0884
    np.testing.assert_allclose(alibi_slopes(12), expected, rtol=1e-15)


def _mpt_gen_slopes(n_heads: int, alibi_bias_max: float) -> np.ndarray:
    """MPT's ``gen_slopes``, transcribed: the next power of 2's slopes, odd ones first."""
    n = 2 ** math.ceil(math.log2(n_heads))
    slopes = 1.0 / 2 ** (np.arange(1, n + 1) * (alibi_bias_max / n))
    if n != n_heads:
        slopes = np.concatenate([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes


@pytest.mark.parametrize("n_heads", [1, 2, 3, 5, 12, 16, 32, 40, 71, 112, 128])
def test_alibi_matches_mpt_and_the_shortcut_only_for_powers_of_two(n_heads):
    slopes = alibi_slopes(n_heads)
    np.testing.assert_allclose(slopes, _mpt_gen_slopes(n_heads, 8.0), rtol=1e-15)
    np.testing.assert_allclose(
        alibi_slopes(n_heads, alibi_bias_max=16), _mpt_gen_slopes(n_heads, 16.0), rtol=1e-15
    )
    shortcut = 2.0 ** (-8 * np.arange(1, n_heads + 1) / n_heads)
    power_of_two = n_heads & (n_heads - 1) == 0
    assert np.allclose(slopes, shortcut, rtol=1e-15) == power_of_two


def test_alibi_112_heads_bloom_176b():
    slopes = alibi_slopes(112)
    np.testing.assert_allclose(slopes[:64], 2.0 ** (-np.arange(1, 65) / 8))
    np.testing.assert_allclose(slopes[64:], 2.0 ** (-np.arange(1, 96, 2) / 16))
    assert abs(slopes[-1] - 2.0 ** (-8)) > 0.01  # the shortcut's last slope


def test_alibi_bias_and_falls():
    b = alibi_bias(12, max_distance=100)
    assert b.bias.shape == (12, 101)
    np.testing.assert_allclose(b.bias[0, 10], -5.0)
    np.testing.assert_allclose(b.falls[0], [2, 10, 20])  # slope 1/2
    np.testing.assert_allclose(b.falls[8], np.array([1, 5, 10]) * 2**0.5)
    with pytest.raises(Refused, match="n_heads is 0; it must be a whole number from 1 to 4,096"):
        alibi_slopes(0)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"model_type": "bloom", "n_head": 10_000_000}, "n_head in config.json is 10000000"),
        ({"model_type": "bloom", "n_head": 10**4000}, "n_head in config.json is 1000000000"),
        (
            {
                "model_type": "mpt",
                "n_heads": 8,
                "attn_config": {"alibi": True, "alibi_bias_max": 1e308},
            },
            "alibi_bias_max in config.json is 1e\\+308",
        ),
    ],
)
def test_an_alibi_config_past_its_bounds_is_refused_by_its_key(config, key):
    # 10**7 heads cost 866 MB and printed 209 MB before they were bounded.
    with pytest.raises(LoadError, match=key):
        position_scheme({**config, "max_position_embeddings": 2048})


def test_alibi_heads_times_distances_within_the_budget():
    alibi_bias(4096, max_distance=8191)  # 256 MiB exactly
    with pytest.raises(
        Refused, match="The bias of 4,096 heads to distance 8,192 would take 256 MiB"
    ):
        alibi_bias(4096, max_distance=8192)
    with pytest.raises(Refused, match="max_distance is 10000000; it must be a whole number"):
        alibi_bias(8, max_distance=10**7)


# --- T5 and DeBERTa --------------------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("settings", "span", "buckets", "longest"),
    [
        ({}, 512, -1, 512),  # DebertaV2Config's defaults: no buckets, max_position_embeddings
        ({"max_relative_positions": 128}, 128, -1, 128),
        ({"position_buckets": 256}, 256, 256, 512),
        ({"position_buckets": 128, "max_relative_positions": 1024}, 128, 128, 1024),
    ],
)
def test_deberta_settings_default_as_transformers_does(settings, span, buckets, longest):
    config = {"relative_attention": True, "hidden_size": 8, "max_position_embeddings": 512}
    spec = position_scheme(config | settings).relative_table
    assert (spec.span, spec.position_buckets, spec.max_relative_positions) == (
        span, buckets, longest,
    )  # fmt: skip


def test_deberta_settings_its_formula_cannot_take_are_refused():
    config = {"relative_attention": True, "hidden_size": 8, "position_buckets": 256}
    with pytest.raises(LoadError, match="max_relative_positions above 129"):
        position_scheme(config | {"max_relative_positions": 100})
    with pytest.raises(LoadError, match="span is unknown"):
        position_scheme(config)


def test_numbers_tables():
    f = rotary_frequencies(_rotary(PRESETS["meta-llama/Llama-3.1-8B"]))
    frame = f.to_frame()
    assert len(frame) == 64
    assert frame["band"].value_counts().to_dict() == {"kept": 29, "divided": 29, "blended": 6}
    np.testing.assert_allclose(frame["turns in 131,072"], 131072 * f.inv_freq / (2 * np.pi))
    alibi = alibi_bias(4, max_distance=10).to_frame()
    assert alibi["distance for -10 logits"].tolist() == [40.0, 160.0, 640.0, 2560.0]


def test_dynamic_base_curve_and_bucket_layouts():
    from posviz.schemes.relative import bucket_layouts
    from posviz.schemes.rotary import dynamic_base_curve

    spec = RotarySpec("dynamic", 64, 10000.0, context=2048, factor=2.0)
    lengths, bases = dynamic_base_curve(spec)
    assert lengths[0] == 1
    assert lengths[-1] == 16 * 2048
    assert np.all(bases[lengths <= 2048] == 10000.0)
    assert bases[-1] == pytest.approx(10000 * (2 * 16 - 1) ** (64 / 62))
    b = bucket_layouts(RelativeBiasSpec(num_buckets=32, max_distance=128, n_heads=8))
    encoder, _ = b.layouts["encoder (bidirectional)"]
    np.testing.assert_array_equal(encoder, t5_buckets(b.relative_positions))
    assert b.params == {}  # every number is the config's
