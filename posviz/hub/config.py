"""Which position scheme a model's config.json names, when it has no learned position table."""

from __future__ import annotations

import re
from collections.abc import Iterable

from posviz.io import POSITION_NAMES


def no_table_reason(label: str, config: dict, tensors: Iterable[str]) -> str | None:
    """Why model `label` has no learned absolute position table, when its `config` says so and
    none of its `tensors` is named like one."""
    if any(_position_named(name) for name in tensors):
        return None
    scheme = position_scheme(config)
    if scheme is None:
        return None
    return (
        f"{label} has no learned absolute position table: its config.json says it "
        f"uses {scheme}. posviz analyses position tables; pick another model, or any 2-D "
        "tensor by name if you want to look at it anyway."
    )


def position_scheme(config: dict) -> str | None:
    """The position scheme config.json names when it is not a learned absolute table.

    >>> position_scheme({"model_type": "llama", "rope_theta": 500000.0})
    'rotary embeddings (rope_theta)'
    >>> position_scheme({"model_type": "gpt2", "n_positions": 1024}) is None
    True
    """
    kind = config.get("position_embedding_type")
    rotary = [
        k for k in ("rope_theta", "rotary_dim", "rotary_pct", "rotary_emb_base") if k in config
    ]
    if kind == "rotary" or rotary or config.get("rope_scaling"):
        return f"rotary embeddings ({(rotary or ['position_embedding_type: rotary'])[0]})"
    attn = config.get("attn_config")
    if config.get("alibi") is True or (isinstance(attn, dict) and attn.get("alibi") is True):
        return "ALiBi attention biases (alibi: true)"
    if config.get("model_type") == "bloom":
        return "ALiBi attention biases (model_type: bloom)"
    if "relative_attention_num_buckets" in config:
        return "relative position buckets (relative_attention_num_buckets)"
    if kind in ("relative_key", "relative_key_query"):
        return f"relative position embeddings (position_embedding_type: {kind})"
    if config.get("relative_attention") is True and config.get("position_biased_input") is False:
        return "relative attention (relative_attention: true, position_biased_input: false)"
    return None


def _position_named(name: str) -> bool:
    return bool(POSITION_NAMES.intersection(re.split(r"[./:]", name)))
