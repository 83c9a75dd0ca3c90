"""Peak memory and time of `posviz summary hf:REPO` on a many-shard repo (issue 29, item 2).

A fake Hub on 127.0.0.1 serves a repo of SHARDS safetensors shards of TENSORS one-value
tensors each (the last shard also holds the position table): each file within posviz.io's
per-file limits, the model far above them. The CLI runs as a child process from each checkout
given (default: this one), so the same repo measures the code before and after:

    python benchmarks/hub_shards.py [CHECKOUT ...] [--shards 16] [--tensors 65000]

prints per checkout the exit code, the child's peak RSS (ru_maxrss), wall time, bytes the
fake Hub sent, and the last line of stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from tests import fakehub  # noqa: E402 -- after the path: the fake Hub of the tests

#: `python -m posviz ARGS` that reports its own peak RSS (KiB) as the last line of stderr.
CLI = """
import atexit, resource, runpy, sys
atexit.register(lambda: print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                              file=sys.stderr))
sys.argv = ["posviz", *sys.argv[1:]]
runpy.run_module("posviz", run_name="__main__")
"""


def shard(path: Path, n_tensors: int, index: int, table: np.ndarray | None) -> Path:
    """A safetensors file of `n_tensors` one-value float32 tensors (and `table` if given)."""
    header, offset = {}, 0
    for j in range(n_tensors):
        header[f"model.layers.{index}.block.{j}.weight"] = {
            "dtype": "F32",
            "shape": [1],
            "data_offsets": [offset, offset + 4],
        }
        offset += 4
    if table is not None:
        header["transformer.wpe.weight"] = {
            "dtype": "F32",
            "shape": list(table.shape),
            "data_offsets": [offset, offset + table.nbytes],
        }
        offset += table.nbytes
    text = json.dumps(header).encode()
    with path.open("wb") as file:
        file.write(struct.pack("<Q", len(text)) + text)
        file.write(bytes(4 * n_tensors))
        if table is not None:
            file.write(table.astype("<f4").tobytes())
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", default=[str(ROOT)])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--tensors", type=int, default=65_000)
    args = parser.parse_args()
    table = np.random.default_rng(0).standard_normal((1024, 768)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        monkeypatch = pytest.MonkeyPatch()
        running = fakehub.running(folder, monkeypatch)
        hub = next(running)
        names = [f"model-{i + 1:05d}-of-{args.shards:05d}.safetensors" for i in range(args.shards)]
        files = {
            name: shard(folder / name, args.tensors, i, table if i == args.shards - 1 else None)
            for i, name in enumerate(names)
        }
        weight_map = {"transformer.wpe.weight": names[-1]} | {
            f"model.layers.{i}.block.0.weight": name for i, name in enumerate(names)
        }
        index = json.dumps({"weight_map": weight_map}).encode()
        hub.add("acme/many-shards", {"model.safetensors.index.json": index} | files)
        headers = sum(8 + struct.unpack("<Q", p.read_bytes()[:8])[0] for p in files.values())
        print(
            f"{args.shards} shards x {args.tensors:,} tensors; headers {headers / 2**20:.1f} MiB "
            "in all"
        )
        for checkout in args.checkouts:
            hub.log.clear()
            cache = folder / f"cache-{time.monotonic_ns()}"
            env = os.environ | {"PYTHONPATH": checkout, "POSVIZ_HUB_CACHE": str(cache)}
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", CLI, "summary", "hf:acme/many-shards"],
                cwd=checkout,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            seconds = time.perf_counter() - started
            lines = done.stderr.strip().splitlines()
            peak = int(lines.pop().removeprefix("PEAK "))
            last = (lines or [""])[-1][:160]
            print(
                f"{checkout}: exit {done.returncode}, peak RSS {peak / 1024:.0f} MiB, "
                f"{seconds:.1f} s, {hub.bytes_sent() / 2**20:.1f} MiB sent; {last}"
            )
        running.close()
        monkeypatch.undo()


if __name__ == "__main__":
    main()
