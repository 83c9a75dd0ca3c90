"""What every format reader shares: an opened file, a tensor as its header describes it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from io import BufferedIOBase
from pathlib import Path

from posviz.embedding import MIN_DIMS, MIN_POSITIONS, LoadError

#: What to do about a tensor above `embedding.MAX_ELEMENTS` in a file.
_SAVE_LESS = "save only the position table."


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file, as its header describes it (no data read).

    Attributes
    ----------
    name : str
        Tensor name, .npz member name without ``.npy``, or ``"table"`` for single-array files.
    shape : tuple of int
        Shape as stored.
    dtype : str
        dtype as stored: ``"float32"`` for numpy files, ``"BF16"`` for safetensors,
        ``"float64"`` for text.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def table_shape(self) -> tuple[int, int] | None:
        """(n_positions, d_model) after squeezing leading 1s, or None if not a table of at least
        `MIN_POSITIONS` x `MIN_DIMS`."""
        shape = self.shape
        while len(shape) > 2 and shape[0] == 1:
            shape = shape[1:]
        if len(shape) == 2 and shape[0] >= MIN_POSITIONS and shape[1] >= MIN_DIMS:
            return shape[0], shape[1]
        return None


@dataclass(frozen=True)
class _File:
    """An opened source: a seekable binary file, its size, its name for messages, its format."""

    file: BufferedIOBase
    size: int
    label: str
    kind: str


def _pickle_refused(label: str) -> LoadError:
    """The refusal of a pickle-based file, with the code that converts it."""
    error = LoadError(
        f"{label} is pickle-based (PyTorch .pt/.pth/.bin/.ckpt, .pkl, joblib): unpickling runs "
        "whatever code the file contains, so posviz never loads pickles. Convert it to "
        "safetensors with this code, on a machine where you trust the file, then load that:"
    )
    error.snippet = conversion_snippet([label])
    return error


def conversion_snippet(names: list[str], repo: str | None = None, revision: str = "") -> str:
    """Python that converts the pickle-based checkpoints `names` (local files, or files of the
    Hub repo `repo` at `revision`, downloaded first) to .safetensors files in the current
    folder. Names are quoted by repr: a name's quotes or newlines cannot break the code."""
    pairs = [(name, (Path(name).stem or "model") + ".safetensors") for name in names]
    head = ["import torch", "from safetensors.torch import save_file"]
    if repo is not None:
        head.insert(0, "from huggingface_hub import hf_hub_download")

    def load(name: str) -> str:
        where = (
            name if repo is None else f"hf_hub_download({repo!r}, {name}, revision={revision!r})"
        )
        return f"torch.load({where}, weights_only=True)"

    save = "save_file({{k: v.contiguous() for k, v in state.items()}}, {})"
    if len(pairs) == 1:  # one file: its names written in, no loop to read
        ((name, out),) = pairs
        body = [f"state = {load(repr(name))}", save.format(repr(out))]
    else:
        body = [
            f"for name, out in {pairs!r}:",
            f"    state = {load('name')}",
            "    " + save.format("out"),
        ]
    return "\n".join([*head, "", *body])


def _read_exact(file: BufferedIOBase, nbytes: int, what: str) -> bytearray:
    """Exactly `nbytes` from `file` into a fresh writable buffer."""
    buffer = bytearray(nbytes)
    view = memoryview(buffer)
    done = 0
    while done < nbytes:
        got = file.readinto(view[done:])
        if not got:
            msg = f"{what} is truncated: {nbytes - done:,} of {nbytes:,} data bytes are missing."
            raise LoadError(msg)
        done += got
    return buffer


def _whole(value: object) -> bool:
    """A JSON whole number; `True` is an int to Python but not a size."""
    return isinstance(value, int) and not isinstance(value, bool)


def single_name(label: str) -> str:
    """What a single-array file's table is called: after the file ("wpe" for wpe.npy), so
    the card and the report name it; its one array also answers to "table", as listed."""
    return Path(label).stem or "table"


def _check_single(src: _File, name: str) -> None:
    if name not in ("table", single_name(src.label)):
        raise LoadError(_missing_message(src.label, name, ["table"]))


def _missing_message(label: str, name: str, names: Iterable[str]) -> str:
    names = [_short(n) for n in names]
    more = f" and {len(names) - 20:,} more" if len(names) > 20 else ""
    return f"{label} has no tensor {_short(name)!r}; it holds: {', '.join(names[:20])}{more}."


def _short(name: str) -> str:
    """A name as messages quote it: a header may hold names of megabytes."""
    return name if len(name) <= 120 else f"{name[:100]}… ({len(name):,} characters)"
