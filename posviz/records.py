"""A position scheme's numbers as one JSON-ready record: what `posviz summary` prints for a
model whose positions are not a learned table (and `scheme` for every model).

A record is an export (`posviz rerun` recomputes it): its ``"analysis"`` names the step,
:func:`scheme_record`, its ``"params"`` are that function's settings, and its ``"provenance"``
the config.json it was made from (`posviz.models.weights.config_provenance`: a path,
``hf:REPO@COMMIT`` or ``preset:NAME``, and the sha256 of its bytes).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from posviz import _moved
from posviz._params import Bound, bounded, check_budget
from posviz.embedding import Embedding
from posviz.export import header
from posviz.heads import (
    LABELS,
    MAX_POSITIONS,
    PATTERN_NUMBERS,
    ROTARY_NUMBERS,
    PatternHeads,
    RotaryHeads,
)
from posviz.models import weights
from posviz.models.attention import AttentionLayer
from posviz.rows import row_offsets
from posviz.schemes._values import given
from posviz.schemes.alibi import alibi_slopes
from posviz.schemes.config import (
    KINDS,
    RelativeBiasSpec,
    RelativeTableSpec,
    Scheme,
)
from posviz.schemes.layers import LayerScheme
from posviz.schemes.relative import check_bias_shape, check_relative_bias, t5_buckets
from posviz.schemes.rotary import (
    MAX_TABLE_POSITIONS,
    RotaryFrequencies,
    RotarySpec,
    inv_freq_difference,
    rotary_frequencies,
    rotary_table,
)
from posviz.simulate import sinusoidal
from posviz.spectrum import NO_VARIANCE, Spectrum, spectrum

__all__ = [
    "HEADS_POSITIONS",
    "INV_FREQ_TOLERANCE",
    "N_SINGULAR_VALUES",
    "SHOWN_POSITIONS",
    "alibi_record",
    "check_shown_kernels",
    "finite",
    "heads_record",
    "is_decoder_bias",
    "layers_record",
    "other_layer_types",
    "relative_bias_record",
    "relative_rows_record",
    "rotary_record",
    "scheme_head",
    "scheme_record",
    "table_record",
]

#: Singular values printed and exported.
N_SINGULAR_VALUES = 10
#: Largest relative difference of a stored inv_freq buffer from config.json's that passes:
#: bfloat16 stores 8 significant bits (relative error up to 2**-8 = 0.0039).
INV_FREQ_TOLERANCE = 2**-8


def scheme_head(scheme: Scheme) -> dict[str, Any]:
    """The keys every record starts with: the scheme, in words, and its warnings."""
    record: dict[str, Any] = {"scheme": scheme.kind, "description": KINDS[scheme.kind]}
    record["reason"] = scheme.reason
    if scheme.warnings:
        record["warnings"] = list(scheme.warnings)
    return record


def scheme_record(
    scheme: Scheme,
    provenance: dict[str, Any],
    model: weights.Model | None = None,
    *,
    context: int | None = None,
    positions: int | None = None,
    center: bool = True,
    check_inv_freq: bool = False,
) -> dict[str, Any]:
    """Everything `posviz summary` says of a scheme: its numbers, and the summary of its
    table (rotary, sinusoidal; DeBERTa's from the Hub) under "table".

    Parameters
    ----------
    scheme : Scheme
    provenance : dict
        :func:`config_provenance` of the config.json `scheme` was read from.
    model : ConfigFile or LocalCheckpoint, optional
        The model on the Hub or on disk, for what its weights hold (T5's bias, DeBERTa's
        table, a stored inv_freq buffer).
    context : int, optional
        Sequence length a rotary scaling rule is applied at (default max_position_embeddings).
    positions : int, optional
        Rows of the rotary or sinusoidal table (default its original context, at most
        `MAX_TABLE_POSITIONS`).
    center : bool
        Center the table before its spectrum.
    check_inv_freq : bool
        Read a stored ``rotary_emb.inv_freq`` buffer from the model's weights and compare.
    """
    record = scheme_head(scheme)
    record["analysis"] = scheme_record.__name__  # the step that makes it again
    record["params"] = {
        "context": context,
        "positions": positions,
        "center": center,
        "check_inv_freq": check_inv_freq,
    }
    record["provenance"] = provenance
    source = provenance["config"] if model is None else model.source  # a table names its commit
    if scheme.kind == "rotary":
        main, *others = scheme.rotary
        stored = weights.stored_inv_freq(model) if model and check_inv_freq else None
        record |= rotary_record(
            main,
            context=context,
            positions=positions,
            center=center,
            source=source,
            stored_inv_freq=stored,
        )
        if others:
            record["other_layer_types"] = other_layer_types(tuple(others))
        if scheme.layers:
            record["layers"] = layers_record(scheme.layers, context=context, main=main)
    elif scheme.kind == "alibi":
        alibi = given(scheme.alibi, "ALiBi's heads")
        record |= alibi_record(alibi.n_heads, alibi_bias_max=alibi.alibi_bias_max)
    elif scheme.kind == "relative_bias":
        bias = given(scheme.relative_bias, "T5's relative attention bias")
        check_relative_bias(bias)  # before any tensor is read
        tensors = weights.bias_tensors(model, bias) if model is not None else {}
        record |= relative_bias_record(bias, tensors)
    elif scheme.kind == "relative_table":
        table_spec = given(scheme.relative_table, "DeBERTa's relative table")
        record |= {"span": table_spec.span, "hidden_size": table_spec.hidden_size}
        record["absolute_table_too"] = table_spec.absolute_too
        record |= relative_rows_record(table_spec)
        if model is not None:
            table, span = weights.relative_embeddings(model)
            record["relative_positions"] = span
            record["table"] = table_record(table, spectrum(table.values, center=center))
    elif scheme.kind == "sinusoidal" and scheme.width and scheme.context:
        rows = positions or min(scheme.context, MAX_TABLE_POSITIONS)
        table = sinusoidal(rows, scheme.width)  # built from its formula: rarely stored
        record["rows"] = rows
        record["table"] = table_record(table, spectrum(table.values, center=center))
    record["context"] = record.get("context", scheme.context)
    return finite(record)


def relative_rows_record(spec: RelativeTableSpec) -> dict[str, Any]:
    """What each row of DeBERTa's relative table stands for: the settings that bucket it, the
    exact band, and ``row_offsets``, per row (bucket ``row − span``) the first and last offset
    q − k it covers (``null`` for an end that takes every offset beyond; the entry ``null`` for
    a row no offset reaches), from config.json alone.

    >>> spec = RelativeTableSpec(span=256, hidden_size=8, absolute_too=False,
    ...                          position_buckets=256, max_relative_positions=512)
    >>> r = relative_rows_record(spec)
    >>> r["exact_band"], r["row_offsets"][256 + 200], r["row_offsets"][-1], r["row_offsets"][0]
    ([-128, 128], [278, 280], [506, None], [None, -512])
    """  # fmt: skip
    offsets = row_offsets(
        position_buckets=spec.position_buckets, max_relative_positions=spec.max_relative_positions
    )
    return {
        "position_buckets": spec.position_buckets,
        "max_relative_positions": spec.max_relative_positions,
        "offset": "query − key",
        "exact_band": [-offsets.exact, offsets.exact],
        "rows_never_reached": int((~offsets.reached).sum()),
        "row_offsets": offsets.record(),
    }


def table_record(table: Embedding, result: Spectrum) -> dict[str, Any]:
    """A table's usual summary: the export header (analysis, params, provenance) and its
    spectrum's numbers (k50…k99, ranks, noise count, the first singular values). A scheme's
    table (rotary, sinusoidal, DeBERTa's) carries it under "table"."""
    numbers: dict[str, Any] = result.metrics()
    numbers["singular_values"] = result.singular_values[:N_SINGULAR_VALUES].tolist()
    record = {**header(result, table), "numbers": numbers}
    if not result.has_variance:  # the metrics above are null
        record["undefined"] = NO_VARIANCE
    return record


def rotary_record(
    spec: RotarySpec,
    *,
    context: int | None = None,
    positions: int | None = None,
    center: bool = True,
    source: str = "config.json",
    stored_inv_freq: tuple[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """A rotary scheme's keys, and its position table's usual keys (`rows` of them).

    `stored_inv_freq` is (tensor name, values) of a buffer found in the checkpoint.
    """
    f = rotary_frequencies(spec, context=context)
    table = rotary_table(f, positions=positions, source=source)
    stored = None
    if stored_inv_freq is not None:
        name, values = stored_inv_freq
        difference = inv_freq_difference(values, f)
        stored = {
            "tensor": name,
            "max_relative_difference": difference,
            "matches": difference <= INV_FREQ_TOLERANCE,
        }
    record = {
        "layer_type": spec.layer_type,
        "rope_type": spec.rope_type,
        "rotary_dim": spec.rotary_dim,
        "base": spec.base,
        "interleaved": spec.interleaved,
        "context": f.context,
        "original_context": spec.original_context,
        "factor": spec.factor,
        "attention_factor": f.attention_factor,
        "logit_multiplier": f.logit_multiplier,
        "logit_multiplier_source": f.logit_multiplier_source,
        "base_applied": f.base_applied,
        "inv_freq": f.inv_freq.tolist(),
        "inv_freq_unscaled": f.inv_freq_unscaled.tolist(),
        "wavelengths": f.wavelengths.tolist(),
        "rotating_pairs": spec.rotating_pairs,
        "bands": f.bands(),
        "pairs_beyond_original_context": f.pairs_beyond_original_context,
        "stored_inv_freq": stored,
        "rows": table.shape[0],
    }
    record["table"] = table_record(table, spectrum(table.values, center=center))
    return record


def other_layer_types(specs: tuple[RotarySpec, ...]) -> dict[str, dict[str, Any]]:
    """The rules of the other layer types (Gemma-3's sliding layers), in brief."""
    brief = {}
    for spec in specs:
        f: RotaryFrequencies = rotary_frequencies(spec)
        brief[spec.layer_type] = {
            "rope_type": spec.rope_type,
            "base": spec.base,
            "factor": spec.factor,
            "attention_factor": f.attention_factor,
            "inv_freq": f.inv_freq.tolist(),
        }
    return brief


def layers_record(
    layers: tuple[LayerScheme, ...], *, context: int | None, main: RotarySpec
) -> list[dict[str, Any]]:
    """One entry per layer (issue 33's JSON): RoPE or NoPE, its rule, base and width, its
    inv_freq where it differs from `main`'s (the record's top-level one, at the same context),
    sliding window, layer type, mrope sections and attention temperature."""
    applied: dict[RotarySpec, np.ndarray] = {}
    for rule in {layer.rotary for layer in layers if layer.rotary is not None} | {main}:
        applied[rule] = rotary_frequencies(rule, context=context).inv_freq
    entries = []
    for layer in layers:
        spec = layer.rotary
        entry: dict[str, Any] = {
            "layer": layer.layer,
            "rope": layer.rope,
            "rope_type": spec and spec.rope_type,
            "base": spec and spec.base,
            "rotary_dim": spec and spec.rotary_dim,
        }
        if spec is not None and not np.array_equal(applied[spec], applied[main]):
            entry["inv_freq"] = applied[spec].tolist()
        entry |= {
            "sliding_window": layer.sliding_window,
            "layer_type": layer.layer_type,
            "mrope_section": layer.mrope and layer.mrope.record(),
            "attention_temperature": (
                layer.attention_temperature and layer.attention_temperature.record()
            ),
        }
        entries.append(entry)
    return entries


def alibi_record(n_heads: int, *, alibi_bias_max: float = 8.0) -> dict[str, Any]:
    """ALiBi's keys: heads and their slopes (reference recursion)."""
    slopes = alibi_slopes(n_heads, alibi_bias_max=alibi_bias_max)
    return {
        "n_heads": n_heads,
        "alibi_bias_max": alibi_bias_max,
        "slopes": slopes.tolist(),
    }


def is_decoder_bias(name: str) -> bool:
    """Whether a T5 bias tensor belongs to the decoder (causal buckets)."""
    return name.startswith("decoder.") or ".decoder." in name


def relative_bias_record(spec: RelativeBiasSpec, tensors: dict[str, np.ndarray]) -> dict[str, Any]:
    """T5's keys: buckets and bias per tensor (heads by relative positions -max ... max).

    Without tensors (a config.json alone) `buckets` is given for the encoder and decoder
    rules, and `bias` is empty.

    Raises
    ------
    Refused
        As :func:`check_relative_bias`, or when the lists would take more than
        `posviz._params.MAX_RESULT_BYTES` (a Python float in a list: 32 bytes).
    LoadError
        If a tensor's shape is not the config's (num_buckets, n_heads).
    """
    check_relative_bias(spec)
    for weight in tensors.values():
        check_bias_shape(np.shape(weight), spec)
    check_budget(
        32 * (2 * spec.max_distance + 1) * (2 + len(tensors) * spec.n_heads),
        f"The buckets and bias of {len(tensors):,} tensors of {spec.n_heads:,} heads to "
        f"relative_attention_max_distance {spec.max_distance:,}",
    )
    positions = np.arange(-spec.max_distance, spec.max_distance + 1)

    def buckets(bidirectional: bool) -> list[int]:
        return t5_buckets(
            positions,
            bidirectional=bidirectional,
            num_buckets=spec.num_buckets,
            max_distance=spec.max_distance,
        ).tolist()

    if tensors:
        per_tensor = {name: buckets(not is_decoder_bias(name)) for name in tensors}
        bias = {
            name: np.asarray(w, dtype=np.float64)[per_tensor[name]].T.tolist()
            for name, w in tensors.items()
        }
    else:
        per_tensor = {"encoder": buckets(True), "decoder": buckets(False)}
        bias = {}
    return {
        "num_buckets": spec.num_buckets,
        "max_distance": spec.max_distance,
        "n_heads": spec.n_heads,
        "per_layer": spec.per_layer,
        "tensors": list(tensors),
        "relative_positions": positions.tolist(),
        "buckets": per_tensor,
        "bias": bias,
    }


def finite(record: Any) -> Any:
    """`record` with NaN/Inf floats as None (JSON has no NaN).

    >>> finite({"a": [1.0, math.nan, [np.float64(-math.inf), 2, "x"]], "b": math.inf})
    {'a': [1.0, None, [None, 2, 'x']], 'b': None}
    """
    if isinstance(record, dict):
        return {k: finite(v) for k, v in record.items()}
    if isinstance(record, list):
        # A heads record's kernels are half a million floats over a GPT-2's layers: a list of
        # numbers whose sum is finite holds no NaN or Inf (either would carry into the sum; an
        # overflow only sends it the long way), and sum() is a C loop. Anything else in the
        # list (a string, None, a list) raises: the long way, a float at a time.
        with contextlib.suppress(TypeError, OverflowError):  # a huge int: no float
            if math.isfinite(sum(record)):
                return list(record)
        return [
            (v if math.isfinite(v) else None) if isinstance(v, float)
            else finite(v) if isinstance(v, dict | list) else v
            for v in record
        ]  # fmt: skip
    if isinstance(record, float) and not math.isfinite(record):
        return None
    return record


#: Positions of each head's kernel and offset profile in a heads record (`posviz heads
#: --positions`); the numbers are computed over all positions whatever it is.
HEADS_POSITIONS = 64
#: What `positions` may be (a record's kernels are positions² numbers per head, as JSON: their
#: memory is checked against the budget too).
SHOWN_POSITIONS = Bound(1, MAX_POSITIONS)
#: Memory of one number in a record's lists (a Python float and its list slot).
_NUMBER_BYTES = 32
#: A layer's kind as a heads record names its scheme.
_SCHEMES = {"learned": "learned_absolute", "rotary": "rotary", "alibi": "alibi",
            "relative_bias": "relative_bias"}  # fmt: skip


def check_shown_kernels(n_heads: int, positions: int) -> None:
    """Refuse a heads record whose kernels over `positions` positions would pass the budget
    of a result as JSON's lists (before the heads are computed, by `posviz heads`)."""
    check_budget(
        _NUMBER_BYTES * n_heads * positions * (positions + 2),
        f"The kernels of {n_heads:,} heads over {positions:,} positions, as JSON (positions)",
    )


@bounded(positions=SHOWN_POSITIONS)
def heads_record(
    layer: AttentionLayer, result: PatternHeads | RotaryHeads, *, positions: int = HEADS_POSITIONS
) -> dict[str, Any]:
    """One layer's per-head numbers as one JSON-ready record (`posviz heads --json`): the
    export header (`posviz.export.header`: the step that made `result`, its params, the
    layer's provenance with every tensor's sha256), the layer's shape, one object per query
    head, and the null.

    Per head: ``head``, ``kv_head``, ``label`` (null where the null explains it), the numbers
    by name; rotary: ``usage`` (u_h(k), k = 0 the fastest pair, not normalised),
    ``usage_share`` and ``usage_folded``; learned, ALiBi and T5: ``kernel`` (the first
    `positions` rows and columns) and ``offset_profile`` (m_h(Δ), Δ = 0 … positions − 1 back
    from the query; ``offset_profile_ahead`` Δ = −1 … −(positions − 1) where keys ahead count).
    ``quantization`` names a GGUF's quantized q/k type (None: floats, read as stored).
    ``positions_printed`` is the rows the kernels and profiles hold (`positions`, at most
    ``positions_analysed``, the positions every number was computed over); a rotary layer,
    which prints no kernel, has neither.
    """
    plan = layer.plan
    record: dict[str, Any] = {
        **header(result, layer.provenance()),
        "scheme": _SCHEMES[plan.kind],
        "family": plan.family,
        "layer": plan.layer,
        "n_heads": plan.n_heads,
        "n_kv_heads": plan.n_kv_heads,
        "head_dim": plan.head_dim,
        "quantization": plan.quantization,
        "bytes_fetched": layer.bytes_fetched,
        "positions_printed": positions,
        "notes": list(plan.notes),
    }
    numbers = ROTARY_NUMBERS if plan.kind == "rotary" else PATTERN_NUMBERS
    record["definitions"] = dict(numbers)
    heads = []
    for h in range(plan.n_heads):
        head: dict[str, Any] = {
            "head": h,
            "kv_head": int(result.kv_head[h]),
            "label": result.labels[h],
        }
        head |= {name: float(values[h]) for name, values in result.numbers.items()}
        heads.append(head)
    if isinstance(result, RotaryHeads):
        f = result.frequencies
        rotary = given(plan.rotary, "the layer's rotary rule")
        record |= {
            "rotary_dim": rotary.rotary_dim,
            "rope_type": rotary.rope_type,
            "context": f.context,
            "inv_freq": f.inv_freq.tolist(),
            "wavelengths": f.wavelengths.tolist(),
            "bands": f.band.tolist(),
        }
        del record["positions_printed"]  # its usage is per pair, not per position
        for h, head in enumerate(heads):
            head["usage"] = result.usage[h].tolist()
            head["usage_share"] = result.usage_share[h].tolist()
            head["usage_folded"] = result.usage_folded[h].tolist()
    else:
        stop = min(positions, result.n_positions)
        check_shown_kernels(plan.n_heads, stop)
        record["positions_printed"] = stop  # a table shorter than `positions` prints all
        record["positions_analysed"] = result.n_positions
        record["causal"] = result.causal
        zero = result.n_positions - 1  # the profile's index of Δ = 0
        for h, head in enumerate(heads):
            head["kernel"] = result.kernel(h, stop).tolist()
            head["offset_profile"] = result.offset_profile[h, zero : zero + stop].tolist()
            if not result.causal:
                ahead = result.offset_profile[h, zero - stop + 1 : zero][::-1]
                head["offset_profile_ahead"] = ahead.tolist()
    record["heads"] = heads
    record["null"] = {
        "draws": result.params.get("n_draws", 0) if result.null else 0,
        "seed": result.params.get("seed"),
        "method": "the same numbers with the layer's query rows, and independently its key "
        "rows, permuted across heads" + ("" if plan.kind == "rotary" else
        " (learned kernels: over 64 evenly spaced queries; T5: each offset's bias permuted "
        "across heads)"),
        "spread": result.spread(),
        "values": {name: values.tolist() for name, values in result.null.items()},
    }  # fmt: skip
    record["labels"] = {
        label: {"number": name, "at_least": threshold, "and": "above every null draw"}
        for label, (name, threshold) in LABELS.items()
        if name in result.numbers
    }
    return finite(record)


def __getattr__(name: str) -> object:
    return _moved.attribute(__name__, name)  # reading a config moved to posviz.models.weights
