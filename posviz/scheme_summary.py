"""A position scheme's numbers as one JSON-ready record: what `posviz summary` prints for a
model whose positions are not a learned table (and `scheme` for every model)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posviz import __version__
from posviz.alibi import alibi_slopes
from posviz.embedding import Embedding
from posviz.export import header
from posviz.relative import t5_buckets
from posviz.rotary import (
    RotaryFrequencies,
    RotarySpec,
    inv_freq_difference,
    rotary_frequencies,
    rotary_table,
)
from posviz.scheme import KINDS, RelativeBiasSpec, Scheme
from posviz.spectrum import NO_VARIANCE, Spectrum, spectrum

__all__ = [
    "INV_FREQ_TOLERANCE",
    "N_SINGULAR_VALUES",
    "alibi_record",
    "finite",
    "is_decoder_bias",
    "other_layer_types",
    "relative_bias_record",
    "rotary_record",
    "scheme_head",
    "table_record",
]

#: Singular values printed and exported.
N_SINGULAR_VALUES = 10
#: Largest relative difference of a stored inv_freq buffer from config.json's that passes:
#: bfloat16 stores 8 significant bits (relative error up to 2**-8 = 0.0039).
INV_FREQ_TOLERANCE = 2**-8


def scheme_head(scheme: Scheme, *, source: str) -> dict[str, Any]:
    """The keys every record starts with: the scheme, in words, and its warnings."""
    record: dict[str, Any] = {"scheme": scheme.kind, "description": KINDS[scheme.kind]}
    record["reason"] = scheme.reason
    if scheme.warnings:
        record["warnings"] = list(scheme.warnings)
    record["provenance"] = {"source": source, "posviz_version": __version__}
    return record


def table_record(table: Embedding, result: Spectrum) -> dict[str, Any]:
    """A table's usual summary: the export header (analysis, params, provenance) and its
    spectrum's numbers (k50…k99, ranks, noise count, the first singular values). A scheme's
    table (rotary, sinusoidal, DeBERTa's) carries it under "table"."""
    numbers: dict[str, Any] = result.metrics()
    numbers["singular_values"] = result.singular_values[:N_SINGULAR_VALUES].tolist()
    record = {**header("spectrum", result.params, table), "numbers": numbers}
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
        "logit_multiplier": f.attention_factor**2,
        "base_applied": f.base_applied,
        "inv_freq": f.inv_freq.tolist(),
        "inv_freq_unscaled": f.inv_freq_unscaled.tolist(),
        "wavelengths": f.wavelengths.tolist(),
        "bands": f.band_counts(),
        "pairs_beyond_original_context": f.pairs_beyond_original_context,
        "stored_inv_freq": stored,
        "rows": table.shape[0],
    }
    record["params"] = {**f.params, "positions": table.shape[0]}
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


def alibi_record(n_heads: int, *, alibi_bias_max: float = 8.0) -> dict[str, Any]:
    """ALiBi's keys: heads and their slopes (reference recursion)."""
    slopes = alibi_slopes(n_heads, alibi_bias_max=alibi_bias_max)
    return {
        "n_heads": n_heads,
        "alibi_bias_max": alibi_bias_max,
        "slopes": slopes.tolist(),
        "params": {"alibi_bias_max": alibi_bias_max},
    }


def is_decoder_bias(name: str) -> bool:
    """Whether a T5 bias tensor belongs to the decoder (causal buckets)."""
    return name.startswith("decoder.") or ".decoder." in name


def relative_bias_record(spec: RelativeBiasSpec, weights: dict[str, np.ndarray]) -> dict[str, Any]:
    """T5's keys: buckets and bias per tensor (heads by relative positions -max ... max).

    Without tensors (a config.json alone) `buckets` is given for the encoder and decoder
    rules, and `bias` is empty.
    """
    positions = np.arange(-spec.max_distance, spec.max_distance + 1)

    def buckets(bidirectional: bool) -> list[int]:
        return t5_buckets(
            positions,
            bidirectional=bidirectional,
            num_buckets=spec.num_buckets,
            max_distance=spec.max_distance,
        ).tolist()

    if weights:
        per_tensor = {name: buckets(not is_decoder_bias(name)) for name in weights}
        bias = {
            name: np.asarray(w, dtype=np.float64)[per_tensor[name]].T.tolist()
            for name, w in weights.items()
        }
    else:
        per_tensor = {"encoder": buckets(True), "decoder": buckets(False)}
        bias = {}
    return {
        "num_buckets": spec.num_buckets,
        "max_distance": spec.max_distance,
        "n_heads": spec.n_heads,
        "per_layer": spec.per_layer,
        "tensors": list(weights),
        "relative_positions": positions.tolist(),
        "buckets": per_tensor,
        "bias": bias,
    }


def finite(record: Any) -> Any:
    """`record` with NaN/Inf floats as None (JSON has no NaN)."""
    if isinstance(record, dict):
        return {k: finite(v) for k, v in record.items()}
    if isinstance(record, list):
        return [finite(v) for v in record]
    if isinstance(record, float) and not math.isfinite(record):
        return None
    return record
