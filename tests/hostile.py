"""Issue 45's hostile inputs, each made again from a few lines: GGUF metadata and rope tensors
that would crash or size the work, headers that would take minutes to parse, heads configs of
the wrong type or size, weights holding NaN, names holding escape codes.

The small inputs are committed in tests/data/hostile/ (GGUF files of a few kB, each heads case
as the changes it makes to a fixture's config.json); `python -m tests.hostile FOLDER` writes
them again (tests/cli/test_hostile.py checks the two are the same bytes), and with ``--big``
the large ones too, which the tests make at run time: a 64 MiB rope tensor, 64 MiB headers, a
21 MB checkpoint of 1,024 heads (written sparse).
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from safetensors.numpy import load_file, save_file

from tests import ROOT, ggufs
from tests.fakehub import sparse_checkpoint

HOSTILE = ROOT / "tests" / "data" / "hostile"
HEADS = ROOT / "tests" / "data" / "heads"

#: GGUF metadata that crashed the scheme reader (finding 2) or misread it (finding 11): each a
#: Llama-shaped file with these keys changed, and a word its refusal says.
GGUF_METADATA: dict[str, tuple[dict[str, Any], str]] = {
    "key_length_0": ({"key_length": 0}, "attention.key_length is 0"),
    "embedding_below_heads": ({"embedding_length": 16}, "embedding_length 16 is below"),
    "head_count_1e9": ({"head_count": 10**9}, "head_count is 1,000,000,000"),
    "bloom_head_count_1e6": ({"arch": "bloom", "head_count": 10**6}, "head_count is 1,000,000"),
    "original_context_nan": ({"original": float("nan")}, "original_context_length is nan"),
    "original_context_inf": ({"original": float("inf")}, "original_context_length is inf"),
    "rope_freqs_one_value": ({"rope_freqs": 1}, "rope_freqs.weight holds 1 value"),
}

#: Heads configs of the wrong type, shape or size (findings 4, 5, 10): fixture family, the
#: changes to its config.json, a word the refusal says.
HEADS_CONFIGS: dict[str, tuple[str, dict[str, Any], str]] = {
    "n_head_not_dividing": ("gpt2", {"n_head": 3}, "n_embd 32 is not a multiple of n_head 3"),
    "n_head_above_hidden": ("gpt2", {"n_head": 64}, "n_embd 32 is not a multiple of n_head 64"),
    "kv_heads_text": ("llama", {"num_key_value_heads": "abc"}, "num_key_value_heads"),
    "kv_heads_list": ("llama", {"num_key_value_heads": [2]}, "num_key_value_heads"),
    "kv_heads_nan": ("llama", {"num_key_value_heads": float("nan")}, "num_key_value_heads"),
    "epsilon_text": ("gpt2", {"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon"),
    "epsilon_list": ("llama", {"rms_norm_eps": [1e-6]}, "rms_norm_eps"),
    "query_pre_attn_scalar_text": ("gemma2", {"query_pre_attn_scalar": "abc"},
                                   "query_pre_attn_scalar"),
    "pad_token_id_null": ("roberta", {"pad_token_id": None}, "pad_token_id"),
    "pad_token_id_text": ("roberta", {"pad_token_id": "1"}, "pad_token_id"),
    "pad_token_id_negative": ("roberta", {"pad_token_id": -5}, "pad_token_id"),
    "attention_types_repeat_text": ("gpt_neo", {"attention_types": [[["global", "local"], "x"]]},
                                    "attention_types"),
    "attention_types_repeat_1e8": ("gpt_neo",
                                   {"attention_types": [[["global", "local"], 10**8]]},
                                   "attention_types"),
}  # fmt: skip


def metadata_gguf(path: Path, changes: dict[str, Any]) -> Path:
    """A Llama-shaped GGUF (BLOOM's when ``arch`` says so) with `changes` to its keys:
    key_length, embedding_length, head_count, an original context (a float, as a hostile file
    may store it) or a rope_freqs tensor of that many values."""
    arch = changes.get("arch", "llama")

    def keys(w: gguf.GGUFWriter) -> None:
        w.add_context_length(4096)
        w.add_embedding_length(changes.get("embedding_length", 4096))
        w.add_block_count(2)
        w.add_head_count(changes.get("head_count", 32))
        if "key_length" in changes:
            w.add_key_length(changes["key_length"])
        w.add_rope_dimension_count(128)
        w.add_rope_freq_base(10000.0)
        if "original" in changes:
            w.add_float32(f"{arch}.rope.scaling.original_context_length", changes["original"])

    tensors: dict[str, Any] = {"token_embd.weight": np.ones((16, 64), np.float32)}
    if "rope_freqs" in changes:
        tensors["rope_freqs.weight"] = np.ones(changes["rope_freqs"], np.float32)
    return ggufs.write(path, arch, keys=keys, tensors=tensors)


def rope_tensor_gguf(path: Path, n_values: int, *, longrope: bool = False) -> Path:
    """A Llama GGUF whose rope_freqs (or a Phi-3 one whose LongRoPE factors) hold `n_values`
    values where its rotary width gives 64 (Phi-3: 48) pairs: 2**24 values are 64 MiB."""
    if not longrope:
        return metadata_gguf(path, {"rope_freqs": n_values})
    values = np.full(n_values, 1.5, np.float32)

    def keys(w: gguf.GGUFWriter) -> None:
        w.add_context_length(131072)
        w.add_rope_scaling_orig_ctx_len(4096)
        w.add_embedding_length(3072)
        w.add_head_count(32)
        w.add_rope_dimension_count(96)
        w.add_rope_freq_base(10000.0)

    tensors = {
        "token_embd.weight": np.ones((16, 64), dtype=np.float32),
        "rope_factors_long.weight": values,
        "rope_factors_short.weight": values,
    }
    return ggufs.write(path, "phi3", tensors=tensors, keys=keys)


def nested_arrays_gguf(path: Path, n: int = 5_000_000) -> Path:
    """A header of one key holding `n` one-element arrays (13 bytes each: 5 million are 65 MB,
    within the 64 MiB header limit)."""
    body = ggufs.string("junk") + struct.pack("<IIQ", 9, 9, n) + struct.pack("<IQB", 0, 1, 7) * n
    path.write_bytes(ggufs.padded(ggufs.header(0, 1) + body))
    return path


def empty_strings_gguf(path: Path, n: int = 8_000_000) -> Path:
    """A header of one key holding `n` empty strings (8 bytes each)."""
    body = ggufs.string("junk") + struct.pack("<IIQ", 9, 8, n) + bytes(8 * n)
    path.write_bytes(ggufs.padded(ggufs.header(0, 1) + body))
    return path


def heads_checkpoint(folder: Path, family: str, changes: dict[str, Any]) -> Path:
    """`family`'s fixture (tests/data/heads) with `changes` to its config.json, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    config = json.loads((HEADS / family / "config.json").read_text()) | changes
    (folder / "config.json").write_text(json.dumps(config))
    shutil.copy(HEADS / family / "model.safetensors", folder / "model.safetensors")
    return folder / "model.safetensors"


def poisoned_checkpoint(folder: Path, family: str, tensor: str, value: float) -> Path:
    """`family`'s fixture with element 0 of `tensor` (a name's suffix) set to `value`."""
    path = heads_checkpoint(folder, family, {})
    tensors = load_file(path)
    (name,) = [n for n in tensors if n.endswith(tensor)]
    tensors[name].reshape(-1)[0] = value
    save_file(tensors, path)
    return path


def wide_heads_checkpoint(folder: Path, heads: int = 1024, positions: int = 2048) -> Path:
    """A GPT-2 of `heads` heads of width 1 over `positions` positions (1,024 over 2,048: a
    21 MB checkpoint), written sparse: its weights are zeros the disk does not hold."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "gpt2", "n_embd": heads, "n_head": heads, "n_layer": 1,
              "n_positions": positions, "layer_norm_epsilon": 1e-5}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    filler = {
        "transformer.h.0.attn.c_attn.weight": (heads, 3 * heads),
        "transformer.h.0.attn.c_attn.bias": (3 * heads,),
        "transformer.h.0.ln_1.weight": (heads,),
        "transformer.h.0.ln_1.bias": (heads,),
        "transformer.wpe.weight": (positions, heads),
    }
    return sparse_checkpoint(folder / "model.safetensors", {}, filler)


def escaped_name_checkpoint(path: Path) -> Path:
    """A safetensors table whose one tensor's name clears the screen and rings the bell."""
    table = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    save_file({"wpe\x1b[2J\x1b]0;owned\x07": table}, path)
    return path


def write_small(folder: Path) -> None:
    """The inputs committed in tests/data/hostile/: each GGUF_METADATA case as a file, each
    HEADS_CONFIGS case as the changes it makes (the tests copy the fixture's weights)."""
    (folder / "gguf").mkdir(parents=True, exist_ok=True)
    for name, (changes, _) in GGUF_METADATA.items():
        metadata_gguf(folder / "gguf" / f"{name}.gguf", changes)
    cases = {name: {"family": f, "config": c} for name, (f, c, _) in HEADS_CONFIGS.items()}
    (folder / "heads.json").write_text(json.dumps(cases, indent=1) + "\n")


def write_big(folder: Path) -> None:
    """The inputs the tests make at run time (a few hundred MB in all)."""
    folder.mkdir(parents=True, exist_ok=True)
    rope_tensor_gguf(folder / "rope_freqs_64mib.gguf", 2**24)
    rope_tensor_gguf(folder / "longrope_64mib.gguf", 2**23, longrope=True)
    nested_arrays_gguf(folder / "nested_arrays.gguf")
    empty_strings_gguf(folder / "empty_strings.gguf")
    wide_heads_checkpoint(folder / "wide_heads")


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HOSTILE
    write_small(out)
    if "--big" in sys.argv:
        write_big(out / "big")
