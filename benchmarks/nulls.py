"""What each null costs, and the probes against one numpy SVD of the default table.

    python benchmarks/nulls.py            # ~1-2 min on 2 cores
    PYTHONPATH=/old/checkout python benchmarks/nulls.py --probes-only   # the same, older code

Every time is the best of `--repeats` runs in this process (the machine is shared: best-of is
the least noisy). The yardstick is ``numpy.linalg.svd(E, full_matrices=False)`` of the
default 1024 x 768 simulated table (learned-like, seed 0, the app's first table); the probes
(`posviz.probes.probe_with_controls` with its defaults) are reported as a multiple of it
(issue 28's target: within 5x). Then each null issue 27 added, on the tables its closing note
names, as its own cost beside the measure without it:

- CKA: `compare.compare` with ``n_permutations=200`` against ``n_permutations=0``;
- sinusoid likeness: 999 row shuffles against 1 (`components.sinusoid_likeness`);
- change points: the step test on the norm curve with its 20 shuffles against none
  (`boundary.change_points`);
- probe controls: 20 draws of each control against 1 (`n_control_draws`).
"""

from __future__ import annotations

import argparse
import inspect

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits
from timing import best  # benchmarks/timing.py

from posviz import boundary, compare, components, probes, simulate


def probes_against_svd(repeats: int) -> None:
    table = simulate.learned_like(1024, 768, seed=0).values
    svd = best(lambda: np.linalg.svd(table, full_matrices=False), repeats)
    probe = best(lambda: probes.probe_with_controls(table), repeats)
    print(f"numpy SVD of the default 1024 x 768 table: {svd:.3f} s")
    print(f"probe_with_controls (defaults):           {probe:.3f} s = {probe / svd:.1f}x the SVD")
    # Its parts, as probe_with_controls runs them, and the floor of the absolute probe: one
    # eigendecomposition of a fold's training Gram matrix per fold (2 splits x 5 folds) for
    # the table (whose row-shuffled draws share them) and 10 for the Gaussian table.
    x = table / table.std()
    positions = np.arange(len(x))
    rng = np.random.default_rng(0)
    draws = [positions, *(rng.permutation(positions) for _ in range(20))]
    options = {"folds": 5, "repeats": 2, "protocol": "nested ridge", "seed": 1}
    parts = {
        "absolute, table + 20 row-shuffled draws": lambda: probes._absolute_probes(
            x, draws, **options
        ),
        "relative, table": lambda: probes.relative_probe(x, positions, seed=1),
        "relative, row-shuffled": lambda: probes.relative_probe(x, draws[1], seed=1),
    }
    train = x[np.random.default_rng(1).permutation(len(x))[: len(x) * 4 // 5]]
    centred = train - train.mean(axis=0)
    parts["one fold's eigendecomposition (768 x 768)"] = lambda: scipy.linalg.eigh(
        centred.T @ centred, driver="evd"
    )
    for name, part in parts.items():
        with threadpool_limits(1, user_api="blas"):  # as probe_with_controls runs them
            seconds = best(part, repeats)
        print(f"  {name}: {seconds:.3f} s = {seconds / svd:.2f}x the SVD")


def tables() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Pairs of tables for CKA; the first of each pair is the single-table case."""
    rng = np.random.default_rng(0)
    learned = simulate.learned_like(512, 128, seed=0).values
    shifted = learned * np.where(np.arange(512) < 300, 1.0, 1.1)[:, None]
    return {
        "Gaussian 512 x 128": (rng.standard_normal((512, 128)), rng.standard_normal((512, 128))),
        "Gaussian 512 x 128 / 512 x 384": (
            rng.standard_normal((512, 128)),
            rng.standard_normal((512, 384)),
        ),
        "learned-like 512 x 128 (seeds 0, 1)": (
            learned,
            simulate.learned_like(512, 128, seed=1).values,
        ),
        "learned-like with a 10% shift at 300": (shifted, learned),
        "default 1024 x 768 (learned-like / sinusoidal)": (
            simulate.learned_like(1024, 768, seed=0).values,
            simulate.sinusoidal_table(1024, 768),
        ),
    }


def nulls(repeats: int) -> None:
    for name, (x, y) in tables().items():
        print(f"\n{name}")
        with_null = best(lambda x=x, y=y: compare.compare(x, y), repeats)
        without = best(lambda x=x, y=y: compare.compare(x, y, n_permutations=0), repeats)
        c = compare.compare(x, y)
        m = c.metrics()
        print(
            f"  CKA classic {c.cka:.4f} (null mean {m['cka_null_mean']:.4f}, 95th "
            f"{m['cka_null_p95']:.4f}, p {m['cka_p_value']:.3g}); debiased {c.cka_debiased:.4f} "
            f"(null mean {m['cka_debiased_null_mean']:.4f}, 95th {m['cka_debiased_null_p95']:.4f}"
            f", p {m['cka_debiased_p_value']:.3g})"
        )
        print(f"  compare: {without:.3f} s; with the 200-shuffle null {with_null:.3f} s")
        k = min(6, components.max_components(x.shape, center=True))
        pc = components.principal_components(x, n_components=k)
        like = components.sinusoid_likeness(pc)
        t999 = best(lambda pc=pc: components.sinusoid_likeness(pc), repeats)
        t1 = best(lambda pc=pc: components.sinusoid_likeness(pc, n_shuffles=1), repeats)
        print(
            f"  sinusoid likeness {like.mean_cos2:.4f} (shuffled {like.shuffled_mean:.4f}), "
            f"{like.p_text}: {t999:.3f} s (1 shuffle: {t1:.3f} s)"
        )
        flags = boundary.outliers(boundary.position_statistics(x))
        changes = boundary.change_points(flags)
        t_changes = best(lambda flags=flags: boundary.change_points(flags), repeats)
        t0 = best(lambda flags=flags: boundary.change_points(flags, null_draws=0), repeats)
        print(
            f"  change points on the norm: {changes.describe()} (|z| > {changes.critical:.2f}; "
            f"{changes.null_found} of {changes.null_z.size} shuffles found one): "
            f"{t_changes * 1e3:.1f} ms (without the shuffles: {t0 * 1e3:.1f} ms)"
        )
        if "n_control_draws" in inspect.signature(probes.probe_with_controls).parameters:
            report = probes.probe_with_controls(x)
            t20 = best(lambda x=x: probes.probe_with_controls(x), 1)
            t1 = best(lambda x=x: probes.probe_with_controls(x, n_control_draws=1), 1)
            summary = [
                "{}: skill {:.3f} ({:.3f} to {:.3f})".format(c, *report.control_summary(c))
                for c in ("row-shuffled", "Gaussian")
            ]
            print(
                f"  probes: table skill {report.absolute['table'].skill:.3f}; "
                + "; ".join(summary)
                + f"; {t20:.2f} s with 20 draws a control, {t1:.2f} s with 1"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--probes-only", action="store_true", help="only probes / SVD")
    args = parser.parse_args()
    probes_against_svd(args.repeats)
    if not args.probes_only:
        nulls(args.repeats)


if __name__ == "__main__":
    main()
