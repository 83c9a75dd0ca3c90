"""posviz.schemes.config: config.json read into a Scheme: rotary widths and bases of each
layout (head_dim, partial rotary, v5's rope_parameters and layer types), contradictions warned,
bad values refused by their key, ALiBi's and DeBERTa's keys read as transformers reads them."""

from __future__ import annotations

import pytest

from posviz.embedding import LoadError
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import RotarySpec


def _rotary(config: dict) -> RotarySpec:
    (spec,) = position_scheme(config).rotary
    return spec


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
