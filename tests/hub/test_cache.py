"""posviz.hub.cache, the Hub's disk cache: a second load and an offline one read from it, it
stays within its size and leaves files not its own, and a broken or tampered cache costs
network, never the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

import posviz
from posviz import hub
from posviz.embedding import LoadError
from tests.hub.repos import WPE, gpt2_repo


def test_a_second_load_reads_the_tensor_from_the_disk_cache(fake_hub):
    gpt2_repo(fake_hub)
    first = posviz.load("hf:acme/gpt2")
    fake_hub.log.clear()
    again = posviz.load("hf:acme/gpt2")
    assert again.sha256 == first.sha256
    assert fake_hub.requests_for("model.safetensors") == []
    assert fake_hub.requests_for("config.json") == []
    assert len(fake_hub.log) == 1  # the revision, resolved again (a branch moves)


def test_offline_the_cache_still_answers(fake_hub, monkeypatch):
    gpt2_repo(fake_hub)
    first = posviz.load("hf:acme/gpt2")
    fake_hub.log.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert posviz.load("hf:acme/gpt2").sha256 == first.sha256
    assert fake_hub.log == []
    with pytest.raises(LoadError, match="HF_HUB_OFFLINE is set and hf:acme/other@main was never"):
        posviz.load("hf:acme/other")


def test_the_cache_stays_within_its_size(fake_hub, monkeypatch):
    fake_hub.add("acme/a", {"model.safetensors": save({"wpe": WPE})})
    fake_hub.add("acme/b", {"model.safetensors": save({"wpe": -WPE})})
    monkeypatch.setenv("POSVIZ_HUB_CACHE_SIZE", str(WPE.nbytes + 2000))
    posviz.load("hf:acme/a")
    posviz.load("hf:acme/b")
    files = list(hub.cache_dir().glob("*/*"))
    assert sum(f.stat().st_size for f in files) <= WPE.nbytes + 2000
    fake_hub.log.clear()
    posviz.load("hf:acme/b")  # the latest tensor stayed
    assert fake_hub.requests_for("model.safetensors") == []


def test_an_unwritable_cache_costs_network_not_the_table(fake_hub, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("POSVIZ_HUB_CACHE", str(blocker / "cache"))
    gpt2_repo(fake_hub)
    np.testing.assert_array_equal(posviz.load("hf:acme/gpt2").values, WPE)


def test_a_tampered_cache_entry_is_not_used(fake_hub):
    gpt2_repo(fake_hub)
    posviz.load("hf:acme/gpt2")
    for path in Path(hub.cache_dir(), "tensors").iterdir():
        path.write_bytes(b"short")
    np.testing.assert_array_equal(posviz.load("hf:acme/gpt2").values, WPE)


def test_an_enormous_cache_size_is_a_clear_error(monkeypatch):
    from posviz.hub.cache import cache_limit, parse_size

    assert parse_size("1000TB") == 10**15
    assert parse_size("0.5kB") == 500
    for size in ("9" * 400 + "GB", "1001TB"):
        monkeypatch.setenv("POSVIZ_HUB_CACHE_SIZE", size)
        with pytest.raises(LoadError, match="above the largest size accepted, 1 PB"):
            cache_limit()


def test_eviction_leaves_files_that_are_not_posvizs(fake_hub, monkeypatch, tmp_path):
    shared = tmp_path / "shared-tmp"  # a folder others use, like /tmp
    monkeypatch.setenv("POSVIZ_HUB_CACHE", str(shared))
    monkeypatch.setenv("POSVIZ_HUB_CACHE_SIZE", str(WPE.nbytes + 2000))
    foreign = [shared / "tensors" / "someone-elses.bin", shared / "x" / "y"]
    for path in foreign:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"keep me" * 1000)
    own_folder_stranger = hub.cache_dir() / "tensors" / "notes.txt"
    own_folder_stranger.parent.mkdir(parents=True)
    own_folder_stranger.write_bytes(b"keep me too" * 1000)
    fake_hub.add("acme/a", {"model.safetensors": save({"wpe": WPE})})
    fake_hub.add("acme/b", {"model.safetensors": save({"wpe": -WPE})})
    posviz.load("hf:acme/a")
    posviz.load("hf:acme/b")
    assert all(path.exists() for path in [*foreign, own_folder_stranger])
    assert hub.cache_dir() == shared / "posviz-hub"
    entries = [f for f in hub.cache_dir().glob("*/*") if f != own_folder_stranger]
    assert sum(f.stat().st_size for f in entries) <= WPE.nbytes + 2000
