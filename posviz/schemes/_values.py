"""Numbers read from config.json, checked: finite, of the right kind, within their bounds, so a
bad value is refused with its key, its value and the limit before anything is computed."""

from __future__ import annotations

import math
from typing import Any, TypeVar

from posviz._params import quoted
from posviz.embedding import LoadError

__all__ = ["first", "given", "integer", "number", "shown"]

_T = TypeVar("_T")


#: `value` for a message: a huge number or a long text cut to a few dozen characters (the one
#: helper every refusal quotes with).
shown = quoted


def first(config: dict, *keys: str) -> Any:
    """The value of the first of `keys` that `config` sets (not null)."""
    return next((config[k] for k in keys if config.get(k) is not None), None)


def given(value: _T | None, what: str) -> _T:
    """`value`, which the checks before made sure is set (a spec's field its rule or kind needs:
    `rotary_spec` and `position_scheme` refuse a config without it); raises only for a spec
    built by hand.

    >>> given(4096, "original_max_position_embeddings")
    4096
    """
    if value is None:
        msg = f"The scheme needs {what}; none is given."
        raise LoadError(msg)
    return value


def number(value: Any, key: str, *, low: float = 0.0, high: float | None = None) -> float:
    """A finite real number from JSON (not a bool, not a string) in [`low`, `high`].

    Examples
    --------
    >>> number(8, "factor")
    8.0
    >>> number(10**4000, "rope_theta")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    posviz.source.LoadError: rope_theta in config.json is 1000...; expected a finite number.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{key} in config.json is {shown(value)}; expected a finite number."
        raise LoadError(msg)
    try:
        result = float(value)  # a 4000-digit integer overflows here
    except OverflowError:
        result = math.inf
    if not math.isfinite(result):
        msg = f"{key} in config.json is {shown(value)}; expected a finite number."
        raise LoadError(msg)
    if result < low:
        msg = (
            f"{key} in config.json is {value:g}; it must not be negative."
            if low == 0
            else f"{key} in config.json is {value:g}; it must be at least {low:g}."
        )
        raise LoadError(msg)
    if high is not None and result > high:
        msg = f"{key} in config.json is {result:g}; posviz takes at most {high:g}."
        raise LoadError(msg)
    return result


def integer(value: Any, key: str, *, high: int | None = None) -> int:
    """A positive whole number from JSON (4096 or 4096.0), at most `high`."""
    result = number(value, key)
    if result != int(result) or result < 1:
        msg = f"{key} in config.json is {shown(value)}; expected a positive whole number."
        raise LoadError(msg)
    if high is not None and result > high:
        text = f"{result:,.0f}" if result < 1e15 else f"{result:g}"
        msg = f"{key} in config.json is {text}; posviz takes at most {high:,}."
        raise LoadError(msg)
    return int(result)
