"""Position schemes from the Hub by name, against a fake Hub with repos shaped like real models:
only what a scheme needs travels (config.json for rotary and ALiBi; T5's bias tensors;
DeBERTa's relative table; a stored inv_freq buffer when asked)."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from safetensors.numpy import save

from posviz.cli import main
from posviz.models import remote
from posviz.schemes.alibi import alibi_slopes
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.source import HubRef
from tests.fakehub import FakeHub

RNG = np.random.default_rng(0)
#: Weights that must never travel for rotary and ALiBi: 4 MB.
BIG = {"model.embed_tokens.weight": np.zeros((4096, 256), np.float32)}
ROTARY = [
    "meta-llama/Llama-3.1-8B",  # llama3
    "deepseek-ai/DeepSeek-V3",  # yarn
    "microsoft/Phi-3.5-mini-instruct",  # longrope
    "google/gemma-3-4b-it",  # linear + default per layer type
    "mistralai/Mistral-7B-v0.1",  # default
    "EleutherAI/gpt-neox-20b",  # rotary_pct
    "EleutherAI/gpt-j-6b",  # rotary_dim
]
DYNAMIC = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "max_position_embeddings": 4096,
    "rope_scaling": {"type": "dynamic", "factor": 2.0},
}


def add_repo(fake_hub: FakeHub, name: str, config: dict, tensors: dict) -> tuple[bytes, bytes]:
    config_bytes = json.dumps(config, indent=2).encode()
    weights = save(tensors)
    fake_hub.add(name, {"config.json": config_bytes, "model.safetensors": weights})
    return config_bytes, weights


def summary(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["summary", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def fetched(fake_hub: FakeHub) -> dict[str, int]:
    """Body bytes sent per kind of request: the revision API, config.json, weights."""
    out = {"api": 0, "config.json": 0, "model.safetensors": 0}
    for sent in fake_hub.log:
        key = "api" if sent.path.startswith("/api/") else sent.path.rsplit("/", 1)[-1]
        out[key] += sent.nbytes
    return out


@pytest.mark.parametrize("name", [*ROTARY, "dynamic"])
def test_rotary_only_config_json_travels(fake_hub, capsys, name):
    config = DYNAMIC if name == "dynamic" else PRESETS[name]
    config_bytes, _ = add_repo(fake_hub, "acme/rope", config, BIG)
    record = summary(capsys, "hf:acme/rope", "--positions", "256")
    assert record["scheme"] == "rotary"
    assert record["rows"] == 256
    sent = fetched(fake_hub)
    assert sent["config.json"] == len(config_bytes)
    assert sent["model.safetensors"] == 0
    commit = fake_hub.repos["acme/rope", "main"].commit
    assert record["provenance"]["config"] == f"hf:acme/rope@{commit}"
    assert record["provenance"]["sha256"] == hashlib.sha256(config_bytes).hexdigest()


def test_llama31_by_name_equals_its_config_file(fake_hub, capsys, tmp_path):
    add_repo(fake_hub, "meta-llama/Llama-3.1-8B", PRESETS["meta-llama/Llama-3.1-8B"], BIG)
    remote = summary(capsys, "hf:meta-llama/Llama-3.1-8B")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PRESETS["meta-llama/Llama-3.1-8B"]))
    local = summary(capsys, str(path))
    assert (
        remote["table"]["provenance"]["commit"]
        == fake_hub.repos["meta-llama/Llama-3.1-8B", "main"].commit
    )  # the rotary table names the commit its config.json was read at
    for record in (remote, local):  # where they came from differs, nothing else
        record.pop("provenance")
        provenance = record["table"].pop("provenance")
        record["table"]["sha256"] = provenance["sha256"]
    assert remote == local
    assert {b: len(v["pairs"]) for b, v in remote["bands"].items()} == {
        "kept": 29, "blended": 6, "divided": 29
    }  # fmt: skip


@pytest.mark.parametrize("n_heads", [16, 112])
def test_alibi_only_config_json_travels(fake_hub, capsys, n_heads):
    config = {"model_type": "bloom", "hidden_size": 64 * n_heads, "n_head": n_heads}
    config_bytes, _ = add_repo(fake_hub, "bigscience/bloom-x", config, BIG)
    record = summary(capsys, "hf:bigscience/bloom-x")
    assert (record["scheme"], record["n_heads"]) == ("alibi", n_heads)
    np.testing.assert_allclose(record["slopes"], alibi_slopes(n_heads), rtol=1e-15)
    shortcut = 2.0 ** (-8 * np.arange(1, n_heads + 1) / n_heads)
    assert np.allclose(record["slopes"], shortcut) == (n_heads == 16)
    assert fetched(fake_hub)["config.json"] == len(config_bytes)
    assert fetched(fake_hub)["model.safetensors"] == 0


def t5_tensors() -> dict[str, np.ndarray]:
    bias = RNG.standard_normal((32, 8)).astype(np.float32)
    return {
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": bias,
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": -bias,
        "shared.weight": np.zeros((4096, 256), np.float32),
    }


def test_t5_reads_the_two_bias_tensors(fake_hub, capsys):
    tensors = t5_tensors()
    config_bytes, weights = add_repo(fake_hub, "google-t5/t5-small", PRESETS["google-t5/t5-small"],
                                     tensors)  # fmt: skip
    record = summary(capsys, "hf:google-t5/t5-small")
    encoder, decoder = sorted(n for n in tensors if "relative" in n)[::-1]
    assert record["tensors"] == sorted([encoder, decoder])
    bias = np.array(record["bias"][encoder])
    assert bias.shape == (8, 257)
    # Distance +20 (key 20 ahead) is encoder bucket 26; −20 is decoder bucket 17.
    np.testing.assert_allclose(bias[:, 128 + 20], tensors[encoder][26], rtol=1e-7)
    decoder_bias = np.array(record["bias"][decoder])
    np.testing.assert_allclose(decoder_bias[:, 128 - 20], tensors[decoder][17], rtol=1e-7)
    np.testing.assert_allclose(decoder_bias[:, 128 + 5], tensors[decoder][0], rtol=1e-7)
    header = 8 + int.from_bytes(weights[:8], "little")
    sent = fetched(fake_hub)
    assert sent["config.json"] == len(config_bytes)
    assert sent["model.safetensors"] == header + 2 * 32 * 8 * 4  # length, header, 2 biases


def test_deberta_v3_relative_table(fake_hub, capsys):
    rel = RNG.standard_normal((512, 64)).astype(np.float32)
    tensors = {"deberta.encoder.rel_embeddings.weight": rel, **BIG}
    _, weights = add_repo(fake_hub, "microsoft/deberta-v3-base",
                          PRESETS["microsoft/deberta-v3-base"], tensors)  # fmt: skip
    record = summary(capsys, "hf:microsoft/deberta-v3-base")
    assert record["scheme"] == "relative_table"
    assert record["relative_positions"] == [-256, 255]
    assert record["table"]["provenance"]["shape"] == [512, 64]
    assert record["table"]["provenance"]["tensor"] == "deberta.encoder.rel_embeddings.weight"
    header = 8 + int.from_bytes(weights[:8], "little")
    assert fetched(fake_hub)["model.safetensors"] == header + rel.nbytes


@pytest.mark.parametrize(("wrong", "matches"), [(False, True), (True, False)])
def test_a_stored_inv_freq_checked(fake_hub, capsys, wrong, matches):
    config = PRESETS["mistralai/Mistral-7B-v0.1"]
    inv_freq = (10000.0 ** (-np.arange(0, 128, 2) / 128)).astype(np.float32)
    if wrong:  # meta-device initialisation left garbage in an old conversion
        inv_freq = inv_freq[::-1].copy()
    name = "model.layers.0.self_attn.rotary_emb.inv_freq"
    _, weights = add_repo(fake_hub, "acme/old-mistral", config, {name: inv_freq, **BIG})
    plain = summary(capsys, "hf:acme/old-mistral", "--positions", "64")
    assert plain["stored_inv_freq"] is None
    assert fetched(fake_hub)["model.safetensors"] == 0
    record = summary(capsys, "hf:acme/old-mistral", "--positions", "64", "--check-inv-freq")
    stored = record["stored_inv_freq"]
    assert (stored["tensor"], stored["matches"]) == (name, matches)
    if matches:
        assert stored["max_relative_difference"] < 1e-7
    else:
        assert stored["max_relative_difference"] == pytest.approx(10000 ** (126 / 128) - 1)
    header = 8 + int.from_bytes(weights[:8], "little")
    assert fetched(fake_hub)["model.safetensors"] == header + 64 * 4


def test_a_learned_table_still_summarised_as_before(fake_hub, capsys):
    wpe = RNG.standard_normal((64, 16)).astype(np.float32)
    add_repo(fake_hub, "acme/gpt2", {"model_type": "gpt2", "n_positions": 64},
             {"transformer.wpe.weight": wpe})  # fmt: skip
    record = summary(capsys, "hf:acme/gpt2")
    assert record["scheme"] == "learned_absolute"
    assert record["provenance"]["shape"] == [64, 16]
    # The revision and config.json are asked for once, then the header and the table.
    assert len([s for s in fake_hub.log if s.path.startswith("/api/")]) == 1
    assert len(fake_hub.requests_for("config.json")) == 1


def test_bad_configs_on_the_hub_exit_2(fake_hub, capsys):
    add_repo(fake_hub, "acme/bad", {"model_type": "llama", "rope_theta": math.inf}, BIG)
    fake_hub.repos["acme/bad", "main"].files["config.json"] = b'{"rope_theta": -Infinity}'
    assert main(["summary", "hf:acme/bad"]) == 2
    assert "finite number" in capsys.readouterr().err
    fake_hub.add("acme/deep", {"config.json": b"[" * 100 + b"]" * 100})
    assert main(["summary", "hf:acme/deep"]) == 2
    assert "deeper than" in capsys.readouterr().err
    fake_hub.add("acme/noconfig", {"model.safetensors": save(BIG)})
    opened = remote.open_config(HubRef("acme/noconfig"))
    assert position_scheme(opened.config).kind == "learned_absolute"


def test_umt5_has_one_bias_per_layer(fake_hub, capsys):
    config = {**PRESETS["google-t5/t5-small"], "model_type": "umt5"}
    names = [
        f"{stack}.block.{layer}.layer.0.SelfAttention.relative_attention_bias.weight"
        for stack in ("encoder", "decoder")
        for layer in (0, 1)
    ]
    tensors = {name: np.full((32, 8), i, np.float32) for i, name in enumerate(names)}
    add_repo(fake_hub, "google/umt5-x", config, tensors)
    record = summary(capsys, "hf:google/umt5-x")
    assert record["per_layer"] is True
    assert record["tensors"] == sorted(names)
    for i, name in enumerate(names):
        assert np.all(np.array(record["bias"][name]) == i)
    # The decoder's layers bucket causally: keys ahead share bucket 0 (position +5 -> 0).
    assert record["buckets"][names[2]][128 + 5] == 0
    assert record["buckets"][names[0]][128 + 5] == 21
