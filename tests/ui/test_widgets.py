"""The shared display widgets: a table of numbers wider than the page keeps its first column in
view and says it scrolls."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest


def _numbers(columns: int) -> None:
    import pandas as pd

    from posviz.ui import widgets

    frame = pd.DataFrame({"head": range(4)} | {f"n{i}": [0.5] * 4 for i in range(columns - 1)})
    widgets.show_numbers(frame, name="t", settings={})


@pytest.mark.parametrize("columns", [4, 17])
def test_a_wide_table_pins_its_first_column_and_says_it_scrolls(columns):
    at = AppTest.from_function(_numbers, args=(columns,)).run()
    assert not at.exception, at.exception
    config = json.loads(at.dataframe[0].proto.columns or "{}")
    said = [c.value for c in at.caption if "scroll sideways" in c.value]
    pinned = [name for name, column in config.items() if column.get("pinned")]
    if columns > 8:
        assert pinned == ["head"]
        assert said == [f"{columns} columns: scroll sideways for the rest; head stays in view."]
    else:
        assert pinned == []
        assert said == []
