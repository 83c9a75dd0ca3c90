"""Which tables a collection asks for, how many bytes they will hold, and whether they fit.

The Collection page's sources (uploaded files, the shared folder, simulations, Hub ids, the
example run) become :class:`Request` s: a label, the bytes the table will hold and how to load
it. The bytes are known before anything is allocated: from a file's header, a model's
safetensors header, or a simulation's shape. :func:`gather` checks the count and the byte
budgets for the whole request first and loads nothing when it does not fit.
"""

from __future__ import annotations

import fnmatch
import inspect
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path, PurePosixPath

import numpy as np

from posviz import io, simulate
from posviz._params import Bound, bounded, refusal_text
from posviz.collection import MAX_TABLES, Member, member, order
from posviz.embedding import MIN_POSITIONS, Embedding, LoadError, numpy_dtype_name
from posviz.io import datadir
from posviz.models import remote
from posviz.schemes.gguf import ROPE_TENSORS
from posviz.source import Cut, HubRef

__all__ = [
    "COLLECTION_BYTES",
    "MAX_PATTERN",
    "ROW_START",
    "SERVER_BYTES",
    "Request",
    "edited",
    "example_run",
    "file_request",
    "folders",
    "gather",
    "held_bytes",
    "hub_lines",
    "hub_request",
    "matching",
    "parse_numbers",
    "shared_request",
    "simulation_requests",
    "stem",
]

#: Bytes of tables one collection may hold: as much as the largest single table posviz loads
#: (`MAX_ELEMENTS` float32 values, 256 MiB), e.g. 32 checkpoints of 2048 x 1024 float32 or 32
#: GPT-2 tables (96 MiB). The analyses work on one table at a time: 32 tables of 2048 x 1024
#: at the budget peaked at 281 MiB traced while loading and 309 MiB while analysed
#: (benchmarks/collection_budget.py), so a full collection costs the server about 1.2x its budget.
COLLECTION_BYTES = 256 * 2**20
#: Bytes of tables all sessions' collections may hold together: four full collections. The
#: deployment's memory limit is 4 GB (compose.yaml); the server itself takes ~0.3 GB, the
#: result caches up to 16 x POSVIZ_CACHE_SIZE (128 MB there, few results large), the Hub cache
#: 256 MB on /tmp's tmpfs and the collection cache up to 4 more collections' tables, so 1 GiB
#: of held tables leaves the analyses room and keeps the server out of the kernel's kill.
SERVER_BYTES = 1024 * 2**20
#: Longest "Files matching" pattern: fnmatch compiles (and caches) a regex per pattern, and a
#: pattern of 500,000 characters cost seconds per rerun.
MAX_PATTERN = 200


@dataclass(frozen=True)
class Request:
    """One table asked for, not yet loaded.

    Attributes
    ----------
    label : str
        The member's label.
    nbytes : int
        Bytes the loaded table will hold (its rows in the stored float32/float64 dtype); 0 when
        the request is already refused.
    load : callable or None
        ``load() -> Embedding``; None when refused.
    error : str or None
        Why the request is refused before loading (an unreadable header, no position tensor),
        as `posviz._params.refusal_text` writes it.
    """

    label: str
    nbytes: int = 0
    load: Callable[[], Embedding] | None = None
    error: str | None = None

    def member(self) -> Member:
        """Load the table (a refusal becomes the member's error, see :func:`member`)."""
        if self.load is None:
            return Member(self.label, error=self.error)
        return member(self.label, self.load)


def _stored_itemsize(dtype: str) -> int:
    """Bytes per value once loaded: as `posviz.embedding.as_table` widens or narrows."""
    try:
        stored = np.dtype(numpy_dtype_name(dtype))
    except TypeError:  # bfloat16, float8: not numpy dtypes, loaded as float32
        return 4
    wide = stored.itemsize >= 8 if stored.kind == "f" else stored.itemsize >= 4
    return 8 if wide else 4


def _tensor_bytes(shape: Sequence[int], dtype: str) -> int:
    return math.prod(int(s) for s in shape) * _stored_itemsize(dtype)


def held_bytes(members: Iterable[Member]) -> int:
    """Bytes of the tables `members` hold (kept rows and the dropped leading rows' copy)."""
    return sum(m.table.values.nbytes + m.table.prefix.nbytes for m in members if m.table)


def stem(name: str) -> str:
    """A file's name without a loadable format's suffix: the label of a file's table.

    >>> stem("run/step1000.npy"), stem("notes.md")
    ('run/step1000', 'notes.md')
    """
    path = PurePosixPath(name)
    return str(path.with_suffix("")) if path.suffix.lower() in datadir.EXTENSIONS else name


#: Leading rows dropped from every table of a batch: reserved rows (padding, class and register
#: tokens) are a handful; each table's own length bounds it again when it is read.
ROW_START = Bound(0, 4096)


@bounded(row_start=ROW_START)
def file_request(
    label: str, source: io.Input, filename: str, *, tensor: str | None = None, row_start: int = 0
) -> Request:
    """A file's table, sized from its header (the data are not read until loaded).

    Parameters
    ----------
    label : str
    source, filename
        As in :func:`posviz.io.list_tensors` (bytes of an upload, or a path).
    tensor : str, optional
        The tensor to read; by default the one :func:`posviz.io.choose_tensor` picks.
    row_start : int
        Leading rows to drop.
    """
    try:
        infos = io.list_tensors(source, filename)
        name = tensor if tensor is not None else io.choose_tensor(infos, filename)
    except LoadError as error:
        return Request(label, error=refusal_text(error))
    # A tensor the file lacks is refused by io.load before any data is read.
    nbytes = sum(_tensor_bytes(i.shape, i.dtype) for i in infos if i.name == name)
    load = partial(io.load, source, filename, Cut(name, row_start))
    return Request(label, nbytes, load)


def shared_request(
    root: Path, relative: str, *, tensor: str | None = None, row_start: int = 0
) -> Request:
    """A file of the shared folder `root` (see :func:`posviz.io.datadir.resolve`), labelled by its
    relative path without the suffix, as :func:`file_request`."""
    try:
        path = datadir.resolve(root, relative)
    except LoadError as error:
        return Request(stem(relative), error=refusal_text(error))
    return file_request(stem(relative), path, relative, tensor=tensor, row_start=row_start)


def hub_request(line: str, *, max_bytes: int | None = None) -> Request:
    """A model on the Hub (``REPO``, ``REPO@REVISION`` or ``hf:...``), sized from its
    safetensors header; only the chosen tensor travels when it is loaded, and not at all
    when it is larger than `max_bytes` (the app's upload limit, see `posviz.hub.read_tensor`)."""
    try:
        model = remote.open_model(HubRef.parse(line))
        if reason := remote.why_no_table(model):  # rotary, ALiBi, ...: said as a load says it
            raise LoadError(reason)
        name = io.choose_tensor([i for i in model.infos if i.name not in ROPE_TENSORS], model.label)
        entry = model.entry(name)
    except LoadError as error:
        return Request(line, error=refusal_text(error))
    nbytes = _tensor_bytes(entry["shape"], entry["dtype"])
    load = partial(remote.load_model, model, Cut(name), max_bytes=max_bytes)
    return Request(line, nbytes, load)


def hub_lines(refs: str, repo: str = "", revisions: str = "") -> list[str]:
    """The models named one per line in `refs`, then `repo` at each comma-separated revision.

    Raises
    ------
    ValueError
        If they are more than a collection holds (each would cost requests to the Hub first).

    Examples
    --------
    >>> hub_lines("gpt2\\n\\n org/m@v1 ", "org/run", "step1, step2")
    ['gpt2', 'org/m@v1', 'org/run@step1', 'org/run@step2']
    """
    lines = [line.strip() for line in refs.splitlines() if line.strip()]
    if repo.strip():
        lines += [f"{repo.strip()}@{r.strip()}" for r in revisions.split(",") if r.strip()]
    if len(lines) > MAX_TABLES:
        msg = f"{len(lines)} models named; a collection holds at most {MAX_TABLES}."
        raise ValueError(msg)
    return lines


def parse_numbers(text: str, what: str, *, low: int, high: int) -> list[int]:
    """Whole numbers separated by commas, each within `low`..`high`.

    Raises
    ------
    ValueError
        Naming `what` and the bounds, when a value is not a whole number or out of bounds.

    Examples
    --------
    >>> parse_numbers("256, 512,", "Positions", low=10, high=4096)
    [256, 512]
    """
    cells = [cell.strip() for cell in text.split(",") if cell.strip()]
    if not all(cell.isdecimal() and len(cell) <= 9 for cell in cells):
        msg = f"{what}: whole numbers separated by commas, e.g. 256, 512."
        raise ValueError(msg)
    values = [int(cell) for cell in cells]
    if not values or not all(low <= v <= high for v in values):
        msg = f"{what}: one or more whole numbers from {low:,} to {high:,}, separated by commas."
        raise ValueError(msg)
    return values


def simulation_requests(
    kind: str, n_positions: Sequence[int], seeds: Sequence[int], *, d_model: int
) -> list[Request]:
    """One simulated table per length and seed (one per length for the unseeded sinusoids)."""
    generator = simulate.GENERATORS[kind]
    seeded = "seed" in inspect.signature(generator).parameters
    # The dtype the generator keeps (float32, or float64 for sinusoids), from a tiny table.
    itemsize = generator(MIN_POSITIONS, 4).values.itemsize
    return [
        Request(
            f"{kind} n={n}" + (f" seed={seed}" if seeded else ""),
            n * d_model * itemsize,
            partial(generator, n, d_model, **({"seed": seed} if seeded else {})),
        )
        for n, seed in itertools.product(n_positions, seeds if seeded else [None])
    ]


def example_run(
    *,
    steps: Sequence[int] = (100, 300, 1000, 3000, 10000, 30000),
    n_positions: int = 512,
    d_model: int = 128,
    seed: int = 0,
) -> list[Request]:
    """A simulated training run: one learned-like table at several steps, seeded.

    Every checkpoint has the same waves (one seed); as training goes on the noise falls as
    ``1/sqrt(step/100)`` and the end rows grow apart (boundary ``4 step / (step + 1000)``),
    so the run's metrics move the way a trained table's do, with a known direction.
    """
    return [
        Request(
            f"simulated-run-step{step}",
            n_positions * d_model * 4,  # learned_like keeps float32
            partial(
                simulate.learned_like,
                n_positions,
                d_model,
                noise=(100 / step) ** 0.5,
                boundary=4 * step / (step + 1000),
                seed=seed,
            ),
        )
        for step in steps
    ]


def folders(files: Iterable[str]) -> list[str]:
    """The folders holding `files` (relative paths), sorted.

    >>> folders(["a/b/x.npy", "a/y.npy", "z.npy"])
    ['.', 'a', 'a/b']
    """
    return sorted({str(PurePosixPath(f).parent) for f in files})


def matching(files: Iterable[str], folder: str, pattern: str) -> list[str]:
    """`files` under `folder` (subfolders included) whose name matches the glob `pattern`.

    Raises
    ------
    ValueError
        If `pattern` is longer than `MAX_PATTERN` characters.

    Examples
    --------
    >>> matching(["r/step1.npy", "r/sub/step2.npy", "r/notes.csv", "x/step3.npy"], "r", "step*")
    ['r/step1.npy', 'r/sub/step2.npy']
    """
    if len(pattern) > MAX_PATTERN:
        msg = f"The file pattern has {len(pattern):,} characters; at most {MAX_PATTERN} are read."
        raise ValueError(msg)
    return [
        f
        for f in files
        if PurePosixPath(f).is_relative_to(folder)
        and fnmatch.fnmatch(PurePosixPath(f).name, pattern)
    ]


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:,.1f} MiB"


def _check_room(
    asked: Sequence[Request], held: Sequence[Member], server: int, tables: int, own: int, all_: int
) -> None:
    """Refuse (LoadError) a request over a budget, saying the budget; nothing is loaded."""
    room = tables - len(held)
    if len(asked) > room:
        msg = (
            f"{len(asked)} tables asked for, but a collection holds at most {tables} and "
            f"{len(held)} are in it. Nothing was added: ask for at most {max(room, 0)} "
            "or remove some."
        )
        raise LoadError(msg)
    size, kept = sum(r.nbytes for r in asked), held_bytes(held)
    if kept + size > own:
        msg = (
            f"The {len(asked)} tables asked for would hold {_mib(size)}; with the {_mib(kept)} "
            f"already in the collection that is above its budget of {_mib(own)}. Nothing was "
            "added: ask for fewer or smaller tables, or remove some."
        )
        raise LoadError(msg)
    if server + size > all_:
        msg = (
            f"The {len(asked)} tables asked for would hold {_mib(size)}; the collections of "
            f"everyone using this server hold {_mib(server)} of their budget of {_mib(all_)}. "
            "Nothing was added: ask for fewer or smaller tables, or try again later."
        )
        raise LoadError(msg)


def gather(
    requests: Sequence[Request],
    held: Sequence[Member] = (),
    *,
    server_bytes: int = 0,
    max_tables: int = MAX_TABLES,
    max_bytes: int = COLLECTION_BYTES,
    max_server_bytes: int = SERVER_BYTES,
) -> tuple[Member, ...]:
    """Load `requests` into the collection `held`, if they fit; else load none of them.

    Parameters
    ----------
    requests : sequence of Request
    held : sequence of Member
        The collection so far.
    server_bytes : int
        Bytes of tables every collection on the server holds now, this one included.
    max_tables, max_bytes, max_server_bytes : int
        The budgets: tables per collection, bytes per collection, bytes over the server.

    Returns
    -------
    tuple of Member
        `held` and the new members, in collection order; a table already held under the
        same label is not added twice.

    Raises
    ------
    LoadError
        Before anything is loaded, when the count or the bytes exceed a budget (the message
        states it).
    """
    _check_room(requests, held, server_bytes, max_tables, max_bytes, max_server_bytes)
    new = [r.member() for r in requests]
    known = {(m.label, m.table.sha256 if m.table else None) for m in held}
    fresh = [m for m in new if (m.label, m.table.sha256 if m.table else None) not in known]
    return order([*held, *fresh])


def edited(
    members: Sequence[Member], labels: Iterable[object], keep: Iterable[bool]
) -> list[Member]:
    """`members` as the page's editor left them: relabelled (a blank label keeps the old one),
    the unticked ones removed."""
    return [
        replace(m, label=str(label).strip() or m.label)
        for m, label, kept in zip(members, labels, keep, strict=True)
        if kept
    ]
