"""Fixtures shared by every test folder: what a click on a download builds, a fake Hub."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

from tests import fakehub


@pytest.fixture(autouse=True, scope="session")
def _results_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Results posviz keeps between runs go to this session's folder, never the user's: set
    in the environment, so the apps and commands the tests start inherit it."""
    os.environ["POSVIZ_RESULTS_CACHE"] = str(tmp_path_factory.mktemp("results"))


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
    from posviz.ui import loaders

    loaders._hub_model.clear()
    yield from fakehub.running(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def components_result() -> tuple:
    """Principal components of a learned-like table, their sinusoid fits and likeness: the core's
    results (tests/test_components.py) and what the figures draw (tests/figures/)."""
    from posviz.components import fit_sinusoids, principal_components, sinusoid_likeness
    from posviz.simulate import learned_like

    pc = principal_components(learned_like(300, 32, seed=0).values, n_components=4)
    return pc, fit_sinusoids(pc), sinusoid_likeness(pc, n_frequencies=4, n_shuffles=5)
