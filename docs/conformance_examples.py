"""The files docs/conformance.md compares: config.json excerpts, GGUF files as llama.cpp's
converter writes them (one right, one from before llama3 factors were converted), and runtime
dumps, three of them deliberately wrong.

    python docs/conformance_examples.py FOLDER

needs posviz (its config.json excerpts; numpy and gguf); each dump is made the way a runtime makes
it (float32 frequencies, float32 angles), so the right ones agree within float32's rounding.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import gguf
import numpy as np

from posviz.schemes.presets import PRESETS

#: config.json excerpts built into posviz (the position keys of the models' config.json).
LLAMA31 = PRESETS["meta-llama/Llama-3.1-8B"]
PHI35 = PRESETS["microsoft/Phi-3.5-mini-instruct"]
PHI35_SHORT = PHI35["rope_scaling"]["short_factor"]
PHI35_LONG = PHI35["rope_scaling"]["long_factor"]


def llama3_factors(theta: float, dim: int, scaling: dict) -> np.ndarray:
    """rope_freqs.weight as convert_hf_to_gguf.py computes it (LlamaModel)."""
    freqs = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    out = []
    for freq in freqs:
        wavelength = 2 * math.pi / freq
        if wavelength < original / high:
            out.append(1.0)
        elif wavelength > original / low:
            out.append(factor)
        else:
            smooth = (original / wavelength - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def llama_gguf(path: Path, *, with_factors: bool) -> None:
    """Llama-3.1-8B's position metadata as llama.cpp's converter writes it (tensors omitted:
    a 2 x 2 token table stands for the weights)."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(131072)
    w.add_embedding_length(4096)
    w.add_block_count(32)
    w.add_head_count(32)
    w.add_head_count_kv(8)
    w.add_rope_dimension_count(128)
    w.add_rope_freq_base(500000.0)
    w.add_tensor("token_embd.weight", np.zeros((2, 2), np.float32))
    if with_factors:
        w.add_tensor("rope_freqs.weight", llama3_factors(500000.0, 128, LLAMA31["rope_scaling"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def runtime_inv_freq(theta: float, dim: int, divisors: np.ndarray | None = None) -> np.ndarray:
    """inv_freq as a float32 runtime computes it: theta ** -(2i / dim), divided by per-pair
    factors when the rule has them."""
    inv = 1.0 / (np.float32(theta) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    return inv if divisors is None else (inv / np.asarray(divisors, np.float32)).astype(np.float32)


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "llama-3.1-8b").mkdir(exist_ok=True)
    (folder / "phi-3.5-mini").mkdir(exist_ok=True)
    (folder / "llama-3.1-8b" / "config.json").write_text(json.dumps(LLAMA31, indent=1))
    (folder / "phi-3.5-mini" / "config.json").write_text(json.dumps(PHI35, indent=1))
    llama_gguf(folder / "llama-3.1-8b.gguf", with_factors=True)
    llama_gguf(folder / "llama-3.1-8b-old-convert.gguf", with_factors=False)

    # 1. Phi-3.5's runtime at 8,192 positions, using the short factors (right only up to 4,096).
    np.save(folder / "phi_inv_freq_short.npy", runtime_inv_freq(10000.0, 96, PHI35_SHORT))
    np.save(folder / "phi_inv_freq_long.npy", runtime_inv_freq(10000.0, 96, PHI35_LONG))

    # 2. Llama-3.1's cos/sin table for positions 0..4095, written [cos | sin] (half-split).
    factors = llama3_factors(500000.0, 128, LLAMA31["rope_scaling"])
    llama_inv = runtime_inv_freq(500000.0, 128, factors)
    angles = np.arange(4096, dtype=np.float32)[:, None] * llama_inv[None, :]
    np.save(folder / "llama_cos_sin.npy", np.concatenate([np.cos(angles), np.sin(angles)], axis=1))

    # 3. A runtime that missed rope_theta and used the default 10,000.
    np.save(
        folder / "llama_inv_freq_theta_10000.npy",
        runtime_inv_freq(10000.0, 128, llama3_factors(10000.0, 128, LLAMA31["rope_scaling"])),
    )
    print(f"wrote the examples in {folder}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "conformance"))
