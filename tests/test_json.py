"""posviz._json.max_depth: how deep a JSON text nests, counted outside its strings in one
linear pass before it is parsed (Python's parser recurses once per level)."""

from __future__ import annotations

import json
import time

import pytest

from posviz._json import max_depth


def depth(value: object) -> int:
    """The nesting of a parsed value, by recursion: the reference."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@pytest.mark.parametrize(
    "value",
    [
        1, "text", [], {}, [[]], {"a": {"b": [1, {"c": []}]}}, [[1], [[2]], [[[3]]]],
        {"k": [{"x": [[[]]]}, 4]}, [{}] * 5,
    ],
)  # fmt: skip
def test_the_depth_of_any_value_is_its_nesting(value):
    text = json.dumps(value)
    assert max_depth(text) == max_depth(text.encode()) == depth(value)


def test_brackets_inside_strings_do_not_count_escaped_quotes_included():
    assert max_depth(b'["[[[[", "{{{", "\\"]]]", "\\\\", ["]"]]') == 2
    assert max_depth(json.dumps({"s": '\\"[[' * 50})) == 1
    assert max_depth('{"a\\"[": [1]}') == 2


def test_depth_is_counted_from_the_texts_start_whatever_it_closes_first():
    # Not JSON (the parser refuses it after): its depth only has to stay what it nests.
    assert max_depth(b"]]][[]") == 0
    assert max_depth(b"]][[[") == 1
    assert max_depth(b"") == 0


def test_a_deep_text_is_measured_in_linear_time_where_parsing_would_fail():
    deep = b"[" * 1_000_000 + b"]" * 1_000_000
    with pytest.raises(RecursionError):
        json.loads(deep)
    start = time.process_time()
    assert max_depth(deep) == 1_000_000
    assert max_depth(b'"' + b"[" * 1_000_000 + b'"') == 0  # all of it a string
    assert time.process_time() - start < 5  # a fraction of a second on an idle machine
