"""Eight users at once against one alone, in real browsers: page times and server CPU; a table.

    python benchmarks/team.py                      # 256 x 192 tables, as tests/e2e/test_team.py
    python benchmarks/team.py --shape 1024x768 --json artifacts/team.json

Runs the load test's measurement (`tests/e2e/test_team.py::load_run`): a fresh server
(`streamlit run app.py`, no file watcher), one user alone twice (the first pays the
server's imports and first runs, the second is the yardstick), then 8 users at once, each in
its own headless Chromium context, uploading a table of its own and opening every page. Server
CPU is the server process's own user + system seconds (/proc/<pid>/stat), the browsers apart,
divided over the page views (each user's upload and load runs included). The ratio that
matters is the crowd's page p95 over one user's p95, both from the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.conftest import CHROMIUM  # noqa: E402
from tests.e2e.test_team import LOAD_SHAPE, load_run  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from browser import ARGS  # noqa: E402


def show(report: dict) -> None:
    one, crowd = report["one_user_page_seconds"], report["per_page_p50"]
    rows = [
        ("page p50 (s)", report["one_user_page_seconds_p50"], report["page_seconds_p50"]),
        ("page p95 (s)", report["one_user_page_seconds_p95"], report["page_seconds_p95"]),
        (
            "server CPU s / page view",
            report["one_user_server_cpu_seconds_per_page_view"],
            report["server_cpu_seconds_per_page_view"],
        ),
    ]
    print(f"{report['sessions']} users on {report['table']} tables, {report['page_visits']} views")
    print(f"{'':>26} {'one user':>9} {'8 users':>9} {'ratio':>6}")
    for label, alone, many in rows:
        print(f"{label:>26} {alone:9.3f} {many:9.3f} {many / alone:6.2f}")
    print(f"{'per page (s)':>26} {'alone':>9} {'p50 of 8':>9}")
    for name in one:
        print(f"{name:>26} {one[name]:9.2f} {crowd[name]:9.2f} {crowd[name] / one[name]:6.2f}")
    print(
        f"server: {report['server_cpu_seconds']:.1f} CPU s over {report['wall_seconds']:.0f} s "
        f"({report['server_share_of_machine_cpu']:.0%} of the machine's {os.cpu_count()} cores; "
        f"the rest went to the browsers and other work), peak RSS "
        f"{report['server_peak_rss_mib']:.0f} MiB; load average at the end "
        f"{', '.join(f'{v:.1f}' for v in report['load_average'])}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="x".join(map(str, LOAD_SHAPE)), help="ROWSxCOLS")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    shape = tuple(int(v) for v in args.shape.split("x"))
    print(f"load average at start: {os.getloadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as folder:
        report = load_run((str(CHROMIUM), ARGS), Path(folder), shape)
    show(report)
    if args.json:
        args.json.parent.mkdir(exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
