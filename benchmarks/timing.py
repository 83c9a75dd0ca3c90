"""The timing loop the benchmarks share: best of a few wall-clock runs.

Best-of is the least noisy on a shared machine (another process can only slow a run down).
Imported by the scripts beside it (run as ``python benchmarks/<script>.py``, so this folder is
on the path).
"""

from __future__ import annotations

import time
from collections.abc import Callable


def best(f: Callable[[], object], repeats: int = 3) -> float:
    """Fewest wall-clock seconds of `repeats` calls of `f`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)
