"""Core calls cached per table content: an Embedding is hashed by its sha256, never by sampling.

Streamlit hashes large arrays by sampling them (two tables could collide), so every wrapper
takes the whole Embedding and `hash_funcs` reduces it to its digest. Results are bounded in
bytes (POSVIZ_CACHE_SIZE, default 1GB) so memory levels off as users come and go.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import streamlit as st

from posviz import spectrum as _spectrum
from posviz.embedding import Embedding

CACHE_SIZE = os.environ.get("POSVIZ_CACHE_SIZE", "1GB")


def cached(spinner: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a core wrapper: content-keyed, byte-bounded, with a spinner saying what runs."""
    return st.cache_data(
        max_size=CACHE_SIZE,
        hash_funcs={Embedding: attrgetter("sha256")},
        show_spinner=spinner,
    )


@cached("Computing the singular-value spectrum…")
def spectrum(table: Embedding, *, center: bool) -> _spectrum.Spectrum:
    return _spectrum.spectrum(table.values, center=center)
