"""Models read as their config.json (or a GGUF file's metadata) says, and the one loader of
position tables: :func:`load` opens any `posviz.source.Source`.

`posviz.io` reads formats (bytes to named tensors) and `posviz.hub` moves bytes; here a file
is read as the model it belongs to: a safetensors checkpoint with its config.json beside it,
or a GGUF file, by :mod:`posviz.models.weights`; a model on the Hub by
:mod:`posviz.models.remote`; one attention layer's queries and keys by
:mod:`posviz.models.attention`; the sources `posviz diff` compares by
:mod:`posviz.models.sources`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path, PurePosixPath

import numpy as np

from posviz import io, simulate
from posviz.embedding import Embedding
from posviz.hub import Progress
from posviz.io import datadir
from posviz.models import remote, weights
from posviz.schemes.config import NAMES, position_scheme
from posviz.schemes.presets import PRESETS, preset_rotary_table, unknown
from posviz.source import (
    NO_CUT,
    Cut,
    HubRef,
    LoadError,
    LocalPath,
    Preset,
    SharedFile,
    Shipped,
    Simulation,
    Source,
    Upload,
    as_source,
)

__all__ = ["load", "model_of", "recut"]


def load(
    source: Source | str | os.PathLike[str],
    cut: Cut = NO_CUT,
    *,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> Embedding:
    """The table `source` names (`posviz.load`'s one implementation), read as its model says.

    A file by its format (:func:`posviz.io.load`); a safetensors checkpoint with its
    config.json beside it (a model folder as ``save_pretrained`` leaves it: its
    model.safetensors or shard index) as that config says (DeBERTa's relative table by
    default; a rotary model without a learned table refused with its scheme in words); a GGUF
    file as its metadata says; a file of the shared folder the same way; a model on the Hub
    by range reads (`max_bytes` and `progress` as :func:`posviz.hub.read_tensor`); a
    simulation made again; a known model's rotary table. `cut` picks the tensor and rows.

    The table keeps its source as `origin` (a Hub model at the commit read; an upload by its
    name, without its bytes).

    Raises
    ------
    LoadError
        If the source is refused, no tensor can be chosen (the candidates are listed, or the
        scheme named), or the rows do not fit.
    """
    source = as_source(source)
    if isinstance(source, HubRef):
        model = remote.open_model(source)
        return remote.load_model(model, cut, progress=progress, max_bytes=max_bytes)
    if isinstance(source, LocalPath):
        table = _file(Path(source.path), None, cut)
    elif isinstance(source, SharedFile):
        table = _shared(source.relative, cut)
    elif isinstance(source, Shipped):
        table = _file(*weights.shipped(source), cut)
    elif isinstance(source, Upload):
        table = _upload(source, cut)
        source = Upload(source.name)  # the table keeps the upload's name, not its bytes
    elif isinstance(source, Simulation):
        table = recut(_simulation(source), cut)
    elif isinstance(source, Preset):
        table = recut(_preset(source.name), cut)
    else:
        raise TypeError(source)
    return replace(table, origin=source)


def model_of(table: Embedding) -> weights.Readable | None:
    """The model whose weights `table` was read from (its `origin`), opened for a layer's
    heads and named as the table names its source: a Hub model at the commit read, a model
    shipped with posviz, or a
    safetensors checkpoint with its config.json beside it (a shard's: through the index
    beside it; a shared folder's: its config.json inside the folder). None when the table was
    not read from a model's safetensors weights (an array file, a GGUF file, an upload, a
    simulation, a table made on a page).

    Raises
    ------
    LoadError
        When the model cannot be opened (its config.json changed since, the Hub is not reached).
    """
    origin = table.origin
    if isinstance(origin, HubRef):
        return remote.open_config(origin)
    if isinstance(origin, Shipped):
        found, label = weights.shipped(origin)
        return weights.open_checkpoint(found, label=label)
    if isinstance(origin, SharedFile):
        root = weights.shared_root()
        path = datadir.resolve(root, origin.relative)
        return weights.folder_checkpoint(root, path, origin.relative)
    if not isinstance(origin, LocalPath):
        return None
    path = Path(origin.path)
    found = weights.weights_in(path) if path.is_dir() else path
    if not (found.suffix == ".safetensors" or found.name.endswith(io.INDEX_SUFFIX)):
        return None
    if weights.config_beside(found) is None:
        return None
    label = str(PurePosixPath(table.source).parent / found.name)  # as the table is named
    return _sharded(found, label) or weights.open_checkpoint(found, label=label)


def _file(path: Path, label: str | None, cut: Cut) -> Embedding:
    """A file (or model folder) on disk, named `label` (default: its weights' file name)."""
    if path.is_dir():
        path = weights.weights_in(path)
    if path.name.lower().endswith(".gguf"):
        return weights.load_gguf(weights.open_gguf(path, label=label), cut)
    if weights.config_beside(path):
        return weights.load_checkpoint(weights.open_checkpoint(path, label=label), cut)
    return io.load(path, label, cut)


def _shared(relative: str, cut: Cut) -> Embedding:
    """A file of the shared folder: only a path inside it is read, named as the folder lists
    it; a checkpoint's config.json is read when it is inside the folder too."""
    root = weights.shared_root()
    path = datadir.resolve(root, relative)
    checkpoint = weights.folder_checkpoint(root, path, relative)
    if checkpoint is not None:
        return weights.load_checkpoint(checkpoint, cut)
    if relative.lower().endswith(".gguf"):
        return _gguf(path, relative, cut)
    return io.load(path, relative, cut)


def _upload(upload: Upload, cut: Cut) -> Embedding:
    if upload.data is None:
        msg = f"{upload.name}: the upload's bytes are gone; upload the file again."
        raise LoadError(msg)
    if upload.name.lower().endswith(".gguf"):
        return _gguf(upload.data, upload.name, cut)
    return io.load(upload.data, upload.name, cut)


def _gguf(file: io.Input, label: str, cut: Cut) -> Embedding:
    """A GGUF file the app reads (uploaded, shared): a tensor picked by name is read as any
    file's, its metadata read once, when the page said what it names (a learned table or
    not); with none named, as its metadata says."""
    if cut.tensor is not None:
        return io.load(file, label, cut)
    return weights.load_gguf(weights.open_gguf(file, label=label), cut)


def _simulation(source: Simulation) -> Embedding:
    """The simulation made again, each argument within its bounds."""
    if source.generator not in {g.__name__ for g in simulate.GENERATORS.values()}:
        names = ", ".join(g.__name__ for g in simulate.GENERATORS.values())
        msg = f"{source}: posviz simulates {names}, not {source.generator!r}."
        raise LoadError(msg)
    return simulate.remade({"generator": source.generator, "params": source.options})


def _preset(name: str) -> Embedding:
    """A known model's rotary table at its context (`posviz.schemes.presets`)."""
    if name not in PRESETS:
        raise unknown(name)
    scheme = position_scheme(PRESETS[name])
    if scheme.kind != "rotary":
        msg = (
            f"{name} uses {NAMES[scheme.kind]}, not a table posviz makes: `posviz summary "
            f"preset:{name}` analyses its scheme."
        )
        raise LoadError(msg)
    return preset_rotary_table(name)


def recut(table: Embedding, cut: Cut = NO_CUT) -> Embedding:
    """A made table (a simulation, a known model's) with `cut`'s rows and grid, its origin
    kept; as made when `cut` names none."""
    if cut == NO_CUT:
        return table
    if cut.tensor not in (None, table.name):
        msg = f"{table.source} holds one table, {table.name!r}, not {cut.tensor!r}."
        raise LoadError(msg)
    made = Embedding.from_array(
        np.concatenate([table.prefix, table.values]),
        name=table.name,
        source=table.source,
        dtype=table.dtype,
        row_start=cut.row_start,
        row_stop=cut.row_stop,
        grid=cut.grid,
        first_position=table.first_position,
    )
    return replace(made, origin=table.origin)


def _sharded(path: Path, label: str) -> weights.LocalCheckpoint | None:
    """The sharded checkpoint whose index beside shard `path` lists it, if any."""
    index = path.parent / f"model{io.INDEX_SUFFIX}"
    if path.name == "model.safetensors" or path == index or not index.is_file():
        return None
    sharded = weights.open_checkpoint(index, label=str(PurePosixPath(label).parent / index.name))
    return sharded if path.name in {Path(s).name for s in sharded.shards} else None
