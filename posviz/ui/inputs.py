"""A setting's widget made from its core function, as napari's magicgui and panel's Param make
theirs: the bounds it declares (`posviz._params.bounded`), its default (the signature) and what
its numpydoc docstring says of it (the tooltip). A page says which settings it shows, with the
label it gives them and any bound the table's shape sets (`posviz.forms`); not how to draw them.

Every number a page asks for is kept in the page's URL (``bind="query-params"``: a copied link
reopens it) and across page switches (``persist_state="session"``); only an input of an action,
which a button uses once (rows to trim, a table to add), stays out of the link.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import streamlit as st

from posviz._params import Bound, bounds_of, defaults, keyword_names

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

__all__ = ["IN_STATE", "described", "number", "setting"]

#: A widget's value is in ``st.session_state`` already, set before it is drawn (a widget that
#: follows the Schemes page's model to its own default: `posviz.ui.schemes.follow`).
IN_STATE: Final = "in session state"

#: reST roles and literals as Markdown code: ``:func:`~a.b` `` and ````x```` read `b` and `x`.
_ROLE = re.compile(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


@functools.cache
def _parameters(func: Callable[..., Any]) -> Mapping[str, str]:
    """Each parameter's description in `func`'s numpydoc docstring, as one line of Markdown
    (``a, b : int`` describes both)."""
    lines = (inspect.getdoc(func) or "").splitlines()
    found: dict[str, str] = {}
    try:
        i = lines.index("Parameters") + 2
    except ValueError:
        return found
    names: list[str] = []
    for line, after in zip(lines[i:], [*lines[i + 1 :], ""], strict=True):
        if set(after.strip()) == {"-"}:  # the next section's title
            break
        if line and not line[0].isspace():
            names = [n.strip() for n in line.partition(" : ")[0].split(",")]
            found.update(dict.fromkeys(names, ""))
        elif line.strip():
            for name in names:
                found[name] = f"{found[name]} {line.strip()}".strip()
    return {name: _LITERAL.sub(r"`\1`", _ROLE.sub(r"`\1`", text)) for name, text in found.items()}


def described(func: Callable[..., Any], name: str) -> str | None:
    """What `func`'s docstring says of its parameter `name` (Markdown), or None."""
    return _parameters(func).get(name) or None


def number(
    label: str,
    bound: Bound,
    default: float | str,
    *,
    key: str,
    step: float | None = None,
    help: str | None = None,
    where: DeltaGenerator | None = None,
    link: bool = True,
) -> Any:
    """A number within `bound`, starting at `default` (moved into the bound; `IN_STATE`: the
    session state holds it); whole numbers as int, others as float written by ``%g``.

    `where` is the container drawn in (a column); `link` False leaves an action's input out
    of the URL.
    """
    kind = int if bound.whole else float
    low, high = (None if v is None else kind(v) for v in (bound.low, bound.high))
    value: dict[str, Any] = {}
    if default != IN_STATE:
        start = kind(default)
        start = start if high is None else min(start, high)
        value["value"] = start if low is None else max(start, low)
    return (where or st).number_input(
        label,
        low,
        high,
        step=None if step is None else kind(step),
        format=None if bound.whole else "%g",
        key=key,
        help=help,
        bind="query-params" if link else None,
        persist_state="session" if link else None,
        **value,
    )


def setting(
    core: Callable[..., Any],
    name: str,
    label: str,
    *,
    key: str,
    low: float | None = None,
    high: float | None = None,
    default: float | str | None = None,
    step: float | None = None,
    help: str | None = None,
    where: DeltaGenerator | None = None,
) -> Any:
    """The widget of `core`'s numeric setting `name`, kept in the URL under `key`.

    Bounded by what `core` declares for it, narrowed by `low` and `high` (a table's shape:
    `posviz.forms`); starting at `default`, else the signature's; its tooltip is `help`,
    else the docstring's description of it.
    """
    if name not in keyword_names(core):
        msg = f"{core.__name__} has no setting {name!r}."
        raise TypeError(msg)
    declared = bounds_of(core).get(name)
    start = defaults(core).get(name) if default is None else default
    if start is None:
        msg = f"{core.__name__}'s {name} has no default of its own: give the page's."
        raise TypeError(msg)
    declared = declared or Bound(whole=isinstance(start, int))
    bound = Bound(
        _narrowed(declared.low, low, max),
        _narrowed(declared.high, high, min),
        whole=declared.whole,
    )
    return number(
        label,
        bound,
        start,
        key=key,
        step=step,
        help=described(core, name) if help is None else help,
        where=where,
    )


def _narrowed(declared: float | None, page: float | None, pick: Callable[..., Any]) -> Any:
    """The tighter of the function's own limit and the page's (either may be None)."""
    given = [v for v in (declared, page) if v is not None]
    return pick(given) if given else None
