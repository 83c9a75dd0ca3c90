"""posviz.schemes._values: a number read from config.json is refused, with its key, its value
and the limit, unless it is finite, of its kind and within its bounds."""

from __future__ import annotations

import pytest

from posviz.embedding import LoadError
from posviz.schemes._values import first, given, integer, number


def test_a_finite_number_of_either_json_kind_is_a_float():
    assert number(8, "factor") == 8.0
    assert isinstance(number(8, "factor"), float)
    assert number(0.25, "rotary_pct") == 0.25
    assert number(0, "factor") == 0.0  # the default low bound is 0, allowed


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (True, "rope_theta in config.json is True; expected a finite number."),
        ("8", "rope_theta in config.json is '8'; expected a finite number."),
        (None, "rope_theta in config.json is None; expected a finite number."),
        (float("nan"), "rope_theta in config.json is nan; expected a finite number."),
        (float("inf"), "rope_theta in config.json is inf; expected a finite number."),
        (-5.0, "rope_theta in config.json is -5; it must not be negative."),
    ],
)
def test_what_is_not_a_finite_non_negative_number_is_refused_by_its_key(value, says):
    with pytest.raises(LoadError) as refused:
        number(value, "rope_theta")
    assert str(refused.value) == says


def test_a_number_past_its_bounds_is_refused_naming_the_bound():
    with pytest.raises(LoadError, match=r"^factor in config.json is 0.5; it must be at least 1\.$"):
        number(0.5, "factor", low=1.0)
    with pytest.raises(
        LoadError, match=r"^factor in config.json is 1e\+06; posviz takes at most 1000\.$"
    ):
        number(1e6, "factor", high=1000)
    assert number(1000, "factor", high=1000) == 1000.0
    with pytest.raises(LoadError, match="posviz takes at most 1000"):
        number(1000.5, "factor", high=1000)


def test_an_integer_too_large_for_a_float_is_refused_quoted_briefly():
    with pytest.raises(LoadError, match="expected a finite number") as refused:
        number(10**4000, "rope_theta")
    assert len(str(refused.value)) < 200


def test_a_whole_number_may_be_written_as_a_float():
    assert integer(4096.0, "hidden_size") == 4096
    assert isinstance(integer(4096.0, "hidden_size"), int)


@pytest.mark.parametrize(
    ("value", "says"),
    [(0, "is 0; expected a positive whole number."), (4096.5, "is 4096.5; expected a positive"),
     (-2, "is -2; it must not be negative.")],
)  # fmt: skip
def test_what_is_not_a_positive_whole_number_is_refused(value, says):
    with pytest.raises(LoadError) as refused:
        integer(value, "num_attention_heads")
    assert str(refused.value).startswith(f"num_attention_heads in config.json {says}")


def test_a_whole_number_past_its_bound_is_written_with_thousands_separators():
    with pytest.raises(LoadError) as refused:
        integer(10_000_000, "n_head", high=4096)
    assert str(refused.value) == "n_head in config.json is 10,000,000; posviz takes at most 4,096."
    with pytest.raises(LoadError, match=r"is 1e\+20; posviz takes at most 4,096\.$"):
        integer(10**20, "n_head", high=4096)
    assert integer(4096, "n_head", high=4096) == 4096


def test_first_is_the_first_key_set_and_not_null():
    config = {"n_head": None, "num_attention_heads": 0, "n_heads": 8}
    assert first(config, "n_head", "num_attention_heads", "n_heads") == 0  # 0 is set
    assert first(config, "n_head", "n_heads") == 8
    assert first(config, "missing", "n_head") is None


def test_given_names_what_a_spec_built_by_hand_lacks():
    assert given(0, "factor") == 0
    with pytest.raises(
        LoadError, match=r"^The scheme needs original_max_position_embeddings; none"
    ):
        given(None, "original_max_position_embeddings")
