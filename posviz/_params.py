"""How a result records what made it: the keyword arguments of the function that made it.

The convention (scikit-learn's ``get_params``, scanpy's ``uns[key]["params"]``): a core
function takes its data positionally and every setting as a keyword-only argument, declared
once, with its default, in its signature. Its result is a frozen dataclass with a ``params``
field, filled by :func:`records_params` with those keyword arguments as called, defaults
applied, so that ``f(data, **result.params)`` makes the same result again. A function whose
data is another result (``fit_sinusoids(principal_components(...))``) records that result's
params too, so the chain reruns from the table. Where the table came from is provenance
(``Embedding.provenance()``), never a param.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["as_recorded", "defaults", "keyword_names", "records_params", "split_params"]

MAX_RESULT_BYTES = 256 * 2**20

P = ParamSpec("P")
R = TypeVar("R")


def keyword_names(func: Callable[..., Any]) -> tuple[str, ...]:
    """The names of `func`'s keyword-only arguments: its settings."""
    parameters = inspect.signature(func).parameters.values()
    return tuple(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


def defaults(func: Callable[..., Any]) -> dict[str, Any]:
    """`func`'s settings with a default, and that default: the one place a default lives.

    Examples
    --------
    >>> def f(x, *, center: bool = True, n_components: int = 8, grid): ...
    >>> defaults(f)
    {'center': True, 'n_components': 8}
    """
    parameters = inspect.signature(func).parameters.values()
    return {
        p.name: p.default
        for p in parameters
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty
    }


def split_params(
    params: dict[str, Any], func: Callable[..., Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the settings of `params` that `func` takes, the rest).

    Examples
    --------
    >>> def f(x, *, k: int = 8): ...
    >>> split_params({"k": 3, "seed": 0}, f)
    ({'k': 3}, {'seed': 0})
    """
    names = set(keyword_names(func))
    return (
        {k: v for k, v in params.items() if k in names},
        {k: v for k, v in params.items() if k not in names},
    )


def as_recorded(value: Any) -> Any:
    """`value` as a result records it: lists as tuples (also inside dicts).

    JSON turns a tuple setting (``grid=(14, 14)``) into a list; recorded as a tuple either
    way, a result read back from an export and called again is equal to the original.

    Examples
    --------
    >>> as_recorded({"grid": [14, 14], "rows": None})
    {'grid': (14, 14), 'rows': None}
    """
    if isinstance(value, list | tuple):
        return tuple(as_recorded(v) for v in value)
    if isinstance(value, dict):
        return {k: as_recorded(v) for k, v in value.items()}
    return value


def records_params(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a core function so its result's ``params`` are the settings it was called with.

    The result must be a frozen dataclass with a ``params: dict`` field (default empty). The
    upstream results among the positional arguments lend their params first, so a chained
    result carries every setting of its chain; the function's own settings win. Settings are
    recorded by :func:`as_recorded` (a list given for a tuple is recorded as the tuple).

    Examples
    --------
    >>> @dataclasses.dataclass(frozen=True)
    ... class Total:
    ...     value: float
    ...     params: dict = dataclasses.field(default_factory=dict)
    >>> @records_params
    ... def total(x, *, scale: float = 1.0) -> Total:
    ...     return Total(sum(x) * scale)
    >>> total([1, 2]).params
    {'scale': 1.0}
    >>> t = total([1, 2], scale=2.0)
    >>> total([1, 2], **t.params) == t
    True
    """
    signature = inspect.signature(func)
    names = keyword_names(func)

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        result = func(*args, **kwargs)
        upstream: dict[str, Any] = {}
        for arg in args:
            upstream.update(getattr(arg, "params", None) or {})
        own = {name: as_recorded(bound.arguments[name]) for name in names}
        params = {**upstream, **own}
        return dataclasses.replace(result, params=params)  # type: ignore[type-var]

    return wrapper
