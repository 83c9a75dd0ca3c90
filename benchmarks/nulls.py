"""What each null costs, beside the measure without it.

    python benchmarks/nulls.py            # ~1-2 min on 2 cores

Every time is the best of `--repeats` runs in this process (the machine is shared: best-of is
the least noisy). The probes against one numpy SVD, and their parts, are
benchmarks/probes.py's. Each null issue 27 added, on the tables its closing note names:

- CKA: `compare.compare` with ``n_permutations=200`` against ``n_permutations=0``;
- sinusoid likeness: 999 row shuffles against 1 (`components.sinusoid_likeness`);
- change points: the step test on the norm curve with its 20 shuffles against none
  (`boundary.change_points`);
- probe controls: 20 draws of each control against 1 (`n_control_draws`).
"""

from __future__ import annotations

import argparse
import inspect
import os

import numpy as np
from timing import best  # benchmarks/timing.py

from posviz import boundary, compare, components, probes, simulate

# "Kept" here means kept in this process's memory: nothing is read from or left on disk.
os.environ["POSVIZ_RESULTS_CACHE"] = "off"


def cold_probes(x: np.ndarray, **settings: int) -> probes.ProbeReport:
    """The probes with no Gaussian control kept (the draws' whole cost; older code keeps none)."""
    kept = getattr(probes, "_gaussian_control", None)
    if kept is not None:
        kept.cache_clear()
    return probes.probe_with_controls(x, **settings)


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
            t20 = best(lambda x=x: cold_probes(x), 1)
            t1 = best(lambda x=x: cold_probes(x, n_control_draws=1), 1)
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
    args = parser.parse_args()
    nulls(args.repeats)


if __name__ == "__main__":
    main()
