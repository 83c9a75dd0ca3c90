"""Which tables this session has loaded: plain session_state slots that survive page switches."""

from __future__ import annotations

import streamlit as st

from posviz import simulate
from posviz.embedding import Embedding

#: The table every page analyses, and the Compare page's second table.
PRIMARY, SECOND = "posviz.table", "posviz.second"

_DEFAULTS = {
    PRIMARY: lambda: simulate.learned_like(1024, 768, seed=0),
    SECOND: lambda: simulate.sinusoidal(1024, 768),
}


def current(slot: str = PRIMARY) -> Embedding:
    """The table in `slot`; a simulated default on first use, so every page opens with charts."""
    if slot not in st.session_state:
        st.session_state[slot] = _DEFAULTS[slot]()
    return st.session_state[slot]


def set_table(table: Embedding, slot: str = PRIMARY) -> None:
    """Make `table` the one in `slot` for every page of this session."""
    st.session_state[slot] = table
