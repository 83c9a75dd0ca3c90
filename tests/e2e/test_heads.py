"""The Heads page in a real browser with the Hub off (as on an air-gapped server): it opens on a
real model shipped with posviz and draws every layer; the planted model's head is marked where
it was planted; a layer opens below; the copied link reopens the same view; a run stopped
half-way keeps its layers and reads on; a small local model of the shared folder in detail."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect

from tests import ROOT
from tests.e2e.conftest import screenshot, start_server, wait_idle, watch
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


def depth_chart(page: Page):
    chart = page.locator(CHARTS).filter(has_text="by layer and head")
    expect(chart).to_have_count(1, timeout=120_000)
    page.wait_for_selector(f"{CHARTS} .main-svg", timeout=60_000)
    return chart


def query(page: Page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_the_depth_view_offline_the_planted_head_and_the_link(page: Page, heads_server: str):
    page.goto(f"{heads_server}/heads")
    main = page.get_by_test_id("stMain")
    chart = depth_chart(page)
    wait_idle(page, timeout=120_000)
    # A real model, with no network: all-MiniLM-L6-v2's six layers of twelve heads.
    expect(chart.locator(".gtitle")).to_contain_text("attention_previous by layer and head")
    expect(chart.locator(".ytick")).to_have_count(6)
    expect(main).to_contain_text("Apache-2.0")
    expect(main).to_contain_text("Layers with labelled heads (how many): 0 (4), 1 (3), 2 (1)")
    assert query(page)["heads.model"] == "example:all-MiniLM-L6-v2"
    no_exception(page)
    chart.scroll_into_view_if_needed()
    screenshot(page, "heads-depth-minilm")

    page.get_by_role("combobox", name="Model shipped with posviz").click()
    page.get_by_role("option").filter(has_text="Planted GPT-2").click()
    wait_idle(page)
    expect(main).to_contain_text("Simulated model")
    chart = depth_chart(page)
    expect(chart.locator(".ytick")).to_have_count(4)
    expect(chart.locator(".legendtext")).to_have_text(["previous-token"])
    expect(main).to_contain_text("Layers with labelled heads (how many): 2 (1)")
    screenshot(page, "heads-depth-planted")

    page.get_by_role("tab", name="Labels over depth").click()
    wait_idle(page)
    labels = page.locator(CHARTS).filter(has_text="The labels over depth")
    expect(labels).to_have_count(1, timeout=60_000)
    expect(labels).to_contain_text("null: largest draw")
    screenshot(page, "heads-depth-labels")

    page.get_by_role("tab", name="Layers x heads").click()
    wait_idle(page)
    page.get_by_role("combobox", name="Number").first.click()
    page.get_by_role("option", name="toeplitz_share", exact=True).click()
    wait_idle(page)
    layer = main.get_by_label("Layer", exact=True)
    layer.fill("2")
    layer.press("Enter")
    wait_idle(page)
    expect(main).to_contain_text("Layer 2 of example:planted-gpt2")
    expect(depth_chart(page).locator(".gtitle")).to_contain_text("toeplitz_share")
    named = query(page)
    assert named["heads.model"] == "example:planted-gpt2"
    assert named["heads.layer"] == "2"
    assert named["heads.number"] == "toeplitz_share"
    no_exception(page)

    # The copied link, opened afresh, shows the same view.
    again = watch(page.context.new_page())
    again.goto(page.url)
    chart = depth_chart(again)
    wait_idle(again)
    expect(chart.locator(".gtitle")).to_contain_text("toeplitz_share by layer and head")
    expect(again.get_by_test_id("stMain")).to_contain_text("Layer 2 of example:planted-gpt2")
    no_exception(again)
    again.close()


def test_a_stopped_run_keeps_its_layers_and_reads_on(page: Page, heads_server: str):
    # A seed no other test uses (every layer is computed, not found in the cache), and many
    # null draws: each layer takes seconds, the Stop button is there to click.
    page.goto(f"{heads_server}/heads?heads.seed=4242&heads.draws=100")
    main = page.get_by_test_id("stMain")
    stop = main.get_by_role("button", name="Stop")
    stop.wait_for(timeout=120_000)
    stop.click()
    wait_idle(page, timeout=120_000)
    expect(main).to_contain_text(re.compile(r"Stopped after [0-5] of 6 layers"))
    done = int(re.search(r"Stopped after (\d)", main.inner_text()).group(1))
    if done:
        expect(depth_chart(page).locator(".ytick")).to_have_count(done)
    screenshot(page, "heads-depth-stopped")
    main.get_by_role("button", name=re.compile("Read the other")).click()
    wait_idle(page, timeout=120_000)
    expect(depth_chart(page).locator(".ytick")).to_have_count(6)
    expect(main).not_to_contain_text("Stopped after")
    no_exception(page)


def test_the_heads_page_draws_a_local_models_overview_and_numbers(
    page: Page, heads_server: str
) -> None:
    page.goto(f"{heads_server}/heads?heads.model=shared%3A{MODEL}&heads.section=Numbers")
    main = page.get_by_test_id("stMain")
    depth_chart(page)
    wait_idle(page, timeout=120_000)
    expect(main).to_contain_text(f"Layer 0 of {MODEL}: GPT-2, learned")
    expect(main).to_contain_text("read from the checkpoint")
    charts = page.locator(CHARTS)
    expect(charts).to_have_count(2, timeout=60_000)
    # The null: the band of its draws behind each head's number, said in words on the chart.
    null = charts.filter(has_text="null: min to max over heads and draws")
    expect(null.locator(".shapelayer path")).not_to_have_count(0)
    table = main.get_by_test_id("stDataFrame").last
    expect(table.get_by_test_id("data-grid-canvas")).to_be_visible()
    box = table.bounding_box()
    assert box is not None
    assert box["height"] > 100
    # The grid is a canvas: what it holds is read through the CSV download under it (the same
    # frame, with the export's header).
    with page.expect_download() as download:
        main.get_by_role("button", name="CSV", exact=True).last.click()
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert text.startswith('# analysis: "learned_heads"\n')
    lines = [line for line in text.splitlines() if not line.startswith("# ")]
    assert {"head", "label", "attention_previous", "attention_previous_null_max"} <= set(
        lines[0].split(",")
    )
    assert len(lines) == 1 + 4  # one row a head
    no_exception(page)
    screenshot(page, "heads-numbers")
