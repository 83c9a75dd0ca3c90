"""Where a table or a model comes from: one value, parsed once from text, printed by ``str()``.

A source is one of:

- :class:`LocalPath` -- a file, or a model folder as ``save_pretrained`` leaves it, on this
  machine: ``model.safetensors``, ``runs/step1000`` (``file:PATH`` when the path itself
  begins as another kind does);
- :class:`SharedFile` -- a file of the server's shared folder (``POSVIZ_DATA_DIR``), by its
  path there: ``shared:gpt2/model.safetensors``;
- :class:`Upload` -- a file uploaded to the app: its name and bytes (``upload:NAME`` names it;
  text cannot carry the bytes);
- :class:`HubRef` -- a model on the Hugging Face Hub: ``hf:REPO[@REVISION][:FILE.gguf|:QUANT]``;
- :class:`Preset` -- a config.json excerpt built into posviz: ``preset:NAME``;
- :class:`Simulation` -- a simulated table, its generator and arguments:
  ``sim:learned_like?n_positions=1024&d_model=768&seed=0``;
- :class:`Shipped` -- a model shipped with posviz (`posviz.examples`), or one of its files:
  ``example:planted-gpt2``, ``example:planted-gpt2/config.json``.

:func:`parse_source` reads any of them from text (a form, a URL, the command line, an
export's provenance) and ``str(source)`` writes it back: ``parse_source(str(s)) == s``. The
value travels as it is down to the bytes (`posviz.load`); a loaded table keeps it
(`posviz.embedding.Embedding.origin`). :class:`Cut` is what is read from a source: which
tensor, which rows, and their patch grid.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from posviz._params import Refused

__all__ = [
    "NO_CUT",
    "Cut",
    "HubRef",
    "LoadError",
    "LocalPath",
    "Preset",
    "SharedFile",
    "Shipped",
    "Simulation",
    "Source",
    "Upload",
    "as_source",
    "parse_source",
    "plain_path",
]


class LoadError(Refused):
    """A file or array that cannot be used as a position table; the message says what to do."""


@dataclass(frozen=True)
class Source:
    """Where a table or a model comes from (one of the kinds below; :func:`parse_source`)."""

    @staticmethod
    def parse(text: str) -> Source:
        """:func:`parse_source`."""
        return parse_source(text)


@dataclass(frozen=True)
class LocalPath(Source):
    """A file or a model folder on this machine, as given (absolute or relative)."""

    path: str

    def __str__(self) -> str:
        # A path that reads as another kind (a file named "hf:x") is written as file:PATH.
        kind = self.path.partition(":")[0] + ":"
        return f"file:{self.path}" if kind in _PREFIXES else self.path


@dataclass(frozen=True)
class SharedFile(Source):
    """A file of the server's shared folder (``POSVIZ_DATA_DIR``), by its relative path."""

    relative: str

    def __str__(self) -> str:
        return f"shared:{self.relative}"


@dataclass(frozen=True)
class Upload(Source):
    """A file uploaded to the app. Its bytes are not part of its identity (nor of its text,
    ``upload:NAME``): a table read from it keeps only its name."""

    name: str
    data: bytes | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        return f"upload:{self.name}"


@dataclass(frozen=True)
class HubRef(Source):
    """A model on the Hub: repo id and revision (branch, tag, ``refs/pr/N`` or commit), and in
    a repo of GGUF files the one read (its name, or a quantization such as ``Q4_K_M``).

    >>> str(HubRef("gpt2")), str(HubRef("org/m-GGUF", "v1", "Q8_0"))
    ('hf:gpt2@main', 'hf:org/m-GGUF@v1:Q8_0')
    """

    repo: str
    revision: str = "main"
    file: str | None = None

    def __post_init__(self) -> None:
        # Every reference is checked, however made (from text, a link's keys, an export's
        # fields): URLs are built from its parts.
        wrong = _wrong_part(self.repo, self.revision, self.file)
        if wrong is not None:
            raise LoadError(_WRONG[wrong](repr(self.repo), self.revision, self.file))

    def __str__(self) -> str:
        return f"hf:{self.repo}@{self.revision}" + (f":{self.file}" if self.file else "")

    def at(self, commit: str) -> HubRef:
        """The same model at `commit` (the revision it resolved to), the same file."""
        return HubRef(self.repo, commit, self.file)

    @staticmethod
    def parse(text: str) -> HubRef:
        """The repo, revision and GGUF file `text` names (``hf:``, ``hf://`` or a bare id).

        >>> HubRef.parse("hf://EleutherAI/pythia-70m@step3000")
        HubRef(repo='EleutherAI/pythia-70m', revision='step3000', file=None)
        >>> HubRef.parse("hf:gpt2")
        HubRef(repo='gpt2', revision='main', file=None)
        >>> HubRef.parse("hf:org/Model-GGUF:Q4_K_M").file
        'Q4_K_M'
        """
        body = text.removeprefix("hf://") if text.startswith("hf://") else text.removeprefix("hf:")
        body, colon, file = body.strip().partition(":")  # no repo or revision holds a colon
        repo, _, revision = body.partition("@")
        wrong = (
            "repo"  # https://…: a URL, not a repo id and a file
            if file.startswith("//")
            else "file"
            if colon and not file
            else _wrong_part(repo, revision or "main", file)
        )
        if wrong is not None:
            raise LoadError(_WRONG[wrong](repr(text), revision, file))
        return HubRef(repo, revision or "main", file or None)


@dataclass(frozen=True)
class Preset(Source):
    """A config.json excerpt built into posviz (`posviz.schemes.presets.PRESETS`), by name."""

    name: str

    def __str__(self) -> str:
        return f"preset:{self.name}"


@dataclass(frozen=True)
class Simulation(Source):
    """A simulated table: a `posviz.simulate` generator's function name and its arguments, in
    order (as a provenance's ``simulated`` record holds them).

    >>> s = Simulation("gaussian", (("n_positions", 300), ("noise", 0.5)))
    >>> str(s), parse_source(str(s)) == s
    ('sim:gaussian?n_positions=300&noise=0.5', True)
    """

    generator: str
    params: tuple[tuple[str, int | float], ...] = ()

    def __str__(self) -> str:
        options = "&".join(f"{name}={value}" for name, value in self.params)
        return f"sim:{self.generator}" + (f"?{options}" if options else "")

    @property
    def options(self) -> dict[str, int | float]:
        return dict(self.params)


@dataclass(frozen=True)
class Shipped(Source):
    """A model shipped with posviz (`posviz.examples.EXAMPLES`), by its name, or one of its
    files (``NAME/FILE``): what the Heads page opens with no network."""

    name: str

    def __str__(self) -> str:
        return f"example:{self.name}"


@dataclass(frozen=True)
class Cut:
    """What is read from a source: the tensor (None: the one detected), rows
    ``[row_start, row_stop)`` and their patch grid (height, width) when they are one, as
    `posviz.load` takes them. ``Cut()`` reads the source as it is."""

    tensor: str | None = None
    row_start: int = 0
    row_stop: int | None = None
    grid: tuple[int, int] | None = None


#: The source as it is: the tensor detected, every row (a default argument's value).
NO_CUT = Cut()


def parse_source(text: str) -> Source:
    """The source `text` names; any text without a kind's prefix is a local path.

    >>> parse_source("hf:gpt2"), parse_source("example:planted-gpt2")
    (HubRef(repo='gpt2', revision='main', file=None), Shipped(name='planted-gpt2'))
    >>> parse_source("runs/wpe.npy"), parse_source("file:hf:odd.npy")
    (LocalPath(path='runs/wpe.npy'), LocalPath(path='hf:odd.npy'))

    Raises
    ------
    LoadError
        If a Hub reference is not one (:meth:`HubRef.parse`), a simulation's argument is not a
        number, or a prefix names nothing.
    """
    kind, colon, rest = text.partition(":")
    if not colon or f"{kind}:" not in _PREFIXES:
        return LocalPath(text)
    if kind == "hf":
        return HubRef.parse(text)
    if kind == "file":
        return LocalPath(rest)
    if not rest:
        msg = f"{text!r} names no {_KINDS[kind]}: write {kind}:NAME."
        raise LoadError(msg)
    if kind == "shared":
        return SharedFile(rest)
    if kind == "upload":
        return Upload(rest)
    if kind == "preset":
        return Preset(rest)
    if kind == "example":
        return Shipped(rest)
    return _simulation(rest)


def as_source(source: Source | str | os.PathLike[str]) -> Source:
    """`source` as a Source: text parsed (:func:`parse_source`), a path-like as a local path."""
    if isinstance(source, Source):
        return source
    if isinstance(source, str):
        return parse_source(source)
    return LocalPath(os.fspath(source))


def plain_path(path: str) -> bool:
    """Whether `path` is relative and names no "", "." or ".." segment: a URL built from it
    stays where it is put (``a/../../x`` would leave the commit-pinned path).

    >>> plain_path("refs/pr/1"), plain_path("."), plain_path("../x.safetensors")
    (True, False, False)
    """
    return not ({"", ".", ".."} & set(path.split("/"))) and "\\" not in path


_KINDS = {
    "hf": "model on the Hub",
    "file": "file",
    "shared": "file of the shared folder",
    "upload": "uploaded file",
    "preset": "known model",
    "sim": "simulation",
    "example": "model shipped with posviz",
}
_PREFIXES = frozenset(f"{kind}:" for kind in _KINDS)
_REPO = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")
_REVISION = re.compile(r"[\w.][\w./-]{0,199}")
_QUANTIZATION = re.compile(r"[A-Za-z0-9][\w.-]{0,63}")
_WHOLE = re.compile(r"[+-]?[0-9]{1,12}")


#: What is wrong with a Hub reference, said: (the reference as written, revision, file).
_WRONG = {
    "file": lambda shown, revision, file: (
        f"{file!r} is not a GGUF file of the repo: after the colon give its name "
        "(model-Q8_0.gguf) or its quantization (Q8_0)."
    ),
    "repo": lambda shown, revision, file: (
        f"{shown} is not a model id: write hf:NAMESPACE/NAME or hf:NAME, optionally "
        "followed by @REVISION (e.g. hf:openai-community/gpt2@main)."
    ),
    "revision": lambda shown, revision, file: (
        f"{revision!r} is not a revision: give a branch, a tag, refs/pr/N or a commit sha."
    ),
}


def _wrong_part(repo: str, revision: str, file: str | None) -> str | None:
    """Which part of a Hub reference is not one ("file", "repo", "revision"), if any."""
    if file and not (
        (file.lower().endswith(".gguf") and plain_path(file)) or _QUANTIZATION.fullmatch(file)
    ):
        return "file"
    if not _REPO.fullmatch(repo) or ".." in repo or "--" in repo:
        return "repo"
    if not _REVISION.fullmatch(revision) or not plain_path(revision):
        return "revision"
    return None


def _simulation(text: str) -> Simulation:
    """``GENERATOR?name=value&...``; each value a whole number or a float."""
    generator, _, query = text.partition("?")
    params: list[tuple[str, int | float]] = []
    for option in query.split("&") if query else []:
        name, equals, value = option.partition("=")
        try:
            if not (equals and name.isidentifier()):
                raise ValueError
            params.append((name, int(value) if _WHOLE.fullmatch(value) else float(value)))
        except ValueError:
            msg = f"{option[:40]!r} is not an argument of a simulation: write name=number."
            raise LoadError(msg) from None
    return Simulation(generator, tuple(params))
