"""How posviz reads from the Hub over HTTP: file URLs, bounded GETs and range reads."""

from __future__ import annotations

import json
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.cookiejar import DefaultCookiePolicy
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from huggingface_hub import constants

from posviz import _settings, io
from posviz.embedding import LoadError

if TYPE_CHECKING:
    import httpx2

#: Seconds without a byte from the Hub before a request is given up.
TIMEOUT = 10.0
#: Slowest transfer accepted after the first TIMEOUT seconds: a server that trickles bytes
#: just under TIMEOUT apart is given up too, instead of holding the page for hours.
MIN_BYTES_PER_SECOND = 20_000
#: JSON files read whole (config.json, the shard index, the API's answer) are refused above this.
MAX_JSON_BYTES = 16 * 2**20
#: Deepest nesting of arrays and objects accepted in those files (real ones nest 3-4 deep):
#: deeper, json's parser and every later copy (cache, pickle) recurse towards Python's limit.
MAX_JSON_DEPTH = 64
#: Progress callback: (bytes received, bytes expected).
Progress = Callable[[int, int], None]


class Unreachable(LoadError):
    """The Hub did not answer (no network, DNS, proxy, timeout): nothing about the model is
    known, and the user can load the file another way. `detail` is the technical cause."""

    def __init__(self, message: str, *, host: str, detail: str) -> None:
        super().__init__(message)
        self.host = host
        self.detail = detail


def _offline() -> bool:
    return constants.HF_HUB_OFFLINE or _settings.hub_offline()


def _endpoint() -> str:
    # Read at each call (the client reads HF_ENDPOINT once, at import).
    return (_settings.hub_endpoint() or constants.ENDPOINT).rstrip("/")


def _file_url(repo: str, commit: str, file: str) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo, file, revision=commit, endpoint=_endpoint())


def _head(url: str, what: str, *, limit: int = io.MAX_HEADER_BYTES) -> tuple[int, bytes]:
    """A safetensors file's size and head: its 8-byte length, then exactly that much JSON, of
    at most `limit` bytes (what is left of a model's header budget)."""
    first, size = _get_range(url, 0, 8, what=what)
    (n,) = struct.unpack("<Q", first)
    if 8 + n > size:
        msg = (
            f"{what} is not safetensors or is truncated: its header claims {n:,} bytes in a "
            f"file of {size:,}."
        )
        raise LoadError(msg)
    if n > limit:
        msg = (
            f"{what}: its safetensors header of {n:,} bytes would bring the model's headers "
            f"(all its shards together) past the limit of {io.MAX_HEADER_BYTES:,} bytes; save "
            "the position table in a repo or file of its own."
        )
        raise LoadError(msg)
    rest, _ = _get_range(url, 8, 8 + n, what=what)
    head = bytes(first + rest)
    io.safetensors_entries(head, size, what)  # refuses a lying header before it is kept
    return size, head


def _gguf_head(url: str, what: str) -> tuple[int, bytes, io.GGUFHeader]:
    """A GGUF file's size, header bytes and checked header: its first 24 bytes (magic, version,
    counts) and the size, then ranges that grow until the header ends (posviz.io's bounds
    hold before each request: a hostile header asks for nothing beyond them)."""
    first, size = _get_range(url, 0, 24, what=what)

    def read(begin: int, end: int) -> bytes:
        if end <= len(first):
            return bytes(first[begin:end])
        rest, _ = _get_range(url, max(begin, len(first)), end, what=what)
        return bytes(first[begin:]) + bytes(rest) if begin < len(first) else bytes(rest)

    header, head = io.read_gguf_header(read, size, what, first=io.FIRST_RANGE)
    return size, bytes(head), header


#: When the answer under way in this thread must be done by (time.monotonic()), or None.
_DEADLINE = threading.local()


def _remaining(timeout: float | None, late: type[Exception]) -> float | None:
    """What is left of this thread's deadline, at most `timeout`; `late` when none is."""
    deadline = getattr(_DEADLINE, "at", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        msg = "posviz's deadline for this answer has passed"
        raise late(msg)
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """A connection whose every read and write waits no longer than the deadline of the answer
    under way: the HTTP client's timeout is per read, and a server sending a byte of its headers
    every few seconds never meets it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        import httpcore2

        return self._stream.read(max_bytes, _remaining(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        import httpcore2

        self._stream.write(buffer, _remaining(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _DeadlineStream:
        import httpcore2

        left = _remaining(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    """The HTTP client's network backend, its connections made `_DeadlineStream`s."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, **options: Any
    ) -> _DeadlineStream:
        import httpcore2

        left = _remaining(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, left, **options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, **options: Any
    ) -> _DeadlineStream:
        import httpcore2

        left = _remaining(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, left, **options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _with_deadlines(session: httpx2.Client) -> None:
    """Make every connection the session opens from now on keep posviz's deadlines (its
    connection pools' network backend wrapped once; a client without one is left as it is)."""
    for transport in (session._transport, *session._mounts.values()):
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None and not isinstance(backend, _DeadlineBackend):
            pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]


def _pace(started: float, done: int) -> float:
    """When an answer begun at `started` with `done` bytes so far must have gone on by."""
    return started + TIMEOUT + done / MIN_BYTES_PER_SECOND


@contextmanager
def _request(url: str, headers: dict[str, str], what: str) -> Iterator[httpx2.Response]:
    """A streamed GET through the Hub client's session (proxies, HF_TOKEN, user agent), with
    every failure turned into a LoadError that says what to do. The whole exchange keeps one
    deadline, its headers included: TIMEOUT for the answer to begin, then the pace of
    MIN_BYTES_PER_SECOND (the body's readers move it on as bytes arrive)."""
    # The HTTP client loads with the first request, not with the app: every first open of a
    # page would pay for its import.
    import httpx2
    from huggingface_hub.utils import build_hf_headers, get_session

    host = urlsplit(url).netloc
    headers = build_hf_headers() | {"Accept-Encoding": "identity"} | headers
    session = get_session()
    # No cookie jar: a cookie one answer sets would travel with every later request of every
    # session (the session is shared by the server).
    session.cookies.jar.set_policy(_NO_COOKIES)
    _with_deadlines(session)
    _DEADLINE.at = _pace(time.monotonic(), 0)
    try:
        with session.stream(
            "GET", url, headers=headers, timeout=TIMEOUT, follow_redirects=True
        ) as response:
            _check_status(response, what)
            yield response
    except httpx2.TooManyRedirects as exc:
        msg = f"{what}: the Hub at {host} redirected in a loop ({exc}); try again later."
        raise LoadError(msg) from exc
    except httpx2.DecodingError as exc:
        msg = f"{what}: the Hub at {host} sent a body that cannot be decoded ({exc}); refused."
        raise LoadError(msg) from exc
    except httpx2.TimeoutException as exc:
        msg = f"{what}: the Hub at {host} did not answer within {TIMEOUT:g} s; try again later."
        detail = (
            f"{type(exc).__name__}: {exc}. The Hub is slow or unreachable from this server; "
            "its administrator can set HF_ENDPOINT to a mirror."
        )
        raise Unreachable(msg, host=host, detail=detail) from exc
    except httpx2.RemoteProtocolError as exc:
        msg = f"{what}: the Hub at {host} cut the answer short ({exc}); try again."
        raise LoadError(msg) from exc
    except httpx2.RequestError as exc:  # TransportError and any other failed request
        msg = f"{what}: the Hub at {host} could not be reached from this server."
        detail = (
            f"{type(exc).__name__}: {exc}. For the server's administrator: check its network "
            "and proxy (HTTPS_PROXY), or set HF_ENDPOINT to a reachable mirror."
        )
        raise Unreachable(msg, host=host, detail=detail) from exc
    finally:
        _DEADLINE.at = None


#: Accepts no cookie from any answer and so sends none.
_NO_COOKIES = DefaultCookiePolicy(allowed_domains=[])


def _check_status(response: httpx2.Response, what: str) -> None:
    status = response.status_code
    if status < 400:
        return
    code = response.headers.get("X-Error-Code", "")
    if code == "GatedRepo" or status in (401, 403):
        msg = (
            f"{what}: the Hub refused access ({status}): the model is gated or private. Accept "
            "its terms on the Hub with an account, then set HF_TOKEN on the server to a token "
            "of that account (it is read on the server only, never shown or exported)."
        )
    elif status == 404 and code == "RevisionNotFound":
        msg = f"{what}: no such revision; give a branch, a tag, refs/pr/N or a commit sha."
    elif status == 404 and code == "EntryNotFound":
        msg = f"{what}: no such file in the repo at this revision."
    elif status == 404:
        msg = f"{what}: no such model on the Hub; check the id (NAMESPACE/NAME) and its spelling."
    elif status == 429:
        msg = (
            f"{what}: the Hub's rate limit was reached (429); wait a minute and try again, or "
            "set HF_TOKEN on the server for a higher limit."
        )
    else:
        msg = f"{what}: the Hub answered HTTP {status}; try again later."
    raise LoadError(msg)


def _get_bytes(url: str, *, what: str, kind: str = "file", limit: int = MAX_JSON_BYTES) -> bytes:
    """A small file read whole, refused beyond `limit` bytes without buffering it, or arriving
    slower than a range read may."""
    import httpx2

    started = time.monotonic()
    with _request(url, {}, what) as response:
        body = bytearray()
        # Each read the socket returns, however small: `iter_bytes(n)` would buffer n bytes
        # first, and a server trickling a byte at a time would never reach the check below.
        try:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > limit:
                    msg = f"{what}: the Hub's {kind} answer exceeds {limit:,} bytes; refused."
                    raise LoadError(msg)
                _check_pace(started, len(body), what, url)
        except httpx2.TimeoutException:  # a read that would wait past the pace
            raise _too_slow(what, url, len(body)) from None
    return bytes(body)


def _get_json(url: str, *, what: str, kind: str = "file") -> object:
    """A small JSON file read whole (see `_get_bytes`), refused nested beyond MAX_JSON_DEPTH."""
    body = _get_bytes(url, what=what, kind=kind)
    too_deep = (
        f"{what}: the Hub's {kind} answer nests deeper than {MAX_JSON_DEPTH} levels; refused."
    )
    try:
        value = json.loads(body)
    except RecursionError as exc:
        raise LoadError(too_deep) from exc
    except ValueError as exc:
        msg = f"{what}: the Hub's {kind} answer is not JSON ({exc})."
        raise LoadError(msg) from exc
    if _depth(value) > MAX_JSON_DEPTH:
        raise LoadError(too_deep)
    return value


def _depth(value: object) -> int:
    """How deep arrays and objects nest in a parsed JSON value, counted level by level (no
    recursion: the value may nest as deep as the parser allowed).

    >>> _depth({"a": [1, {"b": "[[["}]}), _depth(3)
    (3, 0)
    """
    depth, level = 0, [value]
    while level := [v for v in level if isinstance(v, dict | list)]:
        depth += 1
        level = [c for v in level for c in (v.values() if isinstance(v, dict) else v)]
    return depth


def _check_pace(started: float, done: int, what: str, url: str, nbytes: int | None = None) -> None:
    """Give up on an answer slower than MIN_BYTES_PER_SECOND once TIMEOUT has passed: one
    deadline for every read, however the bytes trickle in (and the next read waits no longer
    than it)."""
    _DEADLINE.at = _pace(started, done)
    if time.monotonic() > _DEADLINE.at:
        raise _too_slow(what, url, done, nbytes)


def _too_slow(what: str, url: str, done: int, nbytes: int | None = None) -> LoadError:
    so_far = f"{done:,} of {nbytes:,} bytes" if nbytes is not None else f"{done:,} bytes"
    msg = (
        f"{what}: the Hub at {urlsplit(url).netloc} is sending too slowly ({so_far} so "
        "far); posviz gave up. Try again later."
    )
    return LoadError(msg)


def _get_range(
    url: str, begin: int, end: int, *, what: str, progress: Progress | None = None
) -> tuple[bytearray, int]:
    """Bytes [begin, end) of a file by one range request, and the file's size.

    A server that ignores the range (200 with the whole file) is refused before its body is
    read; more or fewer bytes than asked are refused too.
    """
    nbytes = end - begin
    with _request(url, {"Range": f"bytes={begin}-{end - 1}"}, what) as response:
        if response.status_code != 206:
            sent = response.headers.get("Content-Length", "unknown")
            msg = (
                f"{what}: the server ignored the byte range posviz asked for and began sending "
                f"the whole file ({sent} bytes); posviz stopped reading. Use a Hub endpoint "
                "that supports HTTP range requests (HF_ENDPOINT)."
            )
            raise LoadError(msg)
        match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", response.headers.get("Content-Range", ""))
        if not match or (int(match[1]), int(match[2]) + 1) != (begin, end):
            msg = f"{what}: the server answered another byte range than asked; refused."
            raise LoadError(msg)
        buffer = bytearray(nbytes)
        done = 0
        started = time.monotonic()
        _DEADLINE.at = _pace(started, 0)  # the body's pace, from its first byte on
        import httpx2  # loaded by _request already

        # A connection closed early is reported below, with how much arrived.
        with suppress(httpx2.RemoteProtocolError, httpx2.ReadError):
            try:
                for chunk in response.iter_bytes():  # as they arrive: progress and deadline
                    if done + len(chunk) > nbytes:
                        msg = f"{what}: the server sent more bytes than the range asked; refused."
                        raise LoadError(msg)
                    buffer[done : done + len(chunk)] = chunk
                    done += len(chunk)
                    if done < nbytes:
                        _check_pace(started, done, what, url, nbytes)
                    if progress is not None:
                        progress(done, nbytes)
            except httpx2.TimeoutException:  # a read that would wait past the pace
                raise _too_slow(what, url, done, nbytes) from None
    if done < nbytes:
        msg = f"{what}: the Hub's answer was cut off after {done:,} of {nbytes:,} bytes; try again."
        raise LoadError(msg)
    return buffer, int(match[3])
