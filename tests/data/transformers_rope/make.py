"""Rotary frequencies and cos/sin as transformers computes them (its own rotary embedding
classes, float32), for tests/schemes/test_diff.py: posviz diff must find them agreeing with
the config.json they were made from. Made in a scratch venv outside the repo:

    python3 -m venv /work/scratch-gguf
    /work/scratch-gguf/bin/pip install torch==2.13.0 transformers safetensors numpy
    PYTHONPATH=. /work/scratch-gguf/bin/python tests/data/transformers_rope/make.py

Only the configs' position keys matter (posviz's preset excerpts); no weights are read.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from transformers import LlamaConfig, Phi3Config
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

from posviz.schemes.presets import PRESETS

HERE = Path(__file__).parent


def dump(rotary: torch.nn.Module, first: int, n: int, name: str) -> None:
    """inv_freq, and cos/sin for positions first .. first + n - 1 (one forward call)."""
    np.save(HERE / f"{name}_inv_freq.npy", rotary.inv_freq.float().numpy())
    x = torch.zeros(1, 1, dtype=torch.float32)
    cos, sin = rotary(x, torch.arange(first, first + n)[None])
    save_file(
        {"cos": cos[0].contiguous(), "sin": sin[0].contiguous()},
        HERE / f"{name}_cos_sin.safetensors",
    )


def main() -> None:
    llama = LlamaConfig(**PRESETS["meta-llama/Llama-3.1-8B"])
    dump(LlamaRotaryEmbedding(llama), 131000, 64, "llama31")
    phi = Phi3Config(**PRESETS["microsoft/Phi-3.5-mini-instruct"])
    # positions 8000 .. 8063: a sequence past the original 4,096, so the long factors apply
    dump(Phi3RotaryEmbedding(phi), 8000, 64, "phi35")
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    (HERE / "versions.json").write_text(json.dumps(versions, indent=1) + "\n")


if __name__ == "__main__":
    main()
