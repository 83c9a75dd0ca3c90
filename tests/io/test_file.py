"""posviz.io._file, what every format shares: messages that quote long names and long lists of
tensors briefly."""

from __future__ import annotations

from pathlib import Path

import pytest

from posviz.io import LoadError, list_tensors, read_tensor
from tests.corpus import write_safetensors


def _empty_tensors(n: int) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    return {f"t{i}": ("F32", (0,), b"") for i in range(n)}


def test_messages_quote_long_names_and_many_tensors_briefly(tmp_path: Path) -> None:
    # A header of a few MiB may hold one name of megabytes: the message stays short.
    name = "w" * 2**20
    path = write_safetensors(tmp_path / "long.safetensors", {name: ("F7", (12, 4), bytes(192))})
    with pytest.raises(LoadError, match=r"tensor 'w{100}… \(1,048,576 characters\)'") as refused:
        list_tensors(path)
    assert len(str(refused.value)) < 1000
    many = write_safetensors(tmp_path / "many.safetensors", _empty_tensors(5000))
    with pytest.raises(LoadError, match="and 4,980 more") as refused:
        read_tensor(many, "wpe")
    assert len(str(refused.value)) < 1000
