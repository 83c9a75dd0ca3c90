"""How a result records what made it: the keyword arguments of the function that made it.

The convention (scikit-learn's ``get_params``, scanpy's ``uns[key]["params"]``): a core
function takes its data positionally and every setting as a keyword-only argument, declared
once, with its default, in its signature. Its result is a frozen dataclass with a ``params``
field, filled by :func:`records_params` with those keyword arguments as called, defaults
applied, so that ``f(data, **result.params)`` makes the same result again. A function whose
data is another result (``fit_sinusoids(principal_components(...))``) records that result's
params too, so the chain reruns from the table. Where the table came from is provenance
(``Embedding.provenance()``), never a param.

A function also declares the values each of its arguments may take beside it, as
scikit-learn's ``_parameter_constraints`` do (:func:`bounded`): the function checks them on
every call, before it computes anything, so the pages' widgets (which read them for their
limits), the CLI, ``posviz rerun``, the report and the Python API share one set of bounds.
A result that an argument would make larger than `MAX_RESULT_BYTES` is refused the same way
(:func:`check_budget`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import textwrap
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

__all__ = [
    "MAX_RESULT_BYTES",
    "SEED",
    "Bound",
    "Params",
    "Refused",
    "as_recorded",
    "bounded",
    "bounds_of",
    "check_budget",
    "defaults",
    "keyword_names",
    "quoted",
    "records_params",
    "refusal_parts",
    "refusal_text",
    "split_params",
    "step_of",
]

#: The most memory one result (or one array built on the way to it) may take: a setting or a
#: config.json value that would size a larger allocation is refused, naming it, before
#: anything is built. 256 MiB is a 2**26-value float32 table (`posviz.embedding.MAX_ELEMENTS`);
#: a server of the default compose.yaml (4 GB) holds a few such results per session at once.
MAX_RESULT_BYTES = 256 * 2**20

P = ParamSpec("P")
R = TypeVar("R")


class Refused(ValueError):
    """Input refused with a message saying what is wrong and what to do instead.

    Every refusal is one: `posviz.source.LoadError` (a file or array) and a setting out of
    its :class:`Bound`. The CLI prints it as one line and exits 2; a page shows it and keeps
    what it showed before.

    Attributes
    ----------
    snippet : str
        Python the user can run to do what the message says (convert a pickle to safetensors),
        or "": kept out of the message, so that the message stays one line and the code can be
        copied and run as it is. The CLI prints it under the message, a page as a code block.
    """

    snippet: str = ""


def refusal_text(error: Exception) -> str:
    """`error` as the CLI prints it and a collection keeps it: its message on one line (a
    newline a name brought in is written ``\\n``), then its snippet, if any, each line indented
    by four spaces. :func:`refusal_parts` splits it again.

    >>> error = Refused("a\\nb.pt is pickle-based; convert it:")
    >>> error.snippet = "import torch\\nx = 1"
    >>> print(refusal_text(error))
    a\\nb.pt is pickle-based; convert it:
        import torch
        x = 1
    >>> refusal_parts(refusal_text(error))[1]
    'import torch\\nx = 1'
    """
    line = str(error).replace("\n", "\\n")
    snippet = error.snippet if isinstance(error, Refused) else ""
    return line + "".join(f"\n    {row}" if row else "\n" for row in snippet.splitlines())


def refusal_parts(text: str) -> tuple[str, str]:
    """A :func:`refusal_text` as its message line and its snippet ("" when none)."""
    line, _, snippet = text.partition("\n")
    return line, textwrap.dedent(snippet)


def quoted(value: Any) -> str:
    """`value` as a message quotes it: its repr, cut to 60 characters (a 4000-digit number, a
    string from an export, a file's contents are never echoed whole).

    Examples
    --------
    >>> quoted("abc"), quoted(10**100)
    ("'abc'", '1000000000000000000000000000000000000000… (101 characters)')
    """
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}… ({len(text):,} characters)"


@dataclasses.dataclass(frozen=True)
class Bound:
    """The values one argument may take: a number from `low` to `high` (either end open when
    None), whole when `whole`; None too when `optional`.

    Examples
    --------
    >>> Bound(1, 99_999).check("n_shuffles", 10**9)
    Traceback (most recent call last):
    ...
    posviz._params.Refused: n_shuffles is 1000000000; it must be a whole number from 1 to 99,999.
    >>> Bound(0.0, 1.0, whole=False).check("noise", 0.5)
    """

    low: float | None = None
    high: float | None = None
    whole: bool = True
    optional: bool = False

    def describe(self) -> str:
        """The bound in words: "a whole number from 1 to 99,999"."""
        kind = "a whole number" if self.whole else "a number"
        low, high = (None if v is None else f"{v:,}" for v in (self.low, self.high))
        where = (
            f" from {low} to {high}"
            if low is not None and high is not None
            else f" of at least {low}"
            if low is not None
            else f" of at most {high}"
            if high is not None
            else ""
        )
        return kind + where + (", or None" if self.optional else "")

    def __contains__(self, value: Any) -> bool:
        """Whether `value` lies within the bound (``4 in Bound(1, 8)``)."""
        if value is None and self.optional:
            return True
        kind = numbers.Integral if self.whole else numbers.Real
        ok = isinstance(value, kind) and not isinstance(value, bool)
        if ok and not self.whole:
            try:  # a huge int is no float; NaN lies in no range
                ok = math.isfinite(value)
            except OverflowError:
                ok = False
        if ok and self.low is not None:
            ok = value >= self.low
        if ok and self.high is not None:
            ok = value <= self.high
        return ok

    def check(self, name: str, value: Any, *, error: type[Refused] = Refused) -> None:
        """Refuse `value` for argument `name` unless it lies within the bound.

        Raises
        ------
        Refused
            Naming the argument, its value (cut short) and the bound; as `error` when given
            (a reader raises its own `posviz.source.LoadError`).
        """
        if value not in self:
            msg = f"{name} is {quoted(value)}; it must be {self.describe()}."
            raise error(msg)


#: Every seed: numpy takes any non-negative integer; this is what a widget and a link offer.
SEED = Bound(0, 2**31 - 1)


def bounded(**bounds: Bound) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Declare the bounds of `func`'s arguments beside it; `func` checks them on every call.

    The bounds are the function's own (:func:`bounds_of` reads them: the pages' widgets take
    their limits from there), checked before the function runs, whoever calls it. Put it
    under :func:`records_params`.

    Examples
    --------
    >>> @bounded(n=Bound(1, 10))
    ... def f(x, *, n: int = 3) -> int:
    ...     return n
    >>> f(0, n=11)
    Traceback (most recent call last):
    ...
    posviz._params.Refused: n is 11; it must be a whole number from 1 to 10.
    >>> bounds_of(f)["n"].high
    10
    """

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(func)
        unknown = set(bounds) - set(signature.parameters)
        if unknown:
            msg = f"{func.__name__} has no argument {sorted(unknown)} to bound."
            raise TypeError(msg)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            given = signature.bind(*args, **kwargs)
            given.apply_defaults()
            for name, bound in bounds.items():
                bound.check(name, given.arguments[name])
            return func(*args, **kwargs)

        wrapper.bounds = MappingProxyType(dict(bounds))  # type: ignore[attr-defined]
        return wrapper

    return decorate


def bounds_of(func: Callable[..., Any]) -> Mapping[str, Bound]:
    """The bounds `func` declares (:func:`bounded`), by argument name; empty if none."""
    return getattr(func, "bounds", MappingProxyType({}))


def check_budget(nbytes: float, what: str) -> None:
    """Refuse to build `what` when it would take more than `MAX_RESULT_BYTES`.

    `what` names the values that size it, as the caller knows them (a config.json key, a
    setting), so the message says what to change.

    Examples
    --------
    >>> check_budget(8 * 10**7 * 2049, "the bias of 10,000,000 heads to distance 2,048")
    Traceback (most recent call last):
    ...
    posviz._params.Refused: the bias of 10,000,000 heads to distance 2,048 would take 153 GiB, above the limit of 256 MiB per result; choose smaller values.
    """  # noqa: E501
    if nbytes > MAX_RESULT_BYTES:
        size = f"{nbytes / 2**30:,.0f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.0f} MiB"
        msg = (
            f"{what} would take {size}, above the limit of {MAX_RESULT_BYTES // 2**20} MiB per "
            "result; choose smaller values."
        )
        raise Refused(msg)


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


class Params(dict[str, Any]):
    """A result's settings (a dict, as it always was), and the name of the function that made
    them, `step`: core functions are named as the pipeline steps that run them, so a result
    knows its step (:func:`step_of`) and an export needs no name typed by hand.

    Examples
    --------
    >>> p = Params({"center": True}, step="spectrum")
    >>> p == {"center": True}, p.step
    (True, 'spectrum')
    """

    step: str

    def __init__(self, settings: Mapping[str, Any] = (), /, *, step: str) -> None:  # type: ignore[assignment]
        super().__init__(settings)
        self.step = step

    def __reduce__(self) -> tuple[Any, ...]:  # pickled with its step (the app's caches)
        return (_params, (dict(self), self.step))


def _params(settings: dict[str, Any], step: str) -> Params:
    return Params(settings, step=step)


def step_of(result: Any) -> str:
    """The name of the function (and pipeline step) that made `result`, as
    :func:`records_params` recorded it.

    Raises
    ------
    TypeError
        If `result` was not made by a function decorated with :func:`records_params`.
    """
    step = getattr(getattr(result, "params", None), "step", None)
    if not isinstance(step, str):
        msg = f"{type(result).__name__} does not record the step that made it (records_params)."
        raise TypeError(msg)
    return step


def records_params(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a core function so its result's ``params`` are the settings it was called with.

    The result must be a frozen dataclass with a ``params: dict`` field (default empty). The
    upstream results among the positional arguments lend their params first, so a chained
    result carries every setting of its chain; the function's own settings win. Settings are
    recorded by :func:`as_recorded` (a list given for a tuple is recorded as the tuple), as
    :class:`Params` naming `func`: the step that made the result.

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
    >>> step_of(t)
    'total'
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
        params = Params({**upstream, **own}, step=func.__name__)
        return dataclasses.replace(result, params=params)  # type: ignore[type-var]

    return wrapper
