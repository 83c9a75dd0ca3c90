"""The context planner against the published numbers, against transformers 5 itself, and its
configs read back.

tests/data/plan/ holds what transformers 5's own rope code computes from the config.json each
rule of a plan writes (both layouts), made by make_plan_reference.py in a scratch venv: the
tests import neither torch nor transformers.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from posviz._params import Refused
from posviz.schemes.config import position_scheme
from posviz.schemes.plan import (
    BANDS,
    RULES,
    context_plan,
    critical_base,
    critical_dimension,
    ntk_aware_base,
    planned_config,
    usage_shares,
)
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import rotary_frequencies

DATA = Path(__file__).parents[1] / "data"
REFERENCE = json.loads((DATA / "plan" / "reference.json").read_text())
ARRAYS = np.load(DATA / "plan" / "reference.npz")
#: float32's relative rounding (2^-23 ≈ 1.2e-7), a few operations of it.
FLOAT32 = 4 * 2.0**-23


def hub_config(name: str) -> dict:
    added = DATA / "plan" / "configs" / f"{name}.json"
    path = added if added.exists() else DATA / "rope" / "v4" / f"{name}.json"
    return json.loads(path.read_text())


def plan_of(name: str, target: int):
    return context_plan(position_scheme(hub_config(name)), target=target)


def counts(plan, rule: str) -> list[int]:
    return [len(plan.rule(rule).pairs(band)) for band in BANDS]


# --- the published numbers (docs/schemes.md, "Planning a longer context") ----------------


def test_llama2_critical_dimension_is_92_and_llama3s_70():
    assert plan_of("llama-2-7b", 8192).critical_dimension == 92
    assert plan_of("llama-3-8b", 65536).critical_dimension == 70
    assert critical_dimension(10000.0, 128, 4096) == 92


@pytest.mark.parametrize(("target", "published"), [(8192, 26784), (12288, 47661), (16384, 71738)])
def test_llama2_critical_base(target, published):
    plan = plan_of("llama-2-7b", target)
    assert round(plan.critical_base) == published
    assert plan.rule("critical_base").rope_theta == plan.critical_base


def test_ntk_aware_base_at_factor_two_is_20221():
    assert round(plan_of("llama-2-7b", 8192).rule("ntk_aware").rope_theta) == 20221
    assert ntk_aware_base(10000.0, 128, 2.0) == 10000.0 * 2.0 ** (128 / 126)


@pytest.mark.parametrize("target", [8192, 10000, 16384, 65536])
def test_yarn_on_llama2_keeps_21_blends_25_divides_18_whatever_the_factor(target):
    """YaRN's split is set by L, b and d, not by s."""
    assert counts(plan_of("llama-2-7b", target), "yarn") == [21, 25, 18]


def test_llama3_on_llama3_to_factor_8_keeps_29_blends_6_divides_29():
    assert counts(plan_of("llama-3-8b", 65536), "llama3") == [29, 6, 29]


def test_llama3_on_a_llama_3_2_1b_shape_to_factor_32():
    config = {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32,
              "head_dim": 64, "max_position_embeddings": 8192, "rope_theta": 500000.0}  # fmt: skip
    plan = context_plan(position_scheme(config), target=32 * 8192)
    assert counts(plan, "llama3") == [15, 3, 14]


def test_pairs_beyond_their_trained_angles_llama2_to_16384():
    plan = plan_of("llama-2-7b", 16384)
    beyond = {rule.rule: int(rule.beyond_trained.sum()) for rule in plan.rules}
    assert (beyond["none"], beyond["linear"], beyond["ntk_aware"], beyond["yarn"]) == (18, 0, 17, 0)
    # The 18 are the pairs that never turned within 4096 positions: k = 46 ... 63.
    assert np.flatnonzero(plan.rule("none").beyond_trained).tolist() == list(range(46, 64))


def test_ntk_aware_keeps_the_fastest_pair_and_divides_the_slowest_by_s():
    rule = plan_of("llama-2-7b", 16384).rule("ntk_aware")
    assert rule.pairs("unchanged") == [0]
    assert rule.pairs("interpolated") == [63]
    assert rule.ratio[63] == pytest.approx(1 / 4, rel=1e-12)


def test_interpolation_starts_at_the_first_changed_pairs_wavelength():
    plan = plan_of("llama-2-7b", 16384)
    yarn = plan.rule("yarn")
    first = yarn.pairs("blended")[0]
    assert first == 21
    assert yarn.interpolation_wavelength == pytest.approx(2 * math.pi * 10000 ** (2 * 21 / 128))
    assert plan.rule("linear").interpolation_wavelength == pytest.approx(2 * math.pi)
    assert plan.rule("none").interpolation_wavelength is None


def test_critical_base_by_its_formula():
    expected = 10000 ** (math.log(16384 / (2 * math.pi)) / math.log(4096 / (2 * math.pi)))
    assert critical_base(10000.0, 4096, 16384) == pytest.approx(expected, rel=1e-15)


# --- against transformers 5 ---------------------------------------------------------------

CASES = sorted(REFERENCE["cases"])


@pytest.mark.parametrize("case", CASES)
def test_every_rule_writes_the_fields_the_reference_was_made_with(case):
    name, target = case.split("@")
    plan = plan_of(name, int(target))
    assert {r.rule for r in plan.rules} == set(REFERENCE["cases"][case])
    for rule in plan.rules:
        written = REFERENCE["cases"][case][rule.rule]
        assert json.loads(json.dumps(rule.rope_parameters)) == written["rope_parameters"]
        assert json.loads(json.dumps(rule.rope_scaling)) == written["rope_scaling"]
        assert rule.rope_theta == written["rope_theta"]
        assert rule.max_position_embeddings == written["max_position_embeddings"]


@pytest.mark.parametrize("case", CASES)
def test_every_rules_inv_freq_and_attention_factor_equal_transformers(case):
    """transformers reads the planned config.json (either layout) to the same frequencies, in
    float32, and the same attention factor."""
    name, target = case.split("@")
    plan = plan_of(name, int(target))
    for rule in plan.rules:
        for layout in ("v5", "v4"):
            expected = ARRAYS[f"{case}/{rule.rule}/{layout}"].astype(np.float64)
            np.testing.assert_allclose(rule.inv_freq, expected, rtol=FLOAT32, atol=0)
            factor = REFERENCE["cases"][case][rule.rule]["attention_factor"][layout]
            assert rule.attention_factor == pytest.approx(factor, rel=1e-12)


# --- the configs a plan writes, read back -----------------------------------------------------


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("layout", ["v5", "v4"])
def test_each_planned_config_reads_back_to_the_plans_numbers(case, layout):
    name, target = case.split("@")
    config = hub_config(name)
    plan = plan_of(name, int(target))
    for rule in plan.rules:
        scheme = position_scheme(planned_config(config, rule, layout=layout))
        spec = scheme.rotary[0]
        assert spec.layer_type == plan.spec.layer_type
        assert scheme.context == rule.max_position_embeddings
        again = rotary_frequencies(spec, context=int(target))
        np.testing.assert_array_equal(again.inv_freq, rule.inv_freq)
        assert again.attention_factor == rule.attention_factor
        others = [replace(s, context=None) for s in scheme.rotary[1:]]  # other types kept
        assert others == [replace(s, context=None) for s in position_scheme(config).rotary[1:]]


def test_v4_layout_moves_a_nested_partial_rotary_factor_to_the_top():
    config = json.loads((DATA / "rope" / "v5" / "phi-2.json").read_text())
    plan = context_plan(position_scheme(config), target=8192)
    v4 = planned_config(config, plan.rule("yarn"), layout="v4")
    assert "rope_parameters" not in v4
    assert v4["partial_rotary_factor"] == 0.4
    assert position_scheme(v4).rotary[0].rotary_dim == 32


def test_a_multimodal_configs_fields_go_inside_text_config():
    config = {"model_type": "gemma3", "text_config": hub_config("gemma-3-4b")}
    plan = context_plan(position_scheme(config), target=262144)
    assert any("text_config" in note for note in plan.notes)
    planned = planned_config(config, plan.rule("yarn"))
    assert planned["text_config"]["rope_parameters"] == plan.rule("yarn").rope_parameters
    assert "rope_parameters" not in planned


# --- which rules, and the model's own rule ------------------------------------------------------


def test_every_rule_in_order_for_a_plain_llama():
    assert [r.rule for r in plan_of("llama-2-7b", 8192).rules] == [
        r for r in RULES if r != "longrope"
    ]


def test_longrope_only_with_the_models_own_factors():
    plan = plan_of("phi-3.5-mini-longrope", 131072)
    rule = plan.rule("longrope")
    own = PRESETS["microsoft/Phi-3.5-mini-instruct"]["rope_scaling"]
    assert rule.rope_parameters["long_factor"] == own["long_factor"]
    np.testing.assert_allclose(rule.ratio, 1 / np.array(own["long_factor"]), rtol=1e-15)
    assert rule.attention_factor == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))
    assert not any(r.rule == "longrope" for r in plan_of("llama-2-7b", 8192).rules)


def test_phi3_leaves_out_the_rules_transformers_5_refuses_for_it():
    plan = plan_of("phi-3.5-mini-longrope", 131072)
    assert [r.rule for r in plan.rules] == ["none", "ntk_aware", "longrope", "critical_base"]
    assert any("refuses rope types other than default and longrope" in n for n in plan.notes)


def test_a_models_own_yarn_options_are_kept_and_said():
    plan = plan_of("deepseek-v3", 16384)
    yarn = plan.rule("yarn").rope_parameters
    assert (yarn["mscale"], yarn["mscale_all_dim"], yarn["factor"]) == (1.0, 1.0, 4.0)
    assert plan.original_context == 4096
    assert any("already applies yarn" in n for n in plan.notes)


def test_llama31s_llama3_row_at_its_own_factor_is_its_own_rule():
    plan = plan_of("llama-3.1-8b", 8 * 8192)
    own = rotary_frequencies(position_scheme(hub_config("llama-3.1-8b")).rotary[0])
    np.testing.assert_array_equal(plan.rule("llama3").inv_freq, own.inv_freq)


def test_a_hybrid_plans_its_full_attention_rule_and_keeps_the_sliding_one():
    plan = plan_of("gemma-3-4b", 262144)
    linear = plan.rule("linear").rope_parameters
    assert set(linear) == {"full_attention", "sliding_attention"}
    assert linear["full_attention"]["factor"] == 2.0
    assert linear["sliding_attention"] == {"rope_type": "default", "rope_theta": 10000.0}
    assert plan.original_context == 131072  # no original: max_position_embeddings, said so
    assert any("names no original_max_position_embeddings" in n for n in plan.notes)


def test_a_target_within_the_trained_context_needs_no_rule():
    plan = plan_of("llama-2-7b", 4096)
    assert [r.rule for r in plan.rules] == ["none"]
    assert plan.critical_base is None
    assert any("no rule is needed" in n for n in plan.notes)


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", [0, 2**24 + 1, 1.5, True, "8192", None])
def test_a_target_not_a_whole_number_from_1_to_2_24_is_refused(target):
    with pytest.raises(Refused, match=r"target is .*whole number from 1 to 16,777,216"):
        context_plan(position_scheme(hub_config("llama-2-7b")), target=target)


def test_a_model_without_rotary_positions_is_refused_saying_what_it_has():
    with pytest.raises(Refused, match=r"has ALiBi attention biases .*not rotary positions"):
        context_plan(position_scheme(PRESETS["bigscience/bloom"]), target=8192)
    with pytest.raises(Refused, match="has a learned absolute position table"):
        context_plan(position_scheme({"model_type": "gpt2", "n_positions": 1024}), target=8192)


def test_gemma4s_proportional_rule_is_refused():
    config = json.loads((DATA / "rope" / "v5" / "gemma-4-text.json").read_text())
    with pytest.raises(Refused, match="proportional rule"):
        context_plan(position_scheme(config), target=1_000_000)


def test_a_config_without_a_context_is_refused():
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32}
    with pytest.raises(Refused, match="names no max_position_embeddings"):
        context_plan(position_scheme(config), target=8192)


# --- the runtimes' settings ------------------------------------------------------------------


def test_llama_cpp_flags():
    plan = plan_of("llama-2-7b", 16384)
    flags = {rule.rule: rule.llama_cpp for rule in plan.rules}
    assert flags["none"] == "--rope-scaling none -c 16384"
    assert flags["linear"] == "--rope-scaling linear --rope-scale 4 -c 16384"
    assert flags["yarn"] == "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 4096 -c 16384"
    base = repr(plan.rule("ntk_aware").rope_theta)
    assert flags["ntk_aware"] == f"--rope-scaling none --rope-freq-base {base} -c 16384"
    assert flags["llama3"].startswith("-c 16384 # llama3: no flags")
    assert any("rope_freqs" in n for n in plan.rule("llama3").notes)
    dynamic = plan.rule("dynamic")
    assert str(dynamic.frequencies.base_applied) in dynamic.llama_cpp
    assert any("no dynamic rule" in n for n in dynamic.notes)
    factor = plan_of("llama-2-7b", 10000).rule("linear").llama_cpp
    assert "--rope-scale 2.44140625 " in factor  # s = 10000 / 4096 exactly


def _vllm_overrides(flags: str) -> tuple[int, dict]:
    head, _, overrides = flags.partition(" --hf-overrides ")
    return int(head.removeprefix("--max-model-len ")), json.loads(overrides.strip("'"))


def _vllm_rope_parameters(config: dict, overrides: dict, transformers_major: int) -> dict:
    """vLLM's get_config on `config` with `overrides` (config.update, then
    patch_rope_parameters), as vllm/transformers_utils/config.py does it, for a flat rule."""
    loaded = dict(config)
    if transformers_major >= 5:  # the loaded config holds rope_parameters; rope_scaling sets it
        loaded["rope_parameters"] = {**config.get("rope_scaling", {}), "rope_theta": 1.0}
        for key, value in overrides.items():
            loaded["rope_parameters" if key == "rope_scaling" else key] = value
        parameters = dict(loaded["rope_parameters"])
        parameters.setdefault("rope_theta", loaded["rope_theta"])
        return parameters
    loaded |= overrides
    parameters = dict(loaded["rope_scaling"])
    parameters["rope_theta"] = loaded["rope_theta"]
    return parameters


def _vllm_derived_length(overrides: dict) -> float:
    """vllm/config/model.py, _get_and_verify_max_len, for a flat rule."""
    rule = overrides["rope_parameters"]
    derived = overrides["max_position_embeddings"]
    if rule["rope_type"] not in ("su", "longrope", "llama3"):
        if rule["rope_type"] == "yarn":
            derived = rule["original_max_position_embeddings"]
        derived *= rule.get("factor", 1.0)
    return derived


@pytest.mark.parametrize("name", ["llama-2-7b", "llama-3.1-8b"])
@pytest.mark.parametrize("major", [4, 5])
def test_vllm_reads_the_plans_rule_and_takes_the_length(name, major):
    plan = plan_of(name, 65536)
    for rule in plan.rules:
        length, overrides = _vllm_overrides(rule.vllm)
        assert length == 65536
        read = _vllm_rope_parameters(hub_config(name), overrides, major)
        assert read == rule.rope_parameters
        assert _vllm_derived_length(overrides) >= length
    dynamic = _vllm_overrides(plan.rule("dynamic").vllm)[1]
    assert _vllm_derived_length(dynamic) == 65536  # L·s: vLLM computes dynamic's base there


# --- the heads' usage on the pairs each rule changes -----------------------------------------


def test_usage_shares_sum_each_layers_usage_on_the_changed_pairs():
    plan = plan_of("llama-2-7b", 16384)
    usage = np.zeros((2, 64))
    usage[0, :21] = 1.0  # on the pairs YaRN keeps
    usage[1, 63] = 3.0  # on the slowest pair
    shares = usage_shares(plan, usage)
    assert shares["yarn"] == pytest.approx(3 / 24)
    assert shares["linear"] == 1.0
    assert shares["none"] == 0.0
    with pytest.raises(Refused, match="usage has 32 pairs"):
        usage_shares(plan, np.ones(32))


def test_the_tables_one_row_per_rule_and_per_rule_and_pair():
    plan = plan_of("llama-2-7b", 16384)
    frame = plan.to_frame()
    yarn_row = frame.loc[frame.rule == "yarn", ["unchanged", "blended", "interpolated"]]
    assert yarn_row.values.tolist() == [[21, 25, 18]]
    pairs = plan.pairs_table()
    assert len(pairs) == 64 * len(plan.rules)
    yarn = pairs[pairs.rule == "yarn"]
    np.testing.assert_array_equal(yarn.angle_trained, 4096 * plan.rule("none").inv_freq)
    assert plan.params == {"target": 16384}
    assert plan.params.step == "context_plan"
