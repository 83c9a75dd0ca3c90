"""How long each export takes for a GPT-2-sized (1024 x 768) table; prints a table.

    python benchmarks/exports.py

Figures are the report's (spectrum, similarity heatmap and offset profile, components, boundary
curves, probes). PNG and SVG go through kaleido with one browser kept running, as the app does
after its first image export; the browser's start is timed on its own.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from posviz import export, figures, simulate
from posviz.report import build_report, report_sections


def timed(f) -> tuple[float, object]:
    start = time.perf_counter()
    out = f()
    return time.perf_counter() - start, out


def main() -> int:
    table = simulate.learned_like(1024, 768, seed=0)
    sections = report_sections(table)
    settings = export.header(sections[0].analyses["Metrics"], table)
    print(f"{'export':>44} {'seconds':>8} {'MB':>7}")
    for section in sections:
        for name, frame in section.tables.items():
            for fmt, write in (("csv", export.to_csv), ("json", export.to_json)):
                seconds, text = timed(lambda write=write, frame=frame: write(frame, settings))
                print(
                    f"{section.title + ': ' + name + ' ' + fmt:>44} {seconds:8.3f} "
                    f"{len(text) / 2**20:7.2f}"
                )
    browser = figures.export.static_image_browser()
    if browser:
        import kaleido

        seconds, _ = timed(lambda: kaleido.start_sync_server(silence_warnings=True))
        print(f"{'kaleido browser start (once per server)':>44} {seconds:8.3f}")
    for section in sections:
        for i, fig in enumerate(section.figures, 1):
            label = f"{section.title} figure {i}"
            seconds, page = timed(lambda fig=fig: figures.export.figure_html(fig, settings))
            print(f"{label + ' html':>44} {seconds:8.3f} {len(page) / 2**20:7.2f}")
            for fmt in ("png", "svg") if browser else ():
                seconds, data = timed(
                    lambda fig=fig, fmt=fmt: figures.export.figure_image(fig, fmt)
                )
                print(f"{label + ' ' + fmt:>44} {seconds:8.3f} {len(data) / 2**20:7.2f}")
    seconds, page = timed(lambda: build_report(table))
    print(f"{'whole report (computation included)':>44} {seconds:8.3f} {len(page) / 2**20:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
