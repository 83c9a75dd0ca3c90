"""Every setting that changes a number is in the link: on each page, each setting is moved away
from its default, the URL copied and opened in a fresh browser context (another person, no
session), and the widgets and the numbers shown must come back as they were (issue 44: a
monotonicity window of 16 came back as 32)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from posviz.resample import POSITION_RULES
from tests.e2e.conftest import open_page, screenshot, wait_idle
from tests.e2e.test_links import new_tab

pytestmark = pytest.mark.e2e

#: A simulated table of more positions than a heatmap draws cell by cell (800), so the
#: Similarity page offers its exact window, and few dimensions, so the probes run in seconds.
TABLE = {"sim": "learned-like", "n_positions": "1024", "d_model": "64"}


@dataclass(frozen=True)
class Case:
    """A page (or one of its tabs), what shows its settings, and the settings moved.

    `show` runs in both browsers before anything is read (a tab, a popover, an expander);
    `move` in the first only: ``(kind, label, value)``, kind one of "number", "select",
    "radio", "switch" or "checkbox" ("on", "off"), "slider" (value: arrow-key presses). `query`
    names another table than `TABLE`.
    """

    page: str
    show: list[tuple[str, str]] = field(default_factory=list)
    move: list[tuple[str, str, str | int]] = field(default_factory=list)
    query: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The page's address (Spectrum is the app's first page: its address is the app's)."""
        return f"/{'' if self.page == 'spectrum' else self.page}?{urlencode(TABLE | self.query)}"

    @property
    def id(self) -> str:
        """The page and where its settings are: a tab, an expander, else its first setting."""
        _, label, value = self.move[0]
        return f"{self.page}-{self.show[0][1] if self.show else f'{label}={value}'}"


CASES = [
    Case("spectrum", move=[("switch", "Mean-centre rows", "off")]),
    Case(
        "similarity",
        [("tab", "Similarity vs offset")],
        [
            ("radio", "Measure", "dot product"),
            ("number", "Largest offset k", 200),
            ("number", "Monotonicity window (offsets)", 16),
        ],
    ),
    Case(
        "similarity",
        [("tab", "Position x position"), ("expander", "Exact window")],
        [
            ("number", "Window size (positions)", 100),
            ("number", "First row i", 10),
            ("number", "First column j", 30),
        ],
    ),
    Case("similarity", [("tab", "One position vs all")], [("slider", "Position", 3)]),
    Case(
        "similarity",
        [("tab", "2-D grid")],
        [
            ("switch", "Treat the rows as a 2-D patch grid (row-major)", "on"),
            ("select", "Grid (height x width)", "16 x 64"),
        ],
    ),
    Case(
        "components",
        [("tab", "Sinusoid span")],
        [
            ("number", "Principal components k", 4),
            ("number", "Sinusoid frequencies m", 5),
            ("number", "Shuffles", 99),
            ("number", "Seed", 3),
        ],
    ),
    Case(
        "boundaries",
        [("tab", "Tables"), ("popover", "Settings")],
        [
            ("number", "Window (± positions)", 10),
            ("number", "Flag at |robust z| >", 6.5),
            ("number", "Residual after the top principal directions (0 = off)", 2),
            ("number", "Boundary size k", 5),
            ("select", "Change points on", "dist to mean"),
            ("number", "Change points at most", 2),
            ("number", "Positions between steps at least", 20),
        ],
    ),
    Case(
        "boundaries",
        [("tab", "Probes")],
        [
            ("number", "Seed", 1),
            ("number", "Rows probed at most", 512),
            ("number", "Training pairs per fold", 500),
            ("number", "Repeated splits", 3),
            ("select", "Absolute probe", "linear"),
        ],
    ),
    Case(
        "compare",
        [("tab", "Similarity vs offset")],
        [("select", "Similarity", "dot"), ("number", "Largest offset", 100)],
    ),
    Case("compare", [("tab", "CKA, angles, Procrustes")], [("number", "Components k", 4)]),
    Case(
        "resample",
        [],
        [
            ("number", "New length L'", 1500),
            ("select", "Method", "cubic"),
            ("radio", "Positions read", POSITION_RULES["scaled"]),
        ],
    ),
    Case("resample", [], [("select", "Method", "tile"), ("number", "Reserved rows", 2)]),
    Case(
        "resample",
        [],
        [
            ("number", "New grid height", 20),
            ("number", "New grid width", 12),
            ("select", "Method", "bilinear"),
            ("checkbox", "Antialias", "off"),
        ],
        {"sim": "2-D grid (ViT)", "height": "8", "width": "8"},
    ),
    Case(
        "heads",
        [("expander", "Settings")],
        [
            ("number", "Null draws", 4),
            ("number", "Seed", 2),
            ("number", "Positions", 100),
            ("number", "Layer", 1),
        ],
    ),
    Case(
        "schemes",
        [],
        [
            ("select", "Model", "EleutherAI/gpt-j-6b"),
            ("number", "Sequence length the rule is applied at", 4096),
            ("number", "Positions (rows)", 512),
        ],
    ),
    Case(
        "schemes",
        [],
        [("select", "Model", "bigscience/bloom"), ("number", "Largest distance", 300)],
    ),
    Case(
        "schemes",
        [("expander", "Longer context")],
        [("number", "Target length N (positions)", 50000)],
    ),
    Case(
        "schemes",
        [("expander", "Compare with another source")],
        [
            ("select", "#schemes.compare.preset", "mistralai/Mistral-7B-v0.1"),
            ("number", "Tolerance (relative)", 0.001),
            ("number", "Sequence length the rules are applied at", 8192),
            ("number", "Positions compared (0: the dump's own, else the shorter context)", 300),
        ],
    ),
]


def select_box(page: Page, label: str) -> Locator:
    """The select box of `label`, or of key KEY for ``#KEY`` (when two share a label)."""
    if label.startswith("#"):
        key = label[1:].replace(".", "-")  # as Streamlit writes a key into a class name
        return page.locator(f".st-key-{key} [data-testid=stSelectbox]")
    return page.get_by_test_id("stSelectbox").filter(has_text=label)


def show(page: Page, case: Case) -> None:
    """Open what holds the case's settings, unless it is open (a rerun may close an expander)."""
    for kind, name in case.show:
        tab = page.get_by_role("tab", name=name)
        if kind == "tab" and tab.get_attribute("aria-selected") != "true":
            tab.click()
        elif kind == "popover" and not page.get_by_test_id("stPopoverBody").is_visible():
            page.get_by_role("button", name=name).click()
        elif kind == "expander":
            box = page.get_by_test_id("stExpander").filter(has_text=name)
            if box.locator("details").get_attribute("open") is None:
                box.locator("summary").click()
        wait_idle(page)


def move(page: Page, kind: str, label: str, value: str | int) -> None:
    """Set one widget to `value`, as a user does, and wait for the rerun it starts."""
    if kind == "number":
        box = page.get_by_role("spinbutton", name=label, exact=True)
        box.fill(str(value))
        box.press("Enter")
    elif kind == "select":
        select_box(page, label).click()
        page.keyboard.type(str(value))  # the list filters to it (a long list scrolls)
        page.get_by_role("option", name=str(value), exact=True).click()
    elif kind == "radio":
        group = page.get_by_test_id("stRadio").filter(has_text=label)
        group.get_by_text(str(value), exact=True).click()
    elif kind in ("switch", "checkbox"):
        if page.get_by_role(kind, name=label).is_checked() != (value == "on"):
            page.get_by_text(label, exact=True).click()  # the input itself is drawn inert
    elif kind == "slider":
        handle = page.get_by_test_id("stSlider").filter(has_text=label).get_by_role("slider")
        handle.focus()
        for _ in range(int(value)):
            handle.press("ArrowRight")
    wait_idle(page)


def seen(page: Page) -> dict[str, list[str]]:
    """What the page shows: each widget's value and every number a reader sees (metrics,
    captions and text, chart titles and legends)."""
    texts = {
        "numbers": "[data-testid=stNumberInputField]",
        "selects": "[data-testid=stSelectbox]",
        "radios": "[data-testid=stRadio] label:has(input:checked)",
        "switches": "input[type=checkbox]",
        "sliders": "[data-testid=stSlider] [role=slider]",
        "metrics": "[data-testid=stMetric]",
        "text": "[data-testid=stMain] [data-testid=stMarkdownContainer]",
        "charts": ".gtitle, .legendtext",
    }
    found = {}
    for name, selector in texts.items():
        found[name] = page.locator(selector).evaluate_all(
            """els => els.map(e => (e.getAttribute('aria-label') || '') + '=' + (
                e.type === 'checkbox' ? String(e.checked)
                : e.value ?? e.getAttribute('aria-valuenow') ?? e.innerText))"""
        )
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_setting_comes_back_from_a_copied_link(
    page: Page, server_url: str, browser: Browser, browser_context_args: dict, case: Case
):
    open_page(page, server_url + case.url)
    show(page, case)
    before = seen(page)
    for kind, label, value in case.move:
        move(page, kind, label, value)
        show(page, case)
    moved = seen(page)
    assert moved != before, "no setting moved"
    for kind, label, value in case.move:  # each took the value asked for
        if kind == "number":
            box = page.get_by_role("spinbutton", name=label, exact=True)
            assert float(box.input_value()) == float(value), label
    link = page.url

    context, other = new_tab(browser, browser_context_args)
    try:
        open_page(other, link)
        show(other, case)
        expect(other.get_by_test_id("stException")).to_have_count(0)
        again = seen(other)
        assert again == moved, {
            name: {"only in the link": sorted(set(again[name]) - set(shown)),
                   "only before": sorted(set(shown) - set(again[name]))}
            for name, shown in moved.items() if again[name] != shown
        }  # fmt: skip
        screenshot(other, f"settings_link_{case.id}")
    finally:
        context.close()
