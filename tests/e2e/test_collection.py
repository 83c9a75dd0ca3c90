"""The Collection page in a real browser: three checkpoints uploaded at once, every chart drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from posviz import simulate
from tests.e2e.conftest import open_page, screenshot, wait_idle

pytestmark = pytest.mark.e2e

#: Over training, both overlays, the similarity grid, one table's heatmap and spectrum, the map.
CHARTS = 7


def test_three_uploaded_checkpoints_show_every_chart(page: Page, server_url: str, tmp_path: Path):
    paths = []
    for step, seed in (("step2000", 2), ("step300", 1), ("step10k", 3)):
        paths.append(tmp_path / f"run-{step}.npy")
        np.save(paths[-1], simulate.learned_like(256, 64, seed=seed).values)
    open_page(page, f"{server_url}/collection")
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(paths)
    page.get_by_role("button", name="Add 3 uploaded files").click()
    wait_idle(page)
    charts = page.locator("[data-testid=stPlotlyChart] .js-plotly-plot")
    expect(charts).to_have_count(CHARTS, timeout=60_000)
    page.wait_for_function(
        f"document.querySelectorAll('[data-testid=stPlotlyChart] .main-svg').length >= {CHARTS}",
        timeout=60_000,
    )
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_text("3 tables, ordered by step")).to_be_visible()
    for title in ("Metrics over training", "linear CKA", "Cumulative explained"):
        expect(page.locator(".gtitle", has_text=title).first).to_be_visible()
    screenshot(page, "collection")
