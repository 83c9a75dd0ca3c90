"""posviz._settings: every environment variable posviz reads, read when asked (a test's
monkeypatch or a restarted server takes effect), with its default, and read nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from posviz import _settings
from tests import ROOT

VARIABLES = (
    "POSVIZ_DATA_DIR", "POSVIZ_CACHE_SIZE", "POSVIZ_HUB", "POSVIZ_HUB_CACHE",
    "POSVIZ_RESULTS_CACHE", "POSVIZ_HUB_CACHE_SIZE", "HF_HUB_OFFLINE", "HF_ENDPOINT",
    "BROWSER_PATH", "POSVIZ_OPEN", "XDG_CACHE_HOME",
)  # fmt: skip


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """None of posviz's variables set, and the home folder a fresh one; whatever a test sets
    (`serve_table` too) undone after it."""
    for name in VARIABLES:
        monkeypatch.setenv(name, "")  # recorded, so that teardown restores it
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_the_defaults(unset, tmp_path):
    home = tmp_path / "home" / ".cache" / "posviz"
    assert _settings.data_dir() is None
    assert _settings.cache_size() == "1GB"
    assert _settings.hub_enabled() is True
    assert _settings.hub_cache_dir() == home / "hub"
    assert _settings.results_cache_dir() == home / "results"
    assert _settings.hub_cache_size("5GB") == "5GB"
    assert _settings.hub_offline() is False
    assert _settings.hub_endpoint() is None
    assert _settings.browser_path() is None
    assert _settings.served_table() is None


def test_each_variable_is_read_when_asked(unset, tmp_path):
    unset.setenv("POSVIZ_DATA_DIR", str(tmp_path / "shared"))
    unset.setenv("POSVIZ_CACHE_SIZE", "2GB")
    unset.setenv("POSVIZ_HUB_CACHE_SIZE", "300MB")
    unset.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    unset.setenv("BROWSER_PATH", "/usr/bin/chromium")
    assert _settings.data_dir() == tmp_path / "shared"
    assert _settings.cache_size() == "2GB"
    assert _settings.hub_cache_size("5GB") == "300MB"
    assert _settings.hub_endpoint() == "http://127.0.0.1:9"
    assert _settings.browser_path() == "/usr/bin/chromium"
    # Set but empty: as if unset.
    for name in ("POSVIZ_DATA_DIR", "HF_ENDPOINT", "BROWSER_PATH"):
        unset.setenv(name, "")
    assert (_settings.data_dir(), _settings.hub_endpoint(), _settings.browser_path()) == (None,) * 3


@pytest.mark.parametrize(("value", "enabled"), [("off", False), (" OFF ", False), ("0", False),
    ("false", False), ("no", False), ("on", True), ("1", True), ("anything", True)])  # fmt: skip
def test_the_hub_is_off_only_when_said_so(unset, value, enabled):
    unset.setenv("POSVIZ_HUB", value)
    assert _settings.hub_enabled() is enabled


@pytest.mark.parametrize(("value", "offline"), [("1", True), ("ON", True), (" yes", True),
    ("true", True), ("0", False), ("", False), ("off", False)])  # fmt: skip
def test_offline_as_huggingface_hub_reads_it(unset, value, offline):
    unset.setenv("HF_HUB_OFFLINE", value)
    assert _settings.hub_offline() is offline


def test_the_caches_go_where_they_are_told(unset, tmp_path):
    # The Hub's in a folder of its own under the one named (which may be /tmp, shared).
    unset.setenv("POSVIZ_HUB_CACHE", str(tmp_path / "tmp"))
    assert _settings.hub_cache_dir() == tmp_path / "tmp" / "posviz-hub"
    unset.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _settings.results_cache_dir() == tmp_path / "xdg" / "posviz" / "results"
    unset.setenv("POSVIZ_RESULTS_CACHE", str(tmp_path / "results"))
    assert _settings.results_cache_dir() == tmp_path / "results"
    unset.setenv("POSVIZ_RESULTS_CACHE", "Off")
    assert _settings.results_cache_dir() is None


def test_the_served_table_is_handed_on_through_the_environment(unset):
    _settings.serve_table("hf:gpt2@main")
    assert _settings.served_table() == "hf:gpt2@main"
    assert _settings.SERVED_TABLE == "POSVIZ_OPEN"


def test_no_other_module_reads_the_environment():
    readers = []
    for path in [*(ROOT / "posviz").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]:
        if path == ROOT / "posviz" / "_settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == []
