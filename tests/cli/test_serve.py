"""`posviz serve`: what it hands to Streamlit, and the app opening on the table it names."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import posviz
from posviz._settings import SERVED_TABLE
from posviz.cli import main
from posviz.simulate import sinusoidal_table
from posviz.ui.text import literal
from tests import ROOT, apptest


class Started(Exception):
    """Raised where `posviz serve` would have become the Streamlit server."""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The commands `posviz serve` would replace itself with (no server is started)."""
    calls: list[list[str]] = []

    def execv(path: str, argv: list[str]) -> None:
        assert path == sys.executable
        calls.append(argv)
        raise Started

    monkeypatch.setattr(os, "execv", execv)
    # serve sets the variable itself: record it (set, then deleted) so teardown removes it.
    monkeypatch.setenv(SERVED_TABLE, "")
    monkeypatch.delenv(SERVED_TABLE)
    return calls


@pytest.fixture
def table_file(tmp_path: Path) -> Path:
    path = tmp_path / "wpe.npy"
    np.save(path, sinusoidal_table(64, 16))
    return path


def test_serve_names_the_file_by_absolute_path_and_passes_streamlit_options_on(
    started: list[list[str]],
    table_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    monkeypatch.chdir(table_file.parent)
    with pytest.raises(Started):
        main(["serve", "wpe.npy", "--port", "8999", "--server.maxUploadSize=50"])
    assert started == [
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),  # a clone's; an installed wheel's is posviz/_app/app.py
            "--server.port=8999",
            "--server.address=127.0.0.1",
            "--server.maxUploadSize=50",
        ]
    ]
    assert os.environ[SERVED_TABLE] == str(table_file)
    assert capsys.readouterr().out == "posviz serve: wpe, 64 x 16, wpe.npy\n"


def test_serve_without_a_table_starts_the_app_on_its_default(started: list[list[str]]):
    with pytest.raises(Started):
        main(["serve", "--host", "0.0.0.0"])
    assert started[0][5:] == ["--server.port=8501", "--server.address=0.0.0.0"]
    assert SERVED_TABLE not in os.environ


def test_a_refused_file_fails_before_any_server_starts(
    started: list[list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    pickle = tmp_path / "model.pt"
    pickle.write_bytes(b"\x80\x04K\x01.")
    assert main(["serve", str(pickle)]) == 2
    assert started == []
    assert "model.pt" in capsys.readouterr().err


def test_a_fifo_is_refused_before_any_server_starts(
    started: list[list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from tests.io.test_io import fifo, finishes, release

    pipe = fifo(tmp_path / "wpe.npy")
    try:
        assert finishes(lambda: main(["serve", str(pipe)])) == 2
    finally:
        release(pipe)
    assert started == []
    assert "wpe.npy is not a regular file" in capsys.readouterr().err


def test_serve_passes_a_hub_reference_on_unchanged(
    started: list[list[str]], monkeypatch: pytest.MonkeyPatch
):
    from posviz.models import remote

    def fake_load(ref: object, *_: object, **__: object) -> posviz.Embedding:
        return posviz.Embedding.from_array(sinusoidal_table(16, 4), name="wpe.weight", source="x")

    monkeypatch.setattr(remote, "open_model", lambda ref: ref)
    monkeypatch.setattr(remote, "load_model", fake_load)
    with pytest.raises(Started):
        main(["serve", "hf:org/model@v2"])
    assert os.environ[SERVED_TABLE] == "hf:org/model@v2"


def test_other_commands_refuse_options_they_do_not_know(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        main(["summary", "x.npy", "--server.port=1"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --server.port=1" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"posviz {posviz.__version__}\n"


def app_table(monkeypatch: pytest.MonkeyPatch, served: str, **query: str) -> AppTest:
    monkeypatch.setenv(SERVED_TABLE, served)
    at = apptest("app.py")
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def test_the_app_opens_on_the_served_file(monkeypatch: pytest.MonkeyPatch, table_file: Path):
    at = app_table(monkeypatch, str(table_file))
    assert not at.exception
    table = at.session_state["posviz.table"]
    assert (table.name, table.source, table.shape) == ("wpe", "wpe.npy", (64, 16))
    np.testing.assert_array_equal(table.values, sinusoidal_table(64, 16))


def test_a_link_naming_a_simulation_wins_over_the_served_file(
    monkeypatch: pytest.MonkeyPatch, table_file: Path
):
    at = app_table(monkeypatch, str(table_file), sim="gaussian", n_positions="32", d_model="8")
    assert at.session_state["posviz.table"].name == "gaussian"


def test_a_served_file_that_went_away_gives_a_warning_and_the_default_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    at = app_table(monkeypatch, str(tmp_path / "gone.npy"))
    assert not at.exception
    assert at.session_state["posviz.table"].name == "learned_like"
    (warning,) = at.warning
    # The name, quoted; never the server's path to it.
    assert warning.value.startswith(f"{literal(repr('gone.npy'))} was not opened")
    assert literal(tmp_path) not in warning.value


def test_a_served_file_replaced_by_a_fifo_does_not_hang_a_session(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    from tests.io.test_io import fifo, finishes, release

    pipe = fifo(tmp_path / "wpe.npy")
    try:
        at = finishes(lambda: app_table(monkeypatch, str(pipe)), seconds=60)
    finally:
        release(pipe)
    assert at.session_state["posviz.table"].name == "learned_like"
    assert "is not a regular file" in at.warning[0].value
