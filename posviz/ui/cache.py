"""The pipeline's steps (posviz.pipeline) cached per table content, each named as its step.

A page calls ``cache.run(pipeline.spectrum, table, center=True)``: every step of the registry
(`posviz.pipeline.STEPS`) is cached here, with the spinner the registry gives it; a step that
needs another step's result gets it through :func:`run`, so that one is cached too. Built
figures are kept as well (`figure`), keyed by a digest of the results they draw.

Streamlit hashes large arrays by sampling them (two tables could collide), so every step
takes whole Embeddings and `hash_funcs` reduces each to its sha256: all that a result computed
from the values depends on. A position scheme's steps take a rule, a head count or a small
tensor (`posviz.schemes.relative.HEADS` keeps it below Streamlit's sampling), hashed whole; the
heads steps an attention layer, reduced to its sha256 too (its provenance: config.json, layer,
every tensor's sha256).
A result that holds the table itself (a resampled table keeps its name, source and prefix
rows; a collection its tables) is keyed by every field of it (`_whole`), so that a session
never gets another's. Each cached function keeps at most POSVIZ_CACHE_SIZE (default 1GB) of
results, or for resampled tables the latest TABLE_ENTRIES, shared by all sessions, so memory
levels off as users come and go.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import pickle
import warnings
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np
import streamlit as st

from posviz import _settings, pipeline
from posviz import collection as _collection
from posviz.embedding import Embedding
from posviz.models.attention import AttentionLayer

if TYPE_CHECKING:
    import plotly.graph_objects as go

CACHE_SIZE = _settings.cache_size()

P = ParamSpec("P")
R = TypeVar("R")


def cached(spinner: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a step: content-keyed, byte-bounded, with a spinner saying what runs."""
    return st.cache_data(
        max_size=CACHE_SIZE,
        hash_funcs={Embedding: attrgetter("sha256"), AttentionLayer: attrgetter("sha256")},
        show_spinner=spinner,
    )


def _whole(table: Embedding) -> str:
    """A digest of every field of `table` (the values by their sha256): the key of results
    that carry the table's provenance and prefix rows, not only numbers computed from it."""
    digest = hashlib.sha256()
    for f in dataclasses.fields(table):
        value = getattr(table, f.name)
        if f.name == "values":
            continue  # in sha256
        if isinstance(value, np.ndarray):
            digest.update(f"{f.name}:{value.dtype.str}{value.shape}:".encode())
            digest.update(value.tobytes())
        else:
            digest.update(f"{f.name}:{value!r};".encode())
    return digest.hexdigest()


#: Resampled tables kept per resampling function (see `cached_table`).
TABLE_ENTRIES = 2


def cached_table(spinner: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """As `cached`, for functions returning a table: kept as the object, not pickled.

    `st.cache_data` stores a pickled copy and returns a new copy on every hit: two to three
    copies of a result as large as the table or larger. An Embedding is read-only, so one
    object can be shared; `st.cache_resource` has no byte bound, so entries are bounded by
    count: at most `TABLE_ENTRIES` tables of at most MAX_ELEMENTS values each. Keyed by
    `_whole`: the result keeps the input's name, source and prefix rows.
    """
    return st.cache_resource(
        max_entries=TABLE_ENTRIES,
        hash_funcs={Embedding: _whole},
        show_spinner=spinner,
    )


def _cached_step(step: pipeline.Step) -> Callable[..., Any]:
    """`step`, cached (a table it makes kept as the object), its upstream steps cached too
    (they go through `run`)."""
    forward = step.run

    def cached_step(*data: Any, **params: Any) -> Any:
        return forward(*data, run=run, **params)

    # Streamlit keys a cache by the function's module, qualified name and source: one name
    # per step keeps their caches apart.
    cached_step.__name__ = cached_step.__qualname__ = step.name
    decorate = cached_table if step.makes_table else cached
    return decorate(step.spinner)(cached_step)


#: Every step of the registry, cached, by the step itself.
_CACHED: dict[Callable[..., Any], Callable[..., Any]] = {
    step.run: _cached_step(step) for step in pipeline.STEPS.values()
}


def run(step: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`step` of posviz.pipeline on its data, from the cache when computed before.

    A page calls ``cache.run(pipeline.offset_profile, table, max_offset=k)``; typed as the step
    itself, so a type checker checks the settings against its core function's. Steps run
    their upstream steps through it too.
    """
    return _CACHED[step](*args, **kwargs)


if not TYPE_CHECKING:  # hidden from type checkers, so a page that still uses one is told

    def __getattr__(name: str) -> Callable[..., Any]:
        """``cache.<step>(...)``, as before 0.2.0: ``cache.run(pipeline.<step>, ...)``."""
        if name not in pipeline.STEPS:
            msg = f"module {__name__!r} has no attribute {name!r}"
            raise AttributeError(msg)
        msg = (
            f"posviz.ui.cache.{name}(...) is cache.run(pipeline.{name}, ...) since posviz 0.2.0; "
            "the old name goes in 0.3.0"
        )
        warnings.warn(msg, DeprecationWarning, stacklevel=2)
        return functools.partial(run, pipeline.STEPS[name].run)


# --- collection -----------------------------------------------------------------------------


@st.cache_resource(
    max_entries=4,
    hash_funcs={Embedding: _whole},  # the collection holds the tables themselves
    show_spinner="Comparing the tables by CKA…",
)
def collection(
    labels: tuple[str, ...],
    tables: tuple[Embedding | None, ...],
    errors: tuple[str | None, ...],
    *,
    center: bool,
) -> _collection.Collection:
    """The collection of these members, kept as the object (`cache_resource`: no pickled
    copy of every table on each rerun); per-table summaries from the cached `table_summary`."""
    members = [_collection.Member(*member) for member in zip(labels, tables, errors, strict=True)]
    return _collection.analyse(
        members, center=center, summarize=lambda t: run(pipeline.table_summary, t, center=center)
    )


# --- figures --------------------------------------------------------------------------------

#: Built figures kept, shared by all sessions (the largest, a similarity map, is ~2.5 MB).
FIGURE_ENTRIES = 32


def figure(
    build: Callable[..., go.Figure], *args: Any, digest: str | None = None, **kwargs: Any
) -> go.Figure:
    """`build(*args, **kwargs)`, built once per content of its arguments.

    Building a figure (plotly validates every property) costs more server time than a rerun's
    cached computations, on every rerun of every user. The key is a digest of the pickled
    arguments (the results drawn, every array byte), not Streamlit's sampling hash; or
    `digest` when the arguments give one (a collection: pickling its tables on every rerun
    would cost more than the figure). The figure is shared, so callers only read it.
    """
    digest = digest or hashlib.blake2b(pickle.dumps((args, kwargs), protocol=5)).hexdigest()
    return _built(f"{build.__module__}.{build.__qualname__}", digest, build, args, kwargs)


@st.cache_resource(max_entries=FIGURE_ENTRIES, show_spinner=False)
def _built(
    name: str, digest: str, _build: Callable[..., go.Figure], _args: tuple, _kwargs: dict
) -> go.Figure:
    return _build(*_args, **_kwargs)
