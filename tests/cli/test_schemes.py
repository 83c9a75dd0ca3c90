"""`posviz summary` of a position scheme from a config.json file: keys and known numbers."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from posviz import __version__
from posviz.cli import main
from posviz.schemes.presets import PRESETS
from tests.refusals import refused

ROTARY_KEYS = [
    "scheme", "rope_type", "rotary_dim", "base", "interleaved", "context", "original_context",
    "attention_factor", "inv_freq", "inv_freq_unscaled", "wavelengths",
    "pairs_beyond_original_context", "stored_inv_freq", "rows", "table", "params", "provenance",
]  # fmt: skip
#: The rotary table's summary: a learned table's, under "table".
TABLE_KEYS = ["analysis", "params", "provenance", "numbers"]


def config_file(tmp_path: Path, config: dict, name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path)


def summary_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["summary", *args, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def test_llama31_config(tmp_path, capsys):
    path = config_file(tmp_path, PRESETS["meta-llama/Llama-3.1-8B"])
    record = summary_json(capsys, path, "--positions", "1024")
    assert set(ROTARY_KEYS) <= set(record)
    assert record["scheme"] == "rotary"
    assert (record["rope_type"], record["rotary_dim"], record["base"]) == ("llama3", 128, 5e5)
    assert (record["context"], record["original_context"]) == (131072, 8192)
    assert {b: len(v["pairs"]) for b, v in record["bands"].items()} == {
        "kept": 29, "blended": 6, "divided": 29
    }  # fmt: skip
    assert record["pairs_beyond_original_context"] == 29
    assert record["bands"]["divided"]["pairs"] == list(range(35, 64))
    assert record["bands"]["divided"]["division"] == [8.0] * 29
    assert record["bands"]["kept"]["division"] == [1.0] * 29
    assert record["stored_inv_freq"] is None
    assert record["rows"] == 1024
    table = record["table"]
    assert list(table) == TABLE_KEYS
    assert table["provenance"]["shape"] == [1024, 128]
    assert table["params"] == {"center": True}
    assert table["numbers"]["k99"] <= 128
    inv = np.array(record["inv_freq_unscaled"])
    np.testing.assert_allclose(inv, 500000.0 ** (-np.arange(0, 128, 2) / 128), rtol=1e-15)
    np.testing.assert_allclose(record["wavelengths"][40], 2 * math.pi / (inv[40] / 8))
    assert record["analysis"] == "scheme_record"
    params = {"context": None, "positions": 1024, "center": True, "check_inv_freq": False}
    assert record["params"] == params
    sha256 = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert record["provenance"] == {"config": path, "sha256": sha256, "posviz_version": __version__}


def test_yarn_and_longrope_context(tmp_path, capsys):
    yarn = dict(PRESETS["deepseek-ai/DeepSeek-V3"])
    yarn["rope_scaling"] = {**yarn["rope_scaling"], "mscale": None, "mscale_all_dim": None}
    yarn["rope_scaling"]["factor"] = 4
    yarn["max_position_embeddings"] = 16384
    record = summary_json(capsys, config_file(tmp_path, yarn), "--positions", "64")
    assert record["attention_factor"] == pytest.approx(0.1 * math.log(4) + 1)
    assert record["logit_multiplier"] == pytest.approx((0.1 * math.log(4) + 1) ** 2)
    assert record["interleaved"] is True
    phi = config_file(tmp_path, PRESETS["microsoft/Phi-3.5-mini-instruct"], "phi.json")
    short = summary_json(capsys, phi, "--context", "4096", "--positions", "64")
    long = summary_json(capsys, phi, "--positions", "64")  # at max_position_embeddings
    factors = PRESETS["microsoft/Phi-3.5-mini-instruct"]["rope_scaling"]
    unscaled = np.array(long["inv_freq_unscaled"])
    np.testing.assert_allclose(long["inv_freq"], unscaled / factors["long_factor"])
    np.testing.assert_allclose(short["inv_freq"], unscaled / factors["short_factor"])


def test_warnings_and_layer_types(tmp_path, capsys):
    config = {**PRESETS["deepseek-ai/DeepSeek-V3"], "max_position_embeddings": 32768}
    record = summary_json(capsys, config_file(tmp_path, config), "--positions", "64")
    assert "differs from max_position_embeddings" in record["warnings"][0]
    gemma = config_file(tmp_path, PRESETS["google/gemma-3-4b-it"], "gemma.json")
    record = summary_json(capsys, gemma, "--positions", "64")
    assert record["layer_type"] == "full_attention"
    assert record["other_layer_types"]["sliding_attention"]["base"] == 10000.0


ROPE_DATA = Path(__file__).parents[1] / "data" / "rope"
LAYER_KEYS = ["layer", "rope", "rope_type", "base", "rotary_dim", "sliding_window", "layer_type",
              "mrope_section", "attention_temperature"]  # fmt: skip


def test_layers_of_a_config_saved_by_transformers_5(capsys):
    """issue 33's JSON: one object per layer; inv_freq only where it differs from the top."""
    gemma = summary_json(capsys, str(ROPE_DATA / "v5" / "gemma-3-4b.json"), "--positions", "64")
    layers = gemma["layers"]
    assert len(layers) == 34
    assert all(set(LAYER_KEYS) <= set(layer) for layer in layers)
    full, sliding = layers[5], layers[0]
    assert list(full)[:5] == LAYER_KEYS[:5]
    assert (full["layer_type"], full["rope_type"], full["base"], full["sliding_window"]) == (
        "full_attention", "linear", 1e6, None)  # fmt: skip
    assert "inv_freq" not in full  # the top-level rule's
    assert (sliding["rope_type"], sliding["base"], sliding["sliding_window"]) == (
        "default", 1e4, 1024)  # fmt: skip
    np.testing.assert_allclose(sliding["inv_freq"], 1e4 ** (-np.arange(0, 256, 2) / 256))
    llama4 = summary_json(
        capsys, str(ROPE_DATA / "v5" / "llama-4-scout-text.json"), "--positions", "64"
    )
    nope = llama4["layers"][3]
    assert (nope["rope"], nope["rope_type"], nope["base"], nope["rotary_dim"]) == (
        False,
        None,
        None,
        None,
    )
    assert nope["attention_temperature"]["floor_scale"] == 8192
    assert llama4["layers"][0]["attention_temperature"] is None
    qwen = summary_json(capsys, str(ROPE_DATA / "v5" / "qwen2-vl-7b.json"), "--positions", "64")
    mrope = qwen["layers"][0]["mrope_section"]
    assert (mrope["section"], mrope["interleaved"]) == ([16, 24, 24], False)
    assert mrope["pairs"]["width"] == list(range(40, 64))


def test_deepseek_logit_multiplier_names_its_attention_class(tmp_path, capsys):
    path = config_file(tmp_path, PRESETS["deepseek-ai/DeepSeek-V3"])
    record = summary_json(capsys, path, "--positions", "64")
    assert round(record["logit_multiplier"], 6) == 1.873854
    assert "DeepseekV3Attention" in record["logit_multiplier_source"]


def test_alibi_t5_deberta_and_words(tmp_path, capsys):
    record = summary_json(capsys, config_file(tmp_path, PRESETS["bigscience/bloom"]))
    assert (record["scheme"], record["n_heads"], len(record["slopes"])) == ("alibi", 112, 112)
    assert record["slopes"][64] == pytest.approx(2 ** (-1 / 16))  # 2^(-4·1/64)
    t5 = summary_json(capsys, config_file(tmp_path, PRESETS["google-t5/t5-small"], "t5.json"))
    assert (t5["num_buckets"], t5["max_distance"], t5["n_heads"]) == (32, 128, 8)
    assert t5["relative_positions"][0] == -128
    assert len(t5["relative_positions"]) == 257
    assert t5["buckets"]["encoder"][128 + 20] == 26
    assert t5["buckets"]["decoder"][128 - 20] == 17
    assert (t5["tensors"], t5["bias"]) == ([], {})
    deberta = config_file(tmp_path, PRESETS["microsoft/deberta-v3-base"], "deberta.json")
    record = summary_json(capsys, deberta)
    assert (record["scheme"], record["span"], record["absolute_table_too"]) == (
        "relative_table", 256, False)  # fmt: skip
    marian = {"model_type": "marian", "d_model": 512, "max_position_embeddings": 512}
    record = summary_json(capsys, config_file(tmp_path, marian, "marian.json"))
    assert (record["scheme"], record["rows"]) == ("sinusoidal", 512)
    assert record["table"]["provenance"]["shape"] == [512, 512]
    mamba = summary_json(capsys, config_file(tmp_path, {"model_type": "mamba"}, "m.json"))
    assert mamba["scheme"] == "none"
    assert "no position encoding" in mamba["description"]


@pytest.mark.parametrize(
    ("settings", "rows", "known"),
    [
        # DeBERTa-v3: bucket 200 (row 456) is offsets 278 … 280, the last row 506 and beyond,
        # row 0 only offsets of -512 and below.
        ({}, 512, {456: [278, 280], 511: [506, None], 0: [None, -512], 256 + 44: [44, 44]}),
        # No log buckets (DebertaV2Config's default): rows are offsets within ±512.
        ({"position_buckets": -1}, 1024, {1: [-511, -511], 1023: [511, None], 0: [None, -512]}),
    ],
    ids=["v3", "no-buckets"],
)
def test_deberta_summary_carries_each_rows_offsets_and_reruns(
    tmp_path, capsys, settings, rows, known
):
    config = {**PRESETS["microsoft/deberta-v3-base"], **settings}
    path = config_file(tmp_path, config, "deberta.json")
    record = summary_json(capsys, path)
    assert len(record["row_offsets"]) == rows
    assert {r: record["row_offsets"][r] for r in known} == known
    assert record["offset"] == "query − key"
    assert record["rows_never_reached"] == 0
    saved = tmp_path / "deberta-summary.json"
    saved.write_text(json.dumps(record))
    assert main(["rerun", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "row_offsets" in out
    assert "DIFFERS" not in out


def test_text_output(tmp_path, capsys):
    assert main(["summary", config_file(tmp_path, PRESETS["meta-llama/Llama-3.1-8B"])]) == 0
    out = capsys.readouterr().out
    assert "llama3" in out
    assert "64 values" in out


def test_text_prints_the_provenance_whole_however_long(tmp_path, capsys):
    # A provenance over 200 characters was cut with "…", its sha256 (what a reader cites) too.
    folder = tmp_path / ("a-folder-with-a-long-name-" * 8)
    folder.mkdir()
    path = config_file(folder, PRESETS["meta-llama/Llama-3.1-8B"])
    assert main(["summary", path]) == 0
    out = capsys.readouterr().out
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert f"\n  config                        {path}\n" in out
    assert f"\n  sha256                        {digest}\n" in out


@pytest.mark.parametrize("name", PRESETS)
def test_every_known_model_is_summarised_offline_and_its_text_says_no_none(capsys, name):
    # Formerly: `posviz summary preset:NAME` looked for a file (posviz plan and diff took the
    # name), and the text printed Python's None for what config.json leaves unset.
    assert main(["summary", f"preset:{name}"]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\b(None|null|nan)\b", out), out
    assert "{'" not in out  # no Python dict shown as it prints
    record = summary_json(capsys, f"preset:{name}")
    assert record["provenance"]["config"] == f"preset:{name}"


def test_a_name_that_is_no_known_model_is_refused_with_the_names(capsys):
    for command in (["summary"], ["plan", "--target", "65536"]):
        line = refused(capsys, command[0], "preset:Llama-3.1-8B", *command[1:])
        assert "'Llama-3.1-8B' is not a model posviz has a config.json excerpt of" in line
        assert line.endswith(f"it has {', '.join(PRESETS)}.")


def test_text_says_what_an_unset_value_means(capsys):
    said = {}
    for name in ("mistralai/Mistral-7B-v0.1", "bigscience/bloom", "microsoft/deberta-v3-base"):
        assert main(["summary", f"preset:{name}"]) == 0
        for line in capsys.readouterr().out.splitlines():
            key, _, value = line.partition(" ")
            said.setdefault(key, []).append(value.strip())
    assert said["rotating_pairs"] == ["all"]
    assert said["original_context"] == ["not given (config.json names no pre-training context)"]
    assert said["stored_inv_freq"] == ["not read (--check-inv-freq compares it)"]
    assert said["context"][1] == "not in config.json (max_position_embeddings)"  # ALiBi's
    assert (
        said["params"][0] == "context default, positions default, center True, check_inv_freq False"
    )
    assert said["layers"] == [
        "32 layers: 32 RoPE; full_attention: 32; a sliding window of 4,096 keys in 32."
    ]
    assert said["row_offsets"] == [
        "-512 and beyond; -511 … -506; -505 … -500; -499 … -495; … 512 rows"
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"rope_theta": -1, "hidden_size": 64, "num_attention_heads": 4}', "negative"),
        (b'{"rope_theta": NaN, "hidden_size": 64, "num_attention_heads": 4}', "finite"),
        (b'{"rotary_dim": 63, "n_embd": 64, "n_head": 1}', "even"),
        (b'{"model_type": "bloom", "n_head": 0}', "positive whole"),
        (b"[" * 5000 + b"]" * 5000, "deeper than"),
        (b"{", "not valid JSON"),
        # issue 37: sizes and nonsense refused with the key, the value and the limit.
        (b'{"model_type": "llama", "head_dim": 1000000, "rope_theta": 1e4}',
         "1,000,000 columns (head_dim / rotary_dim / qk_rope_head_dim): its table of 8,192 "
         "positions would take 61.0 GiB, above the 256 MiB"),
        (b'{"qk_rope_head_dim": 200000, "rope_theta": 1e4}', "at most 4,096 columns"),
        (b'{"rope_theta": 1e4, "head_dim": 64, "max_position_embeddings": 1e300}',
         "max_position_embeddings in config.json is 1e+300; posviz takes at most 2,147,483,648"),
        (b'{"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": '
         b'"linear", "factor": 1e308}}', "factor in config.json is 1e+308; posviz takes at most"),
        (b'{"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": '
         b'"yarn", "factor": 4, "beta_fast": 1, "beta_slow": 32}}',
         "beta_fast (1) must be above beta_slow (32)"),
        (b'{"head_dim": 64, "rope_theta": 1' + b"0" * 4000 + b"}",
         "rope_theta in config.json is 1000"),
        (b'{"head_dim": 64, "rope_scaling": {"rope_type": [1]}}',
         "rope_type in config.json is [1]"),
        (b'{"head_dim": 64, "rope_theta": 1e4, "num_hidden_layers": 1e9}',
         "num_hidden_layers in config.json is 1,000,000,000; posviz takes at most 65,536"),
    ],
)  # fmt: skip
def test_bad_configs_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    assert main(["summary", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_a_50_mb_config_is_refused_before_reading(tmp_path, capsys):
    path = tmp_path / "config.json"
    with path.open("wb") as f:
        f.truncate(50 * 10**6)
    assert main(["summary", str(path)]) == 2
    assert "50,000,000 bytes" in capsys.readouterr().err
