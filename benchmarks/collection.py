"""A collection of 32 tables of 1024 x 768: its metrics table cold, against the single pages.

    python benchmarks/collection.py [--tables 32] [--size 1024x768]

Target (issue "Collections"): the metrics table cold in <= 32x one table's cold spectrum +
similarity time. The reference is timed in the same run on the same tables: the Spectrum
page's core call plus the Similarity page's (its overview map at MAX_SIDE and its offset
profile to offset 1024), per table. Also printed: the CKA map's time, the peak memory of the
whole analysis beyond the tables held (tracemalloc), against one float64 copy of a table.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

import posviz  # noqa: F401  (first: sets OpenBLAS's thread timeout before numpy loads)

# isort: split
import numpy as np

from posviz import collection, offsets, similarity, simulate, spectrum


def reference(values: np.ndarray) -> None:
    """One table's cold Spectrum + Similarity page core calls, with those pages' defaults."""
    spectrum.spectrum(values, center=True)
    similarity.similarity_map(values, metric="cosine", center=True)
    n = len(values)
    offsets.offset_profile(values, metric="cosine", center=True, max_offset=min(n - 1, 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=32)
    parser.add_argument("--size", default="1024x768")
    args = parser.parse_args()
    n, d = (int(v) for v in args.size.split("x"))
    tables = [simulate.learned_like(n, d, seed=seed) for seed in range(args.tables)]
    members = [collection.Member(f"step{1000 * (i + 1)}", t) for i, t in enumerate(tables)]
    reference(tables[0].values)  # warm up BLAS threads and imports, not counted

    # Interleaved per table, so load from other processes on this machine hits both alike.
    single = metrics = 0.0
    summaries = []
    for t in tables:
        start = time.perf_counter()
        reference(t.values)
        single += time.perf_counter() - start
        start = time.perf_counter()
        summaries.append(collection.table_summary(t.values))
        metrics += time.perf_counter() - start
    start = time.perf_counter()
    collection.cka_matrix([t.values for t in tables])
    cka = time.perf_counter() - start

    tracemalloc.start()
    collection.analyse(members)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    held = sum(s.spectrum.singular_values.nbytes for s in summaries)  # results kept, for scale
    table64 = n * d * 8
    print(f"{args.tables} tables of {n} x {d} (float32, learned-like)")
    print(f"reference: spectrum + similarity per table, x{args.tables}: {single:8.2f} s")
    print(f"metrics table cold (table_summary x{args.tables}):      {metrics:8.2f} s")
    print(f"ratio metrics / reference:                     {metrics / single:8.2f}  (target <= 1)")
    pairs = args.tables * (args.tables - 1) // 2
    print(f"CKA map ({pairs} pairs, one pass):                   {cka:8.2f} s")
    print(
        f"peak memory of analyse() beyond the tables: {peak / 2**20:.1f} MiB = "
        f"{peak / table64:.2f}x one float64 table ({table64 / 2**20:.1f} MiB); "
        f"tables held {sum(t.values.nbytes for t in tables) / 2**20:.0f} MiB; "
        f"spectra kept {held / 2**10:.0f} KiB"
    )


if __name__ == "__main__":
    main()
