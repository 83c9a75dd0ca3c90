"""Which position scheme a model's config.json names, when it has no learned position table."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from posviz.io import POSITION_NAMES
from posviz.schemes import config as schemes


@dataclass(frozen=True)
class ConfigFile:
    """A model's config.json at one commit, read alone (see posviz.hub.open_config).

    Attributes
    ----------
    repo, revision, commit : str
    config : dict
        Parsed and checked by :func:`posviz.io.config_json.parse_config`.
    files : tuple of str
        The repo's files at `commit` (empty offline).
    nbytes : int
        Size of config.json (of a GGUF file's header).
    sha256 : str
        Of config.json's bytes ("" when read from the offline cache, which keeps no bytes); of
        a GGUF's header and rope tensors.
    file : str
        Where the config was read: ``config.json``, or the GGUF file whose metadata stands
        for it.
    keys : tuple
        A GGUF's keys read (:class:`posviz.schemes.gguf.KeyRead`), each with the config key
        it fed.
    """

    repo: str
    revision: str
    commit: str
    config: dict
    files: tuple[str, ...]
    nbytes: int
    sha256: str = ""
    file: str = "config.json"
    keys: tuple = ()

    @property
    def gguf(self) -> str | None:
        """The GGUF file this config was read from, if it was."""
        return self.file if self.file.lower().endswith(".gguf") else None

    @property
    def at_commit(self) -> str:
        """``hf:REPO@COMMIT`` (``:FILE`` for a GGUF): where this config is read again."""
        return f"hf:{self.repo}@{self.commit}" + (f":{self.gguf}" if self.gguf else "")

    @property
    def source(self) -> str:
        return f"hf:{self.repo}@{self.revision} · commit {self.commit} · {self.file}"

    @cached_property
    def scheme(self) -> schemes.Scheme:
        """The position scheme, checked (LoadError names a bad value)."""
        return schemes.position_scheme(self.config)


def no_table_reason(
    label: str, config: dict, tensors: Iterable[str], *, where: str = "config.json"
) -> str | None:
    """Why model `label` has no learned absolute position table, when its `config` (read from
    `where`: config.json, or a GGUF's metadata) says so and none of its `tensors` is named like
    one."""
    if any(_position_named(name) for name in tensors):
        return None
    scheme = position_scheme(config)
    if scheme is None:
        return None
    return (
        f"{label} has no learned absolute position table: its {where} says it "
        f"uses {scheme}. `posviz summary {label}` and the Schemes page analyse that scheme; "
        "pick any 2-D tensor by name if you want to look at it as a table anyway."
    )


def position_scheme(config: dict) -> str | None:
    """The position scheme config.json names when it is not a learned absolute table, in words.

    >>> position_scheme({"model_type": "llama", "rope_theta": 500000.0})
    'rotary embeddings (rope_theta)'
    >>> position_scheme({"model_type": "gpt2", "n_positions": 1024}) is None
    True
    """
    kind, reason = schemes.scheme_kind(config)
    return None if kind == "learned_absolute" else f"{schemes.NAMES[kind]} ({reason})"


def _position_named(name: str) -> bool:
    return bool(POSITION_NAMES.intersection(re.split(r"[./:]", name)))
