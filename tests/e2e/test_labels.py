"""Labels stay text in a real browser: file names carrying CSS url() vectors and links, on the
Collection page and in its downloaded report, make no request leave 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from posviz import simulate
from posviz.ui import pages
from tests.e2e.conftest import open_page, wait_idle

pytestmark = pytest.mark.e2e

#: A host no request may reach; file names hold no "/", so CSS escapes (\2f) spell it.
HOST = r"http:\2f\2f leak.invalid\2f "
#: File names whose labels plotly would draw as markup fetching HOST (tags left open: no "/" in
#: a name; single quotes: a browser sends a name's " as %22); each names a step, so every
#: chart of an ordered collection is drawn.
NAMES = (
    f"<span style='background:url({HOST}bg)'>a step100.npy",
    f"<span style='mask-image:url({HOST}mask)'>b step200.npy",
    f"<span style='border:9px solid;border-image:url({HOST}border) 30'>c step300.npy",
    f"<a href='{HOST}'><span style='background-image:url({HOST}image)'>d step400.npy",
    r"![p](\\leak.invalid\progress) step500.npy",
)
#: Charts of an ordered collection: over training, both overlays, the grid, a heatmap and a
#: spectrum of one table, the map; on the page one tab at a time.
CHARTS = 7


def outside(urls: list[str]) -> list[str]:
    """The requests that left this machine: any http(s)/ws host but 127.0.0.1."""
    return [
        u
        for u in urls
        if urlsplit(u).scheme not in {"file", "data", "blob", "about"}
        and urlsplit(u).hostname != "127.0.0.1"
    ]


def test_css_url_labels_fetch_nothing_on_the_page_or_in_the_report(
    page: Page, server_url: str, tmp_path: Path
):
    requests: list[str] = []
    page.context.on("request", lambda request: requests.append(request.url))
    paths = []
    for seed, name in enumerate(NAMES):
        paths.append(tmp_path / name)
        np.save(paths[-1], simulate.learned_like(128, 32, seed=seed).values)
    open_page(page, f"{server_url}/collection")
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(paths)
    page.get_by_role("button", name=f"Add {len(NAMES)} uploaded files").click()
    wait_idle(page)
    charts = page.locator("[data-testid=stPlotlyChart] .js-plotly-plot")
    drawn = 0
    for tab in pages.page("collection").tabs[1:]:  # the first holds numbers only
        page.get_by_role("tab", name=tab, exact=True).click()
        wait_idle(page)
        page.wait_for_function(
            "document.querySelectorAll('[data-testid=stPlotlyChart] .main-svg').length > 0",
            timeout=60_000,
        )
        expect(page.get_by_test_id("stException")).to_have_count(0)
        for chart in range(charts.count()):  # hover labels are drawn on hover
            charts.nth(chart).hover()
            drawn += 1
    assert drawn == CHARTS
    with page.expect_download(timeout=120_000) as download:
        page.get_by_role("button", name="Collection report (HTML)").click()
    report = tmp_path / "report.html"
    download.value.save_as(report)
    page.goto(report.as_uri())
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {CHARTS - 2}",
        timeout=60_000,
    )
    page.wait_for_timeout(1_000)  # style fetches start after layout
    assert any(urlsplit(u).scheme == "file" for u in requests)
    assert outside(requests) == []
    # The labels are drawn, as the characters of the file names (cut short in panel titles).
    label = page.locator(".js-plotly-plot text", has_text="<span style='ba")
    expect(label.first).to_be_attached()
