"""Every analysis as steps on an Embedding: the one chain that pages, report and CLI run.

A step is a core call on whole tables (`Embedding`s, read by their values) and keyword
settings. A step that needs another step's result asks `run` for it: the report, the CLI and
the Python API use :func:`call` (compute now), the pages pass the cached runner of
`posviz.ui.cache`, so both follow the same chain with the same settings and give the same
numbers. Defaults are the core modules' constants, named the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posviz import boundary as _boundary
from posviz import collection as _collection
from posviz import compare as _compare
from posviz import components as _components
from posviz import probes as _probes
from posviz import resample as _resample
from posviz import similarity as _similarity
from posviz import spectrum as _spectrum
from posviz.embedding import Embedding

#: How a step asks for another step's result: ``run(step, *tables, **settings)``.
Run = Callable[..., Any]


def call(step: Callable[..., Any], /, *tables: Embedding, **settings: Any) -> Any:
    """Run `step` now, its upstream steps too (no cache)."""
    return step(*tables, run=call, **settings)


# --- spectrum and components ----------------------------------------------------------------


def spectrum(table: Embedding, *, center: bool, run: Run = call) -> _spectrum.Spectrum:
    return _spectrum.spectrum(table.values, center=center)


def principal_components(
    table: Embedding, *, k: int = _components.K, center: bool, run: Run = call
) -> _components.PrincipalComponents:
    return _components.principal_components(table.values, k=k, center=center)


def fit_sinusoids(
    table: Embedding, *, k: int = _components.K, center: bool, run: Run = call
) -> _components.SinusoidFits:
    return _components.fit_sinusoids(run(principal_components, table, k=k, center=center))


def sinusoid_likeness(
    table: Embedding,
    *,
    k: int = _components.K,
    center: bool,
    n_frequencies: int = _components.N_FREQUENCIES,
    n_shuffles: int = _components.N_SHUFFLES,
    seed: int = _components.SEED,
    run: Run = call,
) -> _components.SubspaceLikeness:
    return _components.sinusoid_likeness(
        run(principal_components, table, k=k, center=center),
        n_frequencies=n_frequencies,
        n_shuffles=n_shuffles,
        seed=seed,
    )


# --- similarity -----------------------------------------------------------------------------


def similarity_map(
    table: Embedding,
    *,
    metric: str = _similarity.METRIC,
    center: bool,
    max_side: int = _similarity.MAX_SIDE,
    rows: tuple[int, int] | None = None,
    cols: tuple[int, int] | None = None,
    run: Run = call,
) -> _similarity.SimilarityMap:
    return _similarity.similarity_map(
        table.values, metric=metric, center=center, rows=rows, cols=cols, max_side=max_side
    )


def grid_similarity(
    table: Embedding,
    *,
    grid: tuple[int, int],
    center: bool,
    max_side: int = _similarity.MAX_SIDE,
    run: Run = call,
) -> _similarity.GridSimilarity:
    return _similarity.grid_similarity(table.values, grid, center=center, max_side=max_side)


def offset_profile(
    table: Embedding,
    *,
    metric: str = _similarity.METRIC,
    center: bool,
    max_offset: int | None = None,
    run: Run = call,
) -> _similarity.OffsetProfile:
    return _similarity.offset_profile(
        table.values, metric=metric, center=center, max_offset=max_offset
    )


def offset_scores(
    table: Embedding,
    *,
    metric: str = _similarity.METRIC,
    center: bool,
    max_offset: int | None = None,
    window: int = _similarity.WINDOW,
    run: Run = call,
) -> _similarity.OffsetScores:
    profile = run(offset_profile, table, metric=metric, center=center, max_offset=max_offset)
    return _similarity.offset_scores(profile, window=window)


# --- boundaries and probes ------------------------------------------------------------------


def position_statistics(
    table: Embedding, *, top_k: int = _boundary.TOP_K, run: Run = call
) -> _boundary.PositionStatistics:
    return _boundary.position_statistics(table.values, top_k=top_k)


def outliers(
    table: Embedding,
    *,
    top_k: int = _boundary.TOP_K,
    window: int = _boundary.WINDOW,
    threshold: float = _boundary.THRESHOLD,
    run: Run = call,
) -> _boundary.Outliers:
    stats = run(position_statistics, table, top_k=top_k)
    return _boundary.outliers(stats, window=window, threshold=threshold)


def boundary_summary(
    table: Embedding,
    *,
    top_k: int = _boundary.TOP_K,
    k: int = _boundary.BOUNDARY_K,
    run: Run = call,
) -> _boundary.BoundarySummary:
    return _boundary.boundary_summary(run(position_statistics, table, top_k=top_k), k=k)


def change_points(
    table: Embedding,
    *,
    top_k: int = _boundary.TOP_K,
    window: int = _boundary.WINDOW,
    threshold: float = _boundary.THRESHOLD,
    statistic: str = _boundary.CHANGE_STATISTIC,
    max_changes: int = _boundary.MAX_CHANGES,
    min_size: int = _boundary.MIN_SIZE,
    run: Run = call,
) -> _boundary.ChangePoints:
    flags = run(outliers, table, top_k=top_k, window=window, threshold=threshold)
    return _boundary.change_points(
        flags, statistic=statistic, max_changes=max_changes, min_size=min_size
    )


def probe_with_controls(
    table: Embedding,
    *,
    seed: int = _probes.SEED,
    max_rows: int = _probes.MAX_ROWS,
    n_pairs: int = _probes.N_PAIRS,
    repeats: int = _probes.REPEATS,
    protocol: str = _probes.PROTOCOL,
    run: Run = call,
) -> _probes.ProbeReport:
    return _probes.probe_with_controls(
        table.values,
        seed=seed,
        max_rows=max_rows,
        n_pairs=n_pairs,
        repeats=repeats,
        protocol=protocol,
    )


# --- compare, resample, collection ----------------------------------------------------------


def compare(
    first: Embedding, second: Embedding, *, k: int = _compare.K, center: bool, run: Run = call
) -> _compare.Comparison:
    return _compare.compare(first.values, second.values, k=k, center=center)


def resample_length(
    table: Embedding,
    *,
    n_positions: int,
    method: str = _resample.METHOD,
    positions: str = _resample.POSITIONS,
    reserved: int = _resample.RESERVED,
    run: Run = call,
) -> Embedding:
    result = _resample.resample_length(
        table.values, n_positions, method=method, positions=positions, reserved=reserved
    )
    return _resample.resampled_table(table, result)


def resample_grid(
    table: Embedding,
    *,
    grid: tuple[int, int],
    method: str = _resample.GRID_METHOD,
    antialias: bool = _resample.ANTIALIAS,
    run: Run = call,
) -> Embedding:
    result = _resample.resample_grid(
        table.values, table.grid, grid, method=method, antialias=antialias
    )
    return _resample.resampled_table(table, result)


def table_summary(table: Embedding, *, center: bool, run: Run = call) -> _collection.TableSummary:
    return _collection.table_summary(table.values, center=center)
