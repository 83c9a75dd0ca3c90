"""What a page's URL says about the table it shows: the keys that reopen it, read back, and what
to tell a visitor whose link could not reopen it.

A table is named by its origin and its cut. The origin says where the whole tensor comes from:
a simulation (``sim=learned-like&n_positions=2048&...``: every option of the generator), a
model on the Hub (``hub=REPO&revision=COMMIT``: the commit, so the link keeps its table when
the branch moves; in a repo of GGUF files, ``file=NAME.gguf`` too: the one read), or a file of
the server's shared folder (``shared=PATH``, a GGUF file as any other). The cut says which
tensor and rows (``tensor=...&rows=2:1026&grid=14x14``). Every link also carries the
first 16 hex digits of the table's sha256, so a link whose source changed since says so.

An uploaded file cannot travel in a link, nor can a table a page made from another (resampled,
a rotary table): their links name the table (``upload=E.npy`` with its cut, or ``table=...``)
so the one who opens the link is told what they are not seeing and how to get it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import PurePath

from posviz import models, simulate
from posviz.embedding import Embedding, LoadError
from posviz.source import Cut, HubRef, LocalPath, SharedFile, Simulation, Source, Upload

__all__ = [
    "KEYS",
    "SHA_DIGITS",
    "cut",
    "keys",
    "not_reopened",
    "origin",
    "parse_cut",
    "parse_grid",
    "parse_rows",
    "recut",
    "simulation",
]

#: Hex digits of the sha256 a link carries: enough to tell two tables apart, short in a URL.
SHA_DIGITS = 16

#: Every key a link may use to name a table (a slot's prefix comes before it).
KEYS = frozenset(
    {"sim", "hub", "revision", "file", "shared", "upload", "served", "table"}
    | {"tensor", "rows", "grid", "sha256"}
    | {
        name
        for generator in simulate.GENERATORS.values()
        for name in inspect.signature(generator).parameters
    }
)

#: The origins a link can reopen, and those it can only name.
REOPENED, NAMED = ("sim", "hub", "shared"), ("upload", "served", "table")


def simulation(kind: str, options: Mapping[str, int | float]) -> dict[str, str]:
    """The origin of a table simulated by generator `kind`: every option, defaults included,
    so the link reopens the same table even if a default changes.

    >>> simulation("gaussian", {"n_positions": 300})
    {'sim': 'gaussian', 'n_positions': '300', 'd_model': '768', 'seed': '0'}
    """
    arguments = inspect.signature(simulate.GENERATORS[kind]).parameters.values()
    given = {a.name: options.get(a.name, a.default) for a in arguments}
    return {"sim": kind} | {
        name: f"{value:g}" if isinstance(value, float) else str(value)
        for name, value in given.items()
    }


def origin(source: Source | None) -> dict[str, str] | None:
    """The link keys of a table's source (`Embedding.origin`): a simulation's options, a Hub
    model at the commit read (its GGUF file too), a shared file's path; an upload's or the
    served file's name, which a link names but cannot reopen. None for a table made on a page
    (named in words).

    >>> origin(HubRef("acme/m-GGUF", "a" * 40, "m-Q8_0.gguf")) == {
    ...     "hub": "acme/m-GGUF", "revision": "a" * 40, "file": "m-Q8_0.gguf"}
    True
    >>> origin(LocalPath("/srv/models/gpt2.safetensors")), origin(None)
    ({'served': 'gpt2.safetensors'}, None)
    """
    if isinstance(source, Simulation):
        return simulation(_KINDS[source.generator], source.options)
    if isinstance(source, HubRef):
        return {"hub": source.repo, "revision": source.revision} | (
            {"file": source.file} if source.file else {}
        )
    if isinstance(source, SharedFile):
        return {"shared": source.relative}
    if isinstance(source, Upload):
        return {"upload": source.name}
    if isinstance(source, LocalPath):  # the file `posviz serve` opened: its name only
        return {"served": PurePath(source.path).name}
    return None


#: Each generator's name in a link (the app's) by its function's name (a source's).
_KINDS = {generator.__name__: kind for kind, generator in simulate.GENERATORS.items()}


def cut(table: Embedding) -> dict[str, str]:
    """The tensor, rows and grid of `table` within its source, as link keys."""
    rows = f"{table.row_start}:{table.row_start + table.shape[0]}"
    grid = {"grid": f"{table.grid[0]}x{table.grid[1]}"} if table.grid else {}
    return {"tensor": table.name, "rows": rows} | grid


def keys(table: Embedding, origin: Mapping[str, str] | None, *, made: str | None) -> dict[str, str]:
    """Every key of the link to `table`.

    Parameters
    ----------
    table : Embedding
        The table shown.
    origin : mapping or None
        Its origin's keys (:func:`origin`: :func:`simulation`, ``{"hub": repo, "revision":
        commit}`` with ``"file"`` for a repo's GGUF file, ``{"shared": path}``, ``{"upload":
        file}``, ``{"served": file}``); None for a table a link cannot name by its source,
        which is then named in words (``table=``).
    made : str or None
        For a simulated origin, the sha256 of the generator's own table: a `table` that
        differs (its leading rows trimmed) gets its cut too.
    """
    if origin is None:
        named = {"table": f"{table.name} · {table.source}"[:200]}
    elif "sim" in origin:
        named = dict(origin) | ({} if table.sha256 == made else cut(table))
    else:
        named = dict(origin) | cut(table)
    return named | {"sha256": table.sha256[:SHA_DIGITS]}


def parse_rows(text: str) -> tuple[int, int | None]:
    """``"2:1026"`` as (2, 1026); ``"2:"`` as (2, None).

    >>> parse_rows("2:1026"), parse_rows("5:")
    ((2, 1026), (5, None))
    """
    start, colon, stop = text.partition(":")
    try:
        if not colon:
            raise ValueError
        return int(start or 0), int(stop) if stop else None
    except ValueError:
        msg = f"rows={text[:40]!r} is not a row range like 2:1026"
        raise LoadError(msg) from None


def parse_grid(text: str | None) -> tuple[int, int] | None:
    """``"14x14"`` as (14, 14); nothing as None.

    >>> parse_grid("14x16"), parse_grid(None)
    ((14, 16), None)
    """
    if not text:
        return None
    height, x, width = text.partition("x")
    try:
        if not x:
            raise ValueError
        return int(height), int(width)
    except ValueError:
        msg = f"grid={text[:40]!r} is not a grid like 14x14"
        raise LoadError(msg) from None


def parse_cut(params: Mapping[str, str]) -> Cut:
    """The tensor, rows and grid a link's keys name.

    >>> parse_cut({"tensor": "wpe", "rows": "1:65", "grid": "8x8"})
    Cut(tensor='wpe', row_start=1, row_stop=65, grid=(8, 8))
    """
    start, stop = parse_rows(params.get("rows", "0:"))
    return Cut(params.get("tensor"), start, stop, parse_grid(params.get("grid")))


def recut(table: Embedding, params: Mapping[str, str]) -> Embedding:
    """`table` cut to the rows and grid `params` names (a simulation's trimmed link); as it is
    when they name none.

    >>> e = recut(simulate.gaussian(20, 4), {"rows": "3:20"})
    >>> e.shape, e.row_start, e.describe_rows()
    ((17, 4), 3, 'rows 3-19 of 20 (3 leading rows trimmed)')
    """
    return models.recut(table, parse_cut(params)) if "rows" in params else table


def _shown(table: Embedding) -> str:
    return f"{table.name}, {table.shape[0]:,} x {table.shape[1]:,} ({table.source})"


def _rows(text: str) -> str:
    """A link's rows in words (``"0:64"`` -> ``"rows 0-63"``)."""
    try:
        start, stop = parse_rows(text)
    except LoadError:
        return f"rows {text or '?'}"
    return f"rows {start}-{stop - 1}" if stop else f"rows {start} on"


def not_reopened(params: Mapping[str, str], table: Embedding, *, linked: bool) -> str | None:
    """Why `table`, opened from a link with `params`, is not the table the link was made on;
    None when it is (or the link cannot tell).

    `linked` says whether `table` was opened from the link's origin (else it is the default
    or the served table, the link's origin being one a link cannot reopen).
    """
    sha = params.get("sha256", "")
    if sha and table.sha256.startswith(sha):
        return None
    instead = f"Showing {_shown(table)} instead."
    if linked:
        if not sha:
            return None
        return (
            "The link's table was opened, but it is not the one the link was made on (sha256 "
            f"{table.sha256[:SHA_DIGITS]}, the link says {sha[:SHA_DIGITS]}): its source "
            "changed since the link was made, or the link was edited."
        )
    where = f"tensor {params.get('tensor', '?')}, {_rows(params.get('rows', ''))}"
    if "upload" in params:
        return (
            f"This link was made on a table uploaded from the file {params['upload']} ({where}). "
            "A link cannot carry an uploaded file. " + instead + " To see what the link "
            "showed, upload that file on the Data page and pick the same tensor and rows."
        )
    if "served" in params:
        return (
            f"This link was made on {params['served']} ({where}), the file another posviz server "
            "was started on; this server has not opened it. " + instead
        )
    if "table" in params:
        return (
            f"This link was made on {params['table']}, a table made on a page from another "
            "(resampled, a scheme's table) or an upload, which a link cannot carry. " + instead
        )
    return None
