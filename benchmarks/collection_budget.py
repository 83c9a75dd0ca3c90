"""A Collection request at its byte budget: peak memory of loading it and of analysing it.

    python benchmarks/collection_budget.py [--tables 32] [--size 2048x1024]

32 learned-like tables of 2048 x 1024 float32 (8 MiB each) are exactly the 256 MiB budget of
one collection (posviz.collection.gather.COLLECTION_BYTES). Printed: the bytes the requests
announced before anything was built; the peak traced memory while `gather` loads them; the peak
while `collection.analyse` summarises and maps them (as the page does, its caches aside); the
process's peak resident memory; and that one table more is refused with nothing built.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

import posviz  # noqa: F401  (first: sets OpenBLAS's thread timeout before numpy loads)

# isort: split
from posviz import collection
from posviz.collection import gather
from posviz.embedding import LoadError

MIB = 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=32)
    parser.add_argument("--size", default="2048x1024")
    args = parser.parse_args()
    n, d = (int(v) for v in args.size.split("x"))

    # One table too many, then one row too many in each table: refused, nothing built.
    wide = gather.simulation_requests("learned-like", [n + 1], range(args.tables), d_model=d)
    for over in (
        gather.simulation_requests("learned-like", [n], range(args.tables + 1), d_model=d),
        wide,
    ):
        tracemalloc.start()
        try:
            gather.gather(over)
        except LoadError as error:
            print(f"{len(over)} tables of {over[0].label}...: refused: {error}")
        print(f"  traced while refusing: {tracemalloc.get_traced_memory()[1] / MIB:.2f} MiB")
        tracemalloc.stop()

    requests = gather.simulation_requests("learned-like", [n], range(args.tables), d_model=d)
    print(f"{args.tables} tables of {n} x {d}: {sum(r.nbytes for r in requests) / MIB:.1f} MiB")
    tracemalloc.start()
    start = time.perf_counter()
    members = gather.gather(requests)
    loaded, peak = tracemalloc.get_traced_memory()
    print(
        f"  gather: {time.perf_counter() - start:.1f} s, held {loaded / MIB:.1f} MiB, "
        f"peak {peak / MIB:.1f} MiB"
    )
    tracemalloc.reset_peak()
    start = time.perf_counter()
    collection.analyse(members)
    print(
        f"  analyse: {time.perf_counter() - start:.1f} s, peak "
        f"{tracemalloc.get_traced_memory()[1] / MIB:.1f} MiB (tables included)"
    )
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  process peak resident memory: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
