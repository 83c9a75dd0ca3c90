"""The pipeline's steps (posviz.pipeline) cached per table content, each named as its step.

A page calls ``cache.spectrum(table, center=True)``; a step that needs another step's result
gets it through :func:`run`, so that one is cached too. Built figures are kept as well
(`figure`), keyed by a digest of the results they draw.

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
import hashlib
import pickle
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


_CACHED: dict[Callable[..., Any], Callable[..., Any]] = {}


def run(step: Callable[..., Any], /, *tables: Any, **params: Any) -> Any:
    """The pipeline's cached runner: `step` on `tables`, from the cache when computed before."""
    return _CACHED[step](*tables, **params)


def _step(
    step: Callable[P, R], spinner: str, decorate: Callable[[str], Callable] = cached
) -> Callable[P, R]:
    """`step` of posviz.pipeline, cached, its upstream steps cached too (they go through `run`).

    Typed as the step itself, so a page's call is checked against it.
    """

    forward: Callable[..., R] = step  # it takes `run` too, which its type leaves out

    def cached_step(*tables: Embedding, **params: Any) -> R:
        return forward(*tables, run=run, **params)

    # Streamlit keys a cache by the function's module, qualified name and source: one name
    # per step keeps their caches apart.
    cached_step.__name__ = cached_step.__qualname__ = step.__name__
    _CACHED[step] = decorate(spinner)(cached_step)
    return _CACHED[step]


spectrum = _step(pipeline.spectrum, "Computing the singular-value spectrum…")
principal_components = _step(
    pipeline.principal_components, "Computing the top principal components…"
)
fit_sinusoids = _step(pipeline.fit_sinusoids, "Fitting a sinusoid to each principal component…")
sinusoid_likeness = _step(
    pipeline.sinusoid_likeness, "Comparing the components' span with low-frequency sinusoids…"
)
similarity_map = _step(pipeline.similarity_map, "Computing similarities between positions…")
grid_similarity = _step(
    pipeline.grid_similarity, "Computing patch-to-patch similarities on the grid…"
)
offset_profile = _step(pipeline.offset_profile, "Computing the offset profile…")
offset_scores = _step(pipeline.offset_scores, "Scoring the offset profile…")
position_statistics = _step(pipeline.position_statistics, "Computing per-position statistics…")
outliers = _step(pipeline.outliers, "Flagging unusual positions…")
boundary_summary = _step(pipeline.boundary_summary, "Summarising the boundaries…")
change_points = _step(pipeline.change_points, "Finding change points…")
probe_with_controls = _step(
    pipeline.probe_with_controls,
    "Running the position probes on the table and its two controls…",
)
compare = _step(pipeline.compare, "Comparing the two tables: CKA, principal angles, Procrustes…")
quantization_error = _step(
    pipeline.quantization_error, "Comparing the quantized table with the original…"
)
resample_length = _step(pipeline.resample_length, "Resampling the table…", cached_table)
resample_grid = _step(pipeline.resample_grid, "Resampling the grid…", cached_table)
table_summary = _step(pipeline.table_summary, "Summarising the table…")

# --- position schemes (their data is a rule, a head count, a tensor: hashed as they are) -----

rotary_frequencies = _step(pipeline.rotary_frequencies, "Computing the rotary frequencies…")
rotary_decay = _step(pipeline.rotary_decay, "Computing B(Δ) and RoFormer's bound…")
rotary_overlay = _step(pipeline.rotary_overlay, "Computing the models' B(Δ)…")
context_plan = _step(pipeline.context_plan, "Planning every rule at the target length…")
layer_table = _step(pipeline.layer_table, "Mapping each layer's position encoding…")
alibi_bias = _step(pipeline.alibi_bias, "Computing the ALiBi bias…")
bucket_layouts = _step(pipeline.bucket_layouts, "Computing T5's buckets…")
relative_bias = _step(pipeline.relative_bias, "Reading the bias through its buckets…")

# --- heads (their data is an attention layer: hashed by its sha256) --------------------------

learned_heads = _step(pipeline.learned_heads, "Computing each head's kernel, pattern and null…")
rotary_heads = _step(pipeline.rotary_heads, "Computing each head's usage of each pair and null…")
alibi_heads = _step(pipeline.alibi_heads, "Computing each head's ALiBi pattern…")
t5_heads = _step(pipeline.t5_heads, "Computing each head's T5 pattern and null…")


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
    copy of every table on each rerun); per-table summaries come from :func:`table_summary`."""
    members = [_collection.Member(*member) for member in zip(labels, tables, errors, strict=True)]
    return _collection.analyse(
        members, center=center, summarize=lambda t: table_summary(t, center=center)
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
