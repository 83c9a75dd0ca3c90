"""posviz.io._text: CSV and text tables, a header row found, the size limit checked unread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import posviz.io
from posviz.io import LoadError, list_tensors, read_tensor
from tests.corpus import Good


def test_text_over_the_size_limit_is_not_read(
    good: dict[str, Good], monkeypatch: pytest.MonkeyPatch, bytes_read: list[int]
) -> None:
    monkeypatch.setattr(posviz.io._text, "MAX_TEXT_BYTES", 100)
    with pytest.raises(LoadError, match="above the 100-byte limit for text tables"):
        list_tensors(good["csv_plain"].path)
    assert sum(bytes_read) <= 16  # the magic-byte sniff only


def test_pandas_column_labels_are_a_header(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("0,1,2\n1.5,2.5,3.5\n4,5,6\n")
    np.testing.assert_array_equal(
        read_tensor(tmp_path / "t.csv", "table"), [[1.5, 2.5, 3.5], [4, 5, 6]]
    )
