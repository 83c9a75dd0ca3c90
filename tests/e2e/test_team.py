"""posviz for a team, in real browsers: sessions are isolated, the shared folder loads, eight
users at once get every page, and memory levels off over many uploads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import statistics
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from playwright.async_api import Browser as AsyncBrowser
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from playwright.async_api import async_playwright
from playwright.sync_api import Browser, Page, expect
from safetensors.numpy import save_file

from posviz.simulate import sinusoidal_table
from posviz.ui.pages import PAGES
from tests.e2e.conftest import ARTIFACTS, IDLE, RUNNING, open_page, start_server, wait_idle
from tests.e2e.test_browser import charts_drawn, go_to, load, nav_names, no_exception, upload

pytestmark = pytest.mark.e2e

#: Sizes scaled to a shared 2-core machine (1024 x 768 x 8 users took over 4 minutes there).
SESSIONS, LOAD_SHAPE = 8, (256, 192)
#: Long and narrow: a leaked similarity map (rows², 3.1 MiB) dwarfs the upload Streamlit keeps
#: (rows x cols, 0.31 MiB), so a leak and the machine's noise lie far apart (see the bound).
UPLOADS, MEMORY_SHAPE = 30, (640, 128)
#: The team server's cache, per cached computation: small, so the uploads overflow it early.
SMALL_CACHE = "8MB"
#: As deployed: no file watcher (the image's files never change; here other work edits them).
SERVER = {"STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}


@pytest.fixture(scope="module")
def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only-style model folder: a checkpoint, a nested table, a link leading outside."""
    root = tmp_path_factory.mktemp("models")
    (root / "gpt2").mkdir()
    rng = np.random.default_rng(0)
    save_file(
        {
            "wte.weight": rng.standard_normal((200, 24)).astype(np.float32),
            "wpe.weight": sinusoidal_table(112, 24).astype(np.float32),
        },
        root / "gpt2" / "model.safetensors",
    )
    np.save(root / "sinusoid.npy", sinusoidal_table(64, 16).astype(np.float32))
    (root / "passwd.txt").symlink_to("/etc/passwd")
    return root


@pytest.fixture(scope="module")
def team_server(shared_folder: Path) -> Iterator[tuple[int, str]]:
    """A server as a team runs it: shared folder set, cache bounded small. (pid, url)."""
    server, url = start_server(
        SERVER | {"POSVIZ_DATA_DIR": str(shared_folder), "POSVIZ_CACHE_SIZE": SMALL_CACHE}
    )
    yield server.pid, url
    server.terminate()
    server.wait(timeout=20)


def card(page: Page) -> str:
    return page.get_by_test_id("stSidebar").inner_text()


def main_text(page: Page) -> str:
    return page.get_by_test_id("stMain").inner_text()


def npy(path: Path, rows: int, cols: int, seed: int) -> Path:
    """A distinct float32 table (a sinusoid plus seeded noise) saved as .npy."""
    noise = np.random.default_rng(seed).standard_normal((rows, cols))
    np.save(path, (sinusoidal_table(rows, cols) + 0.1 * noise).astype(np.float32))
    return path


def cache_bytes(url: str) -> dict[str, int]:
    """Bytes per cache (``type:name``) from the server's /_stcore/metrics, as Streamlit counts."""
    with urllib.request.urlopen(f"{url}/_stcore/metrics?families=cache_memory_bytes") as reply:
        text = reply.read().decode()
    pattern = r'^cache_memory_bytes\{cache_type="([^"]*)",cache="([^"]*)"\} (\d+)$'
    return {f"{t}:{n}": int(b) for t, n, b in re.findall(pattern, text, flags=re.MULTILINE)}


def rss_mib(pid: int, field: str) -> float:
    """`field` (VmRSS now, VmHWM peak) of a process plus its descendants', in MiB."""
    (kib,) = (
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith(f"{field}:")
    )
    return kib / 1024 + sum(rss_mib(child, field) for child in _children(pid))


def _children(pid: int) -> list[int]:
    """Child processes, from every process's parent id (/proc/<pid>/task/*/children needs a
    kernel option these machines lack)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # Field 4 is the parent id; the command name before it may hold spaces.
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(stat.parent.name))
    return children


# --- (a) isolation ----------------------------------------------------------------------------


def test_two_sessions_see_only_their_own_table(
    browser: Browser, browser_context_args: dict, team_server: tuple[int, str], tmp_path: Path
):
    _, url = team_server
    alpha = npy(tmp_path / "alpha.npy", 96, 32, seed=1)
    beta = npy(tmp_path / "beta.npy", 160, 48, seed=2)
    pages = {}
    for path in (alpha, beta):
        pages[path] = browser.new_context(**browser_context_args).new_page()
        upload(pages[path], url, path)
    for page in pages.values():  # both sessions hold an upload before either loads it
        load(page)

    def only_own(step: str) -> None:
        for path, other in ((alpha, beta), (beta, alpha)):
            page = pages[path]
            no_exception(page)
            assert path.name in card(page), (step, path.name)
            assert other.name not in card(page) + main_text(page), (step, path.name)

    only_own("loaded")
    shapes = {alpha: "96 x 32", beta: "160 x 48"}
    for name in nav_names(pages[alpha]):
        for path, page in pages.items():
            go_to(page, name)
            # Collection, Schemes and Heads show their own tables and models; the card
            # (only_own) names the current one.
            if name not in ("Collection", "Schemes", "Heads"):
                expect(page.get_by_test_id("stMain")).to_contain_text(shapes[path])
        only_own(name)
    # A rerun from a widget in one session (centring off) leaves both tables where they were.
    go_to(pages[alpha], "Spectrum")
    pages[alpha].get_by_text("Mean-centre rows").click()
    wait_idle(pages[alpha])
    expect(pages[alpha].get_by_test_id("stMain")).to_contain_text("uncentred")
    go_to(pages[beta], "Spectrum")
    expect(pages[beta].get_by_test_id("stMain")).not_to_contain_text("uncentred")
    only_own("after a rerun")
    for page in pages.values():
        page.context.close()


# --- (b) shared folder ------------------------------------------------------------------------


def test_a_file_of_the_shared_folder_loads(page: Page, team_server: tuple[int, str]):
    _, url = team_server
    open_page(page, f"{url}/data")
    page.get_by_role("tab", name="Shared folder").click()
    wait_idle(page)  # choosing a tab reruns the page
    chooser = page.get_by_role("combobox", name="File in the shared folder")
    chooser.click()
    options = page.get_by_role("option")
    # The link to /etc/passwd is not offered.
    expect(options).to_have_text(["gpt2/model.safetensors", "sinusoid.npy"])
    options.filter(has_text="gpt2/model.safetensors").click()
    expect(page.get_by_text("gpt2/model.safetensors holds 2 tensors")).to_be_visible()
    wait_idle(page)
    expect(page.get_by_role("combobox", name="Tensor")).to_have_value("wpe.weight")
    load(page)
    no_exception(page)
    assert "wpe.weight" in card(page)
    assert "112 positions x 24 dims" in card(page)
    assert "gpt2/model.safetensors" in card(page)


# --- (c) eight users at once ------------------------------------------------------------------


async def _idle(page) -> None:
    """As conftest.wait_idle, for the async API."""
    with contextlib.suppress(PlaywrightTimeoutError):  # the run may be over before we look
        await page.wait_for_selector(RUNNING, timeout=3_000)
    await page.wait_for_selector(IDLE, timeout=180_000)


async def _user(browser: AsyncBrowser, url: str, path: Path) -> dict[str, float]:
    """One user: upload `path`, load it, then open every page; seconds per page."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(180_000)
    await page.goto(f"{url}/data")
    await page.get_by_text("Current table").wait_for()
    await _idle(page)
    await page.get_by_role("tab", name="Upload a file").click()
    await _idle(page)  # choosing a tab reruns the page: the chooser is drawn anew
    await page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(path)
    await page.get_by_text(f"{path.name} holds 1 tensor").wait_for()
    await page.wait_for_selector(IDLE)  # the listing ends the upload's run
    await page.get_by_role("button", name="Load", exact=True).click()
    await _idle(page)
    links = page.get_by_test_id("stPageLink-NavLink")
    names = [(await links.nth(i).inner_text()).split()[-1] for i in range(await links.count())]
    seconds = {}
    for i, name in enumerate(names):
        start = time.perf_counter()
        await links.nth(i).click()
        await _idle(page)
        # No chart before tables are added (Data, Collection) or a model is opened (Heads).
        if name not in ("Data", "Collection", "Heads"):
            await page.wait_for_selector("[data-testid=stPlotlyChart] .main-svg", state="attached")
        seconds[name] = time.perf_counter() - start
        assert await page.get_by_test_id("stException").count() == 0, (path.name, name)
        assert path.name in await page.get_by_test_id("stSidebar").inner_text(), (path.name, name)
    await context.close()
    return seconds


async def _crowd(
    executable: str, args: list[str], url: str, paths: list[Path], pid: int
) -> tuple[list[dict], float]:
    """`paths` as users at once: their seconds per page, and the server's CPU seconds."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=args)
        try:
            # One visit first: on a fresh server, sessions whose first run races the server's
            # first run can end without navigation or sidebar (1-3 of 8, streamlit 1.67).
            warm = await browser.new_page()
            await warm.goto(url)
            await warm.get_by_text("Current table").wait_for(timeout=60_000)
            await warm.close()
            cpu = cpu_seconds(pid)
            results = await asyncio.wait_for(
                asyncio.gather(*(_user(browser, url, path) for path in paths)), timeout=300
            )
            return results, cpu_seconds(pid) - cpu
        finally:
            await browser.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the server process has used (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20, method="inclusive")[-1]


def load_run(
    launch: tuple[str, list[str]],
    tmp_path: Path,
    shape: tuple[int, int] = LOAD_SHAPE,
    *,
    yardstick: bool = True,
) -> dict:
    """One user alone (if `yardstick`), then SESSIONS users at once, on a fresh server: every
    page time, the server process's CPU seconds (browsers apart), its peak memory. Timing is
    reported by benchmarks/team.py, never asserted: on a shared machine other work sets the
    pace; the test leaves the lone users out (a fifth of its time)."""
    paths = [npy(tmp_path / f"user{i}.npy", *shape, seed=i) for i in range(SESSIONS)]
    first, alone = (npy(tmp_path / f"alone{i}.npy", *shape, seed=SESSIONS + i) for i in (0, 1))
    server, url = start_server(SERVER)
    try:
        # In a thread of its own: the sync Playwright of the other tests owns this one's loop.
        with ThreadPoolExecutor(1) as thread:
            # One user alone, twice on tables of their own: the first run pays the server's
            # one-time costs (imports, first runs of each page), the second is the yardstick.
            if yardstick:
                thread.submit(asyncio.run, _crowd(*launch, url, [first], server.pid)).result()
                (one,), one_cpu = thread.submit(
                    asyncio.run, _crowd(*launch, url, [alone], server.pid)
                ).result()
            start = time.perf_counter()
            results, cpu = thread.submit(
                asyncio.run, _crowd(*launch, url, paths, server.pid)
            ).result()
            wall = time.perf_counter() - start
        peak = rss_mib(server.pid, "VmHWM")
    finally:
        server.terminate()
        server.wait(timeout=20)
    times = sorted(t for seconds in results for t in seconds.values())
    report = {
        "sessions": SESSIONS,
        "table": f"{shape[0]} x {shape[1]} float32 .npy",
        "page_visits": len(times),
        "pages_per_user": [sorted(seconds) for seconds in results],
        "page_seconds_p50": round(statistics.median(times), 2),
        "page_seconds_p95": round(_p95(times), 2),
        "page_seconds_max": round(times[-1], 2),
        "per_page_p50": {
            name: round(statistics.median(r[name] for r in results), 2) for name in results[0]
        },
        # Each user's upload and load runs included, divided over its page visits.
        "server_cpu_seconds": round(cpu, 2),
        "server_cpu_seconds_per_page_view": round(cpu / len(times), 3),
        # The rest of the machine's CPU went to the eight browsers (and to other work on it).
        "server_share_of_machine_cpu": round(cpu / (wall * os.cpu_count()), 3),
        "server_peak_rss_mib": round(peak, 1),
        "wall_seconds": round(wall, 1),
        "load_average": os.getloadavg(),
    }
    if yardstick:
        one_p95 = _p95(list(one.values()))
        report |= {
            "one_user_page_seconds": {name: round(t, 2) for name, t in one.items()},
            "one_user_page_seconds_p50": round(statistics.median(one.values()), 2),
            "one_user_page_seconds_p95": round(one_p95, 2),
            "p95_x_one_user": round(_p95(times) / one_p95, 2),
            "one_user_server_cpu_seconds_per_page_view": round(one_cpu / len(one), 3),
        }
    return report


def test_eight_concurrent_users_get_every_page(browser_type_launch_args: dict, tmp_path: Path):
    launch = (browser_type_launch_args["executable_path"], browser_type_launch_args["args"])
    report = load_run(launch, tmp_path, yardstick=False)
    print("\nload test:", json.dumps(report, indent=1))
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "load.json").write_text(json.dumps(report, indent=1) + "\n")
    # Every user reached every page (each visit checked the page raised nothing and the card
    # named the user's own table), and the server stayed within a team container's memory.
    pages = sorted(title.split()[-1] for title in (p.title for p in PAGES))
    assert report["pages_per_user"] == [pages] * SESSIONS
    assert report["page_visits"] == SESSIONS * len(pages)
    assert report["server_peak_rss_mib"] < 2048


# --- (d) memory levels off --------------------------------------------------------------------


def test_memory_levels_off_over_many_uploads(
    page: Page, team_server: tuple[int, str], tmp_path: Path
):
    pid, url = team_server
    open_page(page, f"{url}/data")
    rss = [rss_mib(pid, "VmRSS")]
    for i in range(UPLOADS):
        path = npy(tmp_path / f"upload{i:02}.npy", *MEMORY_SHAPE, seed=100 + i)
        go_to(page, "Data")  # through the navigation: a reload would start a new session
        page.get_by_role("tab", name="Upload a file").click()
        wait_idle(page)  # choosing a tab reruns the page: the chooser is drawn anew
        page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(path)
        # The listing appears at the end of the upload's run: then wait only for idle.
        expect(page.get_by_text(f"{path.name} holds 1 tensor")).to_be_visible(timeout=60_000)
        page.wait_for_selector(IDLE, timeout=60_000)
        load(page)
        go_to(page, "Similarity")  # the page with the largest cached results (heatmaps)
        assert charts_drawn(page) >= 1
        no_exception(page)
        assert path.name in card(page)
        rss.append(rss_mib(pid, "VmRSS"))
    print(f"\nRSS MiB after each upload ({SMALL_CACHE} cache): {[round(r) for r in rss]}")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "memory.json").write_text(json.dumps({"cache": SMALL_CACHE, "rss_mib": rss}))

    # Exact, and blind to the allocator: what each cached computation holds, as Streamlit counts
    # it. Every one stays within the cap; a cache that kept every similarity map would hold
    # 30 x 3.1 MiB in one function.
    held = cache_bytes(url)
    print(f"bytes per cache after {UPLOADS} uploads: {held}")
    assert held, "no cache metrics: the page drew nothing cached"
    for name, size in held.items():
        if name.startswith("st_cache_data:"):
            assert size <= 8 * 2**20, (name, size)
    # Coarse, from the operating system: growth per 10 uploads over the last 20, as the median
    # step, so the allocator's one-off steps (arenas of +7 to +18 MiB, a few times in a run) do
    # not count. What still grows is Streamlit keeping each upload until the session ends
    # (0.31 MiB each) and noise: 10 and 15 per 10 measured (the second in the CI run whose
    # Theil-Sen slope, 20.8, crossed the old bound); a cache that keeps every similarity map
    # measured 40 per 10 (POSVIZ_CACHE_SIZE=1GB), and held 98.6 MB in one function above.
    last = 10 * statistics.median(np.diff(rss[-21:]))
    assert last < 25, (last, rss)
