"""The Collection page in a real browser: three checkpoints uploaded at once, every tab drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from posviz import simulate
from tests.e2e.conftest import open_page, screenshot, wait_idle

pytestmark = pytest.mark.e2e

#: Per tab: the charts it draws and a title one of them starts with.
TABS = {
    "Over training": (1, "Metrics over training"),
    "Spectra": (1, "Cumulative explained"),
    "Offsets": (1, "Mean cosine similarity against offset"),
    "Similarity maps": (1, "Cosine similarity between positions"),
    "One table": (2, "Singular values"),
    "CKA map": (1, "Tables by linear CKA"),
}


def test_three_uploaded_checkpoints_show_every_tab(page: Page, server_url: str, tmp_path: Path):
    paths = []
    for step, seed in (("step2000", 2), ("step300", 1), ("step10k", 3)):
        paths.append(tmp_path / f"run-{step}.npy")
        np.save(paths[-1], simulate.learned_like(256, 64, seed=seed).values)
    open_page(page, f"{server_url}/collection")
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(paths)
    page.get_by_role("button", name="Add 3 uploaded files").click()
    wait_idle(page)
    expect(page.get_by_text("3 tables, ordered by step")).to_be_visible()
    charts = page.locator("[data-testid=stPlotlyChart] .js-plotly-plot")
    expect(charts).to_have_count(0)  # the Metrics tab: numbers only
    for tab, (count, title) in TABS.items():
        page.get_by_role("tab", name=tab, exact=True).click()
        wait_idle(page)
        expect(charts).to_have_count(count, timeout=60_000)  # one tab's charts at a time
        page.wait_for_function(
            f"document.querySelectorAll('[data-testid=stPlotlyChart] .main-svg').length >= {count}",
            timeout=60_000,
        )
        expect(page.locator(".gtitle", has_text=title).first).to_be_visible()
        expect(page.get_by_test_id("stException")).to_have_count(0)
    screenshot(page, "collection")


def test_the_example_fills_an_empty_collection(page: Page, server_url: str):
    open_page(page, f"{server_url}/collection")
    page.get_by_role("button", name="Try an example").click()
    wait_idle(page)
    expect(page.get_by_text("6 tables, ordered by step")).to_be_visible()
    expect(page.get_by_test_id("stException")).to_have_count(0)
