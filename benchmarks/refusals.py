"""Peak memory and time of the worst inputs of issue 37, each refused by `posviz` with exit 2.

    python benchmarks/refusals.py

Each input is made here from a few bytes (configs, checkpoints, exports) and run through the
command in this process under tracemalloc (numpy's allocations included): the peak is what the
refusal cost before it said no, against the budget of one result (MAX_RESULT_BYTES). Before
issue 37 the same inputs cost up to 14.9 GiB or exited 1 with a traceback (the issue lists
them); run this script on an older checkout only with care.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).parents[1]))

from posviz import export, pipeline, simulate
from posviz._params import MAX_RESULT_BYTES
from posviz.cli import main

T5 = {"model_type": "t5", "d_model": 64, "num_heads": 8, "max_position_embeddings": 512}
BIAS = "encoder.block.{}.layer.0.SelfAttention.relative_attention_bias.weight"


def inputs(folder: Path) -> dict[str, list[str]]:
    """Each worst input, as the argv that runs it."""

    def config(name: str, data: dict | str) -> str:
        path = folder / name / "config.json"
        path.parent.mkdir()
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return str(path)

    def checkpoint(name: str, tensors: dict[str, np.ndarray]) -> str:
        save_file(tensors, Path(config(name, T5)).with_name("model.safetensors"))
        return str(folder / name / "model.safetensors")

    def exported(name: str, data: dict | str, suffix: str = "json") -> str:
        path = folder / f"{name}.{suffix}"
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return str(path)

    table = simulate.learned_like(64, 16, seed=0)
    likeness = pipeline.sinusoid_likeness(table)
    shuffles = {**export.header(likeness, table), "columns": {"x": [0.0]}}
    shuffles["params"]["n_shuffles"] = 10**9
    deep = "[" * 100_000 + "]" * 100_000
    tag = '<script id="posviz-data" type="application/json">'
    return {
        "ALiBi n_head 1e7": [
            "summary",
            config("a7", {**T5, "model_type": "bloom", "n_head": 10**7}),
        ],
        "ALiBi n_head 1e9": [
            "summary",
            config("a9", {**T5, "model_type": "bloom", "n_head": 10**9}),
        ],
        "T5 max distance 1e9": [
            "summary",
            config("t9", {**T5, "relative_attention_max_distance": 10**9}),
        ],
        "T5 3,000 bias tensors": [
            "summary",
            checkpoint(
                "many", {BIAS.format(i): np.zeros((32, 8), np.float16) for i in range(3000)}
            ),
        ],
        "T5 bias 32 x 100000": [
            "summary",
            checkpoint("wide", {BIAS.format(0): np.zeros((32, 100_000), np.float32)}),
        ],
        "rope_theta of 4000 digits": [
            "summary",
            config(
                "theta",
                '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, '
                '"rope_theta": 1' + "0" * 4000 + "}",
            ),
        ],
        "rerun n_shuffles 1e9": ["rerun", exported("shuffles", shuffles)],
        "rerun 100,000 analyses": [
            "rerun",
            exported(
                "many",
                {"provenance": table.provenance(), "analyses": [{"analysis": "spectrum"}] * 10**5},
            ),
        ],
        "rerun JSON 1e5 deep": ["rerun", exported("deep", f'{{"a": {deep}}}')],
        "rerun CSV 1e5 deep": ["rerun", exported("deepcsv", f"# params: {deep}\nx\n1\n", "csv")],
        "rerun report of 490 KB of tags": [
            "rerun",
            exported("tags", tag * (490_000 // len(tag)), "html"),
        ],
    }


def main_() -> int:
    budget = f"(budget {MAX_RESULT_BYTES // 2**20} MiB)"
    print(f"{'input':<32} {'exit':>4} {'seconds':>8} {'peak MiB':>9}   {budget}")
    with tempfile.TemporaryDirectory() as folder:
        for label, argv in inputs(Path(folder)).items():
            tracemalloc.start()
            start = time.perf_counter()
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                code = main(argv)
            seconds = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"{label:<32} {code:>4} {seconds:8.2f} {peak / 2**20:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())
