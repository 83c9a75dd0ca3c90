"""The report against `posviz summary` on the default table (learned-like 1024 x 768, seed 0).

    python benchmarks/report.py [--repeats 3]

Both as a user runs them: the command in a new interpreter (imports included), interleaved
in each repeat, so the ratio survives a busy machine. The reports keep results in a folder of
their own (POSVIZ_RESULTS_CACHE), empty at first: the first report computes the probes'
Gaussian control ("cold", what the first report of a table shape on a machine costs), the
later ones read it back ("kept"). Then, in one process, the time of each report step (as its
progress bar names them) with nothing kept, and the sidebar's report after the pages computed
their defaults (what the app's cache then gives it), and a second report of the table in that
process (what the first computed is kept). Target: the report within 6x the summary.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))
# In this process nothing is kept between runs: its report steps are timed from scratch.
os.environ["POSVIZ_RESULTS_CACHE"] = "off"

import numpy as np  # noqa: E402

from posviz import simulate  # noqa: E402
from posviz.report import build_report, memo, report_sections  # noqa: E402


def command(*args: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "posviz", *args], cwd=ROOT, check=True, capture_output=True, env=env
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    table = simulate.learned_like(1024, 768, seed=0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "default.npy"
        np.save(path, table.values)
        env = os.environ | {"POSVIZ_RESULTS_CACHE": str(Path(folder) / "results")}
        rows = []
        for _ in range(args.repeats + 1):
            summary = command("summary", str(path), "--json", env=env)
            report = command("report", str(path), "-o", str(Path(folder) / "r.html"), env=env)
            rows.append((summary, report, report / summary))
    print(f"{'repeat':>6} {'summary s':>10} {'report s':>10} {'ratio':>7}")
    for i, (summary, report, ratio) in enumerate(rows):
        print(f"{i or 'cold':>6} {summary:10.2f} {report:10.2f} {ratio:7.2f}")
    kept = statistics.median(r[2] for r in rows[1:])
    print(f"median ratio, Gaussian control kept {kept:.2f}, cold {rows[0][2]:.2f} (target <= 6)")

    steps: dict[str, float] = {}
    mark = [time.perf_counter(), None]

    def told(step: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if mark[1]:
            steps[mark[1]] = now - mark[0]
        mark[:] = [now, step]

    build_report(table, progress=told)
    steps[mark[1]] = time.perf_counter() - mark[0]
    print("report steps, nothing cached:", ", ".join(f"{k} {v:.2f} s" for k, v in steps.items()))
    start = time.perf_counter()
    build_report(table)
    seconds = time.perf_counter() - start
    print(
        f"a second report of the table in this process (the first's results kept): {seconds:.2f} s"
    )
    # The app's case: the pages' results are in the cache. A shared runner stands in for it.
    run = memo()
    report_sections(table, run=run)
    start = time.perf_counter()
    build_report(table, run=run)
    seconds = time.perf_counter() - start
    print(f"report with every step cached (the app after each page): {seconds:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
