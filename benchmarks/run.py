"""Speed, memory and payload of every page at the sizes users bring; prints a table.

    python benchmarks/run.py                 # all sizes (a few minutes on 2 cores)
    python benchmarks/run.py --sizes 1024x768 --pages spectrum similarity

Each page runs through Streamlit's AppTest on a float32 table of the size (learned-like:
smooth waves, noise and boundary rows), with the caches cleared first, so a row is what a user
waits for on first opening that page: every core computation, the figure building and the
serialisation of the figures. The second run of the same page (a rerun, or switching back to
it) is timed too: it must hit the caches. Peak memory is tracemalloc's peak (numpy reports its
buffers to it) beyond the table itself, over a second cold run, untimed. Payload is the
largest single Plotly figure message and the sum over the page. Compute is the time spent
inside the core analyses (every public function of the analysis modules, figures excluded),
in total and for the slowest one: the issue's "under 0.3 s of compute" is per analysis.

The spectrum is also timed alone against one float64 Gram product of the same table (its
floor: the route must form that product), in the same run.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))
os.environ["STREAMLIT_LOGGER_LEVEL"] = "error"  # bare-mode "no runtime" warnings, per page

# First, as in the app: posviz sets OpenBLAS's thread timeout, which is read when numpy loads.
import posviz  # noqa: E402, F401

# isort: split
import numpy as np  # noqa: E402
import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from posviz import (  # noqa: E402
    boundary,
    compare,
    components,
    probes,
    resample,
    similarity,
    simulate,
    spectrum,
)
from posviz.components import KRYLOV_MIN_SIZE  # noqa: E402
from posviz.embedding import Embedding  # noqa: E402
from posviz.ui import pages  # noqa: E402

ANALYSES = (boundary, compare, components, probes, resample, similarity, spectrum)
SIZES = ["512x768", "1024x768", "2048x2048", "8192x4096", "50257x768"]
EIGEN_SIZES = ["1024x768", "2048x1024", "4096x4096", "8192x4096"]
#: The pages that analyse the current table (the Data and Collection pages do not).
PAGES = [p.name for p in pages.PAGES if p.name not in ("data", "collection")]


class ComputeClock:
    """Times every public function of the analysis modules while installed; outer calls only."""

    def __init__(self) -> None:
        self.calls: dict[str, float] = {}
        self._depth = 0
        for module in ANALYSES:
            for name in module.__all__:
                f = getattr(module, name)
                if callable(f) and not isinstance(f, type):
                    setattr(module, name, self._timed(f, f"{module.__name__[7:]}.{name}"))

    def _timed(self, f, label: str):
        @functools.wraps(f)
        def timed(*args, **kwargs):
            self._depth += 1
            start = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.calls[label] = self.calls.get(label, 0.0) + time.perf_counter() - start

        return timed


CLOCK = ComputeClock()


def make_table(n: int, d: int) -> Embedding:
    return simulate.learned_like(n, d, seed=0)


def cold_page(page: str, table: Embedding) -> AppTest:
    """A fresh session on `page` with `table` loaded and every cache empty, not yet run."""
    st.cache_data.clear()
    st.cache_resource.clear()
    gc.collect()
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=900)
    at.session_state["posviz.table"] = table
    return at


def run_page(page: str, table: Embedding) -> dict[str, float]:
    at = cold_page(page, table)
    CLOCK.calls.clear()
    cold = _timed(at.run)
    slowest = max(CLOCK.calls.items(), key=lambda item: item[1], default=("-", 0.0))
    compute = sum(CLOCK.calls.values())
    if at.exception:
        msg = f"{page}: {at.exception[0].message}"
        raise RuntimeError(msg)
    payloads = [len(el.proto.spec) for el in at.get("plotly_chart")]
    warm = _timed(at.run)
    # Memory in a run of its own: tracemalloc slows Python-heavy work (figures) several-fold.
    at = cold_page(page, table)
    tracemalloc.start()
    at.run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "cold_s": cold,
        "compute_s": compute,
        "slowest": slowest[0],
        "slowest_s": slowest[1],
        "warm_s": warm,
        "peak_x_table": peak / table.values.nbytes,
        "peak_mb": peak / 2**20,
        "max_fig_mb": max(payloads, default=0) / 2**20,
        "all_figs_mb": sum(payloads) / 2**20,
        "n_figs": len(payloads),
    }


def harness_seconds() -> float:
    """What AppTest alone adds to a cold run: an empty script, timed like a page."""
    at = AppTest.from_string("pass")
    return _timed(at.run)


def spectrum_vs_gram(table: Embedding, repeats: int = 3) -> dict[str, float]:
    """Best-of-`repeats` times: the spectrum, and one float64 Gram product on the smaller side."""
    x = np.asarray(table.values, dtype=np.float64)
    x = x if x.shape[0] >= x.shape[1] else x.T
    gram = min(_timed(lambda: x.T @ x) for _ in range(repeats))
    full = min(_timed(lambda: spectrum.spectrum(table.values)) for _ in range(repeats))
    return {"spectrum_s": full, "gram_s": gram, "ratio": full / gram}


def krylov_vs_dense(n: int, d: int, repeats: int = 3) -> list[dict]:
    """Top-6 principal components by Lanczos (certified) and by the dense eigensolver, forced
    each way in turn on the same table, best of `repeats`, interleaved: a learned-like table
    (a decaying spectrum, as trained tables have) and Gaussian noise (a flat one, Lanczos'
    worst case). Deviation: the largest difference of loadings, and of scores and singular
    values over the first singular value."""
    rows = []
    tables = {
        "learned-like": make_table(n, d).values,
        "gaussian": np.random.default_rng(0).standard_normal((n, d)).astype(np.float32),
    }
    for kind, values in tables.items():
        times: dict[str, list[float]] = {"krylov": [], "dense": []}
        results, accepted = {}, []
        certify = components._lanczos_pairs

        def spy(g, k, certify=certify, accepted=accepted):
            pairs = certify(g, k)
            accepted.append(pairs is not None)
            return pairs

        components._lanczos_pairs = spy
        try:
            for _ in range(repeats):
                for path, smallest in (("krylov", 0), ("dense", 2**62)):
                    components.KRYLOV_MIN_SIZE = smallest
                    start = time.perf_counter()
                    results[path] = components.principal_components(values, n_components=6)
                    times[path].append(time.perf_counter() - start)
        finally:
            components._lanczos_pairs = certify
            components.KRYLOV_MIN_SIZE = KRYLOV_MIN_SIZE
        a, b = results["krylov"], results["dense"]
        top = b.singular_values[0]
        rows.append(
            {
                "size": f"{n}x{d}",
                "table": kind,
                "krylov_s": min(times["krylov"]),
                "dense_s": min(times["dense"]),
                "certified": all(accepted),
                "deviation": max(
                    np.abs(a.loadings - b.loadings).max(),
                    np.abs(a.scores - b.scores).max() / top,
                    np.abs(a.singular_values - b.singular_values).max() / top,
                ),
            }
        )
    return rows


def _timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=SIZES)
    parser.add_argument("--pages", nargs="+", default=PAGES, choices=PAGES)
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument(
        "--eigen",
        nargs="*",
        metavar="SIZE",
        help=f"only the top-k principal components, Lanczos against dense (default sizes: "
        f"{' '.join(EIGEN_SIZES)}); Lanczos is used from a Gram side of {KRYLOV_MIN_SIZE}",
    )
    args = parser.parse_args(argv)
    if args.eigen is not None:
        print(f"load average {os.getloadavg()[0]:.1f}")
        print(
            f"{'size':>10} {'table':>12} {'Lanczos s':>9} {'dense s':>8} {'dense/L':>7} "
            f"{'certified':>9} {'deviation':>9}"
        )
        rows = []
        for size in args.eigen or EIGEN_SIZES:
            for row in krylov_vs_dense(*(int(v) for v in size.split("x"))):
                rows.append(row)
                print(
                    f"{row['size']:>10} {row['table']:>12} {row['krylov_s']:9.3f} "
                    f"{row['dense_s']:8.3f} {row['dense_s'] / row['krylov_s']:7.1f} "
                    f"{row['certified']!s:>9} {row['deviation']:9.1e}",
                    flush=True,
                )
        print(f"load average {os.getloadavg()[0]:.1f}")
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0

    # Imports and Streamlit's first-run set-up are paid once, not by the first page measured.
    for page in args.pages:
        run_page(page, make_table(64, 32))
    print(f"AppTest's own cost per cold run (component discovery): {harness_seconds():.2f} s")
    rows = []
    header = (
        f"{'size':>10} {'page':>11} {'cold s':>7} {'warm s':>7} {'compute':>7} "
        f"{'slowest analysis':>34} {'peak MB':>8} {'xTable':>6} {'max fig MB':>10} "
        f"{'figs MB':>8} {'figs':>4}"
    )
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        n, d = (int(v) for v in size.split("x"))
        table = make_table(n, d)
        for page in args.pages:
            row = {"size": size, "page": page, **run_page(page, table)}
            rows.append(row)
            print(
                f"{size:>10} {page:>11} {row['cold_s']:7.2f} {row['warm_s']:7.2f} "
                f"{row['compute_s']:7.2f} {row['slowest']:>27} {row['slowest_s']:6.2f} "
                f"{row['peak_mb']:8.1f} {row['peak_x_table']:6.2f} {row['max_fig_mb']:10.2f} "
                f"{row['all_figs_mb']:8.2f} {row['n_figs']:4d}",
                flush=True,
            )
        ratio = spectrum_vs_gram(table)
        rows.append({"size": size, "page": "spectrum-vs-gram", **ratio})
        print(
            f"{size:>10} spectrum {ratio['spectrum_s']:.3f} s = {ratio['ratio']:.2f} x one Gram "
            f"product ({ratio['gram_s']:.3f} s)",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
