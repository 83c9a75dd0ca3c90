"""The io tests' shared fixtures: the corpus of good files, and the bytes posviz.io reads."""

from __future__ import annotations

import io

import pytest

import posviz.io
from tests.corpus import Good, good_files


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Good]:
    return good_files(tmp_path_factory.mktemp("good"))


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of every read posviz.io makes from files it opens by path."""
    reads: list[int] = []

    class CountingFile(io.FileIO):
        def read(self, size: int = -1) -> bytes:
            data = super().read(size)
            reads.append(len(data))
            return data

        def readinto(self, buffer: memoryview) -> int:
            n = super().readinto(buffer)
            reads.append(n or 0)
            return n

    monkeypatch.setattr(posviz.io, "open", lambda path, mode: CountingFile(path), raising=False)
    return reads
