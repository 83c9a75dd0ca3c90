"""posviz: an interactive microscope for transformer position embeddings.

The core (everything but ``posviz.ui``) is plain numpy/scipy and never imports Streamlit. In a
notebook (docs/python-api.md has a worked example)::

    import posviz

    table = posviz.load("model.safetensors")  # or "hf:openai-community/gpt2"
    s = posviz.spectrum.spectrum(table.values)  # one module per question
    s.metrics()["effective_rank"]
    posviz.figures.spectrum.singular_values(s)  # a plotly Figure, shown inline
    posviz.pipeline.offset_scores(table, center=True)  # the app's steps and defaults

The analysis modules (``spectrum``, ``similarity``, ``offsets``, ``components``, ``boundary``,
``probes``, ``compare``, ``resample``), ``pipeline`` (each analysis as the app runs it, on an
Embedding, with the app's defaults), ``simulate`` and ``figures`` are imported on first use,
so ``import posviz`` loads neither Plotly nor Streamlit.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Unpack

from posviz import (
    _moved,
    _settings,  # noqa: F401 (sets OpenBLAS's thread timeout before numpy loads)
)
from posviz._version import __version__
from posviz.embedding import Embedding, LoadError
from posviz.io import list_tensors
from posviz.source import Cut, Source

if TYPE_CHECKING:
    from posviz.recompute import RerunOptions, RerunResult

__all__ = ["Embedding", "LoadError", "__version__", "list_tensors", "load", "rerun"]

_moved.install()

#: Submodules reachable as ``posviz.<name>`` after a plain ``import posviz``.
_LAZY = frozenset(
    {
        "boundary",
        "compare",
        "components",
        "export",
        "figures",
        "offsets",
        "pipeline",
        "probes",
        "quantization",
        "report",
        "resample",
        "similarity",
        "simulate",
        "spectrum",
    }
)


def load(
    source: str | os.PathLike | Source,
    *,
    tensor: str | None = None,
    row_start: int = 0,
    row_stop: int | None = None,
    grid: tuple[int, int] | None = None,
) -> Embedding:
    """A position table from a file, or from a model on the Hugging Face Hub.

    Parameters
    ----------
    source : str, os.PathLike or posviz.source.Source
        A path to a .npy, .npz, .safetensors, .gguf, .csv, .tsv or .txt file, or to a model
        folder as ``save_pretrained`` leaves it; ``"hf:REPO_ID[@REVISION][:FILE.gguf|:QUANT]"``
        for a model on the Hub (only the safetensors header and the one tensor are fetched);
        ``"sim:GENERATOR?name=value&..."`` for a simulated table (`posviz.source`). Pickle-based
        checkpoints are refused, never unpickled. A .safetensors checkpoint with a config.json
        beside it is read as that config says (DeBERTa's relative table by default).
    tensor : str, optional
        Tensor to read; by default the position table detected by name and shape.
    row_start, row_stop : int
        Rows kept, ``[row_start, row_stop)``: e.g. ``row_start=1`` drops a ViT class token.
    grid : tuple of (int, int), optional
        (height, width) when the kept rows are a row-major ViT patch grid.

    Returns
    -------
    Embedding
        ``.values`` is the ndarray of shape (n_positions, d_model) to analyse; ``.origin`` the
        source it was read from.

    Raises
    ------
    LoadError
        If the file or model is refused or no tensor can be chosen; the message says why and
        what to do (e.g. the candidate tensors to pass as `tensor`).
    """
    from posviz import models  # with the Hub's code: a checkpoint reads as a model

    return models.load(source, Cut(tensor, row_start, row_stop, grid))


def rerun(export: dict, **options: Unpack[RerunOptions]) -> RerunResult:
    """Recompute every number of an export from what it records, and compare.

    The table its provenance names is read again (a file, or ``hf:REPO`` at the commit) and its
    sha256 checked; each analysis runs through `posviz.pipeline` with its params. `export` is a
    JSON export, ``posviz summary --json``, or ``posviz.recompute.read_export`` of any export
    file (CSV, HTML report). Options: ``tables`` (paths, in provenance order) and ``base`` (a
    folder searched first), as :func:`posviz.recompute.rerun`.

    Returns
    -------
    posviz.recompute.RerunResult
        ``.ok``, and ``.checks``: every number exported beside the number recomputed.

    Raises
    ------
    LoadError
        When the table is missing or its bytes changed.
    """
    from posviz import recompute as _rerun  # the pipeline loads only when asked

    return _rerun.rerun(export, **options)


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
