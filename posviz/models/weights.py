"""The tensors a position scheme needs from a model's weights: T5's bias tensors, DeBERTa's
relative table, a stored rotary ``inv_freq`` buffer (headers first, then only those bytes).

One code path for every place weights are: a model on the Hub, read by range requests at the
commit its config.json (or GGUF header) was read at (:class:`posviz.hub.ConfigFile`), a
safetensors checkpoint on disk with the config.json beside it (:class:`LocalCheckpoint`: one
file, or the shards a ``*.safetensors.index.json`` lists, as the Hub's sharded models are read),
and a GGUF file, whose metadata stands for its config.json (:class:`LocalGGUF`). Where such a
model's numbers came from is :func:`model_provenance`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np

from posviz import _settings, examples, hub, io
from posviz._json import max_depth
from posviz._version import __version__
from posviz.embedding import Embedding, LoadError
from posviz.hub.client import MAX_JSON_BYTES, MAX_JSON_DEPTH
from posviz.io import INDEX_SUFFIX
from posviz.io.config_json import parse_config, read_config_file
from posviz.models import remote
from posviz.models.remote import no_table_reason
from posviz.schemes._values import given
from posviz.schemes.config import (
    RelativeBiasSpec,
    position_scheme,
)
from posviz.schemes.gguf import ROPE_TENSORS, GGUFConfig, KeyRead, gguf_config, keys_record
from posviz.schemes.presets import PRESETS, unknown
from posviz.schemes.relative import (
    MAX_BIAS_TENSORS,
    REL_EMBEDDINGS,
    check_bias_shape,
    labelled,
    relative_table,
    relative_table_name,
)
from posviz.source import (
    NO_CUT,
    Cut,
    HubRef,
    LocalPath,
    Preset,
    Shipped,
    Source,
    Upload,
    as_source,
)

__all__ = [
    "LocalCheckpoint",
    "LocalGGUF",
    "Model",
    "bias_tensors",
    "checkpoint_provenance",
    "config_beside",
    "config_provenance",
    "folder_checkpoint",
    "gguf_provenance",
    "is_weights",
    "load_checkpoint",
    "load_gguf",
    "model_provenance",
    "open_checkpoint",
    "open_gguf",
    "read_config",
    "relative_embeddings",
    "shared_root",
    "shipped",
    "stored_inv_freq",
    "weights_in",
]


@dataclass(frozen=True)
class LocalCheckpoint:
    """A safetensors checkpoint on disk read with the config.json beside it.

    Attributes
    ----------
    path : str
        The weights file, as given (a provenance names it so `posviz rerun` finds it again):
        a .safetensors file, or a sharded checkpoint's index (``model.safetensors.index.json``).
    config : dict
        Its config.json, parsed and checked (:func:`posviz.io.config_json.parse_config`).
    label : str
        How tables read from it name their source (the file's name, or its path in the
        shared folder).
    sha256 : str
        Of config.json's bytes.
    shards : tuple of str
        A sharded checkpoint's files, as its index lists them (paths in the index's folder);
        empty for one file.
    """

    path: str
    config: dict
    label: str
    sha256: str
    shards: tuple[str, ...] = field(default=(), repr=False)

    @property
    def source(self) -> str:
        """Where the scheme was read: the config.json beside the weights (named by `label`)."""
        return str(PurePosixPath(self.label).parent / "config.json")

    @property
    def files(self) -> tuple[str, ...]:
        """The safetensors files that hold the weights: the shards, or `path`."""
        return self.shards or (self.path,)

    @cached_property
    def _headers(self) -> dict[str, tuple[io.TensorInfo, str]]:
        """Each tensor's header entry and file by name, from every file's header only (the
        first file wins a name two hold, as for a model on the Hub)."""
        found: dict[str, tuple[io.TensorInfo, str]] = {}
        for file in self.files:
            for info in io.list_tensors(file, self._label_of(file)):
                found.setdefault(info.name, (info, file))
        return found

    @property
    def infos(self) -> dict[str, io.TensorInfo]:
        """Each tensor's header entry (name, shape, dtype) by name."""
        return {name: info for name, (info, _) in self._headers.items()}

    @property
    def tensors(self) -> list[str]:
        """The names of the tensors the checkpoint holds (its headers only)."""
        return list(self._headers)

    def file_of(self, name: str) -> str:
        """The file that holds tensor `name` (a name no shard holds: the first shard, whose
        reader says which names it has)."""
        if not self.shards:
            return self.path
        found = self._headers.get(name)
        return self.shards[0] if found is None else found[1]

    def read(self, name: str) -> np.ndarray:
        """Tensor `name`: only its bytes are read, after its size was checked."""
        return io.read_tensor(self.file_of(name), name, self.source_of(name))

    def read_rows(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) of tensor `name` (its first axis): only their bytes are read."""
        return io.read_rows(self.file_of(name), name, start, stop)

    def source_of(self, name: str) -> str:
        """The file that holds tensor `name`, as the checkpoint's label names it."""
        return self._label_of(self.file_of(name))

    def _label_of(self, file: str) -> str:
        if not self.shards:
            return self.label
        return str(PurePosixPath(self.label).parent / Path(file).name)


@dataclass(frozen=True)
class LocalGGUF:
    """A GGUF file (on disk, or uploaded bytes) whose metadata stands for its config.json.

    Attributes
    ----------
    path : str or bytes
        The file, as given (a provenance names it so `posviz rerun` finds it again), or the
        uploaded bytes.
    config : dict
        The config.json keys its metadata stands for (:func:`posviz.schemes.gguf.gguf_config`).
    label : str
        How tables read from it name their source (the file's name, or its path in the shared
        folder).
    sha256 : str
        Of its header and the rope tensors read (what the scheme was read from).
    keys : tuple of KeyRead
        Every GGUF key and tensor read, and the config key each fed.
    """

    path: str | bytes
    config: dict
    label: str
    sha256: str
    keys: tuple[KeyRead, ...]
    tensors: tuple[str, ...]

    @property
    def source(self) -> str:
        """Where the scheme was read: the GGUF file itself."""
        return self.label

    def read(self, name: str) -> np.ndarray:
        """Tensor `name` (dequantized): only its bytes are read, after its size was checked."""
        return io.read_tensor(self.path, name, self.label)

    def source_of(self, name: str) -> str:
        return self.label


#: Where a scheme's tensors are: a Hub model's config.json or GGUF header (its commit), a local
#: checkpoint, or a GGUF file.
Model = hub.ConfigFile | LocalCheckpoint | LocalGGUF
#: A model whose weights are read (a layer's heads): a Hub model's config.json (or one GGUF
#: file of a Hub repo), a local checkpoint, a GGUF file.
Readable = hub.ConfigFile | LocalCheckpoint | LocalGGUF


def open_gguf(path: io.Input, *, label: str | None = None) -> LocalGGUF:
    """The GGUF file `path` (or uploaded bytes): its header, and the rope tensors it holds
    (a few hundred bytes), read into the config.json keys they stand for.

    Raises
    ------
    LoadError
        If the file is refused by posviz.io, or its position metadata is unreadable.
    """
    if label is None:
        label = "uploaded.gguf" if isinstance(path, bytes) else Path(path).name
    source = path if isinstance(path, bytes) else str(path)
    with io.opened(source, label) as (read, size, named):
        header, head = io.read_gguf_header(read, size, named)
        translated: GGUFConfig = gguf_config(
            header,
            lambda name: io.read_gguf_tensor(read, header, name, named),
            head=head,
        )
    return LocalGGUF(
        source, translated.config, label, translated.sha256, translated.keys, tuple(header.tensors)
    )


def load_gguf(model: LocalGGUF, cut: Cut = NO_CUT) -> Embedding:
    """A table of a GGUF file, as :func:`posviz.io.load` reads one; with no tensor named, a
    model whose metadata names another scheme and holds no learned table is refused with the
    scheme in words (a rotary model's rope tensors are factors, not a table)."""
    tensor = cut.tensor
    if tensor is None:
        position_scheme(model.config)  # the metadata's values are checked first
        reason = no_table_reason(model.label, model.config, model.tensors, where="GGUF metadata")
        if reason:
            raise LoadError(reason)
        candidates = [n for n in model.tensors if n not in ROPE_TENSORS]
        infos = [i for i in io.list_tensors(model.path, model.label) if i.name in candidates]
        tensor = io.choose_tensor(infos, model.label)
    return io.load(model.path, model.label, replace(cut, tensor=tensor))


def is_weights(path: str | Path) -> bool:
    """Whether `path` names a checkpoint's weights: a .safetensors file or a shard index."""
    name = str(path).lower()
    return name.endswith((".safetensors", INDEX_SUFFIX))


def config_beside(path: str | Path) -> Path | None:
    """The config.json in the folder of safetensors file (or shard index) `path`, if there is
    one: a checkpoint saved by transformers' ``save_pretrained`` keeps it there."""
    path = Path(path)
    config = path.parent / "config.json"
    return config if is_weights(path) and config.is_file() else None


def weights_in(folder: str | Path) -> Path:
    """The weights of a model folder as ``save_pretrained`` leaves it: its model.safetensors,
    else its shard index (model.safetensors.index.json when it holds several indexes), as a
    Hub model's are found.

    Raises
    ------
    LoadError
        If the folder holds neither.
    """
    folder = Path(folder)
    single = folder / "model.safetensors"
    if single.is_file():
        return single
    indexes = sorted(p for p in folder.glob(f"*{INDEX_SUFFIX}") if p.is_file())
    if len(indexes) > 1:
        indexes = [p for p in indexes if p.name == f"model{INDEX_SUFFIX}"]
    if len(indexes) != 1:
        msg = (
            f"{folder} holds no model.safetensors and no single shard index (*{INDEX_SUFFIX}): "
            "give the checkpoint's folder as save_pretrained leaves it, or its weights file."
        )
        raise LoadError(msg)
    return indexes[0]


def _shards(index: Path, label: str, within: Path | None) -> tuple[str, ...]:
    """The files shard index `index` lists, in its folder: its size and nesting checked before
    it is parsed, each name a plain file name ending .safetensors (no folder, no ``..``), at
    most `posviz.hub.MAX_SHARDS`, each a file (inside `within`, after its links, when given).
    Messages name it by `label` (never the server's own path)."""
    what = "a shard index"
    try:
        size = index.stat().st_size if index.is_file() else -1
        if not 0 <= size <= MAX_JSON_BYTES:
            msg = f"{label} is not a file of at most {MAX_JSON_BYTES // 2**20} MiB: {what}."
            raise LoadError(msg)
        with index.open("rb") as file:
            data = file.read(MAX_JSON_BYTES + 1)  # a file that grew: refused below
        if len(data) > MAX_JSON_BYTES:
            msg = f"{label} is not a file of at most {MAX_JSON_BYTES // 2**20} MiB: {what}."
            raise LoadError(msg)
    except OSError as exc:
        msg = f"Cannot read {label}: {exc.strerror or 'unreadable'}."
        raise LoadError(msg) from exc
    if max_depth(data) > MAX_JSON_DEPTH:
        msg = f"{label} nests deeper than {MAX_JSON_DEPTH} levels: it is no shard index."
        raise LoadError(msg)
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        msg = f"{label} is not JSON: a shard index maps each tensor to its file."
        raise LoadError(msg) from exc
    weight_map = parsed.get("weight_map") if isinstance(parsed, dict) else None
    names = list(weight_map.values()) if isinstance(weight_map, Mapping) else []
    files = sorted({n for n in names if isinstance(n, str)})
    plain = all(
        isinstance(n, str) and n == Path(n).name and n not in (".", "..") for n in names
    ) and all(n.lower().endswith(".safetensors") for n in files)
    if not files or not plain:
        msg = (
            f"{label} is not a shard index: its weight_map must name .safetensors files beside "
            "it (plain file names)."
        )
        raise LoadError(msg)
    if len(files) > hub.MAX_SHARDS:
        msg = f"{label} lists {len(files):,} shards, above the limit of {hub.MAX_SHARDS}."
        raise LoadError(msg)
    shards = tuple(str(index.parent / name) for name in files)
    for shard in shards:
        real = Path(shard).resolve()
        if not real.is_file() or (within is not None and not real.is_relative_to(within)):
            msg = (
                f"{label} lists {Path(shard).name}, which is not a file beside it"
                + (" inside the folder" if within is not None else "")
                + "."
            )
            raise LoadError(msg)
    return shards


def open_checkpoint(
    path: str | Path,
    *,
    config: Path | None = None,
    label: str | None = None,
    within: Path | None = None,
) -> LocalCheckpoint:
    """The safetensors checkpoint `path` (a .safetensors file, or a sharded checkpoint's
    index) with the config.json beside it, or `config` (config.json only is read, and a shard
    index: the weights' headers when a scheme asks for a tensor). `within`: a folder every
    shard must stay in after its links (the shared folder).

    `label` names the checkpoint in its tables and in every message (default: the file's
    name); its config.json and shards are named as the files beside it.

    Raises
    ------
    LoadError
        If there is no config.json beside it, or it is too big, too deep or not a JSON object;
        a shard index that is not one, or lists a file that is not beside it.
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
    sharded = str(path).lower().endswith(INDEX_SUFFIX)
    shards = _shards(Path(path), label, within) if sharded else ()
    return LocalCheckpoint(str(path), parsed, label, sha256, shards)


def shipped(source: Shipped) -> tuple[Path, str]:
    """A shipped model's weights (or the file it names), and their name in a provenance."""
    if "/" in source.name:
        return examples.path_of(str(source)), str(source)
    found = examples.EXAMPLES.get(source.name)
    if found is None:
        msg = f"{source} is not a model shipped with posviz ({', '.join(examples.EXAMPLES)})."
        raise LoadError(msg)
    return found.weights, found.label


def shared_root() -> Path:
    """The server's shared folder (``POSVIZ_DATA_DIR``); refused when it has none."""
    root = _settings.data_dir()
    if root is None:
        msg = "this server has no shared folder (POSVIZ_DATA_DIR)"
        raise LoadError(msg)
    return root


def folder_checkpoint(root: Path, path: Path, relative: str) -> LocalCheckpoint | None:
    """The shared folder's checkpoint `relative` (its checked real `path`: a .safetensors file
    or a shard index) with the config.json beside its name (a Hugging Face cache links both to
    blobs), when that config.json is inside the shared folder `root` too (a link out of it is
    not followed, nor a shard's); named `relative` (never the server's own path)."""
    config = config_beside(root / relative)
    if config is None or not config.resolve().is_relative_to(root.resolve()):
        return None
    return open_checkpoint(path, config=config.resolve(), label=relative, within=root.resolve())


def config_provenance(config: str, sha256: str, **where: Any) -> dict[str, Any]:
    """Where a scheme's numbers came from: the config.json `config` names (a path,
    ``hf:REPO@COMMIT`` or ``preset:NAME``), the sha256 of its bytes, and `where` in it (a
    layer type, a tensor, an attention layer and the tensors read)."""
    return {"config": config, "sha256": sha256, **where, "posviz_version": __version__}


def checkpoint_provenance(model: LocalCheckpoint, **where: Any) -> dict[str, Any]:
    """:func:`config_provenance` of a local checkpoint: its config.json, and the weights under
    "weights", both named by the checkpoint's label (a path, or its name in the shared
    folder: never the server's own path)."""
    return config_provenance(model.source, model.sha256, weights=model.label, **where)


def model_provenance(model: Readable, **where: Any) -> dict[str, Any]:
    """:func:`config_provenance` of a model whose weights were read: a Hub model at the commit
    its config.json (or GGUF header) was read at, a local checkpoint
    (:func:`checkpoint_provenance`), or a GGUF file (its header's sha256, and which GGUF key fed
    which config key)."""
    if isinstance(model, LocalCheckpoint):
        return checkpoint_provenance(model, **where)
    if isinstance(model, LocalGGUF):
        return gguf_provenance(model, **where)
    return config_provenance(model.at_commit, model.sha256, **where)


def gguf_provenance(model: LocalGGUF, **where: Any) -> dict[str, Any]:
    """:func:`config_provenance` of a GGUF file: the file (its label) stands for the
    config.json, the sha256 is of its header and rope tensors, and "gguf_keys" says which GGUF
    key fed which config key."""
    keys = keys_record(model.keys)
    return config_provenance(model.source, model.sha256, gguf_keys=keys, **where)


def read_config(
    source: Source | str, *, label: str | None = None
) -> tuple[dict, dict[str, Any], Model | None]:
    """The config.json `source` names (a path, ``hf:REPO[@REV]`` or ``preset:NAME``, or a
    safetensors checkpoint with its config.json beside it, or a .gguf file whose metadata
    stands for one; an upload's bytes), parsed; its :func:`config_provenance` (a Hub model at
    the commit read; a checkpoint's path under "weights"; a GGUF's keys under "gguf_keys");
    the model whose weights hold the scheme's tensors (Hub or local), if any.

    `label` names a local file in its provenance and messages instead of its path (a shared
    folder's file by its name there: the server's path is not the visitor's business), and a
    checkpoint's tables (default: the file's name).

    Raises
    ------
    LoadError
        If it cannot be read or parsed, is bigger than `MAX_CONFIG_BYTES`, or names no preset.
    """
    source = as_source(source)
    if isinstance(source, HubRef):
        opened = remote.open_config(source)
        where = {"gguf_keys": keys_record(opened.keys)} if opened.gguf else {}
        return opened.config, config_provenance(opened.at_commit, opened.sha256, **where), opened
    if isinstance(source, Preset):
        if source.name not in PRESETS:
            raise unknown(source.name)
        name = label or str(source)
        data: bytes | None = json.dumps(PRESETS[source.name]).encode()
    elif isinstance(source, Upload | LocalPath):
        file = source.name if isinstance(source, Upload) else source.path
        name, data = label or file, source.data if isinstance(source, Upload) else None
        if file.lower().endswith(".gguf") and (data is not None or isinstance(source, LocalPath)):
            gguf = open_gguf(file if data is None else data, label=name)  # stands for config.json
            return gguf.config, gguf_provenance(gguf), gguf
        if isinstance(source, LocalPath) and is_weights(source.path):  # a shard index too
            checkpoint = open_checkpoint(source.path, label=name)
            return checkpoint.config, checkpoint_provenance(checkpoint), checkpoint
        if isinstance(source, LocalPath):
            data = read_config_file(source.path, what=name)
    else:
        msg = f"{source} names no config.json: give a model's config.json, weights or hf: name."
        raise LoadError(msg)
    if data is None:
        msg = f"{name}: the upload's bytes are gone; upload the file again."
        raise LoadError(msg)
    sha256 = hashlib.sha256(data).hexdigest()
    return parse_config(data, what=name), config_provenance(name, sha256), None


def load_checkpoint(checkpoint: LocalCheckpoint, cut: Cut = NO_CUT) -> Embedding:
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
    tensor = cut.tensor
    if tensor is None:  # the config.json says which table: its values are checked first
        position_scheme(checkpoint.config)
        tensor = relative_table_name(checkpoint.config, checkpoint.tensors)
        if tensor is None and (
            reason := no_table_reason(checkpoint.label, checkpoint.config, checkpoint.tensors)
        ):
            raise LoadError(reason)
    if checkpoint.shards:  # the shard that holds the tensor, named as the checkpoint names it
        if tensor is None:
            tensor = io.choose_tensor(list(checkpoint.infos.values()), checkpoint.label)
        file, label = checkpoint.file_of(tensor), checkpoint.source_of(tensor)
    else:
        file, label = checkpoint.path, checkpoint.label
    table = io.load(file, label, replace(cut, tensor=tensor))
    return labelled(table, checkpoint.config)


class _Weights(Protocol):
    @property
    def label(self) -> str: ...

    @property
    def tensors(self) -> Sequence[str]: ...

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
    if isinstance(model, LocalCheckpoint | LocalGGUF):
        return model
    return _HubWeights(hub.list_model_at(model))


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
    spec = given(position_scheme(model.config).relative_table, "DeBERTa's relative table")
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
