"""Every analysis as steps on an Embedding: the one chain that pages, report and CLI run.

A step is a core call on whole tables (`Embedding`s, read by their values) and the core
function's keyword settings, forwarded as they are: a step declares no setting and no
default of its own (the core signature is the one place a default lives), so
``step(table, **result.params)`` makes `result` again. A step that needs another step's result
asks `run` for it, handing on the settings its own core function does not take
(:func:`posviz._params.split_params`): the report, the CLI and the Python API use :func:`call`
(compute now), the pages pass the cached runner of `posviz.ui.cache`, so both follow the same
chain with the same settings and give the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from posviz import boundary as _boundary
from posviz import collection as _collection
from posviz import compare as _compare
from posviz import components as _components
from posviz import heads as _heads
from posviz import offsets as _offsets
from posviz import probes as _probes
from posviz import resample as _resample
from posviz import similarity as _similarity
from posviz import spectrum as _spectrum
from posviz._params import split_params
from posviz.embedding import Embedding
from posviz.schemes.attention import AttentionLayer
from posviz.schemes.rotary import rotary_frequencies

#: How a step asks for another step's result: ``run(step, *tables, **params)``.
Run = Callable[..., Any]

P = ParamSpec("P")
R = TypeVar("R")


def _settings_of(
    core: Callable[Concatenate[Any, P], object],
) -> Callable[[Callable[..., R]], Callable[Concatenate[Embedding, P], R]]:
    """Type a step as taking `core`'s keyword settings, which it forwards (for type checkers).

    A step declares no settings of its own (``**params``), so without this a checker would take
    any keyword; typed so, a page's ``cache.spectrum(table, n_components="x")`` is an error
    (tests/test_typing.py). The step itself is returned unchanged: it still takes ``run``.
    """

    def typed(step: Callable[..., R]) -> Callable[Concatenate[Embedding, P], R]:
        return step

    return typed


def call(step: Callable[..., Any], /, *tables: Embedding, **params: Any) -> Any:
    """Run `step` now, its upstream steps too (no cache)."""
    return step(*tables, run=call, **params)


def _chained(
    core: Callable[..., Any], upstream: Callable[..., Any], table: Embedding, run: Run, params: dict
) -> Any:
    """`core` on the result of the `upstream` step, each given the settings it takes."""
    own, rest = split_params(params, core)
    return core(run(upstream, table, **rest), **own)


# --- spectrum and components ----------------------------------------------------------------


@_settings_of(_spectrum.spectrum)
def spectrum(table: Embedding, *, run: Run = call, **params: Any) -> _spectrum.Spectrum:
    """:func:`posviz.spectrum.spectrum` of the table."""
    return _spectrum.spectrum(table.values, **params)


@_settings_of(_components.principal_components)
def principal_components(
    table: Embedding, *, run: Run = call, **params: Any
) -> _components.PrincipalComponents:
    """:func:`posviz.components.principal_components` of the table."""
    return _components.principal_components(table.values, **params)


def fit_sinusoids(table: Embedding, *, run: Run = call, **params: Any) -> _components.SinusoidFits:
    """:func:`posviz.components.fit_sinusoids` of the table's :func:`principal_components`."""
    return _chained(_components.fit_sinusoids, principal_components, table, run, params)


def sinusoid_likeness(
    table: Embedding, *, run: Run = call, **params: Any
) -> _components.SubspaceLikeness:
    """:func:`posviz.components.sinusoid_likeness` of the table's :func:`principal_components`."""
    return _chained(_components.sinusoid_likeness, principal_components, table, run, params)


# --- similarity -----------------------------------------------------------------------------


@_settings_of(_similarity.similarity_map)
def similarity_map(
    table: Embedding, *, run: Run = call, **params: Any
) -> _similarity.SimilarityMap:
    """:func:`posviz.similarity.similarity_map` of the table."""
    return _similarity.similarity_map(table.values, **params)


@_settings_of(_similarity.grid_similarity)
def grid_similarity(
    table: Embedding, *, run: Run = call, **params: Any
) -> _similarity.GridSimilarity:
    """:func:`posviz.similarity.grid_similarity` of the table (its grid is a setting)."""
    return _similarity.grid_similarity(table.values, **params)


# --- offsets --------------------------------------------------------------------------------


@_settings_of(_offsets.offset_profile)
def offset_profile(table: Embedding, *, run: Run = call, **params: Any) -> _offsets.OffsetProfile:
    """:func:`posviz.offsets.offset_profile` of the table."""
    return _offsets.offset_profile(table.values, **params)


def offset_scores(table: Embedding, *, run: Run = call, **params: Any) -> _offsets.OffsetScores:
    """:func:`posviz.offsets.offset_scores` of the table's :func:`offset_profile`."""
    return _chained(_offsets.offset_scores, offset_profile, table, run, params)


# --- boundaries and probes ------------------------------------------------------------------


@_settings_of(_boundary.position_statistics)
def position_statistics(
    table: Embedding, *, run: Run = call, **params: Any
) -> _boundary.PositionStatistics:
    """:func:`posviz.boundary.position_statistics` of the table."""
    return _boundary.position_statistics(table.values, **params)


def outliers(table: Embedding, *, run: Run = call, **params: Any) -> _boundary.Outliers:
    """:func:`posviz.boundary.outliers` of the table's :func:`position_statistics`."""
    return _chained(_boundary.outliers, position_statistics, table, run, params)


def boundary_summary(
    table: Embedding, *, run: Run = call, **params: Any
) -> _boundary.BoundarySummary:
    """:func:`posviz.boundary.boundary_summary` of the table's :func:`position_statistics`."""
    return _chained(_boundary.boundary_summary, position_statistics, table, run, params)


def change_points(table: Embedding, *, run: Run = call, **params: Any) -> _boundary.ChangePoints:
    """:func:`posviz.boundary.change_points` of the table's :func:`outliers`."""
    return _chained(_boundary.change_points, outliers, table, run, params)


@_settings_of(_probes.probe_with_controls)
def probe_with_controls(table: Embedding, *, run: Run = call, **params: Any) -> _probes.ProbeReport:
    """:func:`posviz.probes.probe_with_controls` on the table."""
    return _probes.probe_with_controls(table.values, **params)


# --- compare, resample, collection ----------------------------------------------------------


def compare(
    first: Embedding, second: Embedding, *, run: Run = call, **params: Any
) -> _compare.Comparison:
    """:func:`posviz.compare.compare` of two tables of the same length."""
    return _compare.compare(first.values, second.values, **params)


def resample_length(table: Embedding, *, run: Run = call, **params: Any) -> Embedding:
    """The table with its rows resampled by :func:`posviz.resample.resample_length`."""
    return _resample.resampled_table(table, _resample.resample_length(table.values, **params))


def resample_grid(table: Embedding, *, run: Run = call, **params: Any) -> Embedding:
    """The table's grid resampled by :func:`posviz.resample.resample_grid` (to `new_grid`)."""
    result = _resample.resample_grid(table.values, table.grid, **params)
    return _resample.resampled_table(table, result)


@_settings_of(_collection.table_summary)
def table_summary(table: Embedding, *, run: Run = call, **params: Any) -> _collection.TableSummary:
    """:func:`posviz.collection.table_summary` of the table."""
    return _collection.table_summary(table.values, **params)


# --- heads: one attention layer of a model, not a table -------------------------------------


def heads(
    layer: AttentionLayer, *, run: Run = call, **params: Any
) -> _heads.PatternHeads | _heads.RotaryHeads:
    """How each head of `layer` reads position (:mod:`posviz.heads`), by the layer's kind:
    :func:`~posviz.heads.learned_heads` on its position rows, :func:`~posviz.heads.rotary_heads`
    on the frequencies its rule applies at `context` (a setting of
    :func:`~posviz.schemes.rotary.rotary_frequencies`), :func:`~posviz.heads.alibi_heads`,
    :func:`~posviz.heads.t5_heads`."""
    plan = layer.plan
    if plan.kind == "learned":
        return _heads.learned_heads(
            layer.inputs, layer.wq, layer.wk, layer.bq, layer.bk, plan.causal, plan.logit_scale,
            **params,
        )  # fmt: skip
    if plan.kind == "rotary":
        own, rest = split_params(params, _heads.rotary_heads)
        frequencies = rotary_frequencies(plan.rotary, **rest)
        return _heads.rotary_heads(
            layer.wq, layer.wk, frequencies, layer.norm.gain, layer.q_gain, layer.k_gain, **own
        )
    if plan.kind == "alibi":
        return _heads.alibi_heads(layer.slopes, **params)
    spec = plan.options
    return _heads.t5_heads(
        layer.relative_bias, True, spec["num_buckets"], spec["max_distance"], **params
    )
