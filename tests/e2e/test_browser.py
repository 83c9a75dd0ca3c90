"""posviz in a real browser: charts, uploads through the file chooser, every page, refusals."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from playwright.sync_api import Locator, Page, expect
from safetensors.numpy import save_file

from posviz import simulate
from posviz.embedding import MIN_DIMS, MIN_POSITIONS
from posviz.export import from_csv
from posviz.simulate import sinusoidal_table
from posviz.spectrum import spectrum
from posviz.ui.pages import PAGES
from tests.corpus import HOSTILE_WORDS, MARKER, hostile_files
from tests.e2e.conftest import IDLE, open_page, report_button, screenshot, start_server, wait_idle

pytestmark = pytest.mark.e2e


def charts_drawn(page: Page) -> int:
    """Plotly charts that finished drawing (an SVG plot area exists inside the chart element)."""
    page.wait_for_selector(
        "[data-testid=stPlotlyChart] .main-svg", state="attached", timeout=60_000
    )
    return page.locator("[data-testid=stPlotlyChart] .js-plotly-plot").count()


def no_exception(page: Page) -> None:
    expect(page.get_by_test_id("stException")).to_have_count(0)


def sidebar_card(page: Page) -> str:
    """The card's text once it is whole (a rerun may have drawn only part of it yet)."""
    report_button(page).wait_for()
    return page.get_by_test_id("stSidebar").inner_text()


def upload(page: Page, url: str, path: Path) -> None:
    """Upload `path` on the Data page through the real file chooser; wait for its verdict."""
    if not page.url.rstrip("/").endswith("/data"):
        open_page(page, f"{url}/data")
    page.get_by_role("tab", name="Upload a file").click()
    wait_idle(page)  # choosing a tab reruns the page: the chooser is drawn anew
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(path)
    listed = page.get_by_text(re.compile(rf"{re.escape(path.name)} holds \d+ tensor"))
    # A file with one candidate is listed and loaded at once: the listing, or a refusal.
    expect(listed.or_(refusal(page, path)).first).to_be_visible(timeout=60_000)
    page.wait_for_selector(IDLE, timeout=60_000)  # the verdict shows: that run has begun


def refusal(page: Page, path: Path) -> Locator:
    return page.get_by_test_id("stAlertContentError").filter(has_text=path.name)


def load(page: Page) -> None:
    page.get_by_role("button", name="Load", exact=True).click()
    wait_idle(page)


def nav_names(page: Page) -> list[str]:
    """Page titles in the sidebar (a link's text starts with its icon's ligature name)."""
    links = page.get_by_test_id("stPageLink-NavLink")
    return [links.nth(i).inner_text().split()[-1] for i in range(links.count())]


def go_to(page: Page, name: str) -> None:
    page.get_by_test_id("stPageLink-NavLink").nth(nav_names(page).index(name)).click()
    wait_idle(page)


def visit_every_page(page: Page, tag: str) -> dict[str, int]:
    """Click through the sidebar navigation; per page the number of charts drawn."""
    drawn = {}
    for name in nav_names(page):
        go_to(page, name)
        no_exception(page)
        # Every page keeps the sidebar card, even one waiting for a model (Heads): app.py
        # draws it after the page, which a page's st.stop() would have prevented.
        assert "Current table" in sidebar_card(page), name
        if name not in ("Data", "Collection", "Heads"):  # nothing to draw before tables/a model
            drawn[name] = charts_drawn(page)
        screenshot(page, f"{tag}-{re.sub(r'[^a-z]+', '-', name.lower())}")
    return drawn


def test_opens_on_charts_of_a_simulated_table(page: Page, server_url: str):
    open_page(page, server_url)
    assert charts_drawn(page) >= 1
    for tab in ("Singular values", "Explained variance", "Reconstruction error"):
        expect(page.get_by_role("tab", name=tab)).to_be_visible()
    no_exception(page)
    assert "learned_like" in sidebar_card(page)
    expect(page.get_by_test_id("stMetric").first).to_be_visible()
    screenshot(page, "default-spectrum")


def test_npy_upload_reaches_every_page(page: Page, server_url: str, tmp_path: Path):
    path = tmp_path / "sinusoid.npy"
    np.save(path, sinusoidal_table(256, 64).astype(np.float32))
    upload(page, server_url, path)
    load(page)
    no_exception(page)
    assert "sinusoid.npy" in sidebar_card(page)
    drawn = visit_every_page(page, "npy")
    assert len(drawn) >= 1
    assert all(count >= 1 for count in drawn.values()), drawn
    # The spectrum of the uploaded table, not the default: 256 x 64 sinusoid, centred.
    go_to(page, "Spectrum")
    caption = page.get_by_test_id("stMain").get_by_test_id("stCaptionContainer").first
    expect(caption).to_contain_text("256 x 64")


def test_safetensors_tensor_pick(page: Page, server_url: str, tmp_path: Path):
    rng = np.random.default_rng(0)
    path = tmp_path / "gpt2-tiny.safetensors"
    save_file(
        {
            "wte.weight": rng.standard_normal((300, 32)).astype(np.float32),
            "wpe.weight": sinusoidal_table(128, 32).astype(np.float32),
            "h.0.attn.bias": np.zeros(32, np.float32),
        },
        path,
    )
    upload(page, server_url, path)
    # The position table is detected by name; pick the token table instead, then back.
    tensor = page.get_by_role("combobox", name="Tensor")
    expect(tensor).to_have_value("wpe.weight")
    load(page)
    assert "wpe.weight" in sidebar_card(page)
    assert "128 positions" in sidebar_card(page)
    assert "stored as float32" in sidebar_card(page)  # numpy's name, not safetensors' F32
    tensor.click()
    page.get_by_role("option", name="wte.weight").click()
    wait_idle(page)
    load(page)
    assert "wte.weight" in sidebar_card(page)
    assert "300 positions" in sidebar_card(page)


def test_hostile_files_are_refused_and_the_table_stays(page: Page, server_url: str, tmp_path: Path):
    open_page(page, f"{server_url}/data")
    before = sidebar_card(page)
    # One of each kind through the real chooser (tests/app/test_pages.py uploads every one):
    # a pickle, a zip bomb, a file listed fine and refused on loading, a header and a text.
    files = hostile_files(tmp_path)
    for name in ("rce.pkl", "zip_bomb.npz", "nan.npy", "st_nested_json.safetensors", "latin1.csv"):
        path = files[name]
        upload(page, server_url, path)
        if not refusal(page, path).count():  # listed fine (ragged CSV, NaN, ...)
            load(page)  # refused on reading
        expect(refusal(page, path)).to_be_visible()
        assert HOSTILE_WORDS[name].lower() in refusal(page, path).inner_text().lower(), name
        no_exception(page)
        assert sidebar_card(page) == before, name
    screenshot(page, "hostile-refused")
    assert not (tmp_path / MARKER).exists()


def test_figure_download_carries_settings(page: Page, server_url: str):
    open_page(page, server_url)
    page.get_by_text("Export figure").first.click()
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Interactive HTML (opens offline)").first.click()
    html = Path(download_info.value.path()).read_text()
    assert 'id="posviz-settings"' in html
    assert '"params"' in html
    assert '"center": true' in html
    assert "Plotly.newPlot" in html


def test_a_deep_link_as_a_fresh_servers_first_request_goes_through_the_router(page: Page):
    server, url = start_server()
    try:
        open_page(page, f"{url}/similarity")  # waits for the sidebar card that app.py draws
        assert "Spectrum" in nav_names(page)
        expect(page.get_by_role("heading", name="Similarity").first).to_be_visible()
        no_exception(page)
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_a_fresh_servers_first_load_never_lists_the_raw_page_files(page: Page):
    # Streamlit's pages-folder mode, in which a fresh server runs its first visit, would list
    # pages/*.py by file name ("app", "boundaries", ...) until app.py's navigation replaced
    # them. Every sidebar link drawn from the first byte on is recorded.
    page.add_init_script(
        """
        window.seenLinks = new Set();
        new MutationObserver(() => document.querySelectorAll(
            "[data-testid=stSidebarNav] a, [data-testid=stPageLink-NavLink]"
        ).forEach(a => window.seenLinks.add(a.innerText.trim().split(/\\s+/).pop())))
            .observe(document, {subtree: true, childList: true, characterData: true});
        """
    )
    server, url = start_server()
    try:
        open_page(page, url)
        seen = set(page.evaluate("[...window.seenLinks]"))
        assert seen == {title.split()[-1] for title in (p.title for p in PAGES)}, seen
        screenshot(page, "first-load")
    finally:
        server.terminate()
        server.wait(timeout=20)


def download_report(page: Page, folder: Path, *, slow: bool = False) -> Path:
    """Make the report, then download it to `folder`. A `slow` one (seconds: the probes on a
    large table) shows a progress bar naming the step meanwhile."""
    report_button(page).click()
    sidebar = page.get_by_test_id("stSidebar")
    if slow:
        told = sidebar.get_by_text(re.compile(r"Report: .+ \(step \d of 6"))
        expect(told).to_be_visible(timeout=30_000)
    ready = sidebar.get_by_role("button", name="Download the report")
    ready.wait_for(timeout=300_000)  # the probes on a loaded machine
    with page.expect_download(timeout=60_000) as download_info:
        ready.click()
    path = folder / "report.html"
    download_info.value.save_as(path)
    return path


def test_report_downloads_and_opens_offline(page: Page, server_url: str, tmp_path: Path):
    open_page(page, server_url)
    report = download_report(page, tmp_path, slow=True)
    # Offline: every request that is not the file itself fails.
    page.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
    page.goto(report.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=60_000)
    assert page.locator(".js-plotly-plot").count() == 8
    expect(page.get_by_role("heading", name="Probes")).to_be_visible()
    screenshot(page, "report")


def test_exported_numbers_are_the_ones_shown(page: Page, server_url: str):
    open_page(page, server_url)
    shown = page.get_by_test_id("stMetric").filter(has_text="effective rank")
    shown_value = float(shown.get_by_test_id("stMetricValue").inner_text())
    page.get_by_text("Numbers").click()
    # Opening the expander reruns the page; a button clicked mid-run may be replaced with its
    # download before the click lands.
    wait_idle(page)
    with page.expect_download() as download_info:
        page.get_by_test_id("stDownloadButton").filter(has_text="CSV").first.click()
    frame, settings = from_csv(Path(download_info.value.path()).read_text())
    exact = spectrum(simulate.learned_like(1024, 768, seed=0).values).metrics()
    assert frame.loc[0, "effective_rank"] == pytest.approx(exact["effective_rank"], rel=1e-12)
    assert round(frame.loc[0, "effective_rank"], 2) == shown_value
    assert frame.loc[0, "k90"] == exact["k90"]
    assert settings["analysis"] == "spectrum"
    assert settings["params"] == {"center": True}
    assert settings["provenance"]["tensor"] == "learned_like"


#: Markdown that would fetch an image and draw a link from outside, were it rendered.
MARKDOWN = "![x](http://127.0.0.1:9/x.png) [Log in again](http://127.0.0.1:9/) **b** :red[r]"


def test_link_values_and_tensor_names_show_as_literal_text(
    page: Page, server_url: str, tmp_path: Path
):
    # Formerly: an image in a URL value or a tensor name made every visitor's browser fetch
    # an outside URL, and a "Log in again" link appeared inside the app's own warning.
    outside = []
    page.on(
        "request", lambda request: outside.append(request.url) if ":9/" in request.url else None
    )
    open_page(page, f"{server_url}/?sim=sinusoidal&base={quote(MARKDOWN)}")
    warning = page.get_by_test_id("stAlertContentWarning")
    # Shown as typed, but for an invisible word joiner that keeps "http://" from autolinking.
    shown = MARKDOWN.replace("http", "http\u2060")
    expect(warning).to_contain_text(shown[:41])
    path = tmp_path / "names.safetensors"
    save_file({MARKDOWN: sinusoidal_table(16, 8).astype(np.float32)}, path)
    upload(page, server_url, path)
    load(page)
    assert shown in sidebar_card(page)
    expect(page.get_by_test_id("stMain").get_by_text(shown).first).to_be_visible()
    screenshot(page, "literal-names")
    assert page.locator("img[src*='127.0.0.1:9'], a[href*='127.0.0.1:9']").count() == 0
    assert not outside


def test_the_smallest_table_reaches_every_page_and_the_report(
    page: Page, server_url: str, tmp_path: Path
):
    # Formerly: pages and the report failed on short tables, and the failed report's button
    # did nothing at all.
    path = tmp_path / "smallest.npy"
    np.save(path, np.random.default_rng(0).standard_normal((MIN_POSITIONS, MIN_DIMS)))
    upload(page, server_url, path)
    load(page)
    assert f"{MIN_POSITIONS} positions" in sidebar_card(page)
    drawn = visit_every_page(page, "smallest")
    assert all(count >= 1 for count in drawn.values()), drawn
    report = download_report(page, tmp_path)
    page.goto(report.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=60_000)
    assert page.locator(".js-plotly-plot").count() == 8


def main_charts(page: Page) -> Locator:
    return page.locator("[data-testid=stMain] [data-testid=stPlotlyChart] .js-plotly-plot")


def test_hidden_charts_are_one_click_away(page: Page, server_url: str):
    open_page(page, server_url)
    drawn = main_charts(page)
    for name, opener, hint in (
        ("Similarity", "Exact window: every pair of a range of positions", "Open the exact window"),
        ("Compare", "Cumulative explained variance", "Similarity maps"),
    ):
        go_to(page, name)
        shown = charts_drawn(page)
        expect(page.get_by_test_id("stMain")).to_contain_text(hint)
        page.get_by_text(opener).click()
        wait_idle(page)
        expect(drawn).to_have_count(shown + 1, timeout=60_000)
        no_exception(page)
        screenshot(page, f"opened-{name.lower()}")


def open_tab(page: Page, label: str) -> None:
    page.get_by_role("tab", name=label, exact=True).click()
    wait_idle(page)


def test_components_and_resample_draw_the_open_tab_and_keep_the_rest_one_click_away(
    page: Page, server_url: str
):
    main = page.get_by_test_id("stMain")
    drawn = main_charts(page)
    open_page(page, f"{server_url}/components")
    assert charts_drawn(page) == 1  # the projections over position; the other tabs: nothing
    open_tab(page, "Path")
    expect(main).to_contain_text("one click away")
    expect(drawn).to_have_count(1)
    page.get_by_text("Show the 3-D path (PC x / y / z)").click()
    wait_idle(page)
    expect(drawn).to_have_count(2, timeout=60_000)
    screenshot(page, "components-path-3d")
    open_tab(page, "Sinusoid fits")
    expect(drawn).to_have_count(1)
    page.get_by_text("Periodogram: each PC's share of variance per frequency").click()
    wait_idle(page)
    expect(drawn).to_have_count(2, timeout=60_000)
    open_tab(page, "Path")  # the toggle kept its value while its tab was closed
    expect(drawn).to_have_count(2, timeout=60_000)
    assert "components.section=Path" in page.url
    no_exception(page)

    open_page(page, f"{server_url}/resample?resample.section=Similarity")
    expect(drawn).to_have_count(1, timeout=60_000)
    expect(main).to_contain_text("Offsets up to")
    open_tab(page, "Spectrum")
    expect(drawn).to_have_count(1)
    page.get_by_text("Cumulative explained variance", exact=True).click()
    wait_idle(page)
    expect(drawn).to_have_count(2, timeout=60_000)
    expect(main.locator(".gtitle").nth(1)).to_contain_text("Cumulative")
    no_exception(page)
    screenshot(page, "resample-cumulative")


def test_a_tab_draws_its_section_only_when_open_and_a_link_keeps_it(page: Page, server_url: str):
    open_page(page, server_url)
    main = page.get_by_test_id("stMain")
    drawn = main_charts(page)
    tables = main.get_by_test_id("stDataFrame")
    go_to(page, "probes")  # Boundaries & probes: its Positions tab
    expect(drawn).to_have_count(1, timeout=60_000)
    expect(tables).to_have_count(0)
    page.get_by_role("tab", name="Tables").click()
    wait_idle(page)
    # Flags and the boundary summary; the smooth default table has no change point, said in
    # words instead of an empty table.
    expect(tables).to_have_count(2, timeout=60_000)
    expect(main).to_contain_text("None found (no step stands out")
    expect(drawn).to_have_count(0)
    assert "boundaries.section=Tables" in page.url
    no_exception(page)
    screenshot(page, "boundaries-tables")
    open_page(page, f"{server_url}/compare?compare.section={quote('Similarity maps')}")
    expect(page.get_by_role("tab", name="Similarity maps", selected=True)).to_be_visible()
    expect(drawn).to_have_count(1, timeout=60_000)
    expect(main).to_contain_text("cosine similarity between positions")
    no_exception(page)
    screenshot(page, "compare-maps")


def test_sections_are_tabs_drawn_when_opened_and_kept_in_the_url(page: Page, server_url: str):
    open_page(page, server_url)
    chart = main_charts(page)
    expect(chart).to_have_count(1)
    expect(chart).to_contain_text("Singular values")
    open_tab(page, "Explained variance")
    expect(chart).to_have_count(1)
    expect(chart).to_contain_text("Cumulative explained variance")
    assert "spectrum.section=Explained" in page.url
    go_to(page, "Similarity")
    expect(chart).to_have_count(1)
    expect(page.get_by_test_id("stMetric")).to_have_count(0)
    open_tab(page, "Similarity vs offset")
    expect(chart).to_contain_text("positions k apart")
    expect(page.get_by_test_id("stMetric")).to_have_count(6)  # the scores, with their profile
    # A tab's settings are kept while another tab is open.
    largest = page.get_by_role("spinbutton", name="Largest offset k")
    largest.fill("50")
    largest.press("Enter")
    wait_idle(page)
    open_tab(page, "One position vs all")
    open_tab(page, "Similarity vs offset")
    expect(page.get_by_role("spinbutton", name="Largest offset k")).to_have_value("50")
    no_exception(page)
    # A link opens its tab; the position slider (a fragment) still redraws its chart there.
    open_page(page, f"{server_url}/similarity?similarity.section=One+position+vs+all")
    expect(chart).to_contain_text("of position 512 to every position")
    page.get_by_role("slider").focus()
    page.keyboard.press("ArrowRight")
    wait_idle(page)
    expect(chart).to_contain_text("of position 513 to every position")
    no_exception(page)
    screenshot(page, "similarity-one-position")


def test_the_overview_picture_gives_way_to_the_exact_cells_on_request(page: Page, server_url: str):
    open_page(page, f"{server_url}/similarity")
    heatmap = page.get_by_test_id("stPlotlyChart").first
    area = heatmap.locator(".nsewdrag").first
    area.hover()
    expect(heatmap.locator(".hoverlayer")).to_contain_text("value: not in a picture")
    expect(page.get_by_test_id("stMain")).to_contain_text("drawn as a picture")
    page.get_by_text("Exact values on hover", exact=True).click()
    wait_idle(page)
    expect(heatmap.locator(".hm")).to_have_count(1)  # the heatmap's cells are drawn
    expect(page.get_by_test_id("stMain")).not_to_contain_text("drawn as a picture")
    page.mouse.move(0, 0)
    area.hover()
    expect(heatmap.locator(".hoverlayer")).to_contain_text(re.compile(r"cosine=-?\d\.\d{4}"))
    screenshot(page, "similarity-exact-cells")
