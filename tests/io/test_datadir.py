"""posviz.io.datadir and the Shared folder tab: only loadable files inside the folder are listed
and opened."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from posviz import io
from posviz.embedding import LoadError
from posviz.io import datadir
from posviz.simulate import sinusoidal_table
from tests import apptest


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A shared folder with nested files, links in and out, and files that are not tables.

    Layout (-> is a symlink)::

        root/a.npy  root/B.CSV  root/notes.md  root/gpt2/wpe.safetensors
        root/gpt2/deep/t.tsv  root/passwd.txt -> /etc/passwd  root/out -> outside/
        root/alias.npy -> a.npy  root/loop -> root/  root/dir.npy/
    """
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "gpt2" / "deep").mkdir(parents=True)
    (root / "dir.npy").mkdir()
    outside.mkdir()
    np.save(root / "a.npy", sinusoidal_table(16, 8).astype(np.float32))
    (root / "B.CSV").write_text("1,2\n3,4\n")
    (root / "notes.md").write_text("not a table")
    (root / "gpt2" / "wpe.safetensors").write_bytes(b"placeholder")
    (root / "gpt2" / "deep" / "t.tsv").write_text("".join(f"{i}\t{i * i}\n" for i in range(10)))
    np.save(outside / "secret.npy", np.eye(4))
    (root / "passwd.txt").symlink_to("/etc/passwd")
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / "alias.npy").symlink_to("a.npy")
    (root / "loop").symlink_to(root, target_is_directory=True)
    return root


def test_lists_nested_loadable_files_inside_only(shared: Path):
    assert datadir.list_files(shared) == [
        "B.CSV",
        "a.npy",
        "alias.npy",
        "gpt2/deep/t.tsv",
        "gpt2/wpe.safetensors",
    ]


def test_listing_stops_at_the_limit(shared: Path):
    assert datadir.list_files(shared, limit=2) == ["B.CSV", "a.npy"]


def test_every_listed_file_resolves_inside_the_folder(shared: Path):
    for relative in datadir.list_files(shared):
        assert datadir.resolve(shared, relative).is_relative_to(shared.resolve())


def test_resolve_follows_links_that_stay_inside(shared: Path):
    assert datadir.resolve(shared, "alias.npy") == (shared / "a.npy").resolve()
    assert datadir.resolve(shared, "loop/gpt2/deep/t.tsv") == (shared / "gpt2/deep/t.tsv").resolve()


@pytest.mark.parametrize(
    ("relative", "words"),
    [
        ("../outside/secret.npy", "without a leading '/' or '..'"),
        ("gpt2/../../outside/secret.npy", "'..'"),
        ("/etc/passwd.txt", "leading '/'"),
        ("", "not a path inside"),
        ("passwd.txt", "leads outside the shared folder"),
        ("out/secret.npy", "leads outside the shared folder"),
        ("notes.md", "extension '.md'"),
        ("gpt2", "extension 'none'"),
        ("dir.npy", "not a regular file"),
        ("missing.npy", "not in the shared folder"),
    ],
)
def test_resolve_refuses_with_a_reason(shared: Path, relative: str, words: str):
    with pytest.raises(LoadError, match=re.escape(words)):
        datadir.resolve(shared, relative)


def test_a_root_that_is_not_a_directory_is_refused(tmp_path: Path):
    with pytest.raises(LoadError, match="not a directory this server can read"):
        datadir.list_files(tmp_path / "unmounted")
    with pytest.raises(LoadError, match="not a directory this server can read"):
        datadir.resolve(tmp_path / "unmounted", "a.npy")


def test_a_resolved_file_loads_under_its_listed_name(shared: Path):
    # The link's extension names the format: a Hugging Face cache links model.safetensors to
    # an extension-less blob.
    blob = shared / "blobs" / "3f2a"
    blob.parent.mkdir()
    np.save(blob.with_suffix(".npy"), sinusoidal_table(32, 8).astype(np.float32))
    (blob.with_suffix(".npy")).rename(blob)
    (shared / "gpt2" / "pos.npy").symlink_to(os.path.relpath(blob, shared / "gpt2"))
    assert "gpt2/pos.npy" in datadir.list_files(shared)
    table = io.load(datadir.resolve(shared, "gpt2/pos.npy"), "gpt2/pos.npy")
    assert table.shape == (32, 8)
    assert table.source == "gpt2/pos.npy"
    np.testing.assert_allclose(table.values, sinusoidal_table(32, 8), rtol=1e-6)


def test_the_data_page_loads_from_the_folder_and_refuses_a_swapped_link(
    shared: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(shared))
    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    assert [tab.label for tab in at.tabs][-1] == "Shared folder"
    before = at.session_state["posviz.table"].sha256
    # Swapped for a link leading out after the folder was listed: refused when picked.
    (shared / "B.CSV").unlink()
    (shared / "B.CSV").symlink_to("/etc/passwd")
    at.selectbox(key="posviz.table.shared.file").set_value("B.CSV").run()
    assert any("leads outside the shared folder" in error.value for error in at.error)
    assert at.session_state["posviz.table"].sha256 == before
    at.selectbox(key="posviz.table.shared.file").set_value("gpt2/deep/t.tsv").run()
    at.button[-1].click().run()  # "Load"
    assert not at.exception
    table = at.session_state["posviz.table"]
    assert (table.source, table.shape) == ("gpt2/deep/t.tsv", (10, 2))
