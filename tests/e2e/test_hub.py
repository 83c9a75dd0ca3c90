"""The Hub tab in a real browser, against a fake Hub on 127.0.0.1: open a model by name, see
what will travel, load, and reach the Spectrum chart; bytes sent and time to the first chart
for a BERT-small-sized and a GPT-2-sized checkpoint go to artifacts/hub.json."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from tests import fakehub
from tests.e2e.conftest import (
    ARTIFACTS,
    open_page,
    report_button,
    screenshot,
    start_server,
    wait_idle,
)
from tests.fakehub import FakeHub, sparse_checkpoint

pytestmark = pytest.mark.e2e
RNG = np.random.default_rng(0)
#: name: (position tensor, its table, the other tensors' shapes (never sent, stored sparse)).
MODELS = {
    "acme/bert-small": (
        "bert.embeddings.position_embeddings.weight",
        RNG.standard_normal((512, 512)).astype(np.float32),
        {"bert.embeddings.word_embeddings.weight": (30522, 512), "bert.encoder": (13000, 512)},
    ),
    "acme/gpt2": (
        "transformer.wpe.weight",
        RNG.standard_normal((1024, 768)).astype(np.float32),
        {"transformer.wte.weight": (50257, 768), "transformer.h": (111000, 768)},
    ),
}


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeHub, str]]:
    root = tmp_path_factory.mktemp("hub")
    monkeypatch = pytest.MonkeyPatch()
    running = fakehub.running(root, monkeypatch)
    hub = next(running)
    for repo, (name, table, filler) in MODELS.items():
        path = sparse_checkpoint(
            root / f"{repo.replace('/', '-')}.safetensors", {name: table}, filler
        )
        hub.add(repo, {"config.json": b'{"model_type": "bert"}', "model.safetensors": path})
    server, url = start_server()  # inherits HF_ENDPOINT and the caches from this process
    yield hub, url
    server.terminate()
    server.wait(timeout=20)
    running.close()
    monkeypatch.undo()


def test_hub_tab_loads_a_models_position_table_by_name(page: Page, hub_server):
    hub, url = hub_server
    timings = {}
    open_page(page, url)  # the server's first run of the pages, not timed
    page.wait_for_selector("[data-testid=stPlotlyChart] .main-svg", timeout=60_000)
    for repo, (name, table, _) in MODELS.items():
        open_page(page, f"{url}/data")
        hub.log.clear()
        started = time.perf_counter()
        page.get_by_role("tab", name="Hub").click()
        wait_idle(page)  # choosing a tab reruns the page
        page.get_by_role("textbox", name="Model id").fill(repo)
        page.get_by_role("button", name="Open").click()
        wait_idle(page)
        expect(page.get_by_text("file will travel")).to_be_visible()
        expect(page.get_by_role("combobox", name="Tensor")).to_have_value(name)
        if repo == "acme/gpt2":
            screenshot(page, "hub-tab")
        page.get_by_role("button", name="Load", exact=True).click()
        wait_idle(page)
        report_button(page).wait_for()
        loaded = time.perf_counter() - started
        # literal() keeps "@" from autolinking with an invisible word joiner before it.
        card = page.get_by_test_id("stSidebar").inner_text().replace("\u2060", "")
        assert f"hf:{repo}@main · commit {hub.repos[repo, 'main'].commit}" in card
        page.get_by_test_id("stPageLink-NavLink").first.click()  # Spectrum
        page.wait_for_selector("[data-testid=stPlotlyChart] .main-svg", timeout=60_000)
        elapsed = time.perf_counter() - started
        size = hub.repos[repo, "main"].files["model.safetensors"].stat().st_size
        sent = hub.bytes_sent()
        assert table.nbytes <= sent <= table.nbytes + 16_384, sent
        timings[repo] = {
            "file_bytes": size,
            "tensor_bytes": table.nbytes,
            "bytes_sent": sent,
            "requests": len(hub.log),
            "seconds_open_to_loaded": round(loaded, 2),
            "seconds_open_to_first_chart": round(elapsed, 2),
        }
        expect(page.get_by_test_id("stException")).to_have_count(0)
    screenshot(page, "hub-spectrum")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "hub.json").write_text(json.dumps(timings, indent=2))
