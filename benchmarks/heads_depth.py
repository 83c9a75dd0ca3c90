"""Heads across depth (issue 42): every layer of a model read one layer at a time, against the
layers read alone, in one run.

    python benchmarks/heads_depth.py [--repeats 2] [--keep DIR]

makes (random weights, not committed; `--keep` reuses a folder across runs):
- a Llama-3.1-8B-shaped checkpoint: 32 layers, hidden 4096, 32 query heads and 8 key heads
  of 128, bf16, in 4 shards with their index (q_proj, k_proj, input_layernorm written; v_proj
  and o_proj sparse, as large as the real ones but never read);
- a GPT-2-sized one: 12 layers, hidden 768, 12 heads, a 1024-row position table, float32.

and prints:
1. from disk, the Llama: the 32 layers one at a time (`posviz.depth`, what `posviz heads
   --layers all` runs) against the sum of 32 single layers (`--layer N` each: the model
   opened, planned, read and computed), best of `repeats`, interleaved; target <= 1.2x;
2. peak memory (tracemalloc) of the 32 layers against one layer's; target: within one
   layer's rows;
3. by name from a fake Hub on 127.0.0.1: bytes sent for the weights against the q/k (+ norm)
   bytes planned; target within 2%; and a second run's bytes (target: nothing but headers);
4. the GPT-2-sized model by name to its depth summary, first (the transfer) and again on a
   warm server (Hub cache warm); target <= 3 s plus the transfer; beside it one layer alone
   (`--layer 0` by name, warm) and the ratio.

`--parts 4` runs part 4 alone (parts 1-3 take minutes). Each line ends with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from timing import best  # noqa: E402

from posviz import depth, pipeline  # noqa: E402
from posviz.models import attention  # noqa: E402
from tests import fakehub  # noqa: E402

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 32, 4096, 32, 8, 128
LLAMA31 = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": HIDDEN,
    "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "num_hidden_layers": LAYERS,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "vocab_size": 128256, "torch_dtype": "bfloat16",
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
}  # fmt: skip


def to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values as bfloat16 bits (their top half)."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random normal values * 0.02 as bfloat16 bits."""
    return to_bf16(rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02))


def write_shard(path: Path, tensors: dict[str, np.ndarray | tuple[str, tuple[int, ...]]]) -> None:
    """A safetensors file of `tensors`: arrays as BF16 (uint16 bits) or F32, and (dtype, shape)
    fillers left sparse (never written: as large as the real tensors, no disk)."""
    header, offset = {}, 0
    for name, value in tensors.items():
        if isinstance(value, tuple):
            dtype, shape = value
            nbytes = int(np.prod(shape)) * 2
        else:
            dtype = "BF16" if value.dtype == np.uint16 else "F32"
            shape, nbytes = value.shape, value.nbytes
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as file:
        file.write(struct.pack("<Q", len(text)) + text)
        start = file.tell()
        for name, value in tensors.items():
            if not isinstance(value, tuple):
                file.seek(start + header[name]["data_offsets"][0])
                file.write(value.tobytes())
        file.truncate(start + offset)


def llama_checkpoint(folder: Path) -> Path:
    """The Llama-3.1-8B-shaped checkpoint in 4 shards of 8 layers, with its index."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    weight_map = {}
    per_shard = LAYERS // 4
    for shard in range(4):
        name = f"model-{shard + 1:05d}-of-00004.safetensors"
        tensors: dict = {}
        for layer in range(shard * per_shard, (shard + 1) * per_shard):
            at = f"model.layers.{layer}."
            tensors[at + "input_layernorm.weight"] = to_bf16(1 + rng.standard_normal(HIDDEN) * 0.1)
            tensors[at + "self_attn.q_proj.weight"] = bf16(rng, (HEADS * HEAD_DIM, HIDDEN))
            tensors[at + "self_attn.k_proj.weight"] = bf16(rng, (KV_HEADS * HEAD_DIM, HIDDEN))
            tensors[at + "self_attn.v_proj.weight"] = ("BF16", (KV_HEADS * HEAD_DIM, HIDDEN))
            tensors[at + "self_attn.o_proj.weight"] = ("BF16", (HIDDEN, HEADS * HEAD_DIM))
        write_shard(folder / name, tensors)
        weight_map |= dict.fromkeys(tensors, name)
    (folder / "config.json").write_text(json.dumps(LLAMA31))
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def gpt2_checkpoint(folder: Path) -> Path:
    """A GPT-2-small-shaped checkpoint (12 layers, random float32 weights)."""
    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    tensors: dict = {"transformer.wpe.weight": rng.normal(size=(1024, 768)).astype(np.float32)}
    for layer in range(12):
        at = f"transformer.h.{layer}."
        tensors[at + "ln_1.weight"] = np.ones(768, np.float32)
        tensors[at + "ln_1.bias"] = np.zeros(768, np.float32)
        tensors[at + "attn.c_attn.weight"] = (rng.normal(size=(768, 2304)) * 0.05).astype(
            np.float32
        )
        tensors[at + "attn.c_attn.bias"] = np.zeros(2304, np.float32)
    write_shard(folder / "model.safetensors", tensors)
    config = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
              "n_positions": 1024}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def one_layer(source: str, layer: int) -> object:
    """What `posviz heads SOURCE --layer N` does: open, plan, read, compute."""
    found = attention.open_layer(attention.open_source(source), layer=layer)
    return pipeline.call(pipeline.HEADS_STEPS[found.kind], found)


def every_layer(source: str) -> depth.DepthHeads:
    """What `posviz heads SOURCE --layers all` does (without printing)."""
    plan = depth.plan_depth(attention.open_source(source), "all")
    return depth.collect(plan, each=lambda heads: heads.record())


def peak(f) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    f()
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top


def disk(source: str, repeats: int) -> None:
    """Parts 1 and 2: the Llama from disk, time and peak memory."""
    every_layer(source)  # the files in the OS cache for both sides
    singles, alls = [], []
    for _ in range(repeats):
        singles.append(sum(best(lambda i=i: one_layer(source, i), 1) for i in range(LAYERS)))
        alls.append(best(lambda: every_layer(source), 1))
    print(f"1. Llama-3.1-8B-shaped from disk, 32 layers: one at a time {min(alls):.2f} s; "
          f"32 single layers {min(singles):.2f} s; ratio {min(alls) / min(singles):.2f} "
          f"(target <= 1.2); load {os.getloadavg()[0]:.1f}")  # fmt: skip
    plan = depth.plan_depth(attention.open_source(source), "all")
    layer_bytes = plan.plans[0].nbytes
    single = peak(lambda: one_layer(source, 0))
    every = peak(lambda: every_layer(source))
    print(f"2. peak memory: one layer {single / 2**20:.0f} MiB, 32 layers {every / 2**20:.0f} "
          f"MiB; difference {(every - single) / 2**20:.0f} MiB against one layer's rows "
          f"{layer_bytes / 2**20:.0f} MiB (as stored) / {2 * layer_bytes / 2**20:.0f} MiB "
          "(float32)")  # fmt: skip


def by_name(fake, name: str) -> None:
    """Part 3: the Llama by name from the fake Hub, bytes sent against bytes planned."""
    plan = depth.plan_depth(attention.open_source(name), "all")
    fake.log.clear()
    depth.collect(plan)
    sent = sum(s.nbytes for s in fake.log if s.path.endswith(".safetensors"))
    print(f"3. by name: {sent:,} bytes of weights sent, {plan.nbytes:,} planned (q/k + "
          f"norms): {sent / plan.nbytes - 1:+.3%} (target within 2%); load "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    fake.log.clear()
    depth.collect(depth.plan_depth(attention.open_source(name), "all"))
    print(f"   a second run: {fake.bytes_sent():,} bytes sent (the revision's answer)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="a folder for the checkpoints, kept")
    parser.add_argument("--parts", default="1234", help="the parts to run, e.g. 4")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    where = args.keep or Path(tmp.name)
    start = time.perf_counter()
    llama = llama_checkpoint(where / "llama-8b-shaped") if set(args.parts) & set("123") else None
    gpt2 = gpt2_checkpoint(where / "gpt2-sized")
    print(f"checkpoints ready in {time.perf_counter() - start:.0f} s ({where})")
    if llama and set(args.parts) & set("12"):
        disk(str(llama), args.repeats)

    with tempfile.TemporaryDirectory() as hub_tmp, pytest.MonkeyPatch.context() as patch:
        server = fakehub.running(Path(hub_tmp), patch)
        fake = next(server)
        os.environ["POSVIZ_HUB_CACHE_SIZE"] = "4GB"  # 32 layers' rows: 1.3 GB
        fake.add("bench/gpt2", {p.name: p for p in gpt2.iterdir()})
        if llama and "3" in args.parts:
            fake.add("bench/llama-8b-shaped", {p.name: p for p in llama.iterdir()})
            by_name(fake, "hf:bench/llama-8b-shaped")
        if "4" in args.parts:
            start = time.perf_counter()
            summary = every_layer("hf:bench/gpt2").record()
            first = time.perf_counter() - start
            warms, singles = [], []
            for _ in range(args.repeats):  # interleaved: the load moves during a run
                warms.append(best(lambda: every_layer("hf:bench/gpt2").record(), 1))
                singles.append(best(lambda: one_layer("hf:bench/gpt2", 0), 1))
            warm, single = min(warms), min(singles)
            print(f"4. GPT-2-sized by name, 12 layers to the depth summary: first {first:.2f} s "
                  f"(the transfer included), warm server {warm:.2f} s (target <= 3 s); one "
                  f"layer alone {single:.2f} s, ratio {warm / single:.1f}; "
                  f"{len(summary['layers'])} layers; load {os.getloadavg()[0]:.1f}")  # fmt: skip
        next(server, None)
    tmp.cleanup()


if __name__ == "__main__":
    main()
