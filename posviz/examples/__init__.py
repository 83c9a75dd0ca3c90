"""Models shipped with posviz, so that the Heads page draws with no network: a real one
(all-MiniLM-L6-v2, Apache-2.0: the tensors a layer's heads are read from) and a simulated
one with a head planted where the page must find it.

A source names one as ``example:NAME`` (``example:planted-gpt2``); its files are
``example:NAME/config.json`` and ``example:NAME/model.safetensors`` in every provenance, which
:func:`path_of` finds again wherever posviz is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from posviz.embedding import LoadError

__all__ = ["EXAMPLES", "PREFIX", "Example", "path_of"]

#: How a source names an example.
PREFIX = "example:"
_HERE = Path(__file__).parent


@dataclass(frozen=True)
class Example:
    """A model shipped with posviz.

    Attributes
    ----------
    name : str
        Its folder here (``example:NAME``).
    title : str
        How a picker lists it.
    about : str
        What it is, said on screen under it (a simulated model says so).
    simulated : bool
        Random weights with structure planted, not a trained model.
    """

    name: str
    title: str
    about: str
    simulated: bool

    @property
    def label(self) -> str:
        """How its weights are named in a provenance."""
        return f"{PREFIX}{self.name}/model.safetensors"

    @property
    def weights(self) -> Path:
        return _HERE / self.name / "model.safetensors"


EXAMPLES = {
    e.name: e
    for e in (
        Example(
            "all-MiniLM-L6-v2",
            "all-MiniLM-L6-v2 (a real model, shipped with posviz)",
            "sentence-transformers' all-MiniLM-L6-v2 (BERT: 6 layers of 12 heads, 512 learned "
            "positions), Apache-2.0. posviz ships the tensors the heads are read from, bytes "
            "unchanged: the position table, its norm and token-type rows, every layer's query "
            "and key weights (7.9 MB).",
            simulated=False,
        ),
        Example(
            "planted-gpt2",
            "Planted GPT-2 (simulated: one head planted)",
            "A simulated model, not a trained one: a GPT-2 of 4 layers of 4 heads and 32 "
            "positions, transformers' random initialisation, with one previous-token head "
            "planted: head 1 of layer 2. Its query rows read the position table's sin/cos pairs "
            "and its key rows the same pairs one position back (tests/data/heads/"
            "make_depth_fixtures.py). Every other head is noise the null should explain.",
            simulated=True,
        ),
    )
}


def path_of(source: str) -> Path:
    """The file ``example:NAME/FILE`` names, in the installed package.

    Raises
    ------
    LoadError
        If `source` names no shipped example's file.

    Examples
    --------
    >>> path_of("example:planted-gpt2/config.json").name
    'config.json'
    """
    name, _, file = source.removeprefix(PREFIX).partition("/")
    if not source.startswith(PREFIX) or name not in EXAMPLES or file not in _FILES:
        msg = f"{source[:80]!r} is not a model shipped with posviz ({', '.join(EXAMPLES)})"
        raise LoadError(msg)
    return _HERE / name / file


_FILES = ("config.json", "model.safetensors")
