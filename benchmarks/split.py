"""Where a page's time goes, chart by chart: bytes on the wire, server time, browser time.

    python benchmarks/split.py                       # every page, 5 browser renders per chart
    python benchmarks/split.py --pages components --repeats 9 --json artifacts/split.json

Server side (in this process, through Streamlit's AppTest, on the default 1024 x 768 simulated
table, caches cleared before each page): for every chart the page draws, the time to build the
figure (`posviz.ui.cache.figure` on a cold cache), the time `st.plotly_chart` takes (plotly's
validation and `plotly.io.to_json`, every rerun), the figure cache's key on a warm rerun (a
digest of the pickled results), and the exact figure JSON Streamlit puts on the wire. Charts
hidden until asked for (closed tabs, the 3-D path, the exact similarity window, the probes)
are measured too, opened by their tab, toggle or expander, and marked with what opened them.

What the JSON holds: traces (WebGL ones apart), values drawn, heatmap cells, and its bytes by
kind: float64 and float32 typed arrays (plotly's base64 `bdata`), plain JSON number lists,
layout (of which the template).

Browser side (Debian's /usr/bin/chromium through Playwright): each chart's JSON is drawn in a
blank page with the plotly.js that plotly.py ships (Streamlit bundles its own plotly.js 4.x; the
same figure JSON reaches it): `JSON.parse`, `Plotly.newPlot` until its promise resolves, then
the next two animation frames (style, layout and paint of what newPlot added), and the WebGL
contexts it opened. Charts are drawn round-robin, `--repeats` times each after one warm-up
round, with the yardstick (`benchmarks/reference_app.py`'s 1024-point line) in every round;
the table shows medians and each chart's browser time over the yardstick's.

A second table puts each page's visits in the running app (benchmarks/browser.py's server and
timed tab, opened on the Data page so the first visit of each page is cold, then `--repeats`
warm visits; Chromium's main-thread seconds from CDP) beside the sums over its shown charts: how
much of a warm visit the charts explain, and how much is the rest of the page.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))
os.environ["STREAMLIT_LOGGER_LEVEL"] = "error"

import posviz  # noqa: E402, F401  (first, as in the app: it sets OpenBLAS's thread timeout)

# isort: split
import numpy as np  # noqa: E402
import plotly  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import plotly.io  # noqa: E402
import streamlit as st  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from posviz.ui import cache, pages  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import browser as app_browser  # noqa: E402  (benchmarks/browser.py: its server and timed tab)

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
#: Chart width in the browser: the wide layout's main column at the benchmarks' 1400 px viewport.
WIDTH = 1200
CELL_TYPES = {"heatmap", "contour", "image", "surface"}
GL_TYPES = {"scattergl", "scatter3d", "surface", "mesh3d", "splom", "scatterpolargl", "heatmapgl"}

#: Page titles in the app's sidebar.
TITLES = {p.name: p.title for p in pages.PAGES}
#: Per page: the view a visitor gets, then the steps that show each hidden chart: a label and
#: the session state that opens it (a tab's key holds its label, an expander's or a toggle's
#: key its open state). Steps accumulate, in order.
PAGES: dict[str, list[tuple[str, dict[str, object]]]] = {
    "spectrum": [
        ("Explained variance tab", {"spectrum.section": "Explained variance"}),
        ("Reconstruction error tab", {"spectrum.section": "Reconstruction error"}),
    ],
    "similarity": [
        ("exact cells", {"similarity.exact_cells": True}),
        ("exact window", {"similarity.zoom": True}),
        ("Similarity vs offset tab", {"similarity.section": "Similarity vs offset"}),
        ("One position vs all tab", {"similarity.section": "One position vs all"}),
    ],
    "components": [
        ("Path tab", {"components.section": "Path"}),
        ("3-D path", {"components.show_3d": True}),
        ("Sinusoid fits tab", {"components.section": "Sinusoid fits"}),
        ("periodogram", {"components.periodogram": True}),
        ("Sinusoid span tab", {"components.section": "Sinusoid span"}),
    ],
    "boundaries": [("Probes tab", {"boundaries.section": "Probes"})],
    "compare": [
        ("cumulative", {"compare.cumulative": True}),
        ("Similarity vs offset tab", {"compare.section": "Similarity vs offset"}),
        ("Similarity maps tab", {"compare.section": "Similarity maps"}),
        ("CKA, angles, Procrustes tab", {"compare.section": "CKA, angles, Procrustes"}),
    ],
    "resample": [
        ("cumulative", {"resample.cumulative": True}),
        ("Similarity tab", {"resample.section": "Similarity"}),
    ],
}

#: Counts WebGL contexts a drawing opens (one per canvas).
COUNT_GL = """
window.__gl = 0;
const getContext = HTMLCanvasElement.prototype.getContext;
HTMLCanvasElement.prototype.getContext = function (type, ...rest) {
  const context = getContext.call(this, type, ...rest);
  if (context && /webgl/.test(type) && !this.__counted) { this.__counted = true; window.__gl++; }
  return context;
};
"""
DRAW = """async ([spec, width]) => {
  const div = document.createElement('div');
  div.style.width = width + 'px';
  document.body.appendChild(div);
  window.__gl = 0;
  const t0 = performance.now();
  const fig = JSON.parse(spec);
  const t1 = performance.now();
  await Plotly.newPlot(div, fig.data, fig.layout, {displaylogo: false});
  const t2 = performance.now();
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  const t3 = performance.now();
  const gl = window.__gl;
  Plotly.purge(div);
  div.remove();
  return {parse_ms: t1 - t0, plot_ms: t2 - t1, frame_ms: t3 - t2, gl};
}"""


class Charts:
    """Records, while installed, each figure's build time and each `st.plotly_chart` call."""

    def __init__(self) -> None:
        self.build: dict[str, float] = {}
        self.key: dict[str, float] = {}
        self.chart: dict[str, float] = {}
        self.spec: dict[str, str] = {}
        self.figures: dict[str, go.Figure] = {}
        self._pending: list[tuple[float, float]] = []
        figure, plotly_chart, built = cache.figure, st.plotly_chart, cache._built

        def timed_built(*args, **kwargs):
            start = time.perf_counter()
            try:
                return built(*args, **kwargs)
            finally:
                self._pending[-1] = (self._pending[-1][0], time.perf_counter() - start)

        def timed_figure(*args, **kwargs):
            self._pending.append((time.perf_counter(), 0.0))
            fig = figure(*args, **kwargs)
            start, inner = self._pending.pop()
            self._last = (time.perf_counter() - start, inner)
            return fig

        def timed_chart(fig, *args, key: str, **kwargs):
            start = time.perf_counter()
            out = plotly_chart(fig, *args, key=key, **kwargs)
            name = key.removeprefix("chart.")
            self.chart[name] = time.perf_counter() - start
            total, inner = self._last
            # Cold: the cache's miss is the build; warm: what is left is the key's digest.
            self.build.setdefault(name, inner)
            self.key[name] = total - inner
            self.figures[name] = fig
            return out

        cache._built = timed_built
        cache.figure = timed_figure
        st.plotly_chart = timed_chart


def server_side(charts: Charts, page: str) -> dict[str, str]:
    """Run `page` cold, then warm, then with each hidden chart opened; {chart: 'shown'|label}."""
    st.cache_data.clear()
    st.cache_resource.clear()
    gc.collect()
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=900)
    at.run()
    shown = dict.fromkeys(charts.chart, "shown")
    at.run()  # warm: cached results and figures; `st.plotly_chart` still serialises
    for label, state in PAGES[page]:
        for key, value in state.items():
            at.session_state[key] = value
        at.run()
        at.run()
        shown |= {name: label for name in charts.chart if name not in shown}
    if at.exception:
        msg = f"{page}: {at.exception[0].message}"
        raise RuntimeError(msg)
    for name in shown:
        charts.spec[name] = plotly.io.to_json(charts.figures[name], validate=False)
    return shown


def typed_count(array: dict) -> int:
    return len(base64.b64decode(array["bdata"])) // np.dtype(array["dtype"]).itemsize


def anatomy(spec: str) -> dict[str, float]:
    """What a figure's JSON holds: traces, values, cells, and its bytes by kind."""
    fig = json.loads(spec)
    out = Counter()
    types = Counter()

    def walk(node, trace_type: str) -> None:
        if isinstance(node, dict):
            if "bdata" in node:
                dtype = np.dtype(node["dtype"])
                kind = "f8" if dtype == np.float64 else "f4" if dtype == np.float32 else "int"
                out[f"{kind}_bytes"] += len(json.dumps(node))
                out["values"] += typed_count(node)
                return
            for key, value in node.items():
                if key == "z" and trace_type in CELL_TYPES:
                    z(value, trace_type)
                else:
                    walk(value, trace_type)
        elif isinstance(node, list) and node and not isinstance(node[0], dict | str):
            out["list_bytes"] += len(json.dumps(node))
            out["values"] += np.size(np.asarray(node, dtype=object))

    def z(node, trace_type: str) -> None:
        if isinstance(node, dict) and "bdata" in node:
            out["cells"] += typed_count(node)
        elif isinstance(node, list):
            out["cells"] += np.size(np.asarray(node, dtype=object))
        walk(node, trace_type)

    for trace in fig["data"]:
        types[trace.get("type", "scatter")] += 1
        walk(trace, trace.get("type", "scatter"))
    layout = fig.get("layout", {})
    return {
        "kb": len(spec.encode()) / 1024,
        "traces": len(fig["data"]),
        "gl_traces": sum(n for t, n in types.items() if t in GL_TYPES),
        "types": ",".join(f"{t}x{n}" for t, n in types.most_common()),
        "values": out["values"],
        "cells": out["cells"],
        "f8_kb": out["f8_bytes"] / 1024,
        "f4_kb": out["f4_bytes"] / 1024,
        "int_kb": out["int_bytes"] / 1024,
        "list_kb": out["list_bytes"] / 1024,
        "layout_kb": len(json.dumps(layout)) / 1024,
        "template_kb": len(json.dumps(layout.get("template", {}))) / 1024,
        "axes": sum(key.startswith(("xaxis", "yaxis")) for key in layout),
        "annotations": len(layout.get("annotations", ())),
        "shapes": len(layout.get("shapes", ())),
    }


def reference_spec() -> str:
    """The yardstick's figure, as benchmarks/reference_app.py draws it."""
    x = np.arange(1024)
    fig = go.Figure(go.Scatter(x=x, y=np.sin(x / 50).astype(np.float32), mode="lines"))
    return plotly.io.to_json(fig, validate=False)


def browser_side(specs: dict[str, str], repeats: int) -> dict[str, dict[str, float]]:
    """Median parse / newPlot / frame milliseconds per chart, drawn round-robin."""
    runs: dict[str, list[dict]] = {name: [] for name in specs}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=app_browser.CHROMIUM, args=app_browser.ARGS
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_content("<!doctype html><html><body></body></html>")
        page.add_script_tag(content=COUNT_GL)
        page.add_script_tag(path=str(PLOTLY_JS))
        page.set_default_timeout(120_000)
        for r in range(repeats + 1):
            for name, spec in specs.items():
                result = page.evaluate(DRAW, [spec, WIDTH])
                if r:  # round 0 warms the JIT and plotly's lazy set-up
                    runs[name].append(result)
        browser.close()
    out = {}
    for name, rs in runs.items():
        total = statistics.median(r["parse_ms"] + r["plot_ms"] + r["frame_ms"] for r in rs)
        out[name] = {key: statistics.median(r[key] for r in rs) for key in rs[0]}
        out[name]["browser_ms"] = total
    return out


def in_app(pages: list[str], repeats: int) -> dict[str, dict[str, float]]:
    """Each page in the running app on the default table: its first (cold) visit, and the median
    of `repeats` later (warm) ones; the yardstick app's warm visit in the same run."""
    visits: dict[str, list[dict]] = {page: [] for page in pages}
    out = {}
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=app_browser.CHROMIUM, args=app_browser.ARGS
        )
        out["reference"] = app_browser.reference_rows(chromium)["reference warm"]
        server, url = app_browser.serve("app.py", ROOT)
        try:
            tab = app_browser.Session(chromium, server)
            # Opened on the Data page: every analysis page's first visit is then cold.
            tab.timed(lambda: tab.page.goto(f"{url}/data"), "Data", charts=False)
            for r in range(repeats + 1):
                for page in pages:
                    visit = tab.click(TITLES[page])
                    if r == 0:
                        out[f"{page} cold"] = visit
                    else:
                        visits[page].append(visit)
            tab.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
        chromium.close()
    for page, vs in visits.items():
        out[page] = {key: statistics.median(v[key] for v in vs) for key in vs[0]}
    return out


def show_pages(rows: list[dict], visits: dict[str, dict[str, float]]) -> None:
    """Per page: the app's own visit times beside the sums of its shown charts' parts."""
    reference = visits["reference"]["s"]
    print(
        f"{'page':>11} {'cold s':>6} {'warm s':>6} {'x ref':>5} {'ws KB':>6} {'JS s':>5} "
        f"{'layout s':>8} {'task s':>6} {'srv CPU':>7} | {'charts':>6} {'KB':>6} {'build ms':>8} "
        f"{'chart ms':>8} {'browser ms':>10}"
    )
    for page in [p for p in PAGES if p in visits]:
        shown = [row for row in rows if row["page"] == page and row["shown"] == "shown"]
        warm = visits[page]
        print(
            f"{page:>11} {visits[page + ' cold']['s']:6.2f} {warm['s']:6.2f} "
            f"{warm['s'] / reference:5.1f} {warm['kb']:6.0f} {warm['script_s']:5.2f} "
            f"{warm['layout_s']:8.2f} {warm['task_s']:6.2f} {warm['server_cpu_s']:7.2f} | "
            f"{len(shown):6d} "
            f"{sum(r['kb'] for r in shown):6.0f} {sum(r['build_ms'] for r in shown):8.0f} "
            f"{sum(r['chart_ms'] for r in shown):8.0f} {sum(r['browser_ms'] for r in shown):10.0f}"
        )
    print(
        f"yardstick (one 1024-point line) warm visit {reference:.2f} s; app visits: the "
        "median of the warm ones; JS, layout, task: Chromium's main-thread seconds in a warm "
        "visit (task: all of its work); srv CPU: the server's CPU seconds in it"
    )


def show(rows: list[dict]) -> None:
    columns = [
        ("page", "page", "s"),
        ("chart", "chart", "s"),
        ("shown", "shown", "s"),
        ("KB", "kb", ".1f"),
        ("f8 KB", "f8_kb", ".1f"),
        ("f4 KB", "f4_kb", ".1f"),
        ("list KB", "list_kb", ".1f"),
        ("tmpl KB", "template_kb", ".1f"),
        ("traces", "traces", "d"),
        ("GL", "gl_traces", "d"),
        ("values", "values", "d"),
        ("cells", "cells", "d"),
        ("axes", "axes", "d"),
        ("build ms", "build_ms", ".1f"),
        ("chart ms", "chart_ms", ".1f"),
        ("key ms", "key_ms", ".1f"),
        ("parse ms", "parse_ms", ".1f"),
        ("plot ms", "plot_ms", ".1f"),
        ("frame ms", "frame_ms", ".1f"),
        ("GL ctx", "gl", "d"),
        ("x ref", "x_ref", ".1f"),
    ]

    def cell(row: dict, key: str, fmt: str) -> str:
        if key not in row:
            return "-"
        return format(round(row[key]) if fmt == "d" else row[key], fmt)

    table = [[title for title, _, _ in columns]]
    table += [[cell(row, key, fmt) for _, key, fmt in columns] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for i, line in enumerate(table):
        print(" ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)))
        if i == 0:
            print("-" * (sum(widths) + len(widths) - 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", nargs="+", default=list(PAGES), choices=list(PAGES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}", file=sys.stderr)
    charts = Charts()
    server_side(charts, "spectrum")  # imports and Streamlit's first run, paid once
    rows, specs = [], {"reference": reference_spec()}
    for page in args.pages:
        for record in (charts.build, charts.key, charts.chart, charts.figures, charts.spec):
            record.clear()
        shown = server_side(charts, page)
        for name, label in shown.items():
            to_json = min(
                timed(lambda n=name: plotly.io.to_json(charts.figures[n], validate=False))
                for _ in range(3)
            )
            specs[f"{page}/{name}"] = charts.spec[name]
            rows.append(
                {
                    "page": page,
                    "chart": name,
                    "shown": label,
                    "build_ms": 1000 * charts.build[name],
                    "chart_ms": 1000 * charts.chart[name],
                    "to_json_ms": 1000 * to_json,
                    "key_ms": 1000 * charts.key[name],
                    **anatomy(charts.spec[name]),
                }
            )
        print(f"{page}: server side done", file=sys.stderr, flush=True)
    visits = in_app(args.pages, args.repeats)
    drawn = browser_side(specs, args.repeats)
    reference = drawn["reference"]["browser_ms"]
    for row in rows:
        ms = drawn[f"{row['page']}/{row['chart']}"]
        row |= ms | {"x_ref": ms["browser_ms"] / reference}
    rows.append(
        {"page": "reference", "chart": "1024-point line", **anatomy(specs["reference"])}
        | drawn["reference"]
        | {"x_ref": 1.0}
    )
    show(rows)
    print()
    show_pages(rows, visits)
    print(f"load average at end: {os.getloadavg()}")
    if args.json:
        args.json.parent.mkdir(exist_ok=True)
        args.json.write_text(json.dumps({"charts": rows, "visits": visits}, indent=1) + "\n")
    return 0


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
