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
    spinner : str
        What the app says while the step runs ("Computing the offset profile…").
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
    spinner: str
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
    spinner: str,
    takes: Takes = "table",
    data: Callable[..., Any] | None = None,
    *,
    makes_table: bool = False,
    record: Callable[..., dict[str, Any]] | None = None,
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Register the decorated step in `STEPS`, named as its `core` function (results record
    that name: tests/test_params.py holds the names the same)."""

    def register(step: Callable[..., R]) -> Callable[..., R]:
        step.__name__ = step.__qualname__ = core.__name__
        step.__doc__ = step.__doc__ or f":func:`{core.__module__}.{core.__name__}` of its data."
        STEPS[core.__name__] = Step(
            core.__name__, step, core, takes, spinner, data, makes_table, record
        )
        return step

    return register


def call(step: Callable[..., Any], /, *data: Any, **params: Any) -> Any:
    """Run `step` now, its upstream steps too (no cache)."""
    return step(*data, run=call, **params)


# --- how a step runs its core function --------------------------------------------------------
# Most steps are one line each below: the core function, what the app says while it runs, and
# for a step that needs another step's result, that step. Each is typed with its core
# function's settings where a checker can say so (a page's ``cache.run(pipeline.spectrum,
# table, n_components="x")`` is an error: tests/test_typing.py); a chained step's params also
# feed its upstream step, which no type says.


def _of_table(
    core: Callable[Concatenate[Any, P], R], spinner: str
) -> Callable[Concatenate[Embedding, P], R]:
    """The step running `core` on a table's values, its settings forwarded as they are."""

    forward: Callable[..., R] = core  # its settings arrive as **params, which P cannot say

    @_step(core, spinner)
    def step(table: Embedding, *, run: Run = call, **params: Any) -> R:
        return forward(table.values, **params)

    return step


def _of_two_tables(
    core: Callable[Concatenate[Any, Any, P], R], spinner: str
) -> Callable[Concatenate[Embedding, Embedding, P], R]:
    """The step running `core` on two tables' values (of the same length)."""

    forward: Callable[..., R] = core

    @_step(core, spinner, "two tables")
    def step(first: Embedding, second: Embedding, *, run: Run = call, **params: Any) -> R:
        return forward(first.values, second.values, **params)

    return step


def _of_datum(
    core: Callable[Concatenate[D, P], R],
    spinner: str,
    takes: Takes,
    data: Callable[..., Any],
    *,
    record: Callable[..., dict[str, Any]] | None = None,
) -> Callable[Concatenate[D, P], R]:
    """The step running `core` on a scheme's datum (found by `data`) as it is."""

    forward: Callable[..., R] = core

    @_step(core, spinner, takes, data, record=record)
    def step(datum: D, *, run: Run = call, **params: Any) -> R:
        return forward(datum, **params)

    return step


def _after(
    upstream: Callable[..., Any],
    core: Callable[..., R],
    spinner: str,
    takes: Takes = "table",
    data: Callable[..., Any] | None = None,
) -> Callable[..., R]:
    """The step running `core` on the `upstream` step's result, each given the settings it
    takes (:func:`posviz._params.split_params`)."""

    @_step(core, spinner, takes, data)
    def step(datum: Any, *, run: Run = call, **params: Any) -> R:
        own, rest = split_params(params, core)
        return core(run(upstream, datum, **rest), **own)

    return step


# --- a table's analyses -----------------------------------------------------------------------

spectrum = _of_table(_spectrum.spectrum, "Computing the singular-value spectrum…")
principal_components = _of_table(
    _components.principal_components, "Computing the top principal components…"
)
fit_sinusoids = _after(
    principal_components,
    _components.fit_sinusoids,
    "Fitting a sinusoid to each principal component…",
)
sinusoid_likeness = _after(
    principal_components,
    _components.sinusoid_likeness,
    "Comparing the components' span with low-frequency sinusoids…",
)
similarity_map = _of_table(_similarity.similarity_map, "Computing similarities between positions…")
grid_similarity = _of_table(  # its grid is a setting
    _similarity.grid_similarity, "Computing patch-to-patch similarities on the grid…"
)
offset_profile = _of_table(_offsets.offset_profile, "Computing the offset profile…")
offset_scores = _after(offset_profile, _offsets.offset_scores, "Scoring the offset profile…")
position_statistics = _of_table(_boundary.position_statistics, "Computing per-position statistics…")
outliers = _after(position_statistics, _boundary.outliers, "Flagging unusual positions…")
boundary_summary = _after(
    position_statistics, _boundary.boundary_summary, "Summarising the boundaries…"
)
change_points = _after(outliers, _boundary.change_points, "Finding change points…")
probe_with_controls = _of_table(
    _probes.probe_with_controls,
    "Running the position probes on the table and its two controls…",
)
compare = _of_two_tables(
    _compare.compare, "Comparing the two tables: CKA, principal angles, Procrustes…"
)
quantization_error = _of_two_tables(  # a quantized table (a GGUF's Q8_0, …), its original
    _quantization.quantization_error, "Comparing the quantized table with the original…"
)
table_summary = _of_table(_collection.table_summary, "Summarising the table…")


@_step(_resample.resample_length, "Resampling the table…", makes_table=True)
def resample_length(table: Embedding, *, run: Run = call, **params: Any) -> Embedding:
    """The table with its rows resampled by :func:`posviz.resample.resample_length`."""
    return _resample.resampled_table(table, _resample.resample_length(table.values, **params))


@_step(_resample.resample_grid, "Resampling the grid…", makes_table=True)
def resample_grid(table: Embedding, *, run: Run = call, **params: Any) -> Embedding:
    """The table's grid resampled by :func:`posviz.resample.resample_grid` (to `new_grid`)."""
    if table.grid is None:
        msg = f"{table.name} has no patch grid (a ViT's H x W) to resample; resample its length."
        raise ValueError(msg)
    result = _resample.resample_grid(table.values, table.grid, **params)
    return _resample.resampled_table(table, result)


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


rotary_frequencies = _of_datum(
    _rotary.rotary_frequencies, "Computing the rotary frequencies…", "scheme", _layer
)
rotary_decay = _after(
    rotary_frequencies,
    _rotary.rotary_decay,
    "Computing B(Δ) and RoFormer's bound…",
    "scheme",
    _layer,
)


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


layer_table = _of_datum(
    _per_layer.layer_table, "Mapping each layer's position encoding…", "scheme", _all_layers
)
rotary_overlay = _of_datum(  # several models' rules, by label
    _rotary.rotary_overlay, "Computing the models' B(Δ)…", "schemes", _layers
)
alibi_bias = _of_datum(_alibi.alibi_bias, "Computing the ALiBi bias…", "scheme", _n_heads)
bucket_layouts = _of_datum(_relative.bucket_layouts, "Computing T5's buckets…", "scheme", _buckets)
relative_bias = _of_datum(  # one of a T5 model's bias tensors
    _relative.relative_bias, "Reading the bias through its buckets…", "scheme", _bias_tensor
)


@_step(_diff.scheme_diff, "Comparing the two sources…", "two sources")
def scheme_diff(
    a: _sources.Side, b: _sources.Side, *, run: Run = call, **params: Any
) -> _diff.SchemeDiff:
    """:func:`posviz.schemes.diff.scheme_diff` of two sources of one model's rotary positions,
    their rules applied at one length by :func:`posviz.models.sources.compare` (whose
    `context` it records among the params, beside scheme_diff's own)."""
    return _sources.compare(a, b, **params)


def _scheme(scheme: Scheme, where: Mapping[str, Any], model: object = None) -> Scheme:
    return scheme


context_plan = _of_datum(  # a rotary model's scheme (its main rule); its record, the plan's
    _plan.context_plan,
    "Planning every rule at the target length…",
    "scheme",
    _scheme,
    record=lambda scheme, plan, export: plan.record(),
)


def _read(scheme: Scheme, where: Mapping[str, Any], model: Any) -> tuple[Scheme, dict, Any]:
    return scheme, dict(where), model


@_step(_record.scheme_record, "Summarising the scheme…", "scheme", _read)
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


@_step(
    _heads.learned_heads,
    "Computing each head's kernel, pattern and null…",
    "layer",
    _attention_layer,
    record=_heads_record,
)
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


@_step(
    _heads.rotary_heads,
    "Computing each head's usage of each pair and null…",
    "layer",
    _attention_layer,
    record=_heads_record,
)
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


@_step(
    _heads.alibi_heads,
    "Computing each head's ALiBi pattern…",
    "layer",
    _attention_layer,
    record=_heads_record,
)
def alibi_heads(
    layer: _attention.AttentionLayer, *, run: Run = call, **params: Any
) -> _heads.PatternHeads:
    """:func:`posviz.heads.alibi_heads` of an ALiBi layer's slopes."""
    _of_kind(layer, "alibi", "alibi_heads")
    return _heads.alibi_heads(given(layer.slopes, "ALiBi's slopes"), **params)


@_step(
    _heads.t5_heads,
    "Computing each head's T5 pattern and null…",
    "layer",
    _attention_layer,
    record=_heads_record,
)
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

#: The registry and every step, each by the name an export records.
__all__ = ["HEADS_STEPS", "STEPS", "Run", "Step", "call", *STEPS]
