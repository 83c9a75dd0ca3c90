"""The rope table against transformers 5 itself and against the formulas by hand.

tests/data/rope/ holds configs as the Hub serves them (v4/) and as transformers 5.24 writes them
(v5/, ``save_pretrained``), with what transformers' own rotary and attention classes computed
from them (reference.npz, reference.json; made by make_rope_reference.py in a scratch venv:
the tests import neither torch nor transformers).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from posviz.embedding import LoadError
from posviz.schemes.config import position_scheme
from posviz.schemes.layers import AttentionTemperature, Mrope, rope_parameters
from posviz.schemes.rope import ROPE_RULES, ROPE_TYPES, RotarySpec, rotary_spec, yarn_mscale
from posviz.schemes.rotary import rotary_frequencies

DATA = Path(__file__).parents[1] / "data" / "rope"
REFERENCE = json.loads((DATA / "reference.json").read_text())
ARRAYS = np.load(DATA / "reference.npz")
MODELS = sorted(REFERENCE["models"])
#: float32's relative rounding (2^-23 ≈ 1.2e-7), a few operations of it.
FLOAT32 = 4 * 2.0**-23


def config(name: str, layout: str = "v5") -> dict:
    return json.loads((DATA / layout / f"{name}.json").read_text())


def specs_by_type(name: str, layout: str = "v5") -> dict[str, RotarySpec]:
    return {spec.layer_type: spec for spec in position_scheme(config(name, layout)).rotary}


def spec_for(name: str, layer_type: str) -> RotarySpec:
    specs = specs_by_type(name)
    return specs.get(layer_type) or specs["all"]


# --- as transformers 5 computes it --------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_inv_freq_and_attention_factor_agree_with_transformers(name):
    for layer_type, facts in REFERENCE["models"][name]["layer_types"].items():
        spec = spec_for(name, layer_type)
        # At init transformers applies LongRoPE's short factors (positions within L0).
        context = spec.original_context if spec.rope_type == "longrope" else None
        f = rotary_frequencies(spec, context=context)
        expected = ARRAYS[f"{name}/{layer_type}/inv_freq"].astype(np.float64)
        np.testing.assert_allclose(f.inv_freq, expected, rtol=FLOAT32, atol=0)
        assert f.attention_factor == pytest.approx(facts["attention_factor"], rel=1e-12)
        for length, factor in facts["at_lengths"].items():
            at = rotary_frequencies(spec, context=int(length))
            expected = ARRAYS[f"{name}/{layer_type}/inv_freq@{length}"].astype(np.float64)
            np.testing.assert_allclose(at.inv_freq, expected, rtol=FLOAT32, atol=0)
            assert at.attention_factor == pytest.approx(factor, rel=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_cos_and_sin_rows_agree_with_transformers_to_float32_angles(name):
    """transformers' angles m·θ are float32: off by up to m·θ·2^-23 from the exact ones."""
    entry = REFERENCE["models"][name]
    lengths = {str(entry["rows_length"]): ""}
    for layer_type, facts in entry["layer_types"].items():
        spec = spec_for(name, layer_type)
        for length, suffix in {**lengths, **{L: f"@{L}" for L in facts["at_lengths"]}}.items():
            f = rotary_frequencies(spec, context=int(length))
            positions = [p for p in REFERENCE["positions"] if p < int(length)] + [int(length) - 1]
            angles = np.outer(positions, f.inv_freq)
            bound = angles * FLOAT32 + 1e-6
            for part, formula in (("cos", np.cos), ("sin", np.sin)):
                got = ARRAYS[f"{name}/{layer_type}/{part}{suffix}"].astype(np.float64)
                error = np.abs(formula(angles) * f.attention_factor - got)
                assert (error <= bound * f.attention_factor).all(), (layer_type, length, part)


@pytest.mark.parametrize("name", MODELS)
def test_each_layer_as_transformers_builds_its_attention(name):
    layers = position_scheme(config(name)).layers
    facts = REFERENCE["models"][name]["layers"]
    assert len(layers) == len(facts)
    for layer, fact in zip(layers, facts, strict=True):
        assert layer.rope == bool(fact.get("use_rope", 1)), layer.layer
        if "sliding_window" in fact or "layer_type" in fact:
            assert layer.sliding_window == fact.get("sliding_window"), layer.layer
        if "layer_type" in fact:
            assert layer.layer_type == fact["layer_type"]
        if layer.rope and "head_dim" in fact:
            spec = layer.rotary
            width = spec.rotary_dim if spec.rotating_pairs is not None else fact["head_dim"]
            assert width == fact["head_dim"]
        tuned = fact.get("attn_temperature_tuning") and not fact.get("use_rope", 1)
        assert (layer.attention_temperature is not None) == bool(tuned)
        if tuned:
            assert layer.attention_temperature == AttentionTemperature(
                fact["floor_scale"], fact["attn_scale"]
            )
        if layer.rope:  # the softmax scale over head_dim^-½: DeepSeek's mscale²
            qk_width = {"deepseek-v3": 192}.get(name, fact.get("head_dim"))
            if qk_width and name != "gemma-4-text":  # Gemma-4: q/k normed, scaling 1
                expected = fact["scaling"] * math.sqrt(qk_width)
                assert layer.rotary.softmax_scale == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", ["qwen2-vl-7b", "qwen3-vl-8b"])
def test_mrope_pairs_take_the_axis_transformers_gives_them(name):
    (layer, *_) = position_scheme(config(name)).layers
    f = rotary_frequencies(layer.rotary)
    position = {"time": 1, "height": 2, "width": 3}
    expected = np.cos(
        [position[a] * t for a, t in zip(layer.mrope.axes(), f.inv_freq, strict=True)]
    )
    got = ARRAYS[f"{name}/all/cos_thw_123"].astype(np.float64)
    np.testing.assert_allclose(expected, got, atol=1e-6)


def test_deepseek_v3_logits_scale_by_mscale_squared():
    f = rotary_frequencies(spec_for("deepseek-v3", "all"))
    mscale = 0.1 * math.log(40) + 1
    assert round(mscale, 6) == 1.368888
    assert f.spec.softmax_scale == pytest.approx(mscale**2, rel=1e-15)
    assert round(f.logit_multiplier, 6) == 1.873854
    assert "DeepseekV3Attention" in f.logit_multiplier_source
    llama = rotary_frequencies(spec_for("llama-3.1-8b", "all"))
    assert (llama.logit_multiplier, llama.spec.attention_class) == (1.0, None)


# --- every config as transformers 5 reads it ------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.stem for p in (DATA / "v4").glob("*.json")))
def test_v4_and_v5_layouts_give_the_same_scheme(name):
    v4, v5 = (position_scheme(config(name, layout)) for layout in ("v4", "v5"))
    assert v4.rotary == v5.rotary
    assert v4.layers == v5.layers


@pytest.mark.parametrize(("name", "columns"), [("pythia-160m", 16), ("phi-2", 32)])
def test_partial_rotary_factor_inside_rope_parameters(name, columns):
    assert "partial_rotary_factor" in config(name)["rope_parameters"]
    assert not {"partial_rotary_factor", "rotary_pct"} & set(config(name))
    assert spec_for(name, "all").rotary_dim == columns


def test_nested_values_win_over_top_level_ones():
    both = {"rope_theta": 1e4, "partial_rotary_factor": 1.0,
            "rope_parameters": {"rope_theta": 5e5, "partial_rotary_factor": 0.5}}  # fmt: skip
    assert rope_parameters(both)["all"] == {
        "rope_theta": 5e5, "partial_rotary_factor": 0.5, "rope_type": "default"
    }  # fmt: skip


def test_yarn_without_factor_refused_as_transformers_refuses_it():
    refused = REFERENCE["refused"]["yarn-without-factor"]
    assert refused["error"].startswith("KeyError")
    assert "'factor'" in refused["error"]
    with pytest.raises(LoadError, match="lacks 'factor': transformers 5 refuses") as error:
        position_scheme(refused["config"])
    assert "{'factor'}" in str(error.value)


@pytest.mark.parametrize(
    ("kind", "missing"),
    [("linear", "factor"), ("dynamic", "factor"), ("llama3", "low_freq_factor"),
     ("longrope", "short_factor")],
)  # fmt: skip
def test_each_rules_required_keys(kind, missing):
    parameters = {"rope_type": kind, "factor": 2.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 4096,
                  "short_factor": [1.0] * 64, "long_factor": [1.0] * 64}  # fmt: skip
    del parameters[missing]
    assert missing in ROPE_RULES[kind].required
    with pytest.raises(LoadError, match=f"lacks '{missing}'"):
        rotary_spec(parameters, head_dim=128, context=8192)


# --- each rule by hand --------------------------------------------------------------------


def test_every_rule_of_transformers_5_is_in_the_table():
    assert set(ROPE_TYPES) == {"default", "linear", "dynamic", "yarn", "longrope", "llama3",
                               "proportional"}  # fmt: skip
    assert all(rule.source for rule in ROPE_RULES.values())


def test_proportional_rotates_a_quarter_of_gemma4s_wide_head():
    spec = spec_for("gemma-4-text", "full_attention")
    assert (spec.rope_type, spec.rotary_dim, spec.rotating_pairs) == ("proportional", 512, 64)
    f = rotary_frequencies(spec)
    # By hand: θᵢ = 10⁶^(−2i/512) for i < int(0.25 · 512 // 2) = 64: the whole head's width
    # in the exponent; the other 192 pairs do not rotate.
    np.testing.assert_allclose(f.inv_freq[:64], 1e6 ** (-np.arange(64) * 2 / 512), rtol=1e-15)
    assert (f.inv_freq[64:] == 0).all()
    assert f.band_counts() == {"kept": 64, "unrotated": 192}
    doubled = rotary_frequencies(RotarySpec("proportional", 8, 100.0, factor=2.0, rotating_pairs=2))
    np.testing.assert_allclose(doubled.inv_freq, [0.5, 100**-0.25 / 2, 0, 0], rtol=1e-15)
    assert doubled.band.tolist() == ["divided", "divided", "unrotated", "unrotated"]


@pytest.mark.parametrize(
    ("length", "slowest", "divided_by_two"),
    [(4096, 1.0, 0), (4097, 1.0005, 0), (8192, 3.0, 24), (16384, 7.0, 41), (100000, 47.8, 52)],
)
def test_dynamic_ntk_bands_move_with_the_length(length, slowest, divided_by_two):
    spec = spec_for("dynamic-ntk", "all")
    f = rotary_frequencies(spec, context=length)
    # By hand: pair i is divided by r^(2i/(d−2)), r = s·L/max_pos − (s − 1) (beyond max_pos):
    # the slowest pair (i = d/2 − 1) by r itself, pair i by 2 or more from 63 ln 2 / ln r on.
    r = max(2 * length / 4096 - 1, 1.0)
    np.testing.assert_allclose(f.division, r ** (np.arange(64) * 2 / 126), rtol=1e-12)
    assert round(f.division[-1], 4 if slowest < 2 else 1) == slowest
    first = math.inf if r == 1 else math.ceil(63 * math.log(2) / math.log(r))
    assert int((f.division >= 2).sum()) == divided_by_two == max(64 - first, 0)
    assert f.band[0] == "kept"
    assert int((f.band == "divided").sum()) == divided_by_two  # factor 2


def test_llama3_with_equal_band_edges_has_no_blended_pairs():
    """Llama-4 Scout: low_freq_factor = high_freq_factor = 1 (transformers warns, computes)."""
    f = rotary_frequencies(spec_for("llama-4-scout-text", "all"))
    wavelength = 2 * np.pi / f.inv_freq_unscaled
    assert f.band_counts() == {"kept": int((wavelength < 8192).sum()),
                               "divided": int((wavelength > 8192).sum())}  # fmt: skip
    np.testing.assert_allclose(f.division[wavelength > 8192], 16, rtol=1e-15)


def test_yarn_mscale_and_longrope_attention_factor_by_hand():
    assert yarn_mscale(40, 1.0) == pytest.approx(0.1 * math.log(40) + 1, rel=1e-15)
    phi = rotary_frequencies(spec_for("phi-3.5-mini-longrope", "all"), context=4097)
    assert phi.attention_factor == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))


# --- the per-layer map ---------------------------------------------------------------------


def test_smollm3_and_llama4_nope_layers():
    smol = position_scheme(config("smollm3-3b")).layers
    assert [layer.layer for layer in smol if not layer.rope] == list(range(3, 36, 4))
    llama4 = position_scheme(config("llama-4-scout-text")).layers  # no_rope_layers: [] -> interval
    assert [layer.rope for layer in llama4[:4]] == [True, True, True, False]
    assert [layer.layer_type for layer in llama4[:4]] == ["chunked_attention"] * 3 + [
        "full_attention"
    ]
    temperature = llama4[3].attention_temperature
    assert temperature.at(np.array([0, 8191, 2**20])).tolist() == pytest.approx(
        [1.0, 0.1 * math.log(2) + 1, 0.1 * math.log1p(128) + 1]
    )
    assert llama4[0].attention_temperature is None


def test_gemma_layers_alternate_by_type_with_their_own_rules():
    layers = position_scheme(config("gemma-3-4b", "v4")).layers  # from sliding_window_pattern 6
    assert [layer.layer_type for layer in layers[:6]] == ["sliding_attention"] * 5 + [
        "full_attention"
    ]
    assert (layers[0].rotary.base, layers[5].rotary.base, layers[5].rotary.factor) == (1e4, 1e6, 8)
    assert (layers[0].sliding_window, layers[5].sliding_window) == (1024, None)
    gemma4 = position_scheme(config("gemma-4-text")).layers
    assert {(layer.layer_type, layer.rotary.rotary_dim) for layer in gemma4} == {
        ("sliding_attention", 256), ("full_attention", 512)
    }  # fmt: skip


def test_mrope_sections():
    assert Mrope((16, 24, 24)).record()["pairs"]["height"] == list(range(16, 40))
    interleaved = Mrope((24, 20, 20), interleaved=True).axes()
    assert (interleaved == "height").sum() == (interleaved == "width").sum() == 20
    assert interleaved[60:].tolist() == ["time"] * 4
    bad = {**config("qwen2-vl-7b")}
    bad["text_config"] = {**bad["text_config"], "rope_parameters": {
        **bad["text_config"]["rope_parameters"], "mrope_section": [16, 24, 20]}}  # fmt: skip
    with pytest.raises(LoadError, match="sums to 60 pairs; the rotary width 128 has 64"):
        position_scheme(bad)
