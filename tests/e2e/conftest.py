"""Real-browser fixtures: a posviz server on a free port and Debian's chromium under Playwright."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page

from tests import ROOT

CHROMIUM = Path(os.environ.get("POSVIZ_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = ROOT / "artifacts"
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
RUNNING = "[data-testid=stApp][data-test-script-state=running]"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.e2e)
            if not CHROMIUM.exists():
                item.add_marker(pytest.mark.skip(reason=f"no browser at {CHROMIUM}"))


@pytest.fixture(scope="session")
def browser_type_launch_args() -> dict:
    # Debian's chromium as root on a closed network: never `playwright install`.
    return {
        "executable_path": str(CHROMIUM),
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args() -> dict:
    return {"viewport": {"width": 1400, "height": 1000}, "accept_downloads": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """Start `streamlit run app.py` on a free port and wait until /_stcore/health says ok."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            f"--server.port={port}",
            "--server.headless=true",
            "--server.address=127.0.0.1",
        ],
        cwd=ROOT,
        env=os.environ | (env or {}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return server, url
        except OSError:
            assert server.poll() is None, "streamlit exited during start-up"
            assert time.monotonic() < deadline, "streamlit did not answer /_stcore/health in 60 s"
            time.sleep(0.3)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    server, url = start_server()
    yield url
    server.terminate()
    server.wait(timeout=20)


def wait_idle(page: Page, timeout: float = 60_000) -> None:
    """Wait for the script run an action triggered to finish (not for a fixed sleep)."""
    with contextlib.suppress(Exception):
        page.wait_for_selector(RUNNING, timeout=3_000)
    page.wait_for_selector(IDLE, timeout=timeout)


def report_button(page: Page) -> Locator:
    """The sidebar card's last element, so the last one app.py draws."""
    return page.get_by_test_id("stSidebar").get_by_role("button", name="Report (HTML)")


def open_page(page: Page, url: str, timeout: float = 60_000) -> None:
    """Go to `url` and wait for the whole app script, up to its last element."""
    page.goto(url)
    report_button(page).wait_for(timeout=timeout)
    wait_idle(page)


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)
