"""Table checks and provenance of Embedding."""

from __future__ import annotations

import numpy as np
import pytest

from posviz.embedding import MAX_ELEMENTS, MIN_POSITIONS, Embedding, LoadError, as_table


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.arange(4.0), "1-D"),
        (np.zeros((2, 3, 4)), "3-D"),
        (np.zeros((1, 5)), "at least 10 positions"),
        (np.zeros((12, 1)), "2 dimensions"),
        (np.array([["a", "b"], ["c", "d"]]), "non-numeric"),
        (np.zeros((3, 3), dtype=complex), "complex"),
    ],
)
def test_refusals_say_what_is_wrong(array, message):
    with pytest.raises(LoadError, match=message):
        as_table(array)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_refusal_gives_count_and_first_cell(bad):
    x = np.zeros((10, 3), dtype=np.float32)
    x[2, 1] = bad
    x[3, 0] = -np.inf
    with pytest.raises(LoadError, match=r"2 NaN/Inf values \(first at row 2, column 1\)"):
        as_table(x)
    x[3, 0] = 0.0
    with pytest.raises(LoadError, match=r"1 NaN/Inf values \(first at row 2, column 1\)"):
        as_table(x)


@pytest.mark.parametrize(("scale", "word"), [(1e200, "overflow"), (1e-200, "underflow")])
def test_magnitudes_whose_products_leave_float64_are_refused(scale, word):
    # Finite, but the Gram matrix would be inf (1e200) or all zeros (1e-200): wrong numbers.
    x = np.random.default_rng(0).standard_normal((40, 10)) * scale
    with pytest.raises(LoadError, match=f"magnitude up to .*{word}.*Rescale"):
        as_table(x)
    assert as_table(x / scale).shape == (40, 10)
    assert as_table(np.zeros((10, 2))).shape == (10, 2)
    lone = x / scale  # the largest magnitude alone, and negative
    lone[5, 3] = -1e200
    with pytest.raises(LoadError, match=r"magnitude up to 1e\+200.*overflow"):
        as_table(lone)


def test_size_is_checked_before_conversion():
    # A zero-stride view: 512 MiB if it were ever converted, a few bytes as it is.
    huge = np.broadcast_to(np.float32(0), (MAX_ELEMENTS // 2 + 1, 2))
    with pytest.raises(LoadError, match="above the limit"):
        as_table(huge)


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.float16, np.float32),
        (np.float32, np.float32),
        (np.float64, np.float64),
        (np.int8, np.float32),
        (np.int64, np.float64),
    ],
)
def test_dtypes_are_upcast_exactly(dtype, expected):
    assert as_table(np.ones((10, 2), dtype=dtype)).dtype == expected


def test_float128_beyond_float32_is_kept_and_beyond_float64_named():
    # Formerly: a float128 value past float32's range was reported as NaN/Inf.
    x = np.ones((10, 2), dtype=np.longdouble)
    x[3, 1] = np.longdouble("1e39")
    table = as_table(x)
    assert table.dtype == np.float64
    assert table[3, 1] == 1e39
    x[3, 1] = np.longdouble("1e4000")
    if np.isfinite(x[3, 1]):  # only where long double is wider than float64
        with pytest.raises(LoadError, match=r"beyond float64's range \(first at row 3, column 1"):
            as_table(x)


def test_smaller_than_the_smallest_table_is_refused_and_the_smallest_accepted():
    assert as_table(np.eye(MIN_POSITIONS, 2)).shape == (MIN_POSITIONS, 2)
    with pytest.raises(LoadError, match=f"at least {MIN_POSITIONS} positions"):
        as_table(np.eye(MIN_POSITIONS - 1, 2))
    with pytest.raises(LoadError, match=f"keep at least {MIN_POSITIONS} rows"):
        Embedding.from_array(np.eye(MIN_POSITIONS + 1, 2), name="t", source="s", row_start=2)


def test_leading_singletons_are_squeezed():
    assert as_table(np.zeros((1, 1, 10, 2))).shape == (10, 2)


def test_row_range_prefix_and_digest():
    x = np.arange(52.0).reshape(13, 4)
    e = Embedding.from_array(x, name="t", source="s", row_start=2, row_stop=12)
    np.testing.assert_array_equal(e.values, x[2:12])
    np.testing.assert_array_equal(e.prefix, x[:2])
    assert e.describe_rows() == "rows 2-11 of 13 (2 leading rows and 1 trailing row trimmed)"
    assert not e.values.flags.writeable
    same = Embedding.from_array(x[2:12], name="other", source="elsewhere")
    assert same.sha256 == e.sha256  # content, not provenance, keys the caches
    changed = x[2:12].copy()
    changed[0, 0] += 1e-12
    assert Embedding.from_array(changed, name="t", source="s").sha256 != e.sha256


@pytest.mark.parametrize(("start", "stop"), [(6, 15), (3, 3), (-1, 12), (0, 20)])
def test_bad_row_ranges(start, stop):
    with pytest.raises(LoadError, match="Row range"):
        Embedding.from_array(
            np.zeros((15, 4)), name="t", source="s", row_start=start, row_stop=stop
        )


def test_grid_must_match_rows():
    with pytest.raises(LoadError, match="Grid 3 x 4"):
        Embedding.from_array(np.zeros((13, 4)), name="t", source="s", row_start=2, grid=(3, 4))
    assert Embedding.from_array(np.zeros((10, 4)), name="t", source="s", grid=(2, 5)).grid == (2, 5)
