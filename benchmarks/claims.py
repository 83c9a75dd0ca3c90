"""The speed claims of the core's comments, each timed against its alternative in one run.

    python benchmarks/claims.py        # about a minute on 2 cores

Prints one line per claim: best-of-3 seconds of the route taken and of the alternative, and
their ratio (a ratio survives a noisy shared machine; an absolute time does not). The
comments say why a route is taken; benchmarks/README.md keeps the figures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

# First, as in the app: posviz sets OpenBLAS's thread timeout, which is read when numpy loads.
import posviz  # noqa: E402, F401

# isort: split
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import scipy.special  # noqa: E402
from scipy.linalg import lapack  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402
from timing import best  # noqa: E402  (benchmarks/timing.py)

from posviz import _linalg, _ridge, probes, spectrum  # noqa: E402
from posviz._linalg import gram  # noqa: E402
from posviz.simulate import learned_like, sinusoidal_table  # noqa: E402


def in_subprocess(code: str, **env: str) -> float:
    """Seconds `code` prints, run in a fresh interpreter with `env` added (read at start-up)."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def claims() -> list[tuple[str, float, float]]:
    """(claim, seconds of the route taken, seconds of the alternative)."""
    x = learned_like(1024, 768, seed=0).values
    square = np.random.default_rng(0).standard_normal((2048, 2048)).astype(np.float32)
    out = []

    timed_spectrum = (
        "import time, posviz, numpy as np; from posviz.spectrum import spectrum; "
        "from posviz.simulate import learned_like; x = learned_like(1024, 768, seed=0).values; "
        "spectrum(x); t = []\nfor _ in range(5):\n s = time.perf_counter(); spectrum(x); "
        "t.append(time.perf_counter() - s)\nprint(min(t))"
    )
    out.append(
        (
            "OPENBLAS_THREAD_TIMEOUT=20 (2^20 cycles) vs 28 (OpenBLAS default): spectrum 1024x768",
            in_subprocess(timed_spectrum, OPENBLAS_THREAD_TIMEOUT="20"),
            in_subprocess(timed_spectrum, OPENBLAS_THREAD_TIMEOUT="28"),
        )
    )
    out.append(
        (
            "spectrum (Gram + tridiagonal) vs values-only SVD: 1024x768",
            best(lambda: spectrum.spectrum(x)),
            best(lambda: np.linalg.svd(x - x.mean(0), compute_uv=False)),
        )
    )

    def numpy_blocks() -> np.ndarray:
        return sum(b.T @ b for b in _linalg.float64_blocks(square, center=True))

    out.append(
        (
            "Gram by dsyrk over blocks vs adding numpy block products: 2048x2048",
            best(lambda: _linalg.gram(square, center=True)),
            best(numpy_blocks),
        )
    )
    g = _linalg.gram(square, center=True)
    lwork = int(lapack.dsytrd_lwork(len(g), lower=1)[0])
    out.append(
        (
            "dsytrd with its optimal workspace vs scipy's default: 2048x2048",
            best(lambda: lapack.dsytrd(g, lower=1, lwork=lwork)),
            best(lambda: lapack.dsytrd(g, lower=1)),
        )
    )
    _, diagonal, off_diagonal, _, _ = lapack.dsytrd(g, lower=1, lwork=lwork)

    lam = scipy.linalg.eigvalsh_tridiagonal(diagonal, off_diagonal, lapack_driver="sterf")
    for k in (48, 454):  # 454: learned-like 2048 x 2048's values below the refinement split
        out.append(
            (
                f"{k} smallest eigenvectors' basis: inverse iteration + QR vs MRRR (stemr): "
                "2048x2048",
                best(
                    lambda k=k: spectrum._inverse_iteration(
                        diagonal, off_diagonal, lam[:k], lam[-1]
                    )
                ),
                best(
                    lambda k=k: scipy.linalg.eigh_tridiagonal(
                        diagonal,
                        off_diagonal,
                        select="i",
                        select_range=(0, k - 1),
                        lapack_driver="stemr",
                    )
                ),
            )
        )
    sinusoid = gram(sinusoidal_table(1024, 768), center=True)
    _, diagonal, off_diagonal, _, _ = lapack.dsytrd(sinusoid, lower=1, lwork=lwork)
    lam = scipy.linalg.eigvalsh_tridiagonal(diagonal, off_diagonal, lapack_driver="sterf")
    k = int(np.count_nonzero(lam < spectrum._SPLIT**2 * lam[-1]))  # 567, in 555 blocks
    out.append(
        (
            f"{k} smallest eigenvectors of a split tridiagonal form: MRRR vs inverse iteration "
            "+ QR: sinusoidal 1024x768",
            best(lambda: spectrum._smallest_vectors(diagonal, off_diagonal, k)),
            best(lambda: spectrum._inverse_iteration(diagonal, off_diagonal, lam[:k], lam[-1])),
        )
    )
    probe_rows = learned_like(1024, 768, seed=0).values.astype(np.float64)
    probe_rows /= probe_rows.std()
    fold_gram = probe_rows[:819].T @ probe_rows[:819]

    def beside_four(eigh: Callable[[np.ndarray], object]) -> float:
        """Seconds for a relative probe with four eigendecompositions run beside it (one BLAS
        thread each, as the probes run): an eigh that holds the GIL stalls the probe's Python."""
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(2) as pool:
            start = time.perf_counter()
            decompositions = pool.submit(lambda: [eigh(fold_gram) for _ in range(4)])
            probes.relative_probe(probe_rows, np.arange(1024))
            decompositions.result()
            return time.perf_counter() - start

    out.append(
        (
            "a relative probe beside four 768x768 eigh: numpy's (lets go of the GIL) vs scipy's",
            min(beside_four(np.linalg.eigh) for _ in range(3)),
            min(beside_four(scipy.linalg.eigh) for _ in range(3)),
        )
    )
    columns = np.random.default_rng(1).standard_normal((8192, 16))
    out.append(
        (
            "FFT of 16 columns made contiguous vs transformed strided: 8192 rows",
            best(lambda: scipy.fft.rfft(np.ascontiguousarray(columns.T), n=16384)),
            best(lambda: scipy.fft.rfft(columns, n=16384, axis=0)),
        )
    )
    x64 = np.asarray(x, dtype=np.float64) / x.std()
    out.append(
        (
            "top-16 directions: randomised range finder vs full eigh of the Gram: 1024x768",
            best(lambda: _ridge.steep_directions(x64, 16)),
            best(lambda: scipy.linalg.eigh(x64.T @ x64)),
        )
    )
    z = np.random.default_rng(2).standard_normal(5 * 2000 * 8)

    def one_exp() -> None:
        small = np.exp(-np.abs(z))
        np.maximum(z, 0) + np.log1p(small)
        np.where(z >= 0, 1.0, small) / (1 + small)

    out.append(
        (
            "log-loss and its derivative from one exp(-|z|) vs logaddexp + expit",
            best(one_exp),
            best(lambda: (np.logaddexp(0, z), scipy.special.expit(z))),
        )
    )
    out.append(
        (
            "importing posviz vs importing sklearn.model_selection (fresh interpreter)",
            in_subprocess(
                "import time; s = time.perf_counter(); import posviz; "
                "print(time.perf_counter() - s)"
            ),
            in_subprocess(
                "import time; s = time.perf_counter(); import sklearn.model_selection; "
                "print(time.perf_counter() - s)"
            ),
        )
    )
    return out


def main() -> int:
    for claim, taken, alternative in claims():
        print(f"{claim:<84} {taken:8.4f} s {alternative:8.4f} s  {alternative / taken:5.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
