"""Real-browser fixtures: a posviz server on a free port and Debian's chromium under Playwright."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, WebSocket
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests import ROOT

CHROMIUM = Path(os.environ.get("POSVIZ_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = ROOT / "artifacts"
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
RUNNING = "[data-testid=stApp][data-test-script-state=running]"
SKELETON = "[data-testid=stSkeleton]"


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


class Runs:
    """The script runs a page asked the server for and those the server finished, as its
    websocket carried them: a run asked for is known the moment the browser sends it, however
    long a loaded server takes to start it (the page's own running state shows only once the
    server has started it, so a look before that saw the last run's page as done)."""

    #: How a run ends that another run replaces (a newer request, ``st.rerun``).
    REPLACED = ForwardMsg.FINISHED_EARLY_FOR_RERUN

    def __init__(self, page: Page) -> None:
        self.asked = self.finished = 0  # the websocket message count at the last of each
        self.count = 0
        page.on("websocket", self._socket)

    def _socket(self, socket: WebSocket) -> None:
        if socket.url.endswith("/_stcore/stream"):
            socket.on("framesent", self._sent)
            socket.on("framereceived", self._received)

    def _sent(self, payload: str | bytes) -> None:
        self.count += 1
        if isinstance(payload, bytes) and BackMsg.FromString(payload).HasField("rerun_script"):
            self.asked = self.count

    def _received(self, payload: str | bytes) -> None:
        self.count += 1
        if not isinstance(payload, bytes):
            return
        message = ForwardMsg.FromString(payload)
        if message.HasField("script_finished") and message.script_finished != self.REPLACED:
            self.finished = self.count

    @property
    def pending(self) -> bool:
        """A run was asked for and has not finished since."""
        return self.asked > self.finished


#: Each page's runs, watched from before its first navigation (`watch`).
_RUNS: dict[Page, Runs] = {}


def watch(page: Page) -> Page:
    """Count `page`'s script runs (once; before it opens the app, or its socket is missed)."""
    if page not in _RUNS:
        _RUNS[page] = Runs(page)
    return page


@pytest.fixture
def page(page: Page) -> Iterator[Page]:
    """pytest-playwright's page, its script runs counted."""
    yield watch(page)
    _RUNS.pop(page, None)


def wait_idle(page: Page, timeout: float = 180_000) -> None:
    """Wait for the script run an action asked for to finish, if it asked for one.

    The browser sends the request while the action is handled; the grace covers only the
    time that message takes to be reported here, not the server's time to start the run.
    The timeouts guard against a hang, not a slow page: a loaded CI machine (eight users'
    browsers on its two cores) made a 7 s page take over 60 s.
    """
    assert page in _RUNS, "a page must be watched (conftest.watch) before it opens the app"
    runs = _RUNS[page]
    deadline = time.monotonic() + 3
    while not runs.pending and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    deadline = time.monotonic() + timeout / 1000
    while runs.pending:
        assert time.monotonic() < deadline, f"a script run did not finish in {timeout / 1000} s"
        page.wait_for_timeout(50)
    page.wait_for_selector(IDLE, timeout=timeout)
    # An element whose code loads on first use (a download button: a new browser context's
    # first) draws a skeleton until its chunk has come; the numbers read next include it.
    page.wait_for_function(f"!document.querySelector('{SKELETON}')", timeout=timeout)


def report_button(page: Page) -> Locator:
    """The sidebar card's last element, so the last one app.py draws."""
    return page.get_by_test_id("stSidebar").get_by_role("button", name="Report (HTML)")


def open_page(page: Page, url: str, timeout: float = 180_000) -> None:
    """Go to `url` and wait for the whole app script, up to its last element."""
    watch(page).goto(url)
    report_button(page).wait_for(timeout=timeout)
    wait_idle(page)


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)
