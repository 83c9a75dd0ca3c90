"""Configs and checkpoints that would size an allocation, or are not what they claim: each is
refused before anything is built, by the key that says so, as one line with exit 2 (issue 37's
findings, made again here from a few bytes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from posviz import cli
from tests.refusals import refused

T5 = {
    "model_type": "t5",
    "d_model": 64,
    "num_heads": 8,
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
}
LLAMA = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}
BIAS = "encoder.block.{}.layer.0.SelfAttention.relative_attention_bias.weight"


def config(tmp_path: Path, data: dict | str) -> str:
    path = tmp_path / "config.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def checkpoint(tmp_path: Path, tensors: dict[str, np.ndarray], settings: dict) -> str:
    config(tmp_path, settings)
    save_file(tensors, tmp_path / "model.safetensors")
    return str(tmp_path / "model.safetensors")


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        # ALiBi: 10**7 heads cost 866 MB and printed 209 MB; 10**9 exited 1 (MemoryError).
        ({"model_type": "bloom", "n_head": 10_000_000}, "n_head in config.json is 10000000"),
        ({"model_type": "bloom", "n_head": 10**9}, "must be a whole number from 1 to 4,096"),
        # T5's distance: 10**9 asked for 14.9 GiB.
        ({**T5, "relative_attention_max_distance": 10**6}, "relative_attention_max_distance"),
        ({**T5, "relative_attention_max_distance": 10**9}, "from 1 to 65,536"),
        ({**T5, "relative_attention_num_buckets": 10**7}, "relative_attention_num_buckets"),
        # Tracebacks before: an unhashable rope_type, a rope_theta no float holds.
        (
            {**LLAMA, "rope_scaling": {"rope_type": [1], "factor": 2.0}},
            "rope_type in config.json is [1]; expected a name",
        ),
        (
            json.dumps(LLAMA)[:-1] + ', "rope_theta": 1' + "0" * 4000 + "}",
            "rope_theta in config.json is 1000000000",
        ),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested deeper than 32 levels"),
    ],
    ids=[
        "alibi-1e7",
        "alibi-1e9",
        "t5-distance-1e6",
        "t5-distance-1e9",
        "t5-buckets",
        "rope_type-list",
        "rope_theta-4000-digits",
        "deep",
    ],
)
def test_a_config_past_its_bounds(tmp_path, capsys, settings, says):
    data = settings if isinstance(settings, str) else {"max_position_embeddings": 2048, **settings}
    line = refused(capsys, "summary", config(tmp_path, data), "--json")
    assert says in line


def test_t5_bias_tensors_are_checked_against_the_config(tmp_path, capsys):
    # A 4 x 8 tensor where config.json says 32 buckets exited 1 with an IndexError.
    small = {BIAS.format(0): np.zeros((4, 8), np.float32)}
    line = refused(capsys, "summary", checkpoint(tmp_path, small, T5), "--json")
    assert "has shape (4, 8); expected (32, 8)" in line
    # 32 x 100000 printed 129 MB.
    wide = {BIAS.format(0): np.zeros((32, 100_000), np.float32)}
    line = refused(capsys, "summary", checkpoint(tmp_path, wide, T5), "--json")
    assert "has shape (32, 100000)" in line


def test_thousands_of_bias_tensors_are_refused_before_any_is_read(tmp_path, capsys):
    # 3,000 small tensors in 1.8 MB reached 3.6 GB.
    many = {BIAS.format(i): np.zeros((32, 8), np.float16) for i in range(3000)}
    line = refused(capsys, "summary", checkpoint(tmp_path, many, T5), "--json")
    assert "holds 3,000 relative_attention_bias tensors; posviz reads at most 256" in line


def test_a_memory_error_is_a_message_too(tmp_path, capsys, monkeypatch):
    def exhausted(args):
        raise MemoryError

    monkeypatch.setattr(cli, "_summary", exhausted)
    line = refused(capsys, "summary", config(tmp_path, T5))
    assert "more memory than the machine has (the limit per result is 256 MiB)" in line
