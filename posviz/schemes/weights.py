"""The tensors a position scheme needs from a model's weights: T5's bias tensors, DeBERTa's
relative table, a stored rotary ``inv_freq`` buffer (headers first, then only those bytes).

One code path for both places weights are: a model on the Hub, read by range requests at the
commit its config.json was read at (:class:`posviz.hub.ConfigFile`), and a safetensors
checkpoint on disk with the config.json beside it (:class:`LocalCheckpoint`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np

from posviz import hub, io
from posviz.embedding import Embedding, LoadError
from posviz.hub.config import no_table_reason
from posviz.schemes.config import (
    RelativeBiasSpec,
    parse_config,
    position_scheme,
    read_config_file,
)
from posviz.schemes.relative import (
    MAX_BIAS_TENSORS,
    REL_EMBEDDINGS,
    check_bias_shape,
    labelled,
    relative_table,
    relative_table_name,
)

__all__ = [
    "LocalCheckpoint",
    "Model",
    "bias_tensors",
    "config_beside",
    "load_checkpoint",
    "open_checkpoint",
    "relative_embeddings",
    "stored_inv_freq",
]


@dataclass(frozen=True)
class LocalCheckpoint:
    """A safetensors checkpoint on disk read with the config.json beside it.

    Attributes
    ----------
    path : str
        The weights file, as given (a provenance names it so `posviz rerun` finds it again).
    config : dict
        Its config.json, parsed and checked (:func:`posviz.schemes.config.parse_config`).
    label : str
        How tables read from it name their source (the file's name, or its path in the
        shared folder).
    sha256 : str
        Of config.json's bytes.
    """

    path: str
    config: dict
    label: str
    sha256: str

    @property
    def source(self) -> str:
        """Where the scheme was read: the config.json beside the weights (named by `label`)."""
        return str(PurePosixPath(self.label).parent / "config.json")

    @cached_property
    def tensors(self) -> list[str]:
        """The names of the tensors the file holds (its header only)."""
        return [info.name for info in io.list_tensors(self.path, self.label)]

    def read(self, name: str) -> np.ndarray:
        """Tensor `name`: only its bytes are read, after its size was checked."""
        return io.read_tensor(self.path, name, self.label)

    def source_of(self, name: str) -> str:
        return self.label


#: Where a scheme's tensors are: a Hub model's config.json (its commit), or a local checkpoint.
Model = hub.ConfigFile | LocalCheckpoint


def config_beside(path: str | Path) -> Path | None:
    """The config.json in the folder of safetensors file `path`, if there is one: a checkpoint
    saved by transformers' ``save_pretrained`` keeps it there."""
    path = Path(path)
    config = path.parent / "config.json"
    return config if path.suffix.lower() == ".safetensors" and config.is_file() else None


def open_checkpoint(
    path: str | Path, *, config: Path | None = None, label: str | None = None
) -> LocalCheckpoint:
    """The safetensors checkpoint `path` with the config.json beside it, or `config` (config.json
    only is read: the weights' header when a scheme asks for a tensor).

    `label` names the checkpoint in its tables and in every message (default: the file's
    name); its config.json is named as the file beside it.

    Raises
    ------
    LoadError
        If there is no config.json beside it, or it is too big, too deep or not a JSON object.
    """
    label = label or Path(path).name
    config = config or config_beside(path)
    if config is None:
        msg = f"{label} has no config.json beside it: a model's position scheme is read there."
        raise LoadError(msg)
    # Messages name the files by the label (a path as given, or as the shared folder lists
    # it): never by the server's own path.
    named = str(PurePosixPath(label).parent / "config.json")
    data = read_config_file(config, what=named)
    parsed = parse_config(data, what=named)
    sha256 = hashlib.sha256(data).hexdigest()
    return LocalCheckpoint(str(path), parsed, label, sha256)


def load_checkpoint(
    checkpoint: LocalCheckpoint,
    *,
    tensor: str | None = None,
    row_start: int = 0,
    row_stop: int | None = None,
    grid: tuple[int, int] | None = None,
) -> Embedding:
    """A table of a local checkpoint, as :func:`posviz.io.load` reads a file, read as its
    config.json says: DeBERTa's ``rel_embeddings`` (the table by default when the config names
    relative attention) with its rows as relative positions; a model whose config names
    another scheme and holds no learned table is refused with the scheme in words.

    Raises
    ------
    LoadError
        As :func:`posviz.io.load`; with no tensor named, a config.json with a bad value, or no
        learned table (the scheme is named, and where it is analysed). A tensor named is read
        whatever the config's scheme (only its relative rows are labelled).
    """
    if tensor is None:  # the config.json says which table: its values are checked first
        position_scheme(checkpoint.config)
        tensor = relative_table_name(checkpoint.config, checkpoint.tensors)
        if tensor is None and (
            reason := no_table_reason(checkpoint.label, checkpoint.config, checkpoint.tensors)
        ):
            raise LoadError(reason)
    table = io.load(
        checkpoint.path,
        checkpoint.label,
        tensor=tensor,
        row_start=row_start,
        row_stop=row_stop,
        grid=grid,
    )
    return labelled(table, checkpoint.config)


class _Weights(Protocol):
    label: str
    tensors: list[str]

    def read(self, name: str) -> np.ndarray: ...

    def source_of(self, name: str) -> str: ...


@dataclass(frozen=True)
class _HubWeights:
    """A Hub model's headers, read through the same four names as a local checkpoint's."""

    model: hub.HubModel

    @property
    def label(self) -> str:
        return self.model.label

    @property
    def tensors(self) -> list[str]:
        return list(self.model.tensors)

    def read(self, name: str) -> np.ndarray:
        return hub.read_tensor(self.model, name)

    def source_of(self, name: str) -> str:
        return self.model.source(name)


def _weights(model: Model) -> _Weights:
    if isinstance(model, LocalCheckpoint):
        return model
    return _HubWeights(hub.open_model_at(model))


def bias_tensors(model: Model, spec: RelativeBiasSpec) -> dict[str, np.ndarray]:
    """T5's ``relative_attention_bias`` tensors [num_buckets, n_heads], by name (block 0 of
    each stack; UMT5: every layer), each checked against the `spec` config.json states.

    Raises
    ------
    LoadError
        If no tensor holds them, more than `MAX_BIAS_TENSORS` do (counted from the headers,
        before any is read), or one's shape is not the config's (num_buckets, n_heads).
    """
    weights = _weights(model)
    names = sorted(n for n in weights.tensors if n.endswith("relative_attention_bias.weight"))
    if not names:
        msg = f"{weights.label}: config.json names T5 relative buckets but no tensor holds them."
        raise LoadError(msg)
    if len(names) > MAX_BIAS_TENSORS:
        msg = (
            f"{weights.label} holds {len(names):,} relative_attention_bias tensors; posviz reads "
            f"at most {MAX_BIAS_TENSORS} (UMT5 keeps one per layer and stack)."
        )
        raise LoadError(msg)
    tensors = {}
    for name in names:
        tensors[name] = weights.read(name)
        check_bias_shape(tensors[name].shape, spec)
    return tensors


def relative_embeddings(model: Model) -> tuple[Embedding, list[int]]:
    """DeBERTa's ``rel_embeddings`` as a table, its rows labelled by the offsets config.json's
    settings give them, and the buckets of its first and last rows (see
    :func:`posviz.schemes.relative.relative_table`)."""
    weights = _weights(model)
    names = [n for n in weights.tensors if n.endswith(REL_EMBEDDINGS)]
    if not names:
        msg = f"{weights.label}: config.json names relative attention but no rel_embeddings."
        raise LoadError(msg)
    spec = position_scheme(model.config).relative_table
    array = weights.read(names[0])
    return relative_table(array, name=names[0], source=weights.source_of(names[0]), spec=spec)


def stored_inv_freq(model: Model) -> tuple[str, np.ndarray] | None:
    """The first ``rotary_emb.inv_freq`` buffer the checkpoint stores (name, values), or None
    (the usual case: it is a non-persistent buffer)."""
    weights = _weights(model)
    names = [n for n in weights.tensors if n.endswith("inv_freq")]
    if not names:
        return None
    return names[0], weights.read(names[0])


def load(source: str | os.PathLike, **options: Any) -> Embedding:
    """The table `source` names (`posviz.load`'s one implementation): ``hf:REPO[@REV]`` from the
    Hub, a .safetensors checkpoint with its config.json beside it as that config says, any
    other file by `posviz.io`. `options` are `posviz.load`'s (tensor, rows, grid)."""
    if isinstance(source, str) and hub.is_hub_ref(source):
        return hub.load(source, **options)
    if str(source).lower().endswith(".safetensors") and config_beside(source):
        return load_checkpoint(open_checkpoint(source), **options)
    return io.load(source, **options)
