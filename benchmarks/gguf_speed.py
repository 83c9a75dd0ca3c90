"""GGUF reading speed (issue 35): a 10 MB header parsed against numpy reading as many bytes,
and a Hub GGUF's first chart against the transfer of its header and one tensor, in one run.

    python benchmarks/gguf_speed.py [--reader] [--repeats 9]

Part 1 writes a GGUF whose header holds a large vocabulary (Gemma-3's 262,144 tokens with
their types, Llama-3's 280,147 merges: about 10 MB) and 291 tensor infos, then times, interleaved,
`posviz.io.read_gguf_header` from the file against `np.fromfile` of the header's bytes
(--reader also times gguf.GGUFReader once). Part 2 serves a GPT-2-shaped GGUF with that
header, a 1024 x 768 position table and a 77 MB token table from the fake Hub of the tests,
and times `posviz.load` + the spectrum + its figure (what the Spectrum page's first chart needs,
server side) against fetching the same bytes (header and table) by plain range requests.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

import gguf  # noqa: E402

import posviz  # noqa: E402
from posviz import figures, io  # noqa: E402
from posviz.hub import client  # noqa: E402
from posviz.spectrum import spectrum  # noqa: E402
from tests import fakehub, ggufs  # noqa: E402 -- after the path: the tests' helpers


def vocabulary_gguf(path: Path, *, table: bool = False) -> Path:
    """A GGUF with a 10 MB vocabulary in its header; with `table`, GPT-2's tensors."""
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyzĠĊ"

    def word(n: int) -> str:
        return "".join(rng.choice(letters) for _ in range(n))

    def keys(w: gguf.GGUFWriter) -> None:
        w.add_context_length(1024)
        w.add_embedding_length(768)
        w.add_head_count(12)
        w.add_block_count(12)
        w.add_token_list([word(rng.randint(2, 12)) for _ in range(262_144)])
        w.add_token_types([1] * 262_144)
        w.add_token_merges(
            [f"{word(rng.randint(1, 6))} {word(rng.randint(1, 6))}" for _ in range(280_147)]
        )

    tensors: dict[str, np.ndarray | tuple[np.ndarray, str]] = {
        f"blk.{i // 9}.{name}.weight": np.zeros(32, np.float32)
        for i, name in enumerate(
            ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down", "ffn_gate",
             "attn_norm", "ffn_norm"] * 32 + ["output_norm", "output", "rope_freqs"]
        )
    }  # fmt: skip
    if table:
        rows = np.random.default_rng(0).standard_normal((1024, 768)).astype(np.float32)
        tensors = {
            "position_embd.weight": rows,
            "token_embd.weight": (np.zeros((50257, 768 * 2), np.uint8), "F16"),
        }
    return ggufs.write(path, "gpt2" if table else "llama", keys=keys, tensors=tensors)


def header_bytes(path: Path) -> int:
    data = path.read_bytes()
    return io.read_gguf_header(lambda a, b: data[a:b], len(data), path.name)[0].nbytes


def parse(path: Path) -> None:
    with io.opened(str(path)) as (read, size, label):
        io.read_gguf_header(read, size, label)


def part_one(folder: Path, repeats: int, reader: bool) -> None:
    path = vocabulary_gguf(folder / "vocab.gguf")
    n = header_bytes(path)
    parse(path)  # imports gguf's type tables once, as a running server has
    ours, theirs = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        parse(path)
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        np.fromfile(path, dtype=np.uint8, count=n)
        theirs.append(time.perf_counter() - started)
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    print(
        f"header {n / 1e6:.2f} MB ({n:,} bytes): posviz parse median "
        f"{statistics.median(ours) * 1e3:.1f} ms (min {min(ours) * 1e3:.1f}), numpy read median "
        f"{statistics.median(theirs) * 1e3:.2f} ms (min {min(theirs) * 1e3:.2f}); ratio median "
        f"{statistics.median(ratios):.1f}x, min {min(ratios):.1f}x, max {max(ratios):.1f}x"
    )
    if reader:
        started = time.perf_counter()
        gguf.GGUFReader(path)
        print(f"gguf.GGUFReader on the same file: {time.perf_counter() - started:.1f} s")


def part_two(folder: Path, repeats: int) -> None:
    path = vocabulary_gguf(folder / "gpt2.gguf", table=True)
    monkeypatch = pytest.MonkeyPatch()
    running = fakehub.running(folder, monkeypatch)
    fake = next(running)
    try:
        fake.add("acme/gpt2-GGUF", {"gpt2-F32.gguf": path})
        n = header_bytes(path)
        header = io.read_gguf_header(lambda a, b: path.read_bytes()[a:b], path.stat().st_size, "x")[
            0
        ]
        table = header.tensors["position_embd.weight"]
        begin, end = header.data_start + table.begin, header.data_start + table.end
        url = client._file_url("acme/gpt2-GGUF", fake.repos["acme/gpt2-GGUF", "main"].commit,
                               "gpt2-F32.gguf")  # fmt: skip
        totals, transfers, sent = [], [], []
        # A running server has made its first request and built its first figure already.
        monkeypatch.setenv("POSVIZ_HUB_CACHE", str(folder / "warm"))
        figures.spectrum.singular_values(spectrum(posviz.load("hf:acme/gpt2-GGUF").values))
        for i in range(repeats):
            monkeypatch.setenv("POSVIZ_HUB_CACHE", str(folder / f"cache{i}"))  # cold each time
            fake.log.clear()
            started = time.perf_counter()
            loaded = posviz.load("hf:acme/gpt2-GGUF")
            figures.spectrum.singular_values(spectrum(loaded.values)).to_json()
            totals.append(time.perf_counter() - started)
            sent.append(fake.bytes_sent())
            started = time.perf_counter()
            client._get_range(url, 0, n, what="header")
            client._get_range(url, begin, end, what="table")
            transfers.append(time.perf_counter() - started)
        over = [t - x for t, x in zip(totals, transfers, strict=True)]
        print(
            f"Hub GGUF ({path.stat().st_size / 1e6:.0f} MB file, header {n / 1e6:.2f} MB, table "
            f"{(end - begin) / 1e6:.2f} MB): first chart median {statistics.median(totals):.2f} s, "
            f"transfer of header and table median {statistics.median(transfers):.2f} s, the rest "
            f"median {statistics.median(over):.2f} s (max {max(over):.2f}; target 1.5); bytes "
            f"sent {statistics.median(sent) / 1e6:.2f} MB = "
            f"{statistics.median(sent) / (n + end - begin):.3f} x header and table"
        )
    finally:
        running.close()
        monkeypatch.undo()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--reader", action="store_true", help="time gguf.GGUFReader once too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        part_one(Path(tmp), args.repeats, args.reader)
        part_two(Path(tmp), max(args.repeats // 3, 3))


if __name__ == "__main__":
    main()
