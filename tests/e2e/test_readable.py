"""What a reader sees in a real browser: every log axis labels every decade in one style, and
no table draws "None", "NaN" or rounding noise in full."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import open_page, wait_idle

pytestmark = pytest.mark.e2e

#: Every log axis of every chart drawn: its tick labels (as the SVG shows them) and how many
#: tick marks it has.
LOG_AXES = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(gd =>
  Object.entries(gd._fullLayout)
    .filter(([key, axis]) => /^[xy]axis\\d*$/.test(key) && axis.type === 'log')
    // A shared axis's upper panels draw no labels (the bottom one does).
    .filter(([key, axis]) => axis.showticklabels)
    .map(([key, axis]) => ({
      chart: gd._fullLayout.title.text,
      labels: [...gd.querySelectorAll('g.' + axis._id + 'tick text')].map(t => t.textContent),
      marks: gd.querySelectorAll('path.' + axis._id + 'tick').length,
    })))"""
DECADE = re.compile("10(⁻?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)")
DIGITS = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")


def tab(page: Page, name: str) -> None:
    page.get_by_test_id("stMain").get_by_role("tab", name=name, exact=True).first.click()
    wait_idle(page, 300_000)


def preset(page: Page, name: str) -> None:
    page.get_by_test_id("stMain").get_by_test_id("stSelectbox").first.click()
    page.get_by_role("option", name=name, exact=True).click()
    wait_idle(page, 300_000)


def log_axes(page: Page) -> list[dict]:
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=120_000)
    return page.evaluate(LOG_AXES)


def check(axis: dict) -> None:
    """Every label a decade 10ⁿ, the decades consecutive, the ruler's minor marks drawn (on an
    axis of up to ten decades; a wider one's labelled decades are its ruler)."""
    exponents = []
    for label in axis["labels"]:
        match = DECADE.fullmatch(label)
        assert match, axis
        exponents.append(int(match.group(1).translate(DIGITS)))
    assert len(exponents) >= 2, axis
    assert exponents == list(range(exponents[0], exponents[0] + len(exponents))), axis
    if len(exponents) <= 11:  # up to ten decades, the 2-9 multiples as unlabelled marks
        assert axis["marks"] == len(exponents) + 8 * (len(exponents) - 1), axis


def test_every_log_axis_labels_every_decade_in_one_style(page: Page, server_url: str):
    # Formerly: every other decade labelled, "100" beside "10⁴", minor ticks like minus
    # signs, LongRoPE's factors labelled 1 and 10 only.
    seen = []
    small = "sim=learned-like&n_positions=256&d_model=64"
    for url, tabs in (
        (f"/?{small}", ["Singular values", "Explained variance", "Reconstruction error"]),
        (f"/compare?{small}", ["Spectra"]),
        ("/schemes", ["Frequency ladder", "Similarity decay"]),
    ):
        open_page(page, server_url + url)
        for name in tabs:
            tab(page, name)
            seen += log_axes(page)
    preset(page, "microsoft/Phi-3.5-mini-instruct")
    tab(page, "LongRoPE factors")
    factors = log_axes(page)
    assert [a["labels"] for a in factors] == [["10⁰", "10¹", "10²"]]
    preset(page, "bigscience/bloom")
    tab(page, "Slopes")
    seen += factors + log_axes(page)
    assert len(seen) >= 8, seen
    for axis in seen:
        check(axis)


#: Every string a table's canvas draws (Streamlit's tables are drawn on a canvas: their text
#: is in no DOM node).
RECORD_TABLE_TEXT = """
window.__cells = [];
const fill = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
  if (this.canvas.closest && this.canvas.closest('[data-testid=stDataFrame]')) {
    window.__cells.push(String(text));
  }
  return fill.call(this, text, ...rest);
};
"""
UNREADABLE = re.compile(r"^(None|NaN|nan|<NA>|null)$|0\.0{9,}\d")


def open_numbers(page: Page) -> None:
    for expander in page.get_by_test_id("stExpander").all():
        summary = expander.locator("summary")
        if "Numbers" in summary.inner_text() and expander.get_attribute("open") is None:
            summary.click()
            wait_idle(page, 300_000)


def test_no_table_draws_none_nan_or_rounding_noise(page: Page, server_url: str):
    # Formerly: "None" in the probe table (18 cells seen), Compare's measures and Schemes'
    # LongRoPE share; 0.0000000000000002 for a cosine's spread at offset 0.
    page.add_init_script(RECORD_TABLE_TEXT)
    drawn = []
    small = "sim=learned-like&n_positions=128&d_model=32"
    wide = "second.sim=learned-like&second.n_positions=128&second.d_model=24"
    for url, tabs in (
        (f"/boundaries?{small}&boundaries.section=Probes", []),
        (f"/compare?{small}&{wide}&compare.section=CKA%2C+angles%2C+Procrustes", []),
        ("/similarity?sim=sinusoidal&n_positions=256&d_model=64", ["Similarity vs offset"]),
        ("/components?sim=sinusoidal&n_positions=256&d_model=64", ["Sinusoid fits"]),
        ("/schemes", []),
    ):
        open_page(page, server_url + url)
        if url == "/schemes":
            preset(page, "microsoft/Phi-3.5-mini-instruct")
            tabs = ["Numbers"]
        for name in tabs:
            tab(page, name)
        open_numbers(page)
        page.wait_for_selector("[data-testid=stDataFrame] canvas", timeout=300_000)
        page.wait_for_timeout(1_000)  # the canvas draws after the run
        drawn += page.evaluate("window.__cells.splice(0)")
    numbers = [t for t in drawn if re.fullmatch(r"-?[\d,]*\.?\d+", t)]
    assert len(numbers) > 100, drawn[:50]  # the recorder saw the tables
    assert [t for t in drawn if UNREADABLE.search(t)] == []


def test_the_glossary_opens_from_the_sidebar_of_any_page(page: Page, server_url: str):
    # Formerly: "pairs beyond L₀", "Gram route", "skill", ... unexplained.
    for url, word in (("/schemes", "pairs beyond L₀"), ("/boundaries", "skill")):
        open_page(page, server_url + url)
        page.get_by_test_id("stSidebar").get_by_role("button", name="Glossary").click()
        popover = page.get_by_test_id("stPopoverBody")
        expect(popover.get_by_text(word, exact=True)).to_be_visible()
        expect(popover.get_by_text("Gram route", exact=True)).to_be_visible()
        page.keyboard.press("Escape")


def test_a_wide_table_of_the_report_scrolls_with_its_first_column_in_view(page: Page, tmp_path):
    # The report's Heads table (17 columns) ran off the right edge of a laptop's window.
    import pandas as pd

    from posviz.report import Section, _page

    wide = pd.DataFrame({"head": range(12)} | {f"number_{i}_null_max": 0.123456 for i in range(16)})
    path = tmp_path / "report.html"
    listing = {"posviz_version": "test"}
    path.write_text(_page("A wide table", listing, [Section("Heads", "", {"Heads": wide})], {}))
    page.set_viewport_size({"width": 900, "height": 800})
    page.goto(path.as_uri())
    box = page.locator(".numbers").first
    assert box.evaluate("e => e.scrollWidth > e.clientWidth")  # it scrolls sideways...
    first = box.locator("tbody tr").first.locator("td").first
    left = first.bounding_box()["x"]
    box.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    assert first.bounding_box()["x"] == pytest.approx(left)  # ...its first column stays
    assert box.locator("td").nth(1).bounding_box()["x"] < left  # the rest moved under it
    assert page.locator("h1").bounding_box()["x"] >= 8  # the page's text off the window's edge
