"""Issue 45 on the Hub: a server that trickles its answer's headers, a repo holding parts of a
split GGUF without its first (the fake Hub plays both)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from posviz import hub
from posviz.embedding import LoadError
from posviz.hub import client
from posviz.source import HubRef
from tests import ggufs


@pytest.mark.timeout(60)
def test_a_hub_trickling_its_headers_is_given_up_within_the_deadline(fake_hub, monkeypatch):
    # Before: one byte every 2 s held the command 121 s: the deadline covered bodies only.
    monkeypatch.setattr(client, "TIMEOUT", 1.0)
    fake_hub.add("test/slow-headers", {"config.json": b"{}"}, slow_headers=0.25)
    started = time.monotonic()
    with pytest.raises(hub.Unreachable, match="did not answer within 1 s"):
        hub.config_file(HubRef("test/slow-headers"))
    # Its headers take 0.25 s a byte: 40 s or more in all, had the client waited for them.
    assert time.monotonic() - started < 5


@pytest.mark.timeout(60)
def test_a_trickled_answer_on_a_reused_connection_is_given_up_too(fake_hub, monkeypatch):
    # A first answer at full speed leaves its connection in the pool; the next request on it
    # meets a server that has turned slow.
    monkeypatch.setattr(client, "TIMEOUT", 1.0)
    repo = fake_hub.add("test/turns-slow", {"config.json": b"{}"})
    hub.config_file(HubRef("test/turns-slow"))
    repo.slow_headers = 0.25
    started = time.monotonic()
    with pytest.raises(hub.Unreachable, match="did not answer within 1 s"):
        client._get_bytes(client._file_url("test/turns-slow", repo.commit, "config.json"), what="x")
    assert time.monotonic() - started < 5


def test_parts_of_a_split_gguf_without_the_first_are_named(fake_hub, tmp_path: Path):
    # Before: IndexError in hub._gguf_file.
    part = ggufs.llama31(tmp_path / "part.gguf")
    fake_hub.add(
        "test/split-GGUF",
        {"m-Q8_0-00002-of-00003.gguf": part, "m-Q8_0-00003-of-00003.gguf": part},
    )
    with pytest.raises(LoadError, match=r"holds parts 2, 3 of a split GGUF but not part 1"):
        hub.list_model(HubRef("test/split-GGUF"))
