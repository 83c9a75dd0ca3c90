"""Fixtures shared by the page tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager


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
