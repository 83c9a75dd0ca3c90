"""Heads (issue 34): each layer's computation as a ratio to one 1024 x 768 spectrum timed in
the same run, and a model by name to its heads chart through a fake Hub on 127.0.0.1.

    python benchmarks/heads.py [--repeats 3]

prints, best of `repeats` each:
- the reference: posviz.spectrum.spectrum of a 1024 x 768 table;
- a GPT-2-sized learned layer (12 heads of 64, 1024 positions, hidden 768): the heads without
  the null, and with the default null (8 draws);
- Llama-3.1-8B layer 0's shapes (32 query heads, 8 kv heads, 64 pairs, hidden 4096; random
  float32 weights): the rotary heads with the default null;
- a GPT-2-sized checkpoint by name from the fake Hub to its overview figure: the first time
  (the transfer from 127.0.0.1 included) and again with the Hub cache warm (what a warm
  server pays beyond the transfer: headers, plan, reading the cached rows, numbers, figure).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from timing import best  # noqa: E402

from posviz import figures, pipeline  # noqa: E402
from posviz.heads import learned_heads, rotary_heads  # noqa: E402
from posviz.models import attention  # noqa: E402
from posviz.schemes.rope import RotarySpec  # noqa: E402
from posviz.schemes.rotary import rotary_frequencies  # noqa: E402
from posviz.spectrum import spectrum  # noqa: E402
from tests import fakehub  # noqa: E402

LLAMA31 = RotarySpec(
    "llama3", 128, 500000.0, context=131072, original_context=8192, factor=8.0,
    low_freq_factor=1.0, high_freq_factor=4.0,
)  # fmt: skip


def gpt2_checkpoint(folder: Path) -> dict[str, bytes | Path]:
    """A GPT-2-small-shaped checkpoint (random float32 weights) with its config.json."""
    rng = np.random.default_rng(0)
    tensors = {
        "transformer.wpe.weight": rng.normal(size=(1024, 768)).astype(np.float32) * 0.02,
        "transformer.h.0.ln_1.weight": np.ones(768, np.float32),
        "transformer.h.0.ln_1.bias": np.zeros(768, np.float32),
        "transformer.h.0.attn.c_attn.weight": rng.normal(size=(768, 2304)).astype(np.float32)
        * 0.05,
        "transformer.h.0.attn.c_attn.bias": np.zeros(2304, np.float32),
    }
    save_file(tensors, str(folder / "model.safetensors"))
    config = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 1, "n_positions": 1024}
    return {
        "config.json": json.dumps(config).encode(),
        "model.safetensors": folder / "model.safetensors",
    }


def by_name(ref: str) -> object:
    """What the page does for a model named on the Hub: config.json, headers, plan, read, the
    numbers with their null, the overview figure."""
    layer = attention.open_layer(attention.open_source(ref))
    result = pipeline.call(pipeline.HEADS_STEPS[layer.kind], layer)
    return figures.heads.offsets_overview(result, model=ref)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    rng = np.random.default_rng(0)
    table = rng.normal(size=(1024, 768))
    x = rng.normal(size=(1024, 768))
    wq, wk = rng.normal(size=(2, 12, 64, 768)) * 0.05
    frequencies = rotary_frequencies(LLAMA31)
    q = rng.normal(size=(32, 128, 4096)).astype(np.float32)
    k = rng.normal(size=(8, 128, 4096)).astype(np.float32)
    subjects = {
        "GPT-2-sized layer, no null": lambda: learned_heads(x, wq, wk, n_draws=0),
        "GPT-2-sized layer, 8 null draws": lambda: learned_heads(x, wq, wk),
        "Llama-3.1-8B layer 0 shapes, 8 null draws": lambda: rotary_heads(q, k, frequencies),
    }
    # Interleaved, best of each: a burst of load on the shared machine hits both sides.
    reference: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(repeats):
        for name, subject in subjects.items():
            reference.append(best(lambda: spectrum(table), 1))
            times[name].append(best(subject, 1))
    print(f"reference: spectrum of 1024 x 768: {min(reference) * 1e3:.0f} ms")
    for name, seconds in times.items():
        print(f"{name}: {min(seconds) * 1e3:.0f} ms = {min(seconds) / min(reference):.2f}x")

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        hub_server = fakehub.running(Path(tmp), patch)
        fake = next(hub_server)
        fake.add("bench/gpt2", gpt2_checkpoint(Path(tmp)))
        start = time.perf_counter()
        by_name("hf:bench/gpt2")
        first = time.perf_counter() - start
        sent = fake.bytes_sent()
        warm = best(lambda: by_name("hf:bench/gpt2"), repeats)
        print(
            f"by name to the chart: first {first:.2f} s ({sent / 1e6:.1f} MB from 127.0.0.1), "
            f"warm cache {warm:.2f} s"
        )
        next(hub_server, None)


if __name__ == "__main__":
    main()
