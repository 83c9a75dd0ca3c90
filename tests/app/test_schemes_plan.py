"""The Schemes page's longer context (issue 43): the target follows the model, the table of
rules, the two charts, each rule's settings in code blocks, the last plan kept on a refusal, the
heads' usage from the Hub, and its exports rerun."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

import posviz
from posviz.schemes.presets import PRESETS
from tests import ROOT, apptest

PAGE = "pages/schemes.py"
HEADS = ROOT / "tests" / "data" / "heads" / "llama"


def page(**state) -> AppTest:
    at = apptest(PAGE)
    at.session_state["schemes.plan"] = True
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_llama31_opens_at_four_times_its_original_context():
    at = page()
    assert at.number_input(key="schemes.target").value == 32768
    shown = metrics(at)
    assert (shown["trained at L"], shown["factor s = N / L"]) == ("8,192", "4")
    assert shown["critical dimension"] == "70"
    (table,) = at.dataframe
    assert table.value["rule"].tolist() == [
        "none", "linear", "ntk_aware", "dynamic", "yarn", "llama3", "critical_base"
    ]  # fmt: skip
    assert "not which rule gives the lowest perplexity" in " ".join(c.value for c in at.caption)


def test_llama3_shape_to_64k_has_the_published_split():
    at = page(**{"schemes.target": 65536})
    table = at.dataframe[0].value.set_index("rule")
    assert table.loc["llama3", ["unchanged", "blended", "interpolated"]].tolist() == [29, 6, 29]
    assert table.loc["none", "beyond trained"] == 29


def test_the_charts_draw_every_rule():
    at = page(**{"schemes.plan_section": "θ'/θ per pair"})
    ratios = figures(at)[-1]
    assert [t["name"] for t in ratios["data"]] == [
        "none", "linear", "ntk_aware", "dynamic", "yarn", "llama3", "critical_base"
    ]  # fmt: skip
    assert ratios["layout"]["yaxis"]["type"] == "log"
    angles = figures(page(**{"schemes.plan_section": "Angles at N"}))[-1]
    assert angles["data"][0]["name"] == "training: L·θ_k (L = 8,192)"
    assert angles["data"][1]["name"] == "none (29 beyond)"


def test_each_rules_settings_in_code_blocks():
    at = page(**{"schemes.plan_section": "Settings", "schemes.target": 65536})
    assert at.selectbox(key="schemes.plan_rule").value == "linear"
    at.selectbox(key="schemes.plan_rule").set_value("yarn").run()
    v5, v4, llama_cpp, vllm = (code.value for code in at.code)
    assert json.loads(v5)["rope_parameters"]["rope_type"] == "yarn"
    assert json.loads(v4)["rope_scaling"]["factor"] == 8.0
    assert llama_cpp == "--rope-scaling yarn --rope-scale 8 --yarn-orig-ctx 8192 -c 65536"
    assert vllm.startswith("--max-model-len 65536 --hf-overrides ")


def test_the_target_follows_the_model_and_the_section_leaves_non_rotary_models():
    at = page(**{"schemes.target": 50000})
    at.selectbox(key="schemes.preset").set_value("microsoft/Phi-3.5-mini-instruct").run()
    assert at.number_input(key="schemes.target").value == 16384
    assert at.dataframe[0].value["rule"].tolist() == [
        "none", "ntk_aware", "longrope", "critical_base"
    ]  # fmt: skip
    at.selectbox(key="schemes.preset").set_value("bigscience/bloom").run()
    assert not any(e.label.startswith("Longer context") for e in at.expander)


def test_a_refused_plan_keeps_the_last_one_drawn():
    at = page(**{"schemes.source": "config.json"})
    config = {**PRESETS["mistralai/Mistral-7B-v0.1"], "max_position_embeddings": 128}
    data = json.dumps(config).encode()
    at.get("file_uploader")[0].set_value(("config.json", data, "application/json")).run()
    assert at.number_input(key="schemes.target").value == 512
    assert not at.error
    at.number_input(key="schemes.target").set_value(2**24).run()
    assert not at.exception, at.exception
    assert "factor" in at.error[0].value  # s = 131,072: beyond any factor read
    assert any("last plan drawn for this model, at N = 512" in c.value for c in at.caption)
    assert metrics(at)["factor s = N / L"] == "4"


def test_a_hub_models_layer_0_usage_on_the_pairs_each_rule_changes(fake_hub):
    fake_hub.add("test/llama", {"config.json": (HEADS / "config.json").read_bytes(),
                                "model.safetensors": HEADS / "model.safetensors"})  # fmt: skip
    at = page(**{"schemes.source": "Hub model"})
    at.text_input(key="schemes.repo").set_value("test/llama")
    at.button[0].click().run()
    assert at.number_input(key="schemes.target").value == 256  # 4 x 64
    assert not [s for s in fake_hub.log if "safetensors" in s.path]
    at.toggle(key="schemes.plan_heads").set_value(True).run()
    assert not at.exception, at.exception
    shares = at.dataframe[-1].value.set_index("rule")
    assert shares.loc["linear"].tolist() == [1.0, 1.0]  # every pair: all the usage
    assert shares.loc["none"].tolist() == [0.0, 0.0]
    assert 0 < shares.loc["yarn"].iloc[0] < 1


def test_the_tables_export_reruns(downloads):
    page(**{"schemes.target": 20000})
    exported = json.loads(downloads["context_plan.json"]())
    assert exported["analysis"] == "context_plan"
    assert exported["params"] == {"target": 20000}
    assert exported["provenance"]["config"] == "preset:meta-llama/Llama-3.1-8B"
    result = posviz.rerun(exported)
    assert result.ok
    assert len(result.checks) == 7 * 10


@pytest.mark.parametrize("name", ["google/gemma-3-4b-it", "deepseek-ai/DeepSeek-V3"])
def test_hybrid_and_yarn_models_plan(name):
    at = page(**{"schemes.preset": name})
    assert not at.error
    assert at.dataframe[0].value["rule"].iloc[0] == "none"
