"""Page speed a user feels, in headless Chromium, against a one-chart Streamlit page; a table.

    python benchmarks/browser.py                  # 3 repeats, a few minutes on 2 cores
    python benchmarks/browser.py --repeats 1 --json artifacts/browser.json
    python benchmarks/browser.py --baseline ../posviz-main   # before/after in the same run

Each repeat starts fresh servers, the yardstick (`benchmarks/reference_app.py`: one
1024-point Plotly line), then posviz (`app.py`, and the baseline's if given), and drives
Debian's /usr/bin/chromium through Playwright (never `playwright install`). A page is timed
from the sidebar click until the script state is notRunning, the page's title is drawn with
nothing stale left of the last page, and every chart in the main area has drawn its
`.main-svg`. Cold is the first visit of a page in a session on a table whose results are not
cached yet; warm is the second visit (server caches hit). First open is a new session's first
page on a freshly started server (imports included), from `goto` to the same point.

Ratios are taken against the yardstick timed in the same repeat (absolute times on a shared
machine drift by 2x, ratios far less); the table shows the median over repeats. Per page it
also shows the bytes the browser received on the websocket, the server process's CPU seconds
(from /proc/<pid>/stat), and Chromium's main-thread script and layout seconds (CDP Performance
metrics), which say where the time went.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).parents[1]
CHROMIUM = os.environ.get("POSVIZ_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Visits of the yardstick per repeat after its first (warm is their median).
REFERENCE_VISITS = 3

IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
#: Notes when the script state last turned notRunning (ms), for the run's share of the time.
WATCH = """
window.__t0 = 0; window.__idleAt = null;
new MutationObserver((records) => {
  for (const r of records) {
    if (r.target.getAttribute('data-test-script-state') === 'notRunning') {
      window.__idleAt = performance.now();
    }
  }
}).observe(document, {subtree: true, attributes: true,
                      attributeFilter: ['data-test-script-state']});
"""
ARM = "window.__t0 = performance.now(); window.__idleAt = null"
#: Done: idle, the page whose heading holds `title` is drawn with nothing stale left of the
#: last one, and (if `charts`) every chart of the main area has drawn. Not "a run was seen": a
#: fast run's running and notRunning states can reach the page in one render, and never show.
DONE = """([title, charts]) => {
  const app = document.querySelector('[data-testid=stApp]');
  const main = document.querySelector('[data-testid=stMain]');
  if (!app || !main || app.dataset.testScriptState !== 'notRunning') return false;
  if (main.querySelector('[data-stale=true]')) return false;
  // The page's heading names it ("Position schemes" for the Schemes link).
  const titles = [...main.querySelectorAll('h1')].map((h) => h.textContent.toLowerCase());
  if (!titles.some((t) => t.includes(title.toLowerCase()))) return false;
  if (!charts) return true;
  const drawn = main.querySelectorAll('[data-testid=stPlotlyChart]');
  return drawn.length > 0 &&
    [...drawn].every((c) => c.querySelector('.js-plotly-plot .main-svg'));
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(script: str, cwd: Path) -> tuple[subprocess.Popen, str]:
    """`streamlit run script` in `cwd` on a free port, as deployed (no file watcher)."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            script,
            f"--server.port={port}",
            "--server.headless=true",
            "--server.address=127.0.0.1",
            "--server.fileWatcherType=none",
        ],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return server, url
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                msg = f"{script}: streamlit did not start"
                raise RuntimeError(msg) from None
            time.sleep(0.3)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Session:
    """One browser tab: counts websocket bytes and reads Chromium's main-thread metrics."""

    def __init__(self, browser, server: subprocess.Popen) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.context.add_init_script(WATCH)
        self.page: Page = self.context.new_page()
        self.page.set_default_timeout(120_000)
        self.server = server
        self.received = 0
        self.page.on("websocket", lambda ws: ws.on("framereceived", self._count))
        self.cdp = self.context.new_cdp_session(self.page)
        self.cdp.send("Performance.enable")

    def _count(self, payload: str | bytes) -> None:
        self.received += len(payload)

    def _metrics(self) -> dict[str, float]:
        return {m["name"]: m["value"] for m in self.cdp.send("Performance.getMetrics")["metrics"]}

    def timed(self, action, title: str, *, charts: bool = True) -> dict[str, float]:
        """Seconds from `action` until page `title` is DONE, and what it cost in bytes and CPU."""
        self.page.evaluate(ARM)  # a new document starts armed too
        before, received, cpu = self._metrics(), self.received, cpu_seconds(self.server.pid)
        start = time.perf_counter()
        action()
        self.page.wait_for_function(DONE, arg=[title, charts], polling="raf")
        seconds = time.perf_counter() - start
        after = self._metrics()
        idle = self.page.evaluate("(window.__idleAt ?? performance.now()) - window.__t0")
        return {
            "s": seconds,
            "run_s": idle / 1000,
            "kb": (self.received - received) / 1024,
            "server_cpu_s": cpu_seconds(self.server.pid) - cpu,
            "script_s": after["ScriptDuration"] - before.get("ScriptDuration", 0.0),
            "layout_s": after["LayoutDuration"] - before.get("LayoutDuration", 0.0),
            "task_s": after["TaskDuration"] - before.get("TaskDuration", 0.0),
        }

    def click(self, name: str, *, charts: bool = True) -> dict[str, float]:
        """Open page `name` (its title too) from the sidebar; timed until DONE."""
        link = self.page.get_by_test_id("stPageLink-NavLink").filter(has_text=name).first
        return self.timed(link.click, name, charts=charts)

    def names(self) -> list[str]:
        links = self.page.get_by_test_id("stPageLink-NavLink")
        return [links.nth(i).inner_text().split("\n")[-1].strip() for i in range(links.count())]

    def close(self) -> None:
        self.context.close()


def simulate(page: Page, seed: int) -> None:
    """On the Data page: simulate the default table's kind and shape with another seed, a table
    no session of the server has computed anything for yet."""
    page.get_by_role("combobox", name="Generator").click()
    page.get_by_role("option", name="learned-like", exact=True).click()
    page.get_by_label("Seed").fill(str(seed))
    page.get_by_role("button", name="Simulate").click()
    page.get_by_text("Simulated learned-like.").wait_for()
    page.wait_for_selector(IDLE)


def reference_rows(browser) -> dict[str, dict]:
    """The yardstick on a fresh server: first open, first (cold) and later (warm) visits."""
    server, url = serve("benchmarks/reference_app.py", ROOT)
    rows: dict[str, dict] = {}
    try:
        tab = Session(browser, server)
        rows["first open (reference)"] = tab.timed(lambda: tab.page.goto(url), "Chart")
        tab.close()
        # Later sessions open on a chart: the browser's one-time load of Plotly's code is
        # part of a first open, not of every page's first visit.
        tab = Session(browser, server)
        tab.timed(lambda: tab.page.goto(url), "Chart")
        tab.click("Blank", charts=False)
        rows["reference cold"] = tab.click("Chart")
        warm = []
        for _ in range(REFERENCE_VISITS):
            tab.click("Blank", charts=False)
            warm.append(tab.click("Chart"))
        rows["reference warm"] = {k: statistics.median(w[k] for w in warm) for k in warm[0]}
        tab.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return rows


def app_rows(browser, root: Path, seed: int) -> dict[str, dict]:
    """posviz (`root`/app.py) on a fresh server: first open, then every page cold and warm."""
    server, url = serve("app.py", root)
    rows: dict[str, dict] = {}
    try:
        tab = Session(browser, server)
        rows["first open"] = tab.timed(lambda: tab.page.goto(url), "Spectrum")
        tab.close()
        tab = Session(browser, server)
        tab.timed(lambda: tab.page.goto(url), "Spectrum")
        tab.click("Data", charts=False)
        simulate(tab.page, seed)
        # Data and Collection draw no chart until the user adds tables, Heads until a model is
        # named: nothing to time.
        pages = [name for name in tab.names() if name not in ("Data", "Collection", "Heads")]
        for visit in ("cold", "warm"):
            for name in pages:
                rows[f"{name} {visit}"] = tab.click(name)
                if tab.page.get_by_test_id("stException").count():
                    msg = f"{name}: the page raised"
                    raise RuntimeError(msg)
        tab.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return rows


def table(runs: list[dict[str, dict]]) -> list[dict]:
    """Per page the median over repeats of each measure and of its ratio to the yardstick."""

    def median(key: str, field: str) -> float:
        return statistics.median(run[key][field] for run in runs)

    def ratio(key: str, yardstick: str) -> float:
        return statistics.median(run[key]["s"] / run[yardstick]["s"] for run in runs)

    pages = [k[: -len(" cold")] for k in runs[0] if k.endswith(" cold") and "reference" not in k]
    out = [
        {
            "page": "first open",
            "cold_s": median("first open", "s"),
            "cold_x": ratio("first open", "first open (reference)"),
            "kb": median("first open", "kb"),
            "server_cpu_s": median("first open", "server_cpu_s"),
            "script_s": median("first open", "script_s"),
            "layout_s": median("first open", "layout_s"),
        },
        {
            "page": "reference",
            "cold_s": median("reference cold", "s"),
            "warm_s": median("reference warm", "s"),
            "first_open_s": median("first open (reference)", "s"),
            "kb": median("reference cold", "kb"),
        },
    ]
    for page in pages:
        cold, warm = f"{page} cold", f"{page} warm"
        out.append(
            {
                "page": page,
                "cold_s": median(cold, "s"),
                "cold_x": ratio(cold, "reference cold"),
                "warm_s": median(warm, "s"),
                "warm_x": ratio(warm, "reference warm"),
                "kb": median(warm, "kb"),
                "server_cpu_s": median(cold, "server_cpu_s"),
                "warm_server_cpu_s": median(warm, "server_cpu_s"),
                "script_s": median(warm, "script_s"),
                "layout_s": median(warm, "layout_s"),
            }
        )
    return out


def show(rows: list[dict]) -> None:
    def cell(row: dict, key: str, fmt: str) -> str:
        return format(row[key], fmt) if key in row else "-"

    header = (
        f"{'page':>20} {'cold s':>7} {'x ref':>6} {'warm s':>7} {'x ref':>6} {'KB':>7} "
        f"{'srv CPU cold':>12} {'srv CPU warm':>12} {'JS s':>6} {'layout s':>8}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['page']:>20} {cell(row, 'cold_s', '7.2f')} {cell(row, 'cold_x', '6.2f')} "
            f"{cell(row, 'warm_s', '7.2f')} {cell(row, 'warm_x', '6.2f')} "
            f"{cell(row, 'kb', '7.0f')} {cell(row, 'server_cpu_s', '12.2f')} "
            f"{cell(row, 'warm_server_cpu_s', '12.2f')} {cell(row, 'script_s', '6.2f')} "
            f"{cell(row, 'layout_s', '8.2f')}"
        )
    reference = rows[1]
    print(
        f"reference: one 1024-point line, cold {reference['cold_s']:.2f} s, warm "
        f"{reference['warm_s']:.2f} s, first open {reference['first_open_s']:.2f} s "
        "(ratios are per repeat, then the median; JS/layout/KB/warm CPU of the warm visit)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another posviz checkout (e.g. from `git worktree add`) timed in the same repeats, "
        "after the same yardstick: a before/after under the same load",
    )
    parser.add_argument("--json", type=Path, help="also write the tables and every run here")
    args = parser.parse_args(argv)
    roots = {"this checkout": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    runs: dict[str, list[dict]] = {label: [] for label in roots}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for r in range(args.repeats):
            reference = reference_rows(browser)
            # Alternate which checkout goes first: the machine's load drifts within a repeat.
            for label in list(roots)[:: 1 if r % 2 == 0 else -1]:
                runs[label].append(reference | app_rows(browser, roots[label], seed=r + 1))
            print(f"repeat {r + 1}/{args.repeats} done", file=sys.stderr, flush=True)
        browser.close()
    tables = {label: table(label_runs) for label, label_runs in runs.items()}
    for label, rows in tables.items():
        print(f"\n{label} ({roots[label]})")
        show(rows)
    if args.json:
        args.json.parent.mkdir(exist_ok=True)
        args.json.write_text(json.dumps({"tables": tables, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
