"""The probes against one numpy SVD of the same table, and what each of their parts costs.

    python benchmarks/probes.py [--repeats 3] [--positions 1024 2048]
    PYTHONPATH=/old/checkout python benchmarks/probes.py   # the same, older code

For each simulated table (learned-like, seed 0, 768 wide; 1024 rows is the app's first table):
``numpy.linalg.svd(E, full_matrices=False)`` as the yardstick, with the BLAS threads numpy has
(two here) and with one (two threads on a shared machine are erratic: 0.19-0.9 s at 1024 x 768
in one hour), timed before and after the probes, best of both;
`posviz.probes.probe_with_controls` with its defaults, first with no Gaussian control kept and
then with it kept (what every later table of that shape gets), and the parts as
`probe_with_controls` runs them, on one BLAS thread. The relative probes' inner search for C
(3 inner folds x 4 values of C on each outer fold's training rows) is timed inside them: it is
part of their row, and its own row too. Every time is the best of `--repeats` runs in this
process (the machine is shared: best-of is the least noisy); a table prints seconds, CPU
seconds (process time of the best run) and the multiples of the two SVDs. Target (issue 36):
the probes within 5x the SVD.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from posviz import probes, simulate

# "Kept" here means kept in this process's memory: nothing is read from or left on disk.
os.environ["POSVIZ_RESULTS_CACHE"] = "off"


def timed(f: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of `repeats` calls of `f`."""
    runs = []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        f()
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return min(runs)


def forget_gaussian() -> None:
    """Empty the kept Gaussian controls (older code keeps none)."""
    kept = getattr(probes, "_gaussian_control", None)
    if kept is not None:
        kept.cache_clear()


def parts(table: np.ndarray, repeats: int) -> dict[str, tuple[float, float]]:
    """The parts of `probe_with_controls` with its defaults, as it runs them."""
    x = table / table.std()
    positions = np.arange(len(x))
    rng = np.random.default_rng(0)
    draws = [positions, *(rng.permutation(positions) for _ in range(20))]
    gaussian = rng.standard_normal(x.shape)
    options = {"folds": 5, "seed": 1}
    absolute = {"repeats": 2, "protocol": "nested ridge", **options}
    # The inner search's fits: _pair_errors on folds x INNER_FOLDS pair sets at once.
    inner = [0.0, 0.0]
    pair_errors = probes._pair_errors

    def timing_inner(x, positions, train_pairs, test_pairs, **fit):
        wall, cpu = time.perf_counter(), time.process_time()
        errors = pair_errors(x, positions, train_pairs, test_pairs, **fit)
        if len(train_pairs) > options["folds"]:
            inner[0] += time.perf_counter() - wall
            inner[1] += time.process_time() - cpu
        return errors

    steps = {
        "absolute, table + 20 row-shuffled draws": lambda: probes._absolute_probes(
            x, draws, **absolute
        ),
        "absolute, Gaussian's 20 draws": lambda: probes._absolute_probes(
            gaussian, [positions, *draws[2:]], **absolute
        ),
        "relative, table": lambda: probes.relative_probe(x, positions, **options),
        "relative, row-shuffled": lambda: probes.relative_probe(x, draws[1], **options),
        "relative, Gaussian": lambda: probes.relative_probe(gaussian, positions, **options),
    }
    out = {}
    probes._pair_errors = timing_inner
    try:
        with threadpool_limits(1, user_api="blas"):  # as probe_with_controls runs them
            for name, step in steps.items():
                inner[:] = [0.0, 0.0]
                out[name] = timed(step, 1)  # one run: the inner search is timed within it
                if name.startswith("relative"):
                    out[f"  of which the inner search for C ({name.split(', ')[1]})"] = tuple(inner)
    finally:
        probes._pair_errors = pair_errors
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--positions", type=int, nargs="+", default=[1024, 2048])
    args = parser.parse_args()
    for n in args.positions:
        table = simulate.learned_like(n, 768, seed=0).values

        def svd(table=table):
            np.linalg.svd(table, full_matrices=False)

        def svd_one_thread(table=table):
            with threadpool_limits(1, user_api="blas"):
                svd(table)

        yardsticks = [timed(svd, 2 * args.repeats), timed(svd_one_thread, 2 * args.repeats)]

        def cold(table=table):
            forget_gaussian()
            probes.probe_with_controls(table)

        rows = {}
        rows["probe_with_controls, no Gaussian control kept"] = timed(cold, args.repeats)
        rows["probe_with_controls, Gaussian control kept"] = timed(
            lambda table=table: probes.probe_with_controls(table), args.repeats
        )
        rows.update(parts(table, args.repeats))
        # The yardsticks again, after: best of both, so a busy spell does not flatter the probes.
        yardsticks = [
            min(yardsticks[0], timed(svd, 2 * args.repeats)),
            min(yardsticks[1], timed(svd_one_thread, 2 * args.repeats)),
        ]
        rows = {
            "numpy SVD of the table (the yardstick)": yardsticks[0],
            "numpy SVD of the table, one BLAS thread": yardsticks[1],
            **rows,
        }
        two, one = yardsticks[0][0], yardsticks[1][0]
        print(f"\nlearned-like {n} x 768, best of {args.repeats}")
        print(f"| {'part':<55} | {'s':>6} | {'CPU s':>6} | {'x SVD':>6} | {'x SVD 1 thread':>14} |")
        print(f"| {'-' * 55} | {'-' * 6} | {'-' * 6} | {'-' * 6} | {'-' * 14} |")
        for name, (wall, cpu) in rows.items():
            ratios = f"{wall / two:6.2f} | {wall / one:14.2f}"
            print(f"| {name:<55} | {wall:6.3f} | {cpu:6.3f} | {ratios} |")


if __name__ == "__main__":
    main()
