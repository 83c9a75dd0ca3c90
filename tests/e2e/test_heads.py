"""The Heads page in a real browser, on a small local model of the shared folder (the Hub off,
as on an air-gapped server): the heads x offset overview, then the Numbers tab's chart of each
number beside its null and the numbers table with the null's largest draw."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests import ROOT
from tests.e2e.conftest import screenshot, start_server, wait_idle
from tests.e2e.test_browser import no_exception

pytestmark = pytest.mark.e2e

CHARTS = "[data-testid=stMain] [data-testid=stPlotlyChart] .js-plotly-plot"
MODEL = "gpt2/model.safetensors"


@pytest.fixture(scope="module")
def heads_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose shared folder holds the GPT-2-like fixture (4 heads, 32 positions)."""
    root = tmp_path_factory.mktemp("models")
    shutil.copytree(ROOT / "tests" / "data" / "heads" / "gpt2", root / "gpt2")
    server, url = start_server(
        {
            "POSVIZ_DATA_DIR": str(root),
            "POSVIZ_HUB": "off",
            "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
        }
    )
    yield url
    server.terminate()
    server.wait(timeout=20)


def test_the_heads_page_draws_a_local_models_overview_and_numbers(
    page: Page, heads_server: str
) -> None:
    # Not open_page: until a model is picked the page stops before app.py draws the sidebar
    # card that open_page waits for.
    page.goto(f"{heads_server}/heads")
    main = page.get_by_test_id("stMain")
    chooser = page.get_by_role("combobox", name="Checkpoint with its config.json")
    chooser.wait_for(timeout=60_000)
    wait_idle(page)
    chooser.click()
    page.get_by_role("option").filter(has_text=MODEL).click()
    wait_idle(page)
    charts = page.locator(CHARTS)
    expect(charts).to_have_count(1, timeout=60_000)
    page.wait_for_selector(f"{CHARTS} .main-svg", timeout=60_000)
    expect(main).to_contain_text(f"Layer 0 of {MODEL}: GPT-2, learned")
    expect(main).to_contain_text("read from the checkpoint")
    # The overview: one heatmap row per head, every offset within the window as a column.
    expect(charts.first.locator(".heatmaplayer image, .heatmaplayer .hm")).not_to_have_count(0)
    expect(charts.first.locator(".gtitle")).to_contain_text("positional kernel by offset")
    expect(charts.first.locator(".ytick")).to_have_count(4)
    no_exception(page)
    charts.first.scroll_into_view_if_needed()
    screenshot(page, "heads-overview")

    page.get_by_role("tab", name="Numbers").click()
    wait_idle(page)
    expect(charts).to_have_count(1, timeout=60_000)
    page.wait_for_selector(f"{CHARTS} .main-svg", timeout=60_000)
    # The null: the band of its draws behind each head's number, said in words on the chart.
    expect(charts.first.locator(".shapelayer path")).not_to_have_count(0)
    expect(charts.first).to_contain_text("null: min to max over heads and draws")
    table = main.get_by_test_id("stDataFrame")
    expect(table).to_have_count(1, timeout=60_000)
    expect(table.get_by_test_id("data-grid-canvas")).to_be_visible()
    box = table.bounding_box()
    assert box is not None
    assert box["height"] > 100
    # The grid is a canvas: what it holds is read through the CSV download under it (the same
    # frame, with the export's header).
    with page.expect_download() as download:
        main.get_by_role("button", name="CSV", exact=True).click()
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert text.startswith('# analysis: "learned_heads"\n')
    lines = [line for line in text.splitlines() if not line.startswith("# ")]
    assert {"head", "label", "attention_previous", "attention_previous_null_max"} <= set(
        lines[0].split(",")
    )
    assert len(lines) == 1 + 4  # one row a head
    assert "heads.section=Numbers" in page.url
    no_exception(page)
    screenshot(page, "heads-numbers")
