"""Fixtures shared by every test folder: what a click on a download builds, a fake Hub."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

from tests import fakehub


@pytest.fixture
def downloads(monkeypatch) -> dict[str, Callable[[], bytes | str]]:
    """File name -> the builder a click on its download button runs (latest run wins)."""
    built: dict[str, Callable[[], bytes | str]] = {}
    register = MediaFileManager.add_deferred

    def record(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        built[file_name] = data_callable
        return register(self, data_callable, mimetype, coordinates, file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    return built


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[fakehub.FakeHub]:
    """A fake Hub on 127.0.0.1 that posviz and the Hub client talk to (HF_ENDPOINT), with a
    fresh Hub cache; the app's per-process memory of opened models starts empty."""
    from posviz.ui import widgets

    widgets._hub_model.clear()
    yield from fakehub.running(tmp_path, monkeypatch)
