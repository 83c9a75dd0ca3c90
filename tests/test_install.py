"""posviz as a new user gets it: a wheel built from this tree, installed into a fresh venv.

Offline: the wheel is built with the installed hatchling (no build isolation) and installed
without dependencies into a fresh venv that sees the packages of the interpreter running the
tests (a virtualenv's or the system's). Timings, the wheel's
size and its file list go to artifacts/install.json.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import site
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
from playwright.sync_api import Page
from safetensors.numpy import save, save_file

from posviz import __version__
from posviz._settings import SERVED_TABLE
from posviz.simulate import sinusoidal_table
from posviz.spectrum import spectrum
from tests import ROOT
from tests.e2e.conftest import (  # noqa: F401 -- the browser fixtures: Debian's chromium
    ARTIFACTS,
    CHROMIUM,
    browser_context_args,
    browser_type_launch_args,
    free_port,
    open_page,
    screenshot,
)

# Builds a wheel and a venv once per run: part of the full run, not of the quick loop.
pytestmark = pytest.mark.slow

# The checkpoint the commands open: a token table beside the position table, so the position
# table must be found by name.
POSITIONS = sinusoidal_table(96, 32).astype(np.float32)


@dataclass
class Install:
    wheel: Path
    bin: Path
    workdir: Path
    checkpoint: Path
    timings: dict[str, float] = field(default_factory=dict)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a command from the venv, in a folder outside the clone, timed by its name."""
        start = time.perf_counter()
        result = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            cwd=self.workdir,
            env=_clean_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        self.timings[" ".join(args[:2])] = round(time.perf_counter() - start, 2)
        return result


def _clean_env() -> dict[str, str]:
    """This environment without anything that would put the clone's posviz on the path."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", SERVED_TABLE}}


def _timed(timings: dict[str, float], name: str, command: list[str | Path]) -> None:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=_clean_env())
    timings[name] = round(time.perf_counter() - start, 2)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Install:
    root = tmp_path_factory.mktemp("install")
    timings: dict[str, float] = {}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _timed(
        timings,
        "build wheel",
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", root, ROOT],
    )
    (wheel,) = root.glob("posviz-*.whl")
    venv = root / "venv"
    _timed(timings, "create venv", [sys.executable, "-m", "venv", "--without-pip", venv])
    _see_these_packages(venv)
    # The venv's python runs this interpreter's pip (it sees this interpreter's packages) and
    # installs into the venv; --ignore-installed even if a posviz is installed here.
    venv_pip = [venv / "bin" / "python", *pip[1:]]
    _timed(
        timings,
        "pip install wheel",
        [*venv_pip, "install", "--no-deps", "--no-index", "--ignore-installed", wheel],
    )
    workdir = root / "work"
    workdir.mkdir()
    checkpoint = workdir / "model.safetensors"
    save_file(_tensors(), checkpoint)
    return Install(wheel, venv / "bin", workdir, checkpoint, timings)


def _see_these_packages(venv: Path) -> None:
    """Let `venv` see the packages of the interpreter running the tests, after its own.

    `venv --system-site-packages` would show the base interpreter's packages, which inside a
    virtualenv are not the ones the tests were installed into; a .pth file naming this
    interpreter's site folders works from a venv, a system Python and CI alike.
    """
    folders = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    (own,) = (venv / "lib").glob("python3*/site-packages")
    # An `import` line runs: addsitedir also reads the .pth files in those folders.
    lines = [f"import site; site.addsitedir({str(folder)!r})" for folder in folders]
    (own / "_posviz_test_parent.pth").write_text("\n".join(lines) + "\n")


def _tensors() -> dict[str, np.ndarray]:
    tokens = np.random.default_rng(0).standard_normal((200, 32)).astype(np.float32)
    return {"wte.weight": tokens, "wpe.weight": POSITIONS}


@pytest.fixture(scope="module", autouse=True)
def record(installed: Install):
    yield
    with zipfile.ZipFile(installed.wheel) as archive:
        names = archive.namelist()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "install.json").write_text(
        json.dumps(
            {
                "wheel": installed.wheel.name,
                "wheel_bytes": installed.wheel.stat().st_size,
                "timings_s": installed.timings,
                "files": names,
            },
            indent=1,
        )
    )


def test_the_wheel_carries_the_package_and_the_app_and_nothing_else(installed: Install):
    with zipfile.ZipFile(installed.wheel) as archive:
        names = set(archive.namelist())
    tracked = subprocess.run(
        ["git", "ls-files", "posviz", "app.py", "pages", ".streamlit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    packed = {name if name.startswith("posviz/") else f"posviz/_app/{name}" for name in tracked}
    metadata = {name for name in names if name.startswith("posviz-") and ".dist-info/" in name}
    assert names - metadata == packed
    assert {name.split("/")[-1] for name in metadata} == {
        "METADATA",
        "WHEEL",
        "entry_points.txt",
        "RECORD",
    }
    assert "posviz/_app/.streamlit/config.toml" in names
    # Code (about 420 KB with GGUF and heads) and the models the Heads page opens offline
    # (posviz/examples: all-MiniLM-L6-v2's heads tensors, 7.9 MB, hardly compressible): any
    # other data file or checkpoint would be megabytes more.
    shipped = sum(p.stat().st_size for p in (ROOT / "posviz" / "examples").rglob("*.safetensors"))
    assert installed.wheel.stat().st_size < 600_000 + shipped


def test_help_and_version_from_the_console_script(installed: Install):
    text = installed.run("posviz", "--help").stdout
    assert "serve" in text
    assert "posviz serve model.safetensors" in text  # the examples
    assert installed.run("posviz", "--version").stdout == f"posviz {__version__}\n"


def test_summary_from_the_console_script_gives_the_numbers_of_the_position_table(
    installed: Install,
):
    out = installed.run("posviz", "summary", installed.checkpoint.name, "--json").stdout
    record = json.loads(out)
    expected = spectrum(POSITIONS)
    provenance, numbers = record["provenance"], record["numbers"]
    described = (provenance["tensor"], provenance["shape"], provenance["dtype"])
    assert described == ("wpe.weight", [96, 32], "float32")
    assert {k: numbers[k] for k in expected.metrics()} == expected.metrics()
    assert numbers["singular_values"] == expected.singular_values[:10].tolist()


def test_import_posviz_in_the_venv_loads_no_streamlit_and_finds_the_packed_app(
    installed: Install,
):
    code = (
        "import sys, posviz, posviz.cli; "
        "print(posviz.__file__, posviz.cli._app_path(), "
        "'streamlit' in sys.modules, 'plotly' in sys.modules)"
    )
    module, app, streamlit, plotly = installed.run("python", "-c", code).stdout.split()
    site = installed.bin.parent / "lib"
    assert Path(module).is_relative_to(site)
    # The Heads page's offline models, with their licence, inside the installed package.
    code = (
        "from posviz import examples; "
        "print(examples.path_of('example:all-MiniLM-L6-v2/config.json'))"
    )
    config = Path(installed.run("python", "-c", code).stdout.strip())
    assert config.is_relative_to(site)
    assert (config.parent / "model.safetensors").is_file()
    assert "Apache License" in (config.parent / "LICENSE").read_text()
    assert Path(app) == Path(module).parent / "_app" / "app.py"
    assert (streamlit, plotly) == ("False", "False")


@pytest.mark.e2e
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no browser at {CHROMIUM}")
@pytest.mark.parametrize(
    ("table", "source"), [("model.safetensors", "model.safetensors"), ("hf:org/tiny", "org/tiny")]
)
def test_posviz_serve_opens_the_app_on_the_table(
    installed: Install, page: Page, tmp_path: Path, table: str, source: str
):
    env = _clean_env()
    if table.startswith("hf:"):
        if importlib.util.find_spec("posviz.hub") is None:
            pytest.skip("posviz.hub comes with the Hub loader")
        files = {"model.safetensors": save(_tensors()), "config.json": b'{"model_type": "gpt2"}'}
        hub, hub_url = _serve_hub_repo("org/tiny", files)
        env |= {
            "HF_ENDPOINT": hub_url,
            "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "POSVIZ_HUB_CACHE": str(tmp_path / "hub-cache"),
        }
    port = free_port()
    start = time.perf_counter()
    server = subprocess.Popen(
        [installed.bin / "posviz", "serve", table, "--port", str(port)],
        cwd=installed.workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                assert server.poll() is None, "posviz serve exited during start-up"
                assert time.monotonic() < deadline, "no answer on /_stcore/health in 60 s"
                time.sleep(0.3)
        installed.timings[f"serve {table}: health ok"] = round(time.perf_counter() - start, 2)
        open_page(page, url)
        installed.timings[f"serve {table}: page drawn"] = round(time.perf_counter() - start, 2)
        card = page.get_by_test_id("stSidebar").inner_text()
        assert "wpe.weight" in card
        assert "96 positions x 32 dims" in card
        assert source in card
        rank = page.get_by_test_id("stMetric").filter(has_text="effective rank").inner_text()
        assert f"{spectrum(POSITIONS).effective_rank:.2f}" in rank
        screenshot(page, f"posviz-serve-{source.replace('/', '-')}")
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=20)
        if table.startswith("hf:"):
            hub.shutdown()
    assert out.startswith("posviz serve: wpe.weight, 96 x 32, ")


def _serve_hub_repo(repo: str, files: dict[str, bytes]) -> tuple[ThreadingHTTPServer, str]:
    """A Hub on 127.0.0.1 holding one model repo at one commit (any revision resolves to it).

    It answers what huggingface_hub asks for (checked with model_info, hf_hub_download,
    get_safetensors_metadata and HfFileSystem): model info, file listings, and file downloads
    with the commit and ETag headers, honouring Range.
    """
    commit = "0123456789abcdef0123456789abcdef01234567"
    entries = [
        {"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
        for name, data in files.items()
    ]
    info = {
        "id": repo,
        "modelId": repo,
        "sha": commit,
        "private": False,
        "gated": False,
        "siblings": [{"rfilename": name} for name in files],
    }
    name = re.escape(repo)
    api = re.compile(rf"/api/models/{name}(?:/revision/[^/]+)?")
    tree = re.compile(rf"/api/models/{name}/(?:tree|paths-info)/[^/]+(?:/.*)?")
    resolve = re.compile(rf"/{name}/resolve/[^/]+/(.+)")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:
            path = unquote(urlsplit(self.path).path)
            listing = info if api.fullmatch(path) else entries if tree.fullmatch(path) else None
            if listing is not None:
                self.send(200, json.dumps(listing).encode(), {"Content-Type": "application/json"})
                return
            found = resolve.fullmatch(path)
            if not found or found[1] not in files:
                self.send(404, b"not found", {"X-Error-Code": "EntryNotFound"})
                return
            data = files[found[1]]
            headers = {
                "X-Repo-Commit": commit,
                "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                "Accept-Ranges": "bytes",
            }
            span = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if not span:
                self.send(200, data, headers)
                return
            first = int(span[1])
            stop = min(int(span[2]) + 1 if span[2] else len(data), len(data))
            headers["Content-Range"] = f"bytes {first}-{stop - 1}/{len(data)}"
            self.send(206, data[first:stop], headers)

        do_HEAD = do_GET

        def do_POST(self) -> None:  # paths-info
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.do_GET()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
