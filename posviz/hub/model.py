"""A model on the Hub as its files are: its headers listed at one commit, or its config.json.

What a config says of the model (its position scheme, whether it has a table; a GGUF's
metadata read as config.json) is `posviz.models.remote`'s: the Hub's code knows files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from posviz import _moved, io
from posviz.source import HubRef


@dataclass(frozen=True)
class ConfigFile:
    """A model's config.json at one commit, read alone (see posviz.models.remote.open_config).

    Attributes
    ----------
    repo, revision, commit : str
    config : dict
        Parsed and checked by :func:`posviz.io.config_json.parse_config`; a GGUF's metadata as
        config.json keys (`posviz.models.remote` reads them; empty until it has).
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
        return str(HubRef(self.repo, self.commit, self.gguf))

    @property
    def source(self) -> str:
        return f"{HubRef(self.repo, self.revision)} · commit {self.commit} · {self.file}"


@dataclass(frozen=True)
class HubModel:
    """What posviz knows of a model at one commit, from its headers and config.json only.

    Attributes
    ----------
    repo, revision : str
        As the user named them.
    commit : str
        The 40-hex commit sha the revision resolved to; every file was read at it.
    config : dict
        The model's config.json (empty if it has none); a GGUF's metadata as config.json keys
        once `posviz.models.remote` has read them (:meth:`configured`).
    heads : dict of str to (int, bytes)
        Per weights file: its size and its head (a safetensors file's 8-byte length and JSON
        header; a GGUF file's header, magic to the last tensor info).
    tensors : dict of str to str
        Tensor name -> the file holding it.
    file : str or None
        The GGUF file read, in a repo of GGUF files (its metadata is then `config`).
    """

    repo: str
    revision: str
    commit: str
    config: dict
    heads: dict[str, tuple[int, bytes]]
    tensors: dict[str, str]
    file: str | None = None

    @property
    def ref(self) -> HubRef:
        """The model as the user named it (its revision, the GGUF file read)."""
        return HubRef(self.repo, self.revision, self.file)

    @property
    def label(self) -> str:
        return str(self.ref)

    @property
    def infos(self) -> list[io.TensorInfo]:
        """The tensors, as :func:`posviz.io.list_tensors` lists a file's."""
        entries = {name: self.entry(name) for name in self.tensors}
        return [io.TensorInfo(k, tuple(e["shape"]), e["dtype"]) for k, e in entries.items()]

    def entry(self, name: str) -> dict:
        """The checked header entry of tensor `name` (dtype, shape, data_offsets)."""
        return self._file(self.tensors[name])[0][name]

    def span(self, name: str) -> tuple[int, int]:
        """(begin, end) of tensor `name`'s bytes in its file."""
        entries, start = self._file(self.tensors[name])
        begin, end = entries[name]["data_offsets"]
        return start + begin, start + end

    def file_size(self, name: str) -> int:
        """Bytes of the file holding tensor `name`."""
        return self.heads[self.tensors[name]][0]

    def source(self, name: str) -> str:
        """Where tensor `name` comes from, precisely enough to cite and reproduce."""
        return f"{self.label} · commit {self.commit} · {self.tensors[name]}"

    def configured(self, config: dict) -> HubModel:
        """This model with `config` (a GGUF's metadata read as config.json), its headers'
        parse kept."""
        made = replace(self, config=config)
        for kept in ("_parsed", "gguf_header"):
            if kept in self.__dict__:
                made.__dict__[kept] = self.__dict__[kept]
        return made

    @cached_property
    def gguf_header(self) -> io.GGUFHeader:
        """The GGUF file's header (its metadata), parsed with the model's entries."""
        self._parsed  # noqa: B018 -- puts the header here, beside the entries
        return self.__dict__["gguf_header"]

    def _file(self, file: str) -> tuple[dict[str, dict], int]:
        return self._parsed[file]

    @cached_property
    def _parsed(self) -> dict[str, tuple[dict[str, dict], int]]:
        """Each file's checked entries and data start (posviz.io's checks, once per model)."""
        parsed = {}
        for file, (size, head) in self.heads.items():
            if file.lower().endswith(".gguf"):
                entries, start, self.__dict__["gguf_header"] = io.gguf_entries(
                    head, size, self.label
                )
                parsed[file] = (entries, start)
            else:
                parsed[file] = io.safetensors_entries(head, size, f"{self.label}:{file}")
        return parsed


def __getattr__(name: str) -> object:
    return _moved.attribute(__name__, name)  # Reference is posviz.source.HubRef
