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

    rows = page.get_by_role("spinbutton", name="Positions (rows)")
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


def pick_model(page: Page, name: str) -> None:
    page.get_by_test_id("stSelectbox").filter(has_text="Model").click()
    page.keyboard.type(name)
    page.keyboard.press("Enter")
    wait_idle(page)


def test_a_new_model_opens_at_its_own_length_and_shows_its_layers(page: Page, server_url: str):
    # Issue 33 item 7: the browser keeps what it shows unless the server sets it again.
    open_page(page, f"{server_url}/schemes")
    length = page.get_by_role("spinbutton", name="Sequence length the rule is applied at")
    rows = page.get_by_role("spinbutton", name="Positions (rows)")
    expect(length).to_have_value("131072")
    pick_model(page, "EleutherAI/gpt-j-6b")
    expect(length).to_have_value("2048")
    expect(rows).to_have_value("2048")
    page.wait_for_selector(CHART, timeout=60_000)
    expect(page.get_by_text("context 2,048")).to_be_visible()
    expect(page.get_by_text("context 131,072")).to_have_count(0)
    pick_model(page, "HuggingFaceTB/SmolLM3-3B")
    expect(length).to_have_value("65536")
    page.get_by_role("tab", name="Layers").click()
    wait_idle(page)
    page.wait_for_selector(CHART, timeout=60_000)
    expect(page.get_by_text("36 layers: 27 RoPE, 9 NoPE (layers 3-35, every 4th)")).to_be_visible()
    chart = page.get_by_test_id("stPlotlyChart").first
    expect(chart.get_by_text("NoPE")).not_to_have_count(0)  # the legend's entry at least
    expect(page.get_by_test_id("stDataFrame")).to_have_count(1)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    screenshot(page, "schemes-layers")
