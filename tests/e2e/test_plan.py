"""The Schemes page's longer context in a real browser: a target typed, the table of rules, the
two charts, and a rule's settings copied from its code block."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import open_page, screenshot, wait_idle

pytestmark = pytest.mark.e2e
CHART = "[data-testid=stPlotlyChart] .main-svg"


def to_top(locator) -> None:
    """Scroll `locator` to the top of the view (the screenshot shows what follows it)."""
    locator.evaluate("e => e.scrollIntoView({block: 'start'})")


def test_plan_llama31_to_64k(page: Page, server_url: str):
    page.set_viewport_size({"width": 1400, "height": 1400})
    open_page(page, f"{server_url}/schemes")
    page.get_by_text("Longer context: every rope scaling rule").click()
    wait_idle(page)
    target = page.get_by_role("spinbutton", name="Target length N (positions)")
    expect(target).to_have_value("32768")  # four times Llama-3.1's original 8,192
    target.fill("65536")
    target.press("Enter")
    wait_idle(page)
    expect(page.get_by_test_id("stMetricValue").filter(has_text="8,192")).to_have_count(1)
    expect(page.get_by_text("not which rule gives the lowest perplexity")).to_be_visible()
    expect(page.get_by_test_id("stDataFrame")).to_have_count(1)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    to_top(target)
    screenshot(page, "schemes-plan-rules")

    for tab, title in (("θ'/θ per pair", "What each rule does to each pair"),
                       ("Angles at N", "largest angle at N = 65,536")):  # fmt: skip
        page.get_by_role("tab", name=tab).click()
        wait_idle(page)
        page.wait_for_selector(CHART, timeout=60_000)
        expect(page.get_by_text(title)).to_be_visible()
        to_top(page.get_by_role("tab", name=tab))
        screenshot(page, f"schemes-plan-{tab[:6].replace(' ', '-').replace('/', '')}")

    page.get_by_role("tab", name="Settings").click()
    wait_idle(page)
    expect(page.get_by_text("--rope-scaling linear --rope-scale 8 -c 65536")).to_be_visible()
    code = page.get_by_test_id("stCode").nth(2)
    to_top(page.get_by_role("tab", name="Settings"))
    code.hover()
    expect(code.get_by_role("button")).to_have_count(1)  # the copy button
    expect(page.get_by_test_id("stException")).to_have_count(0)
    screenshot(page, "schemes-plan-settings")
