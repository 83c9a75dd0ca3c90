"""The spectrum against its floor, a float64 Gram matrix plus LAPACK eigvalsh, in one run.

    python benchmarks/spectrum.py           # 1024x768, 2048x2048, 8192x4096, 50257x768
    python benchmarks/spectrum.py --quick   # without 50257x768

Each table is float32, learned-like (`posviz.simulate.learned_like`: a decaying spectrum of
waves over noise, so a square one has hundreds of values below 1e-3 of the largest, which
the spectrum refines). The floor is what any exact values-only route must do: convert to
float64, centre, form the Gram matrix on the smaller side (numpy's product) and take its
eigenvalues (`scipy.linalg.eigvalsh`, LAPACK dsyevr: the same reduction to tridiagonal form).
Floor and spectrum are interleaved, best of `--repeat`; the ratio is spectrum / floor. It
also prints how many values the spectrum refined and its largest deviation from the floor's
values above the resolution floor (relative), a check that both computed the same thing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

import posviz  # noqa: F401  (first: it sets OpenBLAS's thread timeout)

# isort: split
import numpy as np
import scipy.linalg

from posviz import spectrum
from posviz.simulate import learned_like

SIZES = ["1024x768", "2048x2048", "8192x4096", "50257x768"]


def floor(values: np.ndarray) -> np.ndarray:
    """Eigenvalues of the centred float64 Gram matrix on the smaller side, ascending."""
    x = values.astype(np.float64)
    x -= x.mean(axis=0)
    g = x.T @ x if x.shape[0] >= x.shape[1] else x @ x.T
    return scipy.linalg.eigvalsh(g, overwrite_a=True, check_finite=False)


def timed(f):
    start = time.perf_counter()
    out = f()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip 50257x768")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", nargs="*", default=None)
    args = parser.parse_args()
    sizes = args.sizes or (SIZES[:3] if args.quick else SIZES)
    print(f"load {os.getloadavg()[0]:.1f}, best of {args.repeat}, interleaved")
    print("| size | floor (s) | spectrum (s) | spectrum / floor | refined | largest deviation |")
    print("| --- | --- | --- | --- | --- | --- |")
    for size in sizes:
        n, d = map(int, size.split("x"))
        values = learned_like(n, d, seed=0).values
        floors, spectra = [], []
        for _ in range(args.repeat):
            t, lam = timed(lambda: floor(values))  # noqa: B023
            floors.append(t)
            t, s = timed(lambda: spectrum.spectrum(values))  # noqa: B023
            spectra.append(t)
        sigma = s.singular_values
        reference = np.sqrt(np.clip(lam[::-1], 0.0, None))
        # The floor's own values are exact only above ~1e-3 of the largest: compare there.
        kept = reference > 1e-3 * reference[0]
        deviation = float(np.max(np.abs(sigma[kept] - reference[kept]) / reference[kept]))
        refined = int(np.count_nonzero(sigma < spectrum._SPLIT * sigma[0]))
        print(
            f"| {size} | {min(floors):.3f} | {min(spectra):.3f} | "
            f"{min(spectra) / min(floors):.2f}x | {refined} | {deviation:.1e} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
