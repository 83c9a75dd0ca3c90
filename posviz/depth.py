"""Every layer's heads of a model, read one layer at a time: the question asked across depth
(in which layers do the previous-token heads live, where does attention move to the slowest
pairs?), answered by the per-layer steps of `posviz.pipeline.HEADS_STEPS` run on each layer.

The three stages, for the CLI, the report and the Heads page alike::

    model = attention.open_source("hf:meta-llama/Llama-3.1-8B")   # config.json only
    plan = depth.plan_depth(model, "all")        # headers only: every refusal, the bytes
    plan.nbytes, plan.to_fetch                   # said (and asked) before anything travels
    found = []
    for layer in depth.stream_depth(plan, run=runner, n_draws=8):   # one layer at a time
        found.append(depth.LayerNumbers.of(layer))                 # keep the small part
        progress(layer.position + 1, len(plan.layers), layer.bytes_fetched)
        if stopped:                             # a stop button: leave the loop; every row
            break                               # read so far stays in the Hub cache
    result = depth.DepthHeads(plan, tuple(found))
    result.map("fast_share")                    # layers x heads of any per-head number
    result.label_map()                          # layers x heads of the labels ("" none)
    result.record()                             # the depth summary the JSON carries

- :func:`plan_depth` plans every asked layer from config.json (or a GGUF's metadata) and the
  tensor headers: a layer the model lacks, a missing tensor, a quantization the `gguf` package
  cannot dequantize are refused here, before a weight is read. A layer without a per-head view
  (NoPE in a per-layer map) is listed in `DepthPlan.skipped` with the reason.
- :func:`stream_depth` is a generator: it reads one layer's planned rows, runs the layer's step
  (through `run`: :func:`posviz.pipeline.call`, or a page's cached runner), yields a
  :class:`LayerHeads` (the layer, its weights dropped, and the full result: what
  `posviz heads --layer N` shows of it), and drops it before the next layer is read, so memory
  does not grow with the number of layers. Tensors every layer shares (a learned position
  table, T5's bias) are read once. A Hub model's rows are cached on disk as they arrive, per
  (commit, file, tensor, byte range): a run stopped half-way resumes where it stopped, and a
  second run fetches nothing.
- :class:`DepthHeads` keeps each layer's per-head numbers, null and labels
  (:class:`LayerNumbers`), not its kernels: the layers x heads maps and the depth summary.
  To open one layer's full detail, read it again: ``attention.read_planned(plan.opened,
  plan.plan_of(layer))`` (its rows come from the cache).

For the Heads page: a model is opened by :func:`posviz.models.attention.open_source` (a path:
a .safetensors file, a shard index, their folder, a .gguf; ``hf:REPO[@REV][:QUANT|FILE]``), an
upload by :func:`posviz.models.weights.open_gguf` (its bytes and name) or
:func:`posviz.models.weights.open_checkpoint`, a shared folder's file by the latter two with its
name there as label (and ``within=`` the folder for a shard index). Before reading: ask when
``plan.to_fetch`` is above 1 GiB, and say when ``not plan.cache_holds`` (the Hub cache is
smaller than the rows: a second run fetches again). While reading: ``layer.position + 1`` of
``len(plan.plans)`` and the running sum of ``layer.bytes_fetched`` out of ``plan.to_fetch``; a
stop button leaves the loop (or calls the generator's ``close()``): the layers done make a
``DepthHeads(plan, done)`` (``complete`` False). Drawing: ``found.definitions`` lists the
per-head numbers in words (the picker), :func:`posviz.figures.heads.depth_map` draws one,
``found.to_frame()`` and ``layers_record(found, records)`` are the downloads (the JSON
`posviz heads --layers` prints, which `posviz rerun` checks).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from posviz import pipeline
from posviz._params import Refused, check_budget, defaults
from posviz.heads import (
    LABELS,
    PATTERN_NUMBERS,
    ROTARY_NUMBERS,
    PatternHeads,
    RotaryHeads,
    check_work,
)
from posviz.hub.cache import cache_limit
from posviz.models import attention, weights
from posviz.models.attention import AttentionLayer, LayerPlan, NoHeadsView, Read
from posviz.records import (
    HEADS_POSITIONS,
    check_shown_kernels,
    finite,
    heads_record,
)
from posviz.schemes._values import given

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ALL",
    "DepthHeads",
    "DepthPlan",
    "LayerHeads",
    "LayerNumbers",
    "check_heads",
    "parse_layers",
    "plan_depth",
    "stream_depth",
]

#: `parse_layers`' word for every layer.
ALL = "all"
#: How `--layers` is written (`parse_layers`).
LAYERS_SYNTAX = "all, N, A-B or i,j,k"
#: Roles of tensors every layer reads alike (the learned table and what it goes through, T5's
#: block-0 bias): read once per run.
_SHARED_ROLES = frozenset(
    {"positions", "token_type", "position_norm_weight", "position_norm_bias", "relative_bias"}
)
_ITEM = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_layers(
    text: str | int | Sequence[int], n_layers: int | None, *, label: str
) -> tuple[int, ...]:
    """The layers `text` names (``all``, ``N``, ``A-B`` inclusive, ``i,j,k``, or items of
    both: ``0-3,7``), sorted, each once.

    Raises
    ------
    Refused
        An empty or reversed range, a word that is not a number, a layer the model lacks: one
        line naming the model's layers (`n_layers` None: the config.json does not say how
        many, so ``all`` is refused and a named layer is checked when it is planned).

    Examples
    --------
    >>> parse_layers("all", 4, label="m"), parse_layers("1-2,0", 4, label="m")
    ((0, 1, 2, 3), (0, 1, 2))
    >>> parse_layers("3-1", 4, label="m")
    Traceback (most recent call last):
    ...
    posviz._params.Refused: --layers '3-1' is a reversed range; m has 4 layers (0 … 3).
    """
    has = (
        f"{label} has {n_layers} layers (0 … {n_layers - 1})"
        if n_layers
        else f"{label}'s config.json does not say how many layers it has"
    )
    if isinstance(text, int) and not isinstance(text, bool):
        found = [text]
    elif isinstance(text, str) and text.strip().lower() == ALL:
        if not n_layers:
            msg = f"--layers all: {has}; name the layers ({LAYERS_SYNTAX})."
            raise Refused(msg)
        return tuple(range(n_layers))
    elif isinstance(text, str):
        found = []
        items = text.split(",")
        for item in items:
            match = _ITEM.fullmatch(item)
            if match is None:
                what = "empty" if not text.strip() else f"{item.strip()[:40]!r} is not a layer"
                msg = f"--layers {text[:60]!r}: {what} (write {LAYERS_SYNTAX}); {has}."
                raise Refused(msg)
            first = int(match[1])
            last = int(match[2]) if match[2] is not None else first
            if last < first:
                msg = f"--layers {item.strip()!r} is a reversed range; {has}."
                raise Refused(msg)
            if n_layers and last >= n_layers:
                msg = f"--layers {text[:60]!r}: there is no layer {last}; {has}."
                raise Refused(msg)
            if last - first >= 2**16:
                msg = f"--layers {item.strip()!r} names more layers than any model has; {has}."
                raise Refused(msg)
            found += range(first, last + 1)
    elif isinstance(text, Sequence):
        found = [int(i) for i in text]
    else:
        msg = f"--layers {text!r} names no layers ({LAYERS_SYNTAX}); {has}."
        raise Refused(msg)
    for layer in found:
        if layer < 0 or (n_layers and layer >= n_layers):
            msg = f"There is no layer {layer}; {has}."
            raise Refused(msg)
    if not found:
        msg = f"No layers named; {has}."
        raise Refused(msg)
    return tuple(sorted(set(found)))


@dataclass(frozen=True)
class DepthPlan:
    """What reading the asked layers takes, from config.json (or a GGUF's metadata) and the
    tensor headers alone: nothing of the weights has travelled yet.

    Attributes
    ----------
    model : str
        The model as named (its label).
    n_layers : int or None
        The model's layers (config.json's count).
    layers : tuple of int
        The layers asked, in order.
    plans : tuple of LayerPlan
        Each layer read (the asked layers less `skipped`), in order.
    skipped : dict of int to str
        A layer without a per-head view (NoPE in the per-layer map), and why.
    nbytes : int
        Bytes every planned read takes, each tensor that layers share (a learned position
        table) counted once.
    to_fetch : int
        Of them, what a Hub model still fetches (not in the disk cache); 0 for a local file.
    opened : Opened
        The model opened (its config, headers, reader): :func:`stream_depth` reads through it;
        ``attention.read_planned(plan.opened, plan.plan_of(layer))`` reads one layer again.
    """

    model: str
    n_layers: int | None
    layers: tuple[int, ...]
    plans: tuple[LayerPlan, ...]
    skipped: dict[int, str]
    nbytes: int
    to_fetch: int
    opened: attention.Opened = field(repr=False)

    @property
    def family(self) -> str:
        return self.plans[0].family if self.plans else ""

    @property
    def kind(self) -> str:
        return self.plans[0].kind if self.plans else ""

    @property
    def remote(self) -> bool:
        return self.opened.remote

    @property
    def cache_holds(self) -> bool:
        """Whether the Hub cache (POSVIZ_HUB_CACHE_SIZE) holds every planned row: else a
        second run, or one resumed, fetches the rows the cache let go (a local file: True)."""
        return not self.remote or self.nbytes <= cache_limit()

    @property
    def read(self) -> tuple[int, ...]:
        """The layers read (those with a per-head view)."""
        return tuple(p.layer for p in self.plans)

    def plan_of(self, layer: int) -> LayerPlan:
        """Layer `layer`'s plan (to read it again for its detail)."""
        for plan in self.plans:
            if plan.layer == layer:
                return plan
        msg = f"Layer {layer} of {self.model} is not among the layers planned."
        raise Refused(msg)


def _unique(reads: Sequence[Read]) -> dict[tuple[str, tuple[int, int] | None], Read]:
    return {(r.name, r.rows): r for r in reads}


def check_heads(plan: LayerPlan, *, shown: int | None = None, **params: Any) -> None:
    """Refuse, from a layer's plan alone (before a weight is read), heads whose kernels would
    pass `posviz.heads.MAX_KERNEL_VALUES` with `params` (its step's settings), or whose
    record's first `shown` positions would pass a result's budget: what the step and the record
    check again once the layer is read."""
    if plan.kind == "rotary":  # no kernels: its work is the weights' rows, read within budget
        return
    step = pipeline.STEPS[pipeline.HEADS_STEPS[plan.kind].__name__]
    settings = defaults(step.core) | params
    n = settings.get("n_positions") or given(plan.n_positions, "the table's positions")
    check_work(plan.n_heads, n, 0 if plan.kind == "alibi" else settings["n_draws"])
    if shown is not None:
        check_shown_kernels(plan.n_heads, min(shown, n))


def plan_depth(
    model: weights.Readable | attention.Opened, layers: str | int | Sequence[int] = ALL
) -> DepthPlan:
    """Plan layers `layers` (:func:`parse_layers`) of `model` (as
    :func:`posviz.models.attention.open_source` returns it, or already opened) from its
    config.json and headers: every refusal before a weight is read.

    Raises
    ------
    Refused
        A layer the model lacks, or a layers text that is not one (:func:`parse_layers`);
        anything :func:`posviz.models.attention.plan_layer` refuses for any of them (a missing
        tensor, an architecture not known, more than the per-layer budget), naming the layer.
        A model none of whose asked layers has a per-head view is refused with the reason.
    """
    opened = model if isinstance(model, attention.Opened) else attention.open_model(model)
    config = attention.language_model(opened.config)
    count = attention.n_layers_of(config)
    asked = parse_layers(layers, count, label=opened.label)
    plans: list[LayerPlan] = []
    skipped: dict[int, str] = {}
    for layer in asked:
        try:
            plans.append(opened.plan(layer))
        except NoHeadsView as why:
            if why.kind != "nope":  # the whole model has none: said as it is
                raise
            skipped[layer] = str(why)
    if not plans:
        msg = next(iter(skipped.values()))
        raise Refused(msg)
    reads = _unique([r for p in plans for r in p.reads])
    nbytes = sum(r.nbytes for r in reads.values())
    waiting = sum(r.nbytes for r in reads.values() if opened.remote and not opened.cached(r))
    return DepthPlan(opened.label, count, asked, tuple(plans), skipped, nbytes, waiting, opened)


@dataclass(frozen=True)
class LayerHeads:
    """One layer's heads as :func:`stream_depth` yields them.

    Attributes
    ----------
    position : int
        Its place among the layers read (0, 1, …): ``position + 1`` of ``len(plan.plans)``.
    layer : AttentionLayer
        The layer read, its weight arrays dropped (its plan, provenance with each tensor's
        sha256, bytes fetched stay).
    result : PatternHeads or RotaryHeads
        Its step's result, whole (kernels included).
    """

    position: int
    layer: AttentionLayer
    result: PatternHeads | RotaryHeads

    @property
    def index(self) -> int:
        """The layer's index in the model."""
        return self.layer.plan.layer

    @property
    def bytes_fetched(self) -> int:
        return self.layer.bytes_fetched

    def record(self, positions: int = HEADS_POSITIONS) -> dict[str, Any]:
        """The JSON record `posviz heads --layer N --json` prints of this layer."""
        return heads_record(self.layer, self.result, positions=positions)


def _light(layer: AttentionLayer) -> AttentionLayer:
    """`layer` without its weight arrays (what stays once its numbers are computed)."""
    return replace(layer, wq=None, wk=None, bq=None, bk=None, positions=None)


def stream_depth(
    plan: DepthPlan, *, run: pipeline.Run = pipeline.call, **params: Any
) -> Iterator[LayerHeads]:
    """Read and compute `plan`'s layers one at a time, each by its kind's step of
    `posviz.pipeline.HEADS_STEPS` with `params` (run through `run`: the page passes its cached
    runner); yields each layer's :class:`LayerHeads`. At most one layer's weights are held:
    the next layer is read after the previous one was yielded and dropped here. Leaving the
    loop stops the reading; what was read stays in the Hub cache."""
    opened = plan.opened
    once = {(r.name, r.rows) for p in plan.plans for r in p.reads if r.role in _SHARED_ROLES}
    shared: dict[tuple[str, tuple[int, int] | None], np.ndarray] = {}

    def read(name: str, rows: tuple[int, int] | None) -> np.ndarray:
        key = (name, rows)
        if key in shared:
            return shared[key]
        array = opened.read(name, rows)
        if key in once:
            shared[key] = array
        return array

    for position, layer_plan in enumerate(plan.plans):
        fetched = sum(
            r.nbytes
            for r in layer_plan.reads
            if opened.remote and (r.name, r.rows) not in shared and not opened.cached(r)
        )
        layer = attention.read_layer(
            layer_plan, read, model=opened.label, read_from=opened.model, bytes_fetched=fetched
        )
        result = run(pipeline.HEADS_STEPS[layer.kind], layer, **params)
        light = _light(layer)
        del layer  # its rows: gone before the next layer's are read
        yield LayerHeads(position, light, result)
        del result, light


@dataclass(frozen=True)
class LayerNumbers:
    """What :class:`DepthHeads` keeps of a layer: its heads' numbers, null and labels.

    Attributes
    ----------
    layer : int
    kind, family : str
    step : str
        The step that made the numbers (``learned_heads``, ``rotary_heads``, …).
    params : dict
        Its settings, as recorded by the result.
    kv_head : ndarray of int, shape (n_heads,)
    numbers : dict of str to ndarray of shape (n_heads,)
    null : dict of str to ndarray of shape (n_draws, n_heads)
    labels : tuple of (str or None)
    notes : tuple of str
    provenance : dict
        The layer's provenance (the model, the layer, each tensor read and its sha256).
    bytes_fetched : int
    """

    layer: int
    kind: str
    family: str
    step: str
    params: dict
    kv_head: np.ndarray
    numbers: dict[str, np.ndarray]
    null: dict[str, np.ndarray]
    labels: tuple[str | None, ...]
    notes: tuple[str, ...]
    provenance: dict
    bytes_fetched: int

    @classmethod
    def of(cls, heads: LayerHeads) -> LayerNumbers:
        return cls.made(heads.layer, heads.result)

    @classmethod
    def made(cls, layer: AttentionLayer, result: PatternHeads | RotaryHeads) -> LayerNumbers:
        """The numbers of `layer`'s `result` (as `posviz rerun` makes them again)."""
        plan = layer.plan
        return cls(
            layer=plan.layer,
            kind=plan.kind,
            family=plan.family,
            step=pipeline.HEADS_STEPS[plan.kind].__name__,
            params=result.params,  # the step that made it: `posviz._params.step_of`
            kv_head=result.kv_head,
            numbers=dict(result.numbers),
            null=dict(result.null),
            labels=result.labels,
            notes=plan.notes,
            provenance=layer.provenance(),
            bytes_fetched=layer.bytes_fetched,
        )

    @property
    def n_heads(self) -> int:
        return len(self.kv_head)

    def null_max(self, name: str) -> float:
        """The largest null draw of number `name` over heads and draws (NaN: no null)."""
        values = self.null.get(name)
        if values is None or not values.size or not np.isfinite(values).any():
            return math.nan
        return float(np.nanmax(values))


@dataclass(frozen=True)
class DepthHeads:
    """Every layer read: layers x heads of each per-head number, the labels, the summary.

    Attributes
    ----------
    plan : DepthPlan
    layers : tuple of LayerNumbers
        In the order read (a run stopped half-way holds the layers done).
    """

    plan: DepthPlan
    layers: tuple[LayerNumbers, ...]

    @property
    def indices(self) -> list[int]:
        """The layers held, as the model numbers them (the rows of every map)."""
        return [n.layer for n in self.layers]

    @property
    def n_heads(self) -> int:
        """The most heads of any layer held (the columns of every map)."""
        return max((n.n_heads for n in self.layers), default=0)

    @property
    def definitions(self) -> dict[str, str]:
        """The per-head numbers the layers have, in words (rotary, or a kernel's pattern)."""
        kinds = {n.kind for n in self.layers}
        if kinds == {"rotary"}:
            return dict(ROTARY_NUMBERS)
        if "rotary" in kinds:  # never both in one model; kept apart if so
            return {**ROTARY_NUMBERS, **PATTERN_NUMBERS}
        return dict(PATTERN_NUMBERS)

    @property
    def complete(self) -> bool:
        """Whether every planned layer is held (not stopped half-way)."""
        return len(self.layers) == len(self.plan.plans)

    def map(self, name: str) -> np.ndarray:
        """Layers x heads of per-head number `name` (NaN where a layer has fewer heads or
        lacks the number)."""
        out = np.full((len(self.layers), self.n_heads), np.nan)
        for row, layer in enumerate(self.layers):
            values = layer.numbers.get(name)
            if values is not None:
                out[row, : len(values)] = values
        return out

    def label_map(self) -> np.ndarray:
        """Layers x heads of each head's label ("" where the null explains it)."""
        out = np.full((len(self.layers), self.n_heads), "", dtype=object)
        for row, layer in enumerate(self.layers):
            out[row, : layer.n_heads] = [label or "" for label in layer.labels]
        return out

    def null_max(self, name: str) -> np.ndarray:
        """Each layer's largest null draw of number `name` (NaN: no null)."""
        return np.array([layer.null_max(name) for layer in self.layers])

    def to_frame(self) -> pd.DataFrame:
        """One row per layer and head: the label, every number, and its layer's null max."""
        import pandas as pd

        frames = []
        for layer in self.layers:
            frame = pd.DataFrame(
                {"layer": layer.layer, "head": np.arange(layer.n_heads), "kv_head": layer.kv_head}
            )
            frame["label"] = [label or "" for label in layer.labels]
            for name, values in layer.numbers.items():
                frame[name] = values
            for name in layer.numbers:
                frame[f"{name}_null_max"] = layer.null_max(name)
            frames.append(frame)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def record(self) -> dict[str, Any]:
        """The depth summary (`posviz heads --layers … --json`'s ``depth``)."""
        return depth_record(self.layers, skipped=self.plan.skipped)


def depth_record(
    layers: Sequence[LayerNumbers], *, skipped: dict[int, str] | None = None
) -> dict[str, Any]:
    """The depth summary of per-layer numbers: per number, each layer's mean and largest value
    over its heads, the head that has it, and the layer's null max beside it; per label, the
    (layer, head) pairs that carry it and the count per layer.

    It is made from the layers' numbers alone, so `posviz rerun` makes it again from the
    layers it recomputes.
    """
    check_budget(64 * sum(n.n_heads for n in layers), "The depth summary of these layers")
    names = list(dict.fromkeys(name for layer in layers for name in layer.numbers))
    numbers: dict[str, Any] = {}
    for name in names:
        means, largest, heads, nulls = [], [], [], []
        for layer in layers:
            values = layer.numbers.get(name, np.empty(0))
            finite_values = values[np.isfinite(values)]
            means.append(float(finite_values.mean()) if finite_values.size else None)
            largest.append(float(finite_values.max()) if finite_values.size else None)
            heads.append(int(np.nanargmax(values)) if finite_values.size else None)
            nulls.append(layer.null_max(name))
        numbers[name] = {"mean": means, "max": largest, "max_head": heads, "null_max": nulls}
    labels: dict[str, Any] = {}
    for label, (name, threshold) in LABELS.items():
        if name not in names:
            continue
        carried = [
            [layer.layer, head] for layer in layers for head, got in enumerate(layer.labels)
            if got == label
        ]  # fmt: skip
        per_layer = [sum(got == label for got in layer.labels) for layer in layers]
        labels[label] = {"number": name, "at_least": threshold, "heads": carried,
                         "per_layer": per_layer}  # fmt: skip
    record = {
        "layers": [layer.layer for layer in layers],
        "skipped": {str(k): v for k, v in (skipped or {}).items()},
        "numbers": numbers,
        "labels": labels,
        "null": "each layer beside its own null: the largest draw over its heads (query and "
        "key rows permuted across the layer's heads); a label needs its number above it",
    }
    return finite(record)


def collect(
    plan: DepthPlan,
    *,
    run: pipeline.Run = pipeline.call,
    each: Callable[[LayerHeads], None] | None = None,
    **params: Any,
) -> DepthHeads:
    """Every layer of `plan` read and kept as :class:`DepthHeads`; `each` sees each layer's
    :class:`LayerHeads` first (its record, a progress line)."""
    found = []
    for heads in stream_depth(plan, run=run, **params):
        if each is not None:
            each(heads)
        found.append(LayerNumbers.of(heads))
    return DepthHeads(plan, tuple(found))


def layers_record(found: DepthHeads, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`posviz heads --layers … --json`: the model, the layers asked and read, the bytes, the
    depth summary, and under ``layers`` each layer's record (`records`: what ``--layer N
    --json`` prints of it, in the order read)."""
    plan = found.plan
    return finite(
        {
            "model": plan.model,
            "family": plan.family,
            "scheme": records[0]["scheme"] if records else None,
            "n_layers": plan.n_layers,
            "layers_asked": list(plan.layers),
            "bytes_planned": plan.nbytes,
            "bytes_fetched": sum(n.bytes_fetched for n in found.layers),
            "provenance": weights.model_provenance(plan.opened.model),
            "depth": found.record(),
            "layers": list(records),
        }
    )
