"""The tensors a position scheme needs from a model on the Hub, read by range requests at the
commit its config.json was read at: T5's bias tensors, DeBERTa's relative table, a stored
rotary ``inv_freq`` buffer (headers first, then only those bytes)."""

from __future__ import annotations

import numpy as np

from posviz import hub
from posviz.embedding import Embedding, LoadError
from posviz.relative import relative_table

__all__ = ["bias_tensors", "relative_embeddings", "stored_inv_freq"]


def bias_tensors(opened: hub.ConfigFile) -> dict[str, np.ndarray]:
    """T5's ``relative_attention_bias`` tensors [num_buckets, n_heads], by name (block 0 of
    each stack; UMT5: every layer)."""
    model = hub.open_model_at(opened)
    names = sorted(n for n in model.tensors if n.endswith("relative_attention_bias.weight"))
    if not names:
        msg = f"{model.label}: config.json names T5 relative buckets but no tensor holds them."
        raise LoadError(msg)
    return {name: hub.read_tensor(model, name) for name in names}


def relative_embeddings(opened: hub.ConfigFile) -> tuple[Embedding, list[int]]:
    """DeBERTa's ``rel_embeddings`` as a table, and the relative positions of its first and
    last rows (see :func:`posviz.relative.relative_table`)."""
    model = hub.open_model_at(opened)
    names = [n for n in model.tensors if n.endswith("rel_embeddings.weight")]
    if not names:
        msg = f"{model.label}: config.json names relative attention but no rel_embeddings."
        raise LoadError(msg)
    array = hub.read_tensor(model, names[0])
    return relative_table(array, name=names[0], source=model.source(names[0]))


def stored_inv_freq(opened: hub.ConfigFile) -> tuple[str, np.ndarray] | None:
    """The first ``rotary_emb.inv_freq`` buffer the checkpoint stores (name, values), or None
    (the usual case: it is a non-persistent buffer)."""
    model = hub.open_model_at(opened)
    names = [n for n in model.tensors if n.endswith("inv_freq")]
    if not names:
        return None
    return names[0], hub.read_tensor(model, names[0])
