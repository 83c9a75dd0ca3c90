"""A model on the Hub as posviz knows it: its reference, and what its headers and config say."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from posviz import io
from posviz.models.remote import no_table_reason


@dataclass(frozen=True)
class Reference:
    """A model on the Hub: repo id and revision (branch, tag, ``refs/pr/N`` or commit), and in
    a repo of GGUF files the one read (its name, or a quantization such as ``Q4_K_M``)."""

    repo: str
    revision: str = "main"
    file: str | None = None

    def __str__(self) -> str:
        return f"hf:{self.repo}@{self.revision}" + (f":{self.file}" if self.file else "")


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
        The model's config.json (empty if it has none).
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
    def label(self) -> str:
        return str(Reference(self.repo, self.revision, self.file))

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

    def no_table_reason(self) -> str | None:
        """Why this model has no learned absolute position table, when config.json (a GGUF's
        metadata) says so and no tensor is named like one."""
        where = "GGUF metadata" if self.file else "config.json"
        return no_table_reason(self.label, self.config, self.tensors, where=where)

    def _file(self, file: str) -> tuple[dict[str, dict], int]:
        return self._parsed[file]

    @cached_property
    def _parsed(self) -> dict[str, tuple[dict[str, dict], int]]:
        """Each file's checked entries and data start (posviz.io's checks, once per model)."""
        return {
            file: io.read_header(
                file, head, size, self.label if self.file else f"{self.label}:{file}"
            )
            for file, (size, head) in self.heads.items()
        }
