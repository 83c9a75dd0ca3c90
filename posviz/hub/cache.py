"""What posviz keeps of the Hub on disk: revisions, safetensors heads, tensor bytes, bounded."""

from __future__ import annotations

import base64
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

from posviz import _settings
from posviz._disk import Store
from posviz.embedding import LoadError
from posviz.hub.model import HubModel
from posviz.source import HubRef

#: Default of POSVIZ_HUB_CACHE_SIZE.
DEFAULT_CACHE_SIZE = "1GB"

#: Largest POSVIZ_HUB_CACHE_SIZE accepted: 1 PB, beyond any disk a server has.
MAX_CACHE_SIZE = 10**15

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def cache_dir() -> Path:
    """posviz's own folder for the Hub cache: POSVIZ_HUB_CACHE/posviz-hub (the setting may
    name a folder others use, such as /tmp), else posviz/hub under the user's cache directory.
    Only files posviz named there are counted and deleted."""
    return _settings.hub_cache_dir()


def cache_limit() -> int:
    """POSVIZ_HUB_CACHE_SIZE in bytes."""
    return parse_size(_settings.hub_cache_size(DEFAULT_CACHE_SIZE))


def parse_size(text: str) -> int:
    """Bytes in a size like ``1GB``, ``250MB``, ``64kB`` or ``0`` (decimal units).

    >>> parse_size("250MB"), parse_size("1.5GB"), parse_size("0")
    (250000000, 1500000000, 0)
    """
    text = text.strip().upper()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?B?)", text)
    if not match:
        msg = f"POSVIZ_HUB_CACHE_SIZE={text!r} is not a size like 500MB or 1GB."
        raise LoadError(msg)
    # Exact: float() of 400 digits is infinity, and int(infinity) an OverflowError.
    size = Fraction(match[1]) * _UNITS[match[2] if match[2] in _UNITS else match[2] + "B"]
    if size > MAX_CACHE_SIZE:
        msg = (
            f"POSVIZ_HUB_CACHE_SIZE is above the largest size accepted, "
            f"{MAX_CACHE_SIZE // 10**15} PB; give one the disk can hold, like 10GB."
        )
        raise LoadError(msg)
    return int(size)


def _gguf_key(file: str | None) -> tuple[str, ...]:
    """The extra part of a heads entry's key: the GGUF file or quantization a reference names."""
    return (file,) if file else ()


#: The cache's subfolders.
_KINDS = ("refs", "heads", "tensors")


class _Cache:
    """Files under cache_dir(): refs/ (revision -> commit and file list), heads/ (per commit),
    tensors/ (raw bytes), kept by a :class:`posviz._disk.Store`: least recently used files go
    first once the total passes the limit; a broken or unwritable cache only costs network,
    never a wrong table."""

    def __init__(self) -> None:
        self.store = Store(cache_dir(), _KINDS, cache_limit())

    def ref(self, ref: HubRef) -> str | None:
        record = self._read_json("refs", ref.repo, ref.revision)
        return record.get("commit") if isinstance(record, dict) else None

    def put_ref(self, ref: HubRef, commit: str) -> None:
        self.store.write("refs", json.dumps({"commit": commit}).encode(), ref.repo, ref.revision)

    def model(self, ref: HubRef, commit: str) -> HubModel | None:
        record = self._read_json("heads", ref.repo, commit, *_gguf_key(ref.file))
        if not isinstance(record, dict):
            return None
        try:
            heads = {f: (size, base64.b64decode(h)) for f, (size, h) in record["heads"].items()}
            model = HubModel(
                ref.repo,
                ref.revision,
                commit,
                record["config"],
                heads,
                record["tensors"],
                record.get("file"),
            )
            model.infos  # noqa: B018 -- the cached heads pass posviz.io's checks again
        except (KeyError, TypeError, ValueError):  # LoadError included
            return None
        return model

    def put_model(self, model: HubModel, ref: HubRef | None = None) -> None:
        """Keep `model`'s heads, found again by `ref` (its repo, commit and the GGUF file or
        quantization it names: another name in the same repo may be another file)."""
        heads = {f: (size, base64.b64encode(h).decode()) for f, (size, h) in model.heads.items()}
        record: dict[str, Any] = {"config": model.config, "heads": heads, "tensors": model.tensors}
        record["file"] = model.file
        key = _gguf_key(ref.file if ref else None)
        self.store.write("heads", json.dumps(record).encode(), model.repo, model.commit, *key)

    def tensor(
        self, model: HubModel, name: str, span: tuple[int, int] | None = None
    ) -> bytearray | None:
        """Tensor `name`'s bytes, or only bytes `span` of its file (a slice of its rows)."""
        begin, end = span or model.span(name)
        data = self.store.read("tensors", *self._tensor_key(model, name, span), size=end - begin)
        return None if data is None else bytearray(data)

    def put_tensor(
        self, model: HubModel, name: str, buffer: bytearray, span: tuple[int, int] | None = None
    ) -> None:
        self.store.write("tensors", buffer, *self._tensor_key(model, name, span))

    @staticmethod
    def _tensor_key(model: HubModel, name: str, span: tuple[int, int] | None) -> tuple[str, ...]:
        key = (model.repo, model.commit, model.tensors[name], name)
        return key if span is None else (*key, f"bytes {span[0]}-{span[1]}")

    def _read_json(self, kind: str, *key: str) -> object:
        data = self.store.read(kind, *key)
        try:
            return None if data is None else json.loads(data)
        except ValueError:
            return None
