"""The Data page's Hub tab against a fake Hub: pick, see what will travel, load; refusals keep
the table; the URL reopens the model's table."""

from __future__ import annotations

import html
import json

import numpy as np
import pytest
import streamlit as st
from safetensors.numpy import save
from streamlit.testing.v1 import AppTest

from posviz.ui import loaders
from posviz.ui.text import literal
from tests import apptest, fakehub
from tests.fakehub import FakeHub

RNG = np.random.default_rng(1)
WPE = RNG.standard_normal((66, 16)).astype(np.float32)  # RoBERTa-like: 2 reserved + 64 rows
WTE = RNG.standard_normal((300, 16)).astype(np.float32)


def plain(markdown: str) -> str:
    """The text a `literal()` markdown string shows."""
    return html.unescape(markdown).replace("\u2060", "")


@pytest.fixture
def roberta(fake_hub: FakeHub) -> fakehub.Repo:
    weights = save({"embeddings.position_embeddings.weight": WPE, "embeddings.word.weight": WTE})
    config = json.dumps({"model_type": "roberta"}).encode()
    return fake_hub.add("acme/roberta", {"config.json": config, "model.safetensors": weights})


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def open_model(at: AppTest, repo: str, revision: str = "main") -> None:
    at.text_input(key="posviz.table.hub.repo").set_value(repo)
    at.text_input(key="posviz.table.hub.revision").set_value(revision)
    button(at, "Open").click().run()
    assert not at.exception, at.exception


def test_hub_tab_picks_trims_and_loads_only_the_tensor(fake_hub, roberta):
    at = apptest("pages/data.py").run()
    open_model(at, "acme/roberta")
    assert at.selectbox(key="posviz.table.hub.tensor").value == (
        "embeddings.position_embeddings.weight"
    )
    assert any("2 reserved rows + 64 positions" in i.value for i in at.info)
    travel = [c.value for c in at.caption if "will travel" in c.value]
    assert travel == [
        f"4.2 kB of a {len(roberta.files['model.safetensors']) / 1e3:.1f} kB file will travel "
        f"({literal('model.safetensors')} at commit {roberta.commit[:12]})."
    ]
    fake_hub.log.clear()
    button(at, "Load").click().run()
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    np.testing.assert_array_equal(table.values, WPE[2:])
    assert table.source == f"hf:acme/roberta@main · commit {roberta.commit} · model.safetensors"
    assert [s.nbytes for s in fake_hub.log] == [WPE.nbytes]
    assert at.query_params["hub"] == "acme/roberta"
    assert at.query_params["tensor"] == "embeddings.position_embeddings.weight"
    assert at.query_params["rows"] == "2:66"


def test_a_refusal_keeps_the_table(fake_hub):
    fake_hub.add("acme/old", {"pytorch_model.bin": b"\x80\x02junk"})
    at = apptest("pages/data.py").run()
    before = at.session_state["posviz.table"].sha256
    open_model(at, "acme/old")
    assert any("only pickle-based weights" in plain(e.value) for e in at.error)
    # Its way out as a code block to copy, not prose run into the message.
    assert any("hf_hub_download('acme/old', 'pytorch_model.bin'" in c.value for c in at.code)
    open_model(at, "acme/missing")
    assert any("no such model on the Hub" in e.value for e in at.error)
    assert at.session_state["posviz.table"].sha256 == before


def test_a_rotary_model_says_it_has_no_table(fake_hub):
    config = json.dumps({"model_type": "llama", "rope_theta": 1e4}).encode()
    fake_hub.add("acme/llama", {"config.json": config, "model.safetensors": save({"e": WTE})})
    at = apptest("pages/data.py").run()
    open_model(at, "acme/llama")
    assert "no learned absolute position table" in at.warning[0].value
    assert "rotary embeddings (rope_theta)" in plain(at.warning[0].value)


def test_a_link_reopens_the_hub_table(fake_hub, roberta):
    at = apptest("app.py")
    at.query_params.update(
        {"hub": "acme/roberta", "revision": "main", "tensor": "embeddings.word.weight"}
    )
    at.query_params["rows"] = "10:110"
    at.run()
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    np.testing.assert_array_equal(table.values, WTE[10:110])
    assert f"commit {roberta.commit}" in table.source


def test_posviz_hub_off_removes_the_tab_and_ignores_links(fake_hub, roberta, monkeypatch):
    monkeypatch.setenv("POSVIZ_HUB", "off")
    at = apptest("app.py")
    at.query_params["hub"] = "acme/roberta"
    at.run()
    assert at.session_state["posviz.table"].source.startswith("simulated")
    at.switch_page("pages/data.py").run()
    assert [t.label for t in at.tabs] == ["Simulate", "Upload a file"]
    assert fake_hub.log == []


def test_compare_loads_its_second_table_from_the_hub(fake_hub, roberta):
    at = apptest("pages/compare.py")
    at.session_state["compare.second"] = True  # the loader is drawn once its expander opens
    at.run()
    at.text_input(key="posviz.second.hub.repo").set_value("acme/roberta")
    button(at, "Open").click().run()
    button(at, "Load").click().run()
    assert not at.exception, at.exception
    np.testing.assert_array_equal(at.session_state["posviz.second"].values, WPE[2:])
    assert "hub" not in at.query_params  # the URL names the primary table only


def test_a_tensor_above_the_upload_limit_is_refused_before_fetching(fake_hub, roberta, monkeypatch):
    real = st.get_option
    monkeypatch.setattr(
        st, "get_option", lambda key: 0 if key == "server.maxUploadSize" else real(key)
    )
    at = apptest("pages/data.py").run()
    open_model(at, "acme/roberta")
    assert "above this server's upload limit of 0 MiB" in at.error[0].value
    assert button(at, "Load").disabled
    assert [s for s in fake_hub.log if s.nbytes > 1000] == []


def test_an_unreachable_hub_says_what_was_asked_what_happened_and_what_to_do(monkeypatch, tmp_path):
    fakehub.unreachable(tmp_path, monkeypatch)
    loaders._hub_model.clear()
    at = apptest("pages/data.py").run()
    before = at.session_state["posviz.table"].sha256
    open_model(at, "gpt2", "main")
    (error,) = at.error
    shown = plain(error.value)
    assert "You asked for the model **gpt2** at revision **main**" in shown
    assert "could not be reached from this server" in shown
    assert "**Upload a file** tab" in shown
    # No internal syntax, no errno text, no invisible characters on screen.
    assert "hf:" not in shown
    assert "Errno" not in shown
    assert "\u2060" not in error.value
    (detail,) = [e for e in at.expander if e.label == "Technical detail"]
    assert "ConnectError" in detail.code[0].value
    assert at.session_state["posviz.table"].sha256 == before


# --- the upload limit for every caller, failures not retried ----------------------------------


@pytest.fixture
def upload_limit_1mb(monkeypatch: pytest.MonkeyPatch) -> None:
    real = st.get_option
    monkeypatch.setattr(
        st, "get_option", lambda key: 1 if key == "server.maxUploadSize" else real(key)
    )


@pytest.fixture
def big(fake_hub: FakeHub) -> np.ndarray:
    """A repo whose position table is 4 MB, above a 1 MB upload limit."""
    table = RNG.standard_normal((1024, 1024)).astype(np.float32)
    fake_hub.add("acme/big", {"model.safetensors": save({"position_embeddings.weight": table})})
    return table


def big_reads(fake_hub: FakeHub) -> list:
    return [s for s in fake_hub.log if s.nbytes > 100_000]


def test_a_link_fetches_nothing_above_the_upload_limit(fake_hub, big, upload_limit_1mb):
    at = apptest("app.py")
    at.query_params["hub"] = "acme/big"
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["posviz.table"].source.startswith("simulated")
    assert "above this server's upload limit of 1 MiB" in plain(at.warning[0].value)
    assert big_reads(fake_hub) == []


def test_the_collection_fetches_nothing_above_the_upload_limit(fake_hub, big, upload_limit_1mb):
    at = apptest("pages/collection.py").run()
    at.text_area(key="collection.hub.refs").set_value("acme/big").run()
    at.button(key="collection.hub.add").click().run()
    assert not at.exception, at.exception
    (member,) = at.session_state["posviz.collection"]
    assert "above this server's upload limit of 1 MiB" in member.error
    assert big_reads(fake_hub) == []


def test_a_served_hub_model_above_the_upload_limit_is_not_fetched(
    fake_hub, big, upload_limit_1mb, monkeypatch
):
    monkeypatch.setenv("POSVIZ_OPEN", "hf:acme/big")
    at = apptest("app.py").run()
    assert not at.exception, at.exception
    assert "above this server's upload limit of 1 MiB" in plain(at.warning[0].value)
    assert big_reads(fake_hub) == []


def test_a_failed_open_is_not_retried_on_every_rerun(fake_hub):
    fake_hub.add("acme/deep", {"config.json": b"[" * 100_000 + b"]" * 100_000})
    at = apptest("pages/data.py").run()
    open_model(at, "acme/deep")
    assert "config.json" in plain(at.error[0].value)
    asked = len(fake_hub.log)
    at.run()
    at.run()
    assert not at.exception, at.exception
    assert "nests deeper than 64 levels" in plain(at.error[0].value)
    assert len(fake_hub.log) == asked  # shown again, not asked again
    button(at, "Open").click().run()  # asked again on purpose
    assert len(fake_hub.log) > asked


def test_a_hostile_link_leaves_every_page_working(fake_hub):
    fake_hub.add("acme/deep", {"config.json": b"[" * 100_000 + b"]" * 100_000})
    at = apptest("app.py")
    at.query_params["hub"] = "acme/deep"
    at.run()
    assert not at.exception, at.exception
    assert "config.json" in plain(at.warning[0].value)
    asked = len(fake_hub.log)
    at.switch_page("pages/similarity.py").run()
    assert not at.exception, at.exception
    assert len(fake_hub.log) == asked  # the sidebar card does not try the link again


def test_a_hostile_line_of_a_collection_batch_keeps_the_good_ones(fake_hub, roberta):
    fake_hub.add("acme/deep", {"config.json": b"[" * 100_000 + b"]" * 100_000})
    at = apptest("pages/collection.py").run()
    at.text_area(key="collection.hub.refs").set_value("acme/deep\nacme/roberta").run()
    at.button(key="collection.hub.add").click().run()
    assert not at.exception, at.exception
    deep, good = at.session_state["posviz.collection"]
    assert "config.json" in deep.error
    assert good.table is not None
