"""A model on the Hub read as its config.json (or a GGUF file's metadata) says: which position
scheme it names, whether it has a learned table, and the table read.

`posviz.hub` lists a model's files and reads their bytes; here a GGUF file's metadata becomes
the config.json keys it stands for (:func:`posviz.schemes.gguf.gguf_config`, its rope factors
read by range requests), DeBERTa's relative table is read with its rows as relative positions,
and a model whose config names another scheme and holds no learned table says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from posviz import hub, io
from posviz.embedding import Embedding
from posviz.hub import ConfigFile, HubModel, Progress
from posviz.io import POSITION_NAMES
from posviz.schemes.config import NAMES, scheme_kind
from posviz.schemes.gguf import ROPE_TENSORS, GGUFConfig, gguf_config
from posviz.schemes.relative import labelled, relative_table_name
from posviz.source import NO_CUT, Cut, HubRef, LoadError

__all__ = [
    "load_model",
    "no_table_reason",
    "open_config",
    "open_model",
    "open_model_at",
    "why_no_table",
]


def open_model(ref: HubRef) -> HubModel:
    """The model `ref` names, its headers listed (:func:`posviz.hub.list_model`) and its config
    read: config.json, or a GGUF file's metadata as the config.json keys it stands for."""
    model = hub.list_model(ref)
    return model.configured(_gguf_config(model).config) if model.file else model


def open_model_at(opened: ConfigFile) -> HubModel:
    """The headers of the model whose config `opened` holds, at its commit, with that config
    (no second request for the revision or config.json)."""
    model = hub.list_model_at(opened)
    return model.configured(opened.config) if opened.gguf else model


def open_config(ref: HubRef) -> ConfigFile:
    """The config.json of the model `ref` names, read alone (:func:`posviz.hub.config_file`):
    all a rotary or ALiBi scheme needs; a repo of GGUF files without config.json, or `ref`
    naming one of them: that file's header and rope factors, read as config.json
    (:func:`posviz.schemes.gguf.gguf_config`), with the keys read.

    Raises
    ------
    LoadError
        As :func:`posviz.hub.config_file`, or when a GGUF's position metadata is unreadable.
    """
    opened = hub.config_file(ref)
    if not opened.gguf:
        return opened
    model = hub.list_model(ref)
    translated = _gguf_config(model)
    ((_, head),) = model.heads.values()
    return replace(
        opened,
        config=translated.config,
        nbytes=len(head),
        sha256=translated.sha256,
        keys=translated.keys,
    )


def load_model(
    model: HubModel,
    cut: Cut = NO_CUT,
    *,
    progress: Progress | None = None,
    max_bytes: int | None = None,
) -> Embedding:
    """A table of an opened model (:func:`open_model`), as `posviz.load` reads a file: by
    default DeBERTa's relative table (its rows relative positions) or the tensor
    :func:`posviz.io.detect_position_tensor` picks; only its bytes travel, under `progress`
    and refused above `max_bytes` (:func:`posviz.hub.read_tensor`). The table's origin is the
    model at the commit read.

    Raises
    ------
    LoadError
        When no tensor is clearly the position table (the candidates are listed, or the
        config's rotary/ALiBi/relative scheme is named), or as :func:`posviz.hub.read_tensor`.
    """
    name = cut.tensor if cut.tensor is not None else _choose(model)
    array = hub.read_tensor(model, name, progress=progress, max_bytes=max_bytes)
    table = io.table_from(
        array,
        name=name,
        source=model.source(name),
        dtype=model.entry(name)["dtype"],
        cut=cut,
    )
    table = labelled(table, model.config)  # DeBERTa's rel_embeddings: relative positions
    return replace(table, origin=model.ref.at(model.commit))


def why_no_table(model: HubModel) -> str | None:
    """:func:`no_table_reason` of a listed model (its config.json, or its GGUF metadata)."""
    where = "GGUF metadata" if model.file else "config.json"
    return no_table_reason(model.label, model.config, model.tensors, where=where)


def no_table_reason(
    label: str, config: dict, tensors: Iterable[str], *, where: str = "config.json"
) -> str | None:
    """Why model `label` has no learned absolute position table, when its `config` (read from
    `where`: config.json, or a GGUF's metadata) says so and none of its `tensors` is named like
    one.

    >>> no_table_reason("m", {"model_type": "llama", "rope_theta": 5e5}, ["lm_head.weight"])[:88]
    'm has no learned absolute position table: its config.json says it uses rotary embeddings'
    >>> no_table_reason("m", {"model_type": "gpt2", "n_positions": 1024}, []) is None
    True
    """
    if any(_position_named(name) for name in tensors):
        return None
    kind, reason = scheme_kind(config)
    if kind == "learned_absolute":
        return None
    return (
        f"{label} has no learned absolute position table: its {where} says it "
        f"uses {NAMES[kind]} ({reason}). `posviz summary {label}` and the Schemes page analyse "
        "that scheme; pick any 2-D tensor by name if you want to look at it as a table anyway."
    )


def _choose(model: HubModel) -> str:
    """The tensor a table is read from when none is named, or the reason there is none."""
    if name := relative_table_name(model.config, model.tensors):  # DeBERTa's relative table
        return name
    if reason := why_no_table(model):
        raise LoadError(reason)
    infos = [info for info in model.infos if info.name not in ROPE_TENSORS]
    return io.choose_tensor(infos, model.label)


def _gguf_config(model: HubModel) -> GGUFConfig:
    """A Hub GGUF file's metadata as config.json keys; its rope factors (a few hundred bytes
    each) read by range requests, kept in the disk cache."""
    ((_, head),) = model.heads.values()
    return gguf_config(model.gguf_header, lambda name: hub.read_tensor(model, name), head=head)


def _position_named(name: str) -> bool:
    return bool(POSITION_NAMES.intersection(re.split(r"[./:]", name)))
