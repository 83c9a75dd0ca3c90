"""posviz._disk.Store: entries written whole or not at all, read back only when whole, and the
folder kept within its bytes by dropping the least recently used; files not the store's are
never counted or deleted, and a broken folder only costs the work again."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from posviz._disk import Store


def store(tmp_path: Path, limit: int = 1000) -> Store:
    return Store(tmp_path / "store", ("hub", "controls"), limit)


def test_an_entry_is_named_by_the_sha256_of_its_key_in_its_kinds_folder(tmp_path):
    s = store(tmp_path)
    digest = hashlib.sha256(b"repo\0commit\0file").hexdigest()
    assert s.path("hub", "repo", "commit", "file") == tmp_path / "store" / "hub" / digest
    assert s.path("hub", "a\0b") == s.path("hub", "a", "b")  # the key's parts joined by NUL


def test_what_is_written_is_read_back_and_nothing_else(tmp_path):
    s = store(tmp_path)
    assert s.read("hub", "k") is None
    s.write("hub", b"bytes", "k")
    assert s.read("hub", "k") == b"bytes"
    assert s.read("controls", "k") is None  # another kind, another entry
    assert s.read("hub", "k", size=5) == b"bytes"
    assert s.read("hub", "k", size=4) is None  # not the size asked: as if absent
    assert [p.name for p in (tmp_path / "store" / "hub").iterdir()] == [s.path("hub", "k").name]


def test_an_entry_larger_than_the_whole_store_is_not_kept(tmp_path):
    s = store(tmp_path, limit=10)
    s.write("hub", b"x" * 11, "big")
    assert not s.path("hub", "big").exists()
    s.path("hub", "planted").parent.mkdir(parents=True)
    s.path("hub", "planted").write_bytes(b"x" * 11)  # put there by another process
    assert s.read("hub", "planted") is None  # not read: past the limit


def test_past_the_limit_the_least_recently_used_go_first(tmp_path):
    s = store(tmp_path, limit=300)
    for i, key in enumerate("abc"):
        s.write("hub", bytes(100), key)
        os.utime(s.path("hub", key), (1000 + i, 1000 + i))  # a, then b, then c
    assert s.read("hub", "a") == bytes(100)  # a used again: now the most recent
    s.write("controls", bytes(100), "d")
    assert [s.read("hub", k) is not None for k in "abc"] == [True, False, True]
    assert s.read("controls", "d") == bytes(100)


def test_files_not_the_stores_are_never_counted_or_deleted(tmp_path):
    s = store(tmp_path, limit=100)
    strangers = [
        tmp_path / "store" / "hub" / "notes.txt",  # not an entry's name
        tmp_path / "store" / "other" / ("0" * 64),  # not one of its kinds
        tmp_path / "store" / "hub" / ("0" * 64 + ".partial"),
    ]
    for path in strangers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(1000))
    s.write("hub", bytes(60), "a")
    s.write("hub", bytes(60), "b")  # 120 bytes of entries: a goes
    assert all(path.exists() for path in strangers)
    assert (s.read("hub", "a"), s.read("hub", "b")) == (None, bytes(60))


def test_a_write_leaves_no_partial_file(tmp_path):
    s = store(tmp_path)
    s.write("hub", b"whole", "k")
    s.write("hub", b"again", "k")
    assert sorted(p.name for p in (tmp_path / "store" / "hub").iterdir()) == [
        s.path("hub", "k").name
    ]
    assert s.read("hub", "k") == b"again"


def test_an_unwritable_folder_costs_the_work_not_an_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    s = Store(blocker / "store", ("hub",), 1000)  # under a file: nothing can be made
    s.write("hub", b"bytes", "k")
    assert s.read("hub", "k") is None
