"""The Schemes page in a real browser: a rotary preset's ladder, its position table opened as
the current table, and the Spectrum page analysing that table."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import open_page, screenshot, wait_idle

pytestmark = pytest.mark.e2e
CHART = "[data-testid=stPlotlyChart] .main-svg"


def test_a_rotary_preset_and_its_table_through_the_spectrum(page: Page, server_url: str):
    open_page(page, f"{server_url}/schemes")
    page.wait_for_selector(CHART, timeout=60_000)
    expect(page.get_by_text("Frequency ladder: llama3")).to_be_visible()
    expect(
        page.get_by_text("kept: 29 pairs · blended: 6 pairs · divided: 29 pairs")
    ).to_be_visible()
    screenshot(page, "schemes-ladder")

    rows = page.get_by_label("Positions (rows)")
    rows.fill("2048")
    rows.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Open the rotary table").click()
    wait_idle(page)
    expect(page.get_by_text("is now the current table")).to_be_visible()
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_text("2,048 positions x 128 dims")).to_be_visible()

    sidebar.get_by_test_id("stPageLink-NavLink").filter(has_text="Spectrum").click()
    wait_idle(page)
    page.wait_for_selector(CHART, timeout=60_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_text("rotary llama3").first).to_be_visible()
    screenshot(page, "schemes-table-spectrum")
