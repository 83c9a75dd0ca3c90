"""posviz.hub.client, HTTP to the Hub (a fake one on 127.0.0.1): redirects followed with the range
kept, HF_TOKEN for gated repos, and a clear message for every fault of the server: ranges
ignored, bodies cut off, rate limits, slow or trickling answers (one deadline per read, issue
45: headers too), no cookie kept."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from safetensors.numpy import save

import posviz
from posviz import hub
from posviz.embedding import LoadError
from posviz.hub import client
from posviz.source import HubRef
from tests import fakehub
from tests.fakehub import TOKEN
from tests.hub.repos import CONFIG, GPT2, OVERHEAD, WPE, gpt2_repo, header_bytes


def test_a_cdn_redirect_is_followed_with_the_range_kept(fake_hub):
    weights = gpt2_repo(fake_hub, redirect=True)
    table = posviz.load("hf:acme/gpt2")
    np.testing.assert_array_equal(table.values, WPE)
    assert any(s.path.startswith("/cdn/") and s.status == 206 for s in fake_hub.log)
    assert fake_hub.bytes_sent() <= header_bytes(weights) + len(CONFIG) + WPE.nbytes + OVERHEAD


def test_a_gated_repo_needs_hf_token(fake_hub, monkeypatch):
    gpt2_repo(fake_hub, gated=True)
    with pytest.raises(LoadError, match=r"gated or private.*set HF_TOKEN on the server") as info:
        posviz.load("hf:acme/gpt2")
    assert "401" in str(info.value)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    table = posviz.load("hf:acme/gpt2")
    np.testing.assert_array_equal(table.values, WPE)
    assert TOKEN not in table.source


def test_a_server_ignoring_range_is_refused_without_reading_the_file(fake_hub):
    big = save({"wpe": WPE, "wte": np.zeros((4096, 256), np.float32)})  # 4 MB
    fake_hub.add("acme/norange", {"model.safetensors": big}, ignore_range=True)
    with pytest.raises(LoadError, match=r"ignored the byte range.*stopped reading"):
        posviz.load("hf:acme/norange")


def test_a_truncated_body_is_refused(fake_hub):
    gpt2_repo(fake_hub, truncate=True)
    with pytest.raises(LoadError, match=r"cut off after \d+ of 8 bytes"):
        posviz.load("hf:acme/gpt2")


def test_rate_limit(fake_hub):
    gpt2_repo(fake_hub, rate_limit=True)
    with pytest.raises(LoadError, match=r"rate limit was reached \(429\)"):
        posviz.load("hf:acme/gpt2")


def test_a_slow_hub_times_out(fake_hub, monkeypatch):
    monkeypatch.setattr(hub.client, "TIMEOUT", 0.3)
    gpt2_repo(fake_hub, delay=1.5)
    with pytest.raises(LoadError, match=r"did not answer within 0.3 s"):
        posviz.load("hf:acme/gpt2")


def test_a_trickling_hub_is_given_up(fake_hub, monkeypatch):
    # Every byte arrives well within the 1 s read timeout, all 8 only after 1.6 s (a margin
    # that a loaded machine's slow first request does not eat into).
    monkeypatch.setattr(hub.client, "TIMEOUT", 1.0)
    gpt2_repo(fake_hub, trickle=0.2)
    with pytest.raises(LoadError, match=r"is sending too slowly \(\d+ of 8 bytes so far\)"):
        posviz.load("hf:acme/gpt2")


def test_an_unreachable_hub(monkeypatch, tmp_path):
    fakehub.unreachable(tmp_path, monkeypatch)
    with pytest.raises(LoadError, match=r"could not be reached from this server"):
        posviz.load("hf:acme/gpt2")


@pytest.mark.slow
def test_a_json_trickle_is_given_up_by_one_deadline(fake_hub, monkeypatch):
    from posviz.hub import client

    monkeypatch.setattr(client, "TIMEOUT", 0.5)  # no single wait between bytes reaches it
    gpt2_repo(fake_hub, slow=0.1)
    with pytest.raises(LoadError, match=r"config.json: the Hub at .* is sending too slowly"):
        posviz.load("hf:acme/gpt2")
    assert sum(s.nbytes for s in fake_hub.requests_for("config.json")) < len(CONFIG)


def test_a_config_trickling_byte_by_byte_is_given_up_long_before_it_ends(fake_hub, monkeypatch):
    # One byte every 50 ms of a 2 KB config.json: 100 s to send. Every socket read returns
    # within the read timeout, so only a deadline checked on each read the socket returns
    # (not on a buffered 64 KiB chunk, which never fills) gives up early.
    from posviz.hub import client

    monkeypatch.setattr(client, "TIMEOUT", 0.5)
    config = json.dumps({"model_type": "gpt2", "padding": " " * 2000}).encode()
    fake_hub.add("acme/slow", {"config.json": config, "model.safetensors": save(GPT2)}, slow=0.05)
    started = time.monotonic()
    with pytest.raises(LoadError, match=r"config.json: the Hub at .* is sending too slowly"):
        posviz.load("hf:acme/slow")
    assert time.monotonic() - started < 30  # 100 s before: the whole body, then the check


def test_no_cookie_travels_to_a_later_request(fake_hub):
    gpt2_repo(fake_hub, cookie="session=tracked; Path=/")
    posviz.load("hf:acme/gpt2")
    assert len(fake_hub.log) > 3
    assert [s.cookie for s in fake_hub.log] == [None] * len(fake_hub.log)


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
