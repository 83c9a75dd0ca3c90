"""A fake Hugging Face Hub on 127.0.0.1 for the tests: repos the test builds, served the way the
Hub serves them (revision API, resolve URLs with Range), with faults on demand, and a log of
every request and the body bytes sent."""

from __future__ import annotations

import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest

#: The token the fake Hub accepts for gated repos.
TOKEN = "hf_fake_token_for_tests"


@dataclass
class Repo:
    """A repo at one revision. `files` values are bytes or a path read by range.

    Faults: ``gated`` (401 without the token), ``redirect`` (302 to a CDN path, as the Hub does
    for LFS files), ``ignore_range`` (200 with the whole file), ``truncate`` (half the body,
    then the connection closes), ``rate_limit`` (429), ``delay`` (seconds before answering),
    ``trickle`` (seconds between the bytes of a range answer).

    Hostile answers: ``api`` (keys replacing those of the revision API's answer, e.g.
    ``{"siblings": {}}``), ``loop`` (files answer with a redirect to themselves),
    ``bad_gzip`` (files answer ``Content-Encoding: gzip`` with a body that is not gzip),
    ``slow`` (seconds between the bytes of every file answer, JSON included), ``cookie``
    (a ``Set-Cookie`` value sent with every answer), ``slow_headers`` (seconds between the
    bytes of every answer's status line and headers, the revision API's included).
    """

    files: dict[str, bytes | Path]
    commit: str
    gated: bool = False
    redirect: bool = False
    ignore_range: bool = False
    truncate: bool = False
    rate_limit: bool = False
    delay: float = 0.0
    trickle: float = 0.0
    api: dict = field(default_factory=dict)
    loop: bool = False
    bad_gzip: bool = False
    slow: float = 0.0
    cookie: str | None = None
    slow_headers: float = 0.0


@dataclass
class Sent:
    """One answer: the path asked for, its Range header, the status and the body bytes sent."""

    path: str
    range: str | None
    status: int
    nbytes: int
    cookie: str | None = None


@dataclass
class FakeHub:
    url: str
    repos: dict[tuple[str, str], Repo] = field(default_factory=dict)
    _log: list[Sent] = field(default_factory=list)
    _in_flight: int = 0
    _idle: threading.Condition = field(default_factory=threading.Condition)

    @property
    def log(self) -> list[Sent]:
        """The answers sent, each logged after its last byte: which the client may have read
        (and returned to the test) before the server's thread logs it, so wait for the answers
        under way (a few seconds at most: a trickle the client gave up on ends on its next
        write)."""
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=5)
        return self._log

    def add(self, repo: str, files: dict[str, bytes | Path], revision: str = "main", **faults):
        """Serve `files` as `repo` at `revision`; returns the Repo (its commit sha is made up)."""
        commit = hashlib.sha1(f"{repo}@{revision}{sorted(files)}".encode()).hexdigest()
        self.repos[repo, revision] = self.repos[repo, commit] = Repo(files, commit, **faults)
        return self.repos[repo, revision]

    def bytes_sent(self) -> int:
        return sum(s.nbytes for s in self.log)

    def requests_for(self, file: str) -> list[Sent]:
        return [s for s in self.log if s.path.endswith("/" + file)]


def _size(content: bytes | Path) -> int:
    return len(content) if isinstance(content, bytes) else content.stat().st_size


def _read(content: bytes | Path, begin: int, end: int) -> bytes:
    if isinstance(content, bytes):
        return content[begin:end]
    with content.open("rb") as file:
        file.seek(begin)
        return file.read(end - begin)


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            with hub._idle:
                hub._in_flight += 1
            try:
                self._get()
            finally:
                with hub._idle:
                    hub._in_flight -= 1
                    hub._idle.notify_all()

        def _get(self) -> None:
            path = self.path.split("?")[0]
            if path.startswith("/api/models/"):
                repo, _, revision = path.removeprefix("/api/models/").partition("/revision/")
                self._api(repo, unquote(revision))
            elif match := re.fullmatch(r"/cdn/(.+)/([0-9a-f]{40})/(.+)", path):
                self._file(hub.repos.get((match[1], match[2])), match[3], cdn=True)
            elif match := re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path):
                self._file(hub.repos.get((match[1], unquote(match[2]))), unquote(match[3]))
            else:
                self._send(404, b"not found", {"X-Error-Code": "RepoNotFound"})

        def _repo(self) -> Repo | None:
            """The repo this request names, at any revision (for the faults every answer has)."""
            path = self.path.removeprefix("/api/models").removeprefix("/cdn") + "/"
            return next((r for (n, _), r in hub.repos.items() if path.startswith(f"/{n}/")), None)

        def _refused(self, repo: Repo | None, code: str) -> bool:
            """Answer a missing repo or a fault; True when answered."""
            if repo is None:
                self._send(404, b"missing", {"X-Error-Code": code})
            elif repo.gated and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._send(401, b"gated", {"X-Error-Code": "GatedRepo"})
            elif repo.rate_limit:
                self._send(429, b"slow down")
            else:
                time.sleep(repo.delay)
                return False
            return True

        def _api(self, name: str, revision: str) -> None:
            known = any(key[0] == name for key in hub.repos)
            repo = hub.repos.get((name, revision))
            if self._refused(repo, "RevisionNotFound" if known else "RepoNotFound"):
                return
            siblings = [{"rfilename": f} for f in repo.files]
            answer = {"id": name, "sha": repo.commit, "siblings": siblings} | repo.api
            self._send(200, json.dumps(answer).encode(), {"Content-Type": "application/json"})

        def _file(self, repo: Repo | None, file: str, cdn: bool = False) -> None:
            if self._refused(repo, "RepoNotFound"):
                return
            if file not in repo.files:
                self._send(404, b"no entry", {"X-Error-Code": "EntryNotFound"})
                return
            if repo.loop:
                self._send(302, b"", {"Location": self.path})
                return
            if repo.bad_gzip:
                self._send(200, b"not gzip at all", {"Content-Encoding": "gzip"})
                return
            if repo.redirect and not cdn:
                name = next(k[0] for k, v in hub.repos.items() if v is repo)
                self._send(302, b"", {"Location": f"/cdn/{name}/{repo.commit}/{file}"})
                return
            content = repo.files[file]
            size = _size(content)
            asked = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if asked is None or repo.ignore_range:
                self._send(200, content, {"Content-Length": str(size)}, trickle=repo.slow)
                return
            begin, end = int(asked[1]), min(int(asked[2]) + 1, size)
            headers = {"Content-Range": f"bytes {begin}-{end - 1}/{size}"}
            body = _read(content, begin, end)
            trickle = repo.trickle or repo.slow
            self._send(206, body, headers, truncate=repo.truncate, trickle=trickle)

        def _send(self, status, body, headers=None, truncate=False, trickle=0.0) -> None:
            self.send_response(status)
            length = _size(body)
            headers = {"Content-Length": str(length)} | (headers or {})
            repo = self._repo()
            if repo is not None and repo.cookie:
                headers["Set-Cookie"] = repo.cookie
            for key, value in headers.items():
                self.send_header(key, value)
            if repo is not None and repo.slow_headers:
                self._trickle_headers(repo.slow_headers)
            else:
                self.end_headers()
            sent = 0
            try:
                if isinstance(body, Path):
                    with body.open("rb") as file:
                        while chunk := file.read(2**16):
                            self.wfile.write(chunk)
                            sent += len(chunk)
                elif trickle:
                    for i in range(length):
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                        sent += 1
                        time.sleep(trickle)
                else:
                    sent = length // 2 if truncate else length
                    self.wfile.write(body[:sent])
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading (e.g. a refused whole-file answer)
            finally:
                cookie = self.headers.get("Cookie")
                hub._log.append(Sent(self.path, self.headers.get("Range"), status, sent, cookie))
            if truncate:
                self.close_connection = True

        def _trickle_headers(self, seconds: float) -> None:
            """The status line and headers, one byte every `seconds`."""
            self._headers_buffer.append(b"\r\n")
            head = b"".join(self._headers_buffer)
            self._headers_buffer = []
            try:
                for i in range(len(head)):
                    self.wfile.write(head[i : i + 1])
                    self.wfile.flush()
                    time.sleep(seconds)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    return Handler


def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A fake Hub the Hub client and posviz.hub talk to (HF_ENDPOINT), with a fresh HF_HOME
    and posviz Hub cache: a test module's fixture yields from it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), None)
    hub = FakeHub(f"http://127.0.0.1:{server.server_port}")
    server.RequestHandlerClass = _handler(hub)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    for name, value in hub_environment(hub.url, tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "POSVIZ_HUB"):
        monkeypatch.delenv(name, raising=False)
    yield hub
    server.shutdown()
    server.server_close()


def unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the Hub client and posviz at a port of this machine that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name, value in hub_environment(f"http://127.0.0.1:{port}", tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def hub_environment(url: str, tmp_path: Path) -> dict[str, str]:
    """What points the Hub client and posviz at a fake Hub, with caches under `tmp_path`."""
    return {
        "HF_ENDPOINT": url,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "POSVIZ_HUB_CACHE": str(tmp_path / "posviz-hub"),
    }


def sparse_checkpoint(
    path: Path, tensors: dict[str, np.ndarray], filler: dict[str, tuple[int, ...]]
) -> Path:
    """A safetensors file holding `tensors` and float32 `filler` tensors of the given shapes,
    written sparse (the filler is never written), so a 500 MB checkpoint costs a few MB."""
    shapes = {name: (list(a.shape), a.nbytes) for name, a in tensors.items()}
    shapes |= {name: (list(shape), 4 * math.prod(shape)) for name, shape in filler.items()}
    header, offset = {}, 0
    for name, (shape, nbytes) in shapes.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header).encode()
    with path.open("wb") as file:
        file.write(struct.pack("<Q", len(text)) + text)
        start = file.tell()
        for name, array in tensors.items():
            file.seek(start + header[name]["data_offsets"][0])
            file.write(np.ascontiguousarray(array, dtype="<f4").tobytes())
        file.truncate(start + offset)
    return path
