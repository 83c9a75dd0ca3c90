"""A link copied on any page, opened in a new browser, shows the same table and view; one that
cannot (an upload) says so on every page."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from posviz import simulate
from tests.e2e.conftest import open_page, screenshot, wait_idle, watch
from tests.e2e.test_browser import go_to, nav_names, sidebar_card, upload

pytestmark = pytest.mark.e2e


def query(page: Page) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlparse(page.url).query).items()}


def new_tab(browser: Browser, browser_context_args: dict) -> tuple[BrowserContext, Page]:
    """A browser context of its own: another person's tab, no shared session."""
    context = browser.new_context(**browser_context_args)
    return context, watch(context.new_page())


def test_a_link_copied_on_another_page_reopens_the_table_and_the_view(
    page: Page, server_url: str, browser: Browser, browser_context_args: dict
):
    # Formerly: Data -> Simulate 2048 -> Similarity dropped the table from the URL, and the
    # link opened the default 1024 x 768 table without a word.
    open_page(page, f"{server_url}/data")
    page.get_by_label("Positions").fill("2048")
    page.get_by_role("button", name="Simulate").click()
    wait_idle(page)
    go_to(page, "Similarity")
    page.get_by_role("tab", name="Similarity vs offset").click()
    wait_idle(page)
    page.get_by_text("Mean-centre rows").click()  # the view: uncentred
    wait_idle(page)
    made = query(page)
    assert (made["sim"], made["n_positions"]) == ("learned-like", "2048")
    # Every page's link names the table.
    for name in nav_names(page):
        go_to(page, name)
        assert query(page)["sha256"] == made["sha256"], name
    go_to(page, "Similarity")
    link = page.url
    assert "similarity.section=Similarity+vs+offset" in link

    context, other = new_tab(browser, browser_context_args)
    try:
        open_page(other, link)
        assert "2,048 positions x 768 dims" in sidebar_card(other)
        expect(other.get_by_role("tab", name="Similarity vs offset")).to_have_attribute(
            "aria-selected", "true"
        )
        expect(other.get_by_role("switch", name="Mean-centre rows")).not_to_be_checked()
        expect(other.locator(".gtitle").first).to_contain_text("uncentred")
        expect(other.get_by_test_id("stAlertContentWarning")).to_have_count(0)
        assert query(other)["sha256"] == made["sha256"]
        screenshot(other, "link_reopened_similarity")
    finally:
        context.close()


def test_an_uploaded_tables_link_says_what_it_cannot_carry_on_every_page(
    page: Page, server_url: str, browser: Browser, browser_context_args: dict, tmp_path: Path
):
    path = tmp_path / "E.npy"
    np.save(path, simulate.sinusoidal_table(64, 16).astype(np.float32))
    upload(page, server_url, path)
    go_to(page, "Spectrum")
    assert query(page)["upload"] == "E.npy"

    context, other = new_tab(browser, browser_context_args)
    try:
        open_page(other, page.url)
        said = re.compile(r"uploaded from the file E\.npy \(tensor E, rows 0-63\)")
        warning = other.get_by_test_id("stAlertContentWarning")
        expect(warning.filter(has_text=said)).to_have_count(1)
        assert "1,024 positions x 768 dims" in sidebar_card(other)
        go_to(other, "Components")
        expect(warning.filter(has_text=said)).to_have_count(1)
        screenshot(other, "link_of_an_upload")
    finally:
        context.close()
