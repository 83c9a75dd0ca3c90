"""Every analysis as a step, in one registry (`STEPS`): the one chain that pages, report, CLI
and `posviz rerun` run, for a table's analyses and a position scheme's alike.

A step is a core call on its data and the core function's keyword settings, forwarded as they
are: a step declares no setting and no default of its own (the core signature is the one place
a default lives), so ``step(data, **result.params)`` makes `result` again. A step is named as its
core function, and a result records that name (:func:`posviz._params.step_of`), so an export
names the step that made it without anyone typing it. Each step says what it takes (`Step.takes`):

- ``"table"`` or ``"two tables"``: `Embedding`s, read by their values;
- ``"scheme"``: one datum of a model's position scheme (a rotary rule, a head count, a bias
  tensor), which `Step.data` finds in the scheme read from a config.json (and in the model's
  weights, for a tensor) when `posviz rerun` makes it again;
- ``"schemes"``: several models' (the rotary overlay);
- ``"layer"``: one attention layer of a model (`posviz.models.attention.AttentionLayer`: its
  query and key rows, norms, position table), read from its weights, not from a table: its
  provenance names the model's config.json as a scheme's does, with the layer and each tensor
  read and the sha256 of its values, and `Step.data` reads that layer again from the model's
  weights and checks every tensor's sha256 (the heads steps, one per kind of layer:
  `HEADS_STEPS`).
- ``"two sources"``: two sources of one model's rotary positions as read
  (:class:`posviz.models.sources.Side`: a config.json, a GGUF, or a runtime's dump), which
  `posviz rerun` reads again from their provenance.

A step that needs another step's result asks `run` for it, handing on the settings its own
core function does not take (:func:`posviz._params.split_params`): the report, the CLI and the
Python API use :func:`call` (compute now), the pages pass the cached runner of
`posviz.ui.cache`, so both follow the same chain with the same settings and give the same
numbers. `STEPS` is also `posviz rerun`'s allow-list: a name that is not in it is not run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from posviz import boundary as _boundary
from posviz import collection as _collection
from posviz import compare as _compare
from posviz import components as _components
from posviz import heads as _heads
from posviz import offsets as _offsets
from posviz import probes as _probes
from posviz import quantization as _quantization
from posviz import records as _record
from posviz import resample as _resample
from posviz import similarity as _similarity
from posviz import spectrum as _spectrum
from posviz._params import quoted, split_params
from posviz.embedding import Embedding, LoadError
from posviz.models import attention as _attention
from posviz.models import sources as _sources
from posviz.models import weights as _weights
from posviz.schemes import alibi as _alibi
from posviz.schemes import diff as _diff
from posviz.schemes import layers as _per_layer
from posviz.schemes import plan as _plan
from posviz.schemes import relative as _relative
from posviz.schemes import rotary as _rotary
from posviz.schemes._values import given
from posviz.schemes.config import RelativeBiasSpec, Scheme

#: The registry and every step, each by the name an export records.
__all__ = [
    "HEADS_STEPS",
    "STEPS",
    "Run",
    "Step",
    "alibi_bias",
    "alibi_heads",
    "boundary_summary",
    "bucket_layouts",
    "call",
    "change_points",
    "compare",
    "context_plan",
    "fit_sinusoids",
    "grid_similarity",
    "layer_table",
    "learned_heads",
    "offset_profile",
    "offset_scores",
    "outliers",
    "position_statistics",
    "principal_components",
    "probe_with_controls",
    "quantization_error",
    "relative_bias",
    "resample_grid",
    "resample_length",
    "rotary_decay",
    "rotary_frequencies",
    "rotary_heads",
    "rotary_overlay",
    "scheme_diff",
    "scheme_record",
    "similarity_map",
    "sinusoid_likeness",
    "spectrum",
    "t5_heads",
    "table_summary",
]

#: How a step asks for another step's result: ``run(step, *data, **params)``.
Run = Callable[..., Any]

P = ParamSpec("P")
R = TypeVar("R")
D = TypeVar("D")

#: What a step takes: see the module's docstring.
Takes = Literal["table", "two tables", "scheme", "schemes", "layer", "two sources"]


@dataclass(frozen=True)
class Step:
    """One step of the registry.

    Attributes
    ----------
    name : str
        The step's name: its core function's, which its results record.
    run : callable
        ``run(*data, run=runner, **params)``: the step itself.
    core : callable
        The core function whose settings (and bounds) the step takes.
    takes : str
        ``"table"``, ``"two tables"``, ``"scheme"``, ``"schemes"``, ``"layer"`` or
        ``"two sources"``.
    data : callable or None
        For a scheme's or a layer's step, how to find its data: ``data(scheme, where, model)``
        for one (`where` is the export's provenance: the layer type, the tensor, the attention
        layer and its tensors' sha256; `model` the weights read with the config.json, or
        None), ``data([(scheme, where, model), ...])`` for several.
    makes_table : bool
        The step makes a table (a resampled one), not numbers: nothing of it is rerun.
    record : callable or None
        For a step whose command-line export is a JSON record of its result rather than a
        table (`posviz heads --json`): ``record(data, result, export)``, that record made
        again from `data` and the recomputed `result` (`export` says how much of it was
        printed), for `posviz rerun` to compare key by key.
    """

    name: str
    run: Callable[..., Any]
    core: Callable[..., Any]
    takes: Takes
    data: Callable[..., Any] | None = None
    makes_table: bool = False
    record: Callable[..., dict[str, Any]] | None = None

    @property
    def n_tables(self) -> int:
        """Tables the step takes (0 for a scheme's)."""
        return {"table": 1, "two tables": 2}.get(self.takes, 0)


#: Every step by name: the pipeline's registry, and `posviz rerun`'s allow-list.
STEPS: dict[str, Step] = {}


def _step(
    core: Callable[..., Any],
    takes: Takes = "table",
    data: Callable[..., Any] | None = None,
    *,
    makes_table: bool = False,
    record: Callable[..., dict[str, Any]] | None = None,
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Register the decorated step, named as its `core` function, in `STEPS` (the names are
    the same: tests/test_params.py holds them so)."""

    def register(step: Callable[..., R]) -> Callable[..., R]:
        STEPS[step.__name__] = Step(step.__name__, step, core, takes, data, makes_table, record)
        return step

    return register


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


def _typed_as(
    core: Callable[Concatenate[D, P], R],
) -> Callable[[Callable[..., Any]], Callable[Concatenate[D, P], R]]:
    """Type a scheme's step as its `core` function: the same data, settings and result."""

    def typed(step: Callable[..., Any]) -> Callable[Concatenate[D, P], R]:
        return step

    return typed


def call(step: Callable[..., Any], /, *data: Any, **params: Any) -> Any:
    """Run `step` now, its upstream steps too (no cache)."""
    return step(*data, run=call, **params)


def _chained(
    core: Callable[..., Any], upstream: Callable[..., Any], data: Any, run: Run, params: dict
) -> Any:
    """`core` on the result of the `upstream` step, each given the settings it takes."""
    own, rest = split_params(params, core)
    return core(run(upstream, data, **rest), **own)


# --- spectrum and components ----------------------------------------------------------------


@_settings_of(_spectrum.spectrum)
@_step(_spectrum.spectrum)
def spectrum(table: Embedding, *, run: Run = call, **params: Any) -> _spectrum.Spectrum:
    """:func:`posviz.spectrum.spectrum` of the table."""
    return _spectrum.spectrum(table.values, **params)


@_settings_of(_components.principal_components)
@_step(_components.principal_components)
def principal_components(
    table: Embedding, *, run: Run = call, **params: Any
) -> _components.PrincipalComponents:
    """:func:`posviz.components.principal_components` of the table."""
    return _components.principal_components(table.values, **params)


@_step(_components.fit_sinusoids)
def fit_sinusoids(table: Embedding, *, run: Run = call, **params: Any) -> _components.SinusoidFits:
    """:func:`posviz.components.fit_sinusoids` of the table's :func:`principal_components`."""
    return _chained(_components.fit_sinusoids, principal_components, table, run, params)


@_step(_components.sinusoid_likeness)
def sinusoid_likeness(
    table: Embedding, *, run: Run = call, **params: Any
) -> _components.SubspaceLikeness:
    """:func:`posviz.components.sinusoid_likeness` of the table's :func:`principal_components`."""
    return _chained(_components.sinusoid_likeness, principal_components, table, run, params)


# --- similarity -----------------------------------------------------------------------------


@_settings_of(_similarity.similarity_map)
@_step(_similarity.similarity_map)
def similarity_map(
    table: Embedding, *, run: Run = call, **params: Any
) -> _similarity.SimilarityMap:
    """:func:`posviz.similarity.similarity_map` of the table."""
    return _similarity.similarity_map(table.values, **params)


@_settings_of(_similarity.grid_similarity)
@_step(_similarity.grid_similarity)
def grid_similarity(
    table: Embedding, *, run: Run = call, **params: Any
) -> _similarity.GridSimilarity:
    """:func:`posviz.similarity.grid_similarity` of the table (its grid is a setting)."""
    return _similarity.grid_similarity(table.values, **params)


# --- offsets --------------------------------------------------------------------------------


@_settings_of(_offsets.offset_profile)
@_step(_offsets.offset_profile)
def offset_profile(table: Embedding, *, run: Run = call, **params: Any) -> _offsets.OffsetProfile:
    """:func:`posviz.offsets.offset_profile` of the table."""
    return _offsets.offset_profile(table.values, **params)


@_step(_offsets.offset_scores)
def offset_scores(table: Embedding, *, run: Run = call, **params: Any) -> _offsets.OffsetScores:
    """:func:`posviz.offsets.offset_scores` of the table's :func:`offset_profile`."""
    return _chained(_offsets.offset_scores, offset_profile, table, run, params)


# --- boundaries and probes ------------------------------------------------------------------


@_settings_of(_boundary.position_statistics)
@_step(_boundary.position_statistics)
def position_statistics(
    table: Embedding, *, run: Run = call, **params: Any
) -> _boundary.PositionStatistics:
    """:func:`posviz.boundary.position_statistics` of the table."""
    return _boundary.position_statistics(table.values, **params)


@_step(_boundary.outliers)
def outliers(table: Embedding, *, run: Run = call, **params: Any) -> _boundary.Outliers:
    """:func:`posviz.boundary.outliers` of the table's :func:`position_statistics`."""
    return _chained(_boundary.outliers, position_statistics, table, run, params)


@_step(_boundary.boundary_summary)
def boundary_summary(
    table: Embedding, *, run: Run = call, **params: Any
) -> _boundary.BoundarySummary:
    """:func:`posviz.boundary.boundary_summary` of the table's :func:`position_statistics`."""
    return _chained(_boundary.boundary_summary, position_statistics, table, run, params)


@_step(_boundary.change_points)
def change_points(table: Embedding, *, run: Run = call, **params: Any) -> _boundary.ChangePoints:
    """:func:`posviz.boundary.change_points` of the table's :func:`outliers`."""
    return _chained(_boundary.change_points, outliers, table, run, params)


@_settings_of(_probes.probe_with_controls)
@_step(_probes.probe_with_controls)
def probe_with_controls(table: Embedding, *, run: Run = call, **params: Any) -> _probes.ProbeReport:
    """:func:`posviz.probes.probe_with_controls` on the table."""
    return _probes.probe_with_controls(table.values, **params)


# --- compare, resample, collection ----------------------------------------------------------


@_step(_compare.compare, "two tables")
def compare(
    first: Embedding, second: Embedding, *, run: Run = call, **params: Any
) -> _compare.Comparison:
    """:func:`posviz.compare.compare` of two tables of the same length."""
    return _compare.compare(first.values, second.values, **params)


@_step(_quantization.quantization_error, "two tables")
def quantization_error(
    quantized: Embedding, original: Embedding, *, run: Run = call, **params: Any
) -> _quantization.QuantizationError:
    """:func:`posviz.quantization.quantization_error` of a quantized table (a GGUF's Q8_0, …)
    against the original it was made from."""
    return _quantization.quantization_error(quantized.values, original.values, **params)


@_step(_resample.resample_length, makes_table=True)
def resample_length(table: Embedding, *, run: Run = call, **params: Any) -> Embedding:
    """The table with its rows resampled by :func:`posviz.resample.resample_length`."""
    return _resample.resampled_table(table, _resample.resample_length(table.values, **params))


@_step(_resample.resample_grid, makes_table=True)
def resample_grid(table: Embedding, *, run: Run = call, **params: Any) -> Embedding:
    """The table's grid resampled by :func:`posviz.resample.resample_grid` (to `new_grid`)."""
    if table.grid is None:
        msg = f"{table.name} has no patch grid (a ViT's H x W) to resample; resample its length."
        raise ValueError(msg)
    result = _resample.resample_grid(table.values, table.grid, **params)
    return _resample.resampled_table(table, result)


@_settings_of(_collection.table_summary)
@_step(_collection.table_summary)
def table_summary(table: Embedding, *, run: Run = call, **params: Any) -> _collection.TableSummary:
    """:func:`posviz.collection.table_summary` of the table."""
    return _collection.table_summary(table.values, **params)


# --- position schemes -----------------------------------------------------------------------


def _layer(scheme: Scheme, where: Mapping[str, Any], model: object = None) -> _rotary.RotarySpec:
    """The rotary rule of the layer type `where` names (the first rule when it names none)."""
    layer = where.get("layer_type")
    for spec in scheme.rotary:
        if layer is None or spec.layer_type == layer:
            return spec
    msg = f"The config.json has no rotary rule for the layer type {quoted(layer)}."
    raise LoadError(msg)


def _n_heads(scheme: Scheme, where: Mapping[str, Any], model: object = None) -> int:
    if scheme.alibi is None:
        msg = f"The config.json describes {scheme.kind.replace('_', ' ')}, not ALiBi."
        raise LoadError(msg)
    return scheme.alibi.n_heads


def _buckets(scheme: Scheme, where: Mapping[str, Any], model: object = None) -> RelativeBiasSpec:
    if scheme.relative_bias is None:
        msg = f"The config.json describes {scheme.kind.replace('_', ' ')}, not T5's buckets."
        raise LoadError(msg)
    return scheme.relative_bias


def _bias_tensor(scheme: Scheme, where: Mapping[str, Any], model: _weights.Model | None) -> Any:
    """The bias tensor `where` names, read from the model's weights (checked against the
    scheme: :func:`posviz.models.weights.bias_tensors`)."""
    if model is None:
        msg = (
            "The export's bias tensor is in the model's weights: name the model (hf:REPO or a "
            "checkpoint with its config.json), not a config.json alone."
        )
        raise LoadError(msg)
    tensors = _weights.bias_tensors(model, _buckets(scheme, where))
    name = where.get("tensor")
    if name not in tensors:
        msg = f"The model has no bias tensor {quoted(name)}."
        raise LoadError(msg)
    return tensors[name]


def _layers(read: list[tuple[Scheme, Mapping[str, Any], Any]]) -> dict[str, _rotary.RotarySpec]:
    """Each model's rotary rule, by the label its provenance gives it."""
    return {str(where["model"]): _layer(scheme, where) for scheme, where, _ in read}


@_typed_as(_rotary.rotary_frequencies)
@_step(_rotary.rotary_frequencies, "scheme", _layer)
def rotary_frequencies(
    spec: _rotary.RotarySpec, *, run: Run = call, **params: Any
) -> _rotary.RotaryFrequencies:
    """:func:`posviz.schemes.rotary.rotary_frequencies` of a rotary rule."""
    return _rotary.rotary_frequencies(spec, **params)


@_step(_rotary.rotary_decay, "scheme", _layer)
def rotary_decay(
    spec: _rotary.RotarySpec, *, run: Run = call, **params: Any
) -> _rotary.RotaryDecay:
    """:func:`posviz.schemes.rotary.rotary_decay` of the rule's :func:`rotary_frequencies`."""
    return _chained(_rotary.rotary_decay, rotary_frequencies, spec, run, params)


def _all_layers(
    scheme: Scheme, where: Mapping[str, Any], model: object = None
) -> tuple[_per_layer.LayerScheme, ...]:
    """Every layer's position encoding (the per-layer map of a rotary model)."""
    if not scheme.layers:
        msg = (
            "The config.json maps no layers: a rotary model that states its number of layers "
            "(num_hidden_layers) has a per-layer map."
        )
        raise LoadError(msg)
    return scheme.layers


@_typed_as(_per_layer.layer_table)
@_step(_per_layer.layer_table, "scheme", _all_layers)
def layer_table(
    layers: tuple[_per_layer.LayerScheme, ...], *, run: Run = call, **params: Any
) -> _per_layer.LayerTable:
    """:func:`posviz.schemes.layers.layer_table` of a model's layers."""
    return _per_layer.layer_table(layers, **params)


@_typed_as(_rotary.rotary_overlay)
@_step(_rotary.rotary_overlay, "schemes", _layers)
def rotary_overlay(
    specs: Mapping[str, _rotary.RotarySpec], *, run: Run = call, **params: Any
) -> _rotary.RotaryOverlay:
    """:func:`posviz.schemes.rotary.rotary_overlay` of several models' rules, by label."""
    return _rotary.rotary_overlay(specs, **params)


@_typed_as(_alibi.alibi_bias)
@_step(_alibi.alibi_bias, "scheme", _n_heads)
def alibi_bias(n_heads: int, *, run: Run = call, **params: Any) -> _alibi.AlibiBias:
    """:func:`posviz.schemes.alibi.alibi_bias` of an ALiBi model's heads."""
    return _alibi.alibi_bias(n_heads, **params)


@_typed_as(_relative.bucket_layouts)
@_step(_relative.bucket_layouts, "scheme", _buckets)
def bucket_layouts(
    spec: RelativeBiasSpec, *, run: Run = call, **params: Any
) -> _relative.BucketLayouts:
    """:func:`posviz.schemes.relative.bucket_layouts` of T5's buckets."""
    return _relative.bucket_layouts(spec, **params)


@_typed_as(_relative.relative_bias)
@_step(_relative.relative_bias, "scheme", _bias_tensor)
def relative_bias(weight: Any, *, run: Run = call, **params: Any) -> _relative.RelativeBias:
    """:func:`posviz.schemes.relative.relative_bias` of one of a T5 model's bias tensors."""
    return _relative.relative_bias(weight, **params)


@_step(_diff.scheme_diff, "two sources")
def scheme_diff(
    a: _sources.Side, b: _sources.Side, *, run: Run = call, **params: Any
) -> _diff.SchemeDiff:
    """:func:`posviz.schemes.diff.scheme_diff` of two sources of one model's rotary positions,
    their rules applied at one length by :func:`posviz.models.sources.compare` (whose
    `context` it records among the params, beside scheme_diff's own)."""
    return _sources.compare(a, b, **params)


def _scheme(scheme: Scheme, where: Mapping[str, Any], model: object = None) -> Scheme:
    return scheme


@_typed_as(_plan.context_plan)
@_step(_plan.context_plan, "scheme", _scheme, record=lambda scheme, plan, export: plan.record())
def context_plan(scheme: Scheme, *, run: Run = call, **params: Any) -> _plan.ContextPlan:
    """:func:`posviz.schemes.plan.context_plan` of a rotary model's scheme (its main rule)."""
    return _plan.context_plan(scheme, **params)


def _read(scheme: Scheme, where: Mapping[str, Any], model: Any) -> tuple[Scheme, dict, Any]:
    return scheme, dict(where), model


@_step(_record.scheme_record, "scheme", _read)
def scheme_record(
    read: tuple[Scheme, dict, Any], *, run: Run = call, **params: Any
) -> dict[str, Any]:
    """:func:`posviz.records.scheme_record` (what `posviz summary` prints of a scheme)
    of (the scheme, its config.json's provenance, the model's weights or None)."""
    return _record.scheme_record(*read, **params)


# --- heads: one attention layer of a model --------------------------------------------------


def _attention_layer(
    scheme: Scheme, where: Mapping[str, Any], model: _weights.Model | None
) -> _attention.AttentionLayer:
    """The attention layer `where` names, read again from the model's weights: planned from
    the headers (every refusal, and a tensor the export does not name, before a weight is
    read), then each tensor's sha256 checked against the export's."""
    if model is None:
        msg = (
            "The export's heads are in the model's weights: name the model (hf:REPO or a "
            "checkpoint with its config.json), not a config.json alone."
        )
        raise LoadError(msg)
    index = where.get("layer")
    if not isinstance(index, int):
        msg = f"The export's provenance names layer {quoted(index)}; expected a layer number."
        raise LoadError(msg)
    recorded = where.get("tensors")
    if not isinstance(recorded, list) or not all(isinstance(t, dict) for t in recorded):
        msg = "The export's provenance lists no tensors read with their sha256."
        raise LoadError(msg)
    expected = {str(t.get("name")): t.get("sha256") for t in recorded}
    opened = _attention.open_model(model)
    plan = opened.plan(index)
    names = {r.name for r in plan.reads}
    if names != set(expected):
        msg = (
            f"Layer {plan.layer} of {opened.label} is read from {len(names)} tensors, not the "
            f"{len(expected)} the export names: it is not the model the export was made from."
        )
        raise LoadError(msg)
    layer = _attention.read_planned(opened, plan)
    for tensor in layer.tensors:
        if tensor["sha256"] != expected[tensor["name"]]:
            msg = (
                f"The layer read from {quoted(opened.label)} is not the one exported: its "
                f"tensor {quoted(tensor['name'])} has sha256 {tensor['sha256'][:16]}…, the "
                f"export's {quoted(str(expected[tensor['name']])[:16])} (the weights changed)."
            )
            raise LoadError(msg)
    return layer


def _heads_record(
    layer: _attention.AttentionLayer, result: Any, export: Mapping[str, Any]
) -> dict[str, Any]:
    """`posviz heads --json`'s record of `result`, with as many positions as `export` printed."""
    shown = export.get("positions_printed", export.get("positions", _record.HEADS_POSITIONS))
    return _record.heads_record(layer, result, positions=shown)


def _of_kind(layer: _attention.AttentionLayer, kind: str, step: str) -> None:
    """Refuse a layer whose kind is not the step's (a hand-edited export)."""
    if layer.kind != kind:
        msg = (
            f"Layer {layer.plan.layer} of {quoted(layer.model)} is {layer.kind.replace('_', ' ')}"
            f", not what {step} reads: its heads' step is "
            f"{HEADS_STEPS[layer.kind].__name__}."
        )
        raise LoadError(msg)


@_step(_heads.learned_heads, "layer", _attention_layer, record=_heads_record)
def learned_heads(
    layer: _attention.AttentionLayer, *, run: Run = call, **params: Any
) -> _heads.PatternHeads:
    """:func:`posviz.heads.learned_heads` of a learned table's layer: its position rows
    through the model's normalisation, its query and key rows and biases, its logit scale."""
    _of_kind(layer, "learned", "learned_heads")
    plan = layer.plan
    wq, wk = given(layer.wq, "query weights"), given(layer.wk, "key weights")
    return _heads.learned_heads(
        layer.inputs, wq, wk, layer.bq, layer.bk, plan.causal, plan.logit_scale,
        **params,
    )  # fmt: skip


@_step(_heads.rotary_heads, "layer", _attention_layer, record=_heads_record)
def rotary_heads(
    layer: _attention.AttentionLayer, *, run: Run = call, **params: Any
) -> _heads.RotaryHeads:
    """:func:`posviz.heads.rotary_heads` of a rotary layer, on the :func:`rotary_frequencies`
    of the layer's own rule (at `context`, a setting of that step)."""
    _of_kind(layer, "rotary", "rotary_heads")
    own, rest = split_params(params, _heads.rotary_heads)
    frequencies = run(rotary_frequencies, layer.plan.rotary, **rest)
    wq, wk = given(layer.wq, "query weights"), given(layer.wk, "key weights")
    return _heads.rotary_heads(
        wq, wk, frequencies, layer.norm.gain, layer.q_gain, layer.k_gain, **own
    )


@_step(_heads.alibi_heads, "layer", _attention_layer, record=_heads_record)
def alibi_heads(
    layer: _attention.AttentionLayer, *, run: Run = call, **params: Any
) -> _heads.PatternHeads:
    """:func:`posviz.heads.alibi_heads` of an ALiBi layer's slopes."""
    _of_kind(layer, "alibi", "alibi_heads")
    return _heads.alibi_heads(given(layer.slopes, "ALiBi's slopes"), **params)


@_step(_heads.t5_heads, "layer", _attention_layer, record=_heads_record)
def t5_heads(
    layer: _attention.AttentionLayer, *, run: Run = call, **params: Any
) -> _heads.PatternHeads:
    """:func:`posviz.heads.t5_heads` of a T5 layer's bias per bucket (the encoder's,
    bidirectional)."""
    _of_kind(layer, "relative_bias", "t5_heads")
    spec = layer.plan.options
    bias = given(layer.relative_bias, "T5's relative attention bias")
    return _heads.t5_heads(bias, True, spec["num_buckets"], spec["max_distance"], **params)


#: The heads step of each kind of layer (`posviz.models.attention.LayerPlan.kind`): what
#: the Heads page, `posviz heads` and the report run on a layer.
HEADS_STEPS: dict[str, Callable[..., Any]] = {
    "learned": learned_heads,
    "rotary": rotary_heads,
    "alibi": alibi_heads,
    "relative_bias": t5_heads,
}
