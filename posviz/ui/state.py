"""Which tables this session has loaded: plain session_state slots that survive page switches.

A simulated primary table is mirrored into the URL (``?sim=learned-like&n_positions=1024...``)
so a link reopens the same table; an uploaded one cannot be shared that way and clears it.
"""

from __future__ import annotations

import inspect
from typing import Any

import streamlit as st

from posviz import simulate
from posviz.embedding import Embedding
from posviz.ui.text import literal

#: The table every page analyses, and the Compare page's second table.
PRIMARY, SECOND = "posviz.table", "posviz.second"
#: Positions the Boundaries page flagged: {"sha256", "positions", "rule"}.
FLAGS = "posviz.flags"

_DEFAULTS = {
    PRIMARY: ("learned-like", {"n_positions": 1024, "d_model": 768, "seed": 0}),
    SECOND: ("sinusoidal", {"n_positions": 1024, "d_model": 768}),
}


def current(slot: str = PRIMARY) -> Embedding:
    """The table in `slot`; on first use the one the URL names, else a simulated default."""
    if slot not in st.session_state:
        kind, options = _DEFAULTS[slot]
        linked = _from_url() if slot == PRIMARY else None
        st.session_state[slot] = linked or simulate.GENERATORS[kind](**options)
    return st.session_state[slot]


def set_table(table: Embedding, slot: str = PRIMARY) -> None:
    """Make `table` the one in `slot` for every page of this session."""
    st.session_state[slot] = table
    if slot == PRIMARY:
        _clear_url()


def set_flags(table: Embedding, positions: list[int], rule: str) -> None:
    """Share the positions flagged on `table` (0-based rows) with the other pages."""
    st.session_state[FLAGS] = {"sha256": table.sha256, "positions": positions, "rule": rule}


def flags(table: Embedding) -> list[int]:
    """Positions flagged on `table`; none when the flags were made on another table."""
    shared = st.session_state.get(FLAGS)
    return shared["positions"] if shared and shared["sha256"] == table.sha256 else []


def set_simulated(kind: str, options: dict[str, Any], slot: str = PRIMARY) -> None:
    """Simulate `kind` with `options` into `slot`; for the primary table, name it in the URL."""
    st.session_state[slot] = simulate.GENERATORS[kind](**options)
    if slot == PRIMARY:
        _clear_url()
        st.query_params.update({"sim": kind} | {k: str(v) for k, v in options.items()})


def _clear_url() -> None:
    for key in ["sim", *_PARAMETERS]:
        st.query_params.pop(key, None)


#: Every keyword any generator takes: the only URL keys read as simulation options.
_PARAMETERS = sorted(
    {
        name
        for generator in simulate.GENERATORS.values()
        for name in inspect.signature(generator).parameters
    }
)


def _from_url() -> Embedding | None:
    """The simulated table the URL names, if its options are within the form's bounds."""
    params = st.query_params
    kind = params.get("sim")
    if kind not in simulate.GENERATORS:
        return None
    try:
        return simulate.GENERATORS[kind](**simulate.parse_options(kind, params.to_dict()))
    except ValueError as error:  # LoadError included
        st.warning(
            f"The link's simulation was not made ({literal(error)}); showing the default table."
        )
        return None
