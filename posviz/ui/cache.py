"""Core calls cached per table content: an Embedding is hashed by its sha256, never by sampling.

Built figures are kept too (`figure`), keyed by a digest of the results they draw.

Streamlit hashes large arrays by sampling them (two tables could collide), so every wrapper
takes the whole Embedding and `hash_funcs` reduces it to its digest. Each cached function
keeps at most POSVIZ_CACHE_SIZE (default 1GB) of results, or for resampled tables the latest
TABLE_ENTRIES, shared by all sessions, so memory levels off as users come and go.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import streamlit as st

from posviz import boundary as _boundary
from posviz import collection as _collection
from posviz import compare as _compare
from posviz import components as _components
from posviz import probes as _probes
from posviz import resample as _resample
from posviz import similarity as _similarity
from posviz import spectrum as _spectrum
from posviz.embedding import Embedding

if TYPE_CHECKING:
    import plotly.graph_objects as go

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


@cached("Computing the top principal components…")
def principal_components(
    table: Embedding, *, k: int, center: bool
) -> _components.PrincipalComponents:
    return _components.principal_components(table.values, k=k, center=center)


@cached("Fitting a sinusoid to each principal component…")
def sinusoid_fits(table: Embedding, *, k: int, center: bool) -> _components.SinusoidFits:
    return _components.fit_sinusoids(principal_components(table, k=k, center=center).scores)


@cached("Comparing the components' span with low-frequency sinusoids…")
def sinusoid_likeness(
    table: Embedding, *, k: int, center: bool, n_frequencies: int, n_shuffles: int, seed: int
) -> _components.SubspaceLikeness:
    return _components.sinusoid_likeness(
        principal_components(table, k=k, center=center).scores,
        n_frequencies=n_frequencies,
        n_shuffles=n_shuffles,
        seed=seed,
    )


#: Resampled tables kept per resampling function (see `cached_table`).
TABLE_ENTRIES = 2


def cached_table(spinner: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """As `cached`, for functions returning a table: kept as the object, not pickled.

    `st.cache_data` stores a pickled copy and returns a new copy on every hit: two to three
    copies of a result as large as the table or larger. An Embedding is read-only, so one
    object can be shared; `st.cache_resource` has no byte bound, so entries are bounded by
    count: at most `TABLE_ENTRIES` tables of at most MAX_ELEMENTS values each.
    """
    return st.cache_resource(
        max_entries=TABLE_ENTRIES,
        hash_funcs={Embedding: attrgetter("sha256")},
        show_spinner=spinner,
    )


# --- compare and resample -------------------------------------------------------------------


@cached_table("Resampling the table…")
def resampled_length(
    table: Embedding, *, n_positions: int, method: str, positions: str, reserved: int
) -> Embedding:
    result = _resample.resample_length(
        table.values, n_positions, method=method, positions=positions, reserved=reserved
    )
    return _resample.resampled_table(table, result)


@cached_table("Resampling the grid…")
def resampled_grid(
    table: Embedding, *, grid: tuple[int, int], method: str, antialias: bool
) -> Embedding:
    result = _resample.resample_grid(
        table.values, table.grid, grid, method=method, antialias=antialias
    )
    return _resample.resampled_table(table, result)


@cached("Comparing the two tables: CKA, principal angles, Procrustes…")
def comparison(first: Embedding, second: Embedding, *, k: int, center: bool) -> _compare.Comparison:
    return _compare.compare(first.values, second.values, k=k, center=center)


@cached("Computing the offset profile…")
def offset_means(
    table: Embedding, *, metric: str, center: bool, max_offset: int
) -> _similarity.OffsetProfile:
    return _similarity.offset_profile(
        table.values, metric=metric, center=center, max_offset=max_offset
    )


# --- similarity -----------------------------------------------------------------------------


@cached("Computing similarities between positions…")
def similarity_map(
    table: Embedding,
    *,
    metric: str,
    center: bool,
    max_side: int,
    rows: tuple[int, int] | None = None,
    cols: tuple[int, int] | None = None,
) -> _similarity.SimilarityMap:
    return _similarity.similarity_map(
        table.values, metric=metric, center=center, rows=rows, cols=cols, max_side=max_side
    )


@cached("Computing patch-to-patch similarities on the grid…")
def grid_similarity(
    table: Embedding, *, grid: tuple[int, int], center: bool, max_side: int
) -> _similarity.GridSimilarity:
    return _similarity.grid_similarity(table.values, grid, center=center, max_side=max_side)


@cached("Scoring the offset profile…")
def offset_scores(
    table: Embedding, *, metric: str, center: bool, max_offset: int, window: int
) -> _similarity.OffsetScores:
    profile = offset_means(table, metric=metric, center=center, max_offset=max_offset)
    return _similarity.offset_scores(profile, window=window)


@cached("Computing per-position statistics…")
def position_statistics(table: Embedding, *, top_k: int) -> _boundary.PositionStatistics:
    return _boundary.position_statistics(table.values, top_k=top_k)


@cached("Flagging unusual positions…")
def outliers(table: Embedding, *, top_k: int, window: int, threshold: float) -> _boundary.Outliers:
    curves = position_statistics(table, top_k=top_k).flagging_curves()
    return _boundary.outliers(curves, window=window, threshold=threshold)


@cached("Summarising the boundaries…")
def boundary_summary(table: Embedding, *, top_k: int, k: int) -> _boundary.BoundarySummary:
    curves = position_statistics(table, top_k=top_k).flagging_curves()
    return _boundary.boundary_summary(curves, k=k)


@cached("Finding change points…")
def change_points(
    table: Embedding,
    *,
    top_k: int,
    window: int,
    threshold: float,
    statistic: str,
    max_changes: int,
    min_size: int,
) -> _boundary.ChangePoints:
    flags = outliers(table, top_k=top_k, window=window, threshold=threshold)
    return _boundary.change_points(
        flags.cleaned(statistic), max_changes=max_changes, min_size=min_size
    )


@cached("Running the position probes on the table and its two controls…")
def probes(
    table: Embedding, *, seed: int, max_rows: int, n_pairs: int, repeats: int, protocol: str
) -> _probes.ProbeReport:
    return _probes.probe_with_controls(
        table.values,
        seed=seed,
        max_rows=max_rows,
        n_pairs=n_pairs,
        repeats=repeats,
        protocol=protocol,
    )


# --- collection -----------------------------------------------------------------------------


@cached("Summarising the table…")
def table_summary(table: Embedding, *, center: bool) -> _collection.TableSummary:
    return _collection.table_summary(table.values, center=center)


@st.cache_resource(
    max_entries=4,
    hash_funcs={Embedding: attrgetter("sha256")},
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


def figure(build: Callable[..., go.Figure], *args: Any, **kwargs: Any) -> go.Figure:
    """`build(*args, **kwargs)`, built once per content of its arguments.

    Building a figure (plotly validates every property) costs more server time than a rerun's
    cached computations, on every rerun of every user. The key is a digest of the pickled
    arguments (the results drawn, every array byte), not Streamlit's sampling hash. The figure
    is shared, so callers only read it.
    """
    digest = hashlib.blake2b(pickle.dumps((args, kwargs), protocol=5)).hexdigest()
    return _built(f"{build.__module__}.{build.__qualname__}", digest, build, args, kwargs)


@st.cache_resource(max_entries=FIGURE_ENTRIES, show_spinner=False)
def _built(
    name: str, digest: str, _build: Callable[..., go.Figure], _args: tuple, _kwargs: dict
) -> go.Figure:
    return _build(*_args, **_kwargs)
