"""`posviz plan SOURCE --target N`: the issue's JSON, its sources (a config.json, a known model,
the Hub, a GGUF), its refusals, and every config it writes read back by `posviz summary` and
`posviz diff`; `posviz rerun` of its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posviz.cli import main
from posviz.schemes.config import position_scheme
from posviz.schemes.plan import context_plan, planned_config
from posviz.schemes.presets import PRESETS
from tests import ggufs

LLAMA2 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
          "num_key_value_heads": 32, "num_hidden_layers": 32, "max_position_embeddings": 4096,
          "rope_theta": 10000.0}  # fmt: skip
#: The issue's JSON fields: the plan's, and each rule's.
TOP = ["analysis", "params", "provenance", "rotary_dim", "rope_theta", "original_context",
       "target", "factor", "critical_dimension", "critical_base", "rules"]  # fmt: skip
RULE = ["rule", "factor", "rope_theta", "rope_parameters", "rope_scaling",
        "max_position_embeddings", "inv_freq", "attention_factor", "pairs_unchanged",
        "pairs_blended", "pairs_interpolated", "pairs_beyond_trained", "llama_cpp",
        "vllm"]  # fmt: skip


def write(tmp_path: Path, config: dict, name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path)


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["plan", *args, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def test_the_issues_json_with_the_published_numbers(tmp_path, capsys):
    plan = plan_json(capsys, write(tmp_path, LLAMA2), "--target", "16384")
    assert set(TOP) <= set(plan)
    assert (plan["analysis"], plan["params"]) == ("context_plan", {"target": 16384})
    assert (plan["rotary_dim"], plan["rope_theta"], plan["original_context"]) == (128, 1e4, 4096)
    assert (plan["target"], plan["factor"], plan["critical_dimension"]) == (16384, 4.0, 92)
    assert round(plan["critical_base"]) == 71738
    rules = {rule["rule"]: rule for rule in plan["rules"]}
    assert list(rules) == ["none", "linear", "ntk_aware", "dynamic", "yarn", "llama3",
                           "critical_base"]  # fmt: skip
    for rule in rules.values():
        assert set(RULE) <= set(rule)
        assert len(rule["inv_freq"]) == 64
    yarn = rules["yarn"]
    assert [len(yarn[f"pairs_{b}"]) for b in ("unchanged", "blended", "interpolated")] == [
        21, 25, 18
    ]  # fmt: skip
    assert yarn["pairs_interpolated"] == list(range(46, 64))
    assert yarn["attention_factor"] == pytest.approx(0.1 * np.log(4) + 1)
    assert yarn["rope_scaling"] == {"rope_type": "yarn", "factor": 4.0,
                                    "original_max_position_embeddings": 4096}  # fmt: skip
    assert yarn["llama_cpp"] == "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 4096 -c 16384"
    assert yarn["vllm"].startswith("--max-model-len 16384 --hf-overrides '{")
    assert (rules["none"]["factor"], rules["none"]["rope_scaling"]) == (None, None)
    assert len(rules["none"]["pairs_beyond_trained"]) == 18
    assert len(rules["ntk_aware"]["pairs_beyond_trained"]) == 17


def test_for_people_a_table_of_the_rules_and_each_rules_settings(tmp_path, capsys):
    assert main(["plan", write(tmp_path, LLAMA2), "--target", "8192"]) == 0
    out = capsys.readouterr().out
    assert "critical dim     92" in out
    assert "critical base    26784" in out
    assert "not which gives the lowest perplexity" in out
    yarn = next(line for line in out.splitlines() if line.startswith("yarn "))
    assert yarn.split()[4:7] == ["21", "25", "18"]
    assert "--rope-scaling none --rope-freq-base 20221.2616897" in out


def test_a_known_model_and_its_own_rules_notes(capsys):
    plan = plan_json(capsys, "preset:microsoft/Phi-3.5-mini-instruct", "--target", "131072")
    assert plan["provenance"]["config"] == "preset:microsoft/Phi-3.5-mini-instruct"
    assert [r["rule"] for r in plan["rules"]] == ["none", "ntk_aware", "longrope", "critical_base"]
    assert any("rope_factors_long/short" in note for note in plan["notes"])
    assert main(["plan", "preset:meta-llama/Llama-3.1-8B", "--target", "65536"]) == 0
    assert "longrope: no flags" not in capsys.readouterr().out


def test_a_hub_model_read_at_its_commit(fake_hub, capsys):
    fake_hub.add("meta/Llama-2", {"config.json": json.dumps(LLAMA2).encode()})
    plan = plan_json(capsys, "hf:meta/Llama-2", "--target", "12288")
    assert plan["provenance"]["config"].startswith("hf:meta/Llama-2@")
    assert round(plan["critical_base"]) == 47661


def test_a_gguf_file(tmp_path, capsys):
    gguf = ggufs.llama31(tmp_path / "llama.gguf")
    plan = plan_json(capsys, str(gguf), "--target", "65536")
    assert plan["provenance"]["gguf_keys"]
    assert (plan["original_context"], plan["factor"]) == (8192, 8.0)
    llama3 = next(r for r in plan["rules"] if r["rule"] == "llama3")
    assert [len(llama3[f"pairs_{b}"]) for b in ("unchanged", "blended", "interpolated")] == [
        29, 6, 29
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("1.5", "--target is '1.5'; it must be a whole number from 1 to 16,777,216."),
        ("16k", "--target is '16k'"),
        ("0", "target is 0; it must be a whole number from 1 to 16,777,216."),
        (str(2**24 + 1), "target is 16777217"),
        ("-5", "target is -5"),
    ],
)
def test_a_target_not_a_whole_number_from_1_to_2_24_exits_2_on_one_line(
    tmp_path, capsys, target, words
):
    assert main(["plan", write(tmp_path, LLAMA2), "--target", target]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert words in captured.err


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("preset:bigscience/bloom", "has ALiBi attention biases (model_type: bloom), not rotary"),
        ("preset:google-t5/t5-small", "has relative position buckets"),
        ("preset:microsoft/deberta-v3-base", "has relative attention"),
    ],
)
def test_a_model_without_rotary_positions_says_what_it_has(capsys, source, words):
    assert main(["plan", source, "--target", "8192"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("posviz plan: The model has ")
    assert words in err
    assert err.count("\n") == 1


def test_a_refused_config_exits_2(tmp_path, capsys):
    assert main(["plan", write(tmp_path, {**LLAMA2, "rope_theta": -1}), "--target", "8192"]) == 2
    err = capsys.readouterr().err
    assert "rope_theta" in err
    assert err.count("\n") == 1
    assert main(["plan", str(tmp_path / "missing.json"), "--target", "8192"]) == 2
    assert "missing.json is not a file" in capsys.readouterr().err


CONFIGS = {
    "llama-2": (LLAMA2, 16384),
    "llama-3.1": (PRESETS["meta-llama/Llama-3.1-8B"], 131072),
    "phi-3.5": (PRESETS["microsoft/Phi-3.5-mini-instruct"], 65536),
    "gemma-3": (PRESETS["google/gemma-3-4b-it"], 262144),
    "deepseek-v3": (PRESETS["deepseek-ai/DeepSeek-V3"], 16384),
    "pythia": (PRESETS["EleutherAI/gpt-neox-20b"], 8192),
}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("layout", ["v5", "v4"])
def test_every_config_a_plan_writes_reads_back_through_summary_and_diff(
    tmp_path, capsys, name, layout
):
    """`posviz summary` of each rule's config.json gives the plan's frequencies and attention
    factor at N, and `posviz diff` finds it equal to the plan's inv_freq."""
    config, target = CONFIGS[name]
    plan = context_plan(position_scheme(config), target=target)
    for rule in plan.rules:
        path = write(tmp_path, planned_config(config, rule, layout=layout), f"{rule.rule}.json")
        args = ["summary", path, "--context", str(target), "--positions", "16", "--json"]
        assert main(args) == 0, capsys.readouterr().err
        record = json.loads(capsys.readouterr().out)
        assert record["inv_freq"] == rule.inv_freq.tolist()
        assert record["attention_factor"] == rule.attention_factor
        assert record["context"] == target
        assert record.get("warnings") is None  # the planned config contradicts nothing
        dump = tmp_path / f"{rule.rule}.npy"
        np.save(dump, rule.inv_freq)
        assert main(["diff", path, str(dump), "--context", str(target)]) == 0
        capsys.readouterr()


def test_rerun_recomputes_every_number_of_the_json(tmp_path, capsys):
    plan = plan_json(capsys, write(tmp_path, LLAMA2), "--target", "10000")
    export = tmp_path / "plan.json"
    export.write_text(json.dumps(plan))
    assert main(["rerun", str(export)]) == 0
    out = capsys.readouterr().out
    assert "DIFFERS" not in out
    assert "context_plan rules[4].inv_freq[63]" in out
    plan["rules"][4]["pairs_blended"] = [0]
    export.write_text(json.dumps(plan))
    assert main(["rerun", str(export)]) == 1


def test_a_report_of_a_rotary_models_table_plans_its_longer_context(fake_hub, tmp_path, capsys):
    """A table read from a rotary model (here its token embeddings) comes with the model: the
    report plans it at four times its trained context, and reruns it from its config.json."""
    heads = Path(__file__).parents[1] / "data" / "heads" / "llama"
    files = {"config.json": (heads / "config.json").read_bytes(),
             "model.safetensors": heads / "model.safetensors"}  # fmt: skip
    fake_hub.add("test/llama-report", files)
    out = tmp_path / "report.html"
    args = ["report", "hf:test/llama-report", "--tensor", "model.embed_tokens.weight"]
    assert main([*args, "-o", str(out)]) == 0, capsys.readouterr().err
    page = out.read_text()
    assert "<h2>Longer context</h2>" in page
    assert "planned to N = 256 (s = 4;" in page
    capsys.readouterr()
    assert main(["rerun", str(out)]) == 0
    rerun = capsys.readouterr().out
    assert "context_plan unchanged[4]: exported 1, recomputed 1  equal" in rerun  # yarn, 4 pairs
    # One source: the report's table says what `posviz plan --json` says at its target.
    from posviz.recompute import read_export

    (entry,) = [a for a in read_export(out)["analyses"] if a["analysis"] == "context_plan"]
    plan = plan_json(capsys, "hf:test/llama-report", "--target", "256")
    assert entry["params"] == plan["params"]
    assert entry["columns"]["rule"] == [r["rule"] for r in plan["rules"]]
    assert entry["columns"]["rope_theta"] == [r["rope_theta"] for r in plan["rules"]]
    assert entry["columns"]["attention_factor"] == [r["attention_factor"] for r in plan["rules"]]
    for band in ("unchanged", "blended", "interpolated"):
        assert entry["columns"][band] == [len(r[f"pairs_{band}"]) for r in plan["rules"]]
