"""Which files of a shared model folder can be loaded, and the checked path to one of them.

A team mounts a folder of checkpoints read-only (``POSVIZ_DATA_DIR`` in the app) so nobody
uploads a 500 MB file through the browser. The folder's files are untrusted names chosen by a
browser: a name is turned into a path only if it stays inside the folder after every symlink is
followed, is a regular file and has an extension :mod:`posviz.io` reads.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from posviz.embedding import LoadError
from posviz.io import ACCEPTED_FORMATS, INDEX_SUFFIX

__all__ = ["EXTENSIONS", "MAX_FILES", "list_files", "resolve"]

#: Extensions offered and accepted, lower-case: the formats posviz.io reads.
EXTENSIONS = frozenset(ACCEPTED_FORMATS.split(", "))
#: Listing stops here: a folder mounted by mistake (a whole disk) must not stall the page.
MAX_FILES = 10_000


def list_files(root: Path, *, limit: int = MAX_FILES) -> list[str]:
    """The loadable files under `root`, as sorted relative POSIX paths.

    The walk follows symlinks only while they resolve inside `root`, visits each real directory
    once (a link back to an ancestor cannot loop), goes through directories in sorted order and
    stops after `limit` files, so a listing of exactly `limit` entries may be incomplete.

    Parameters
    ----------
    root : Path
        The shared folder.
    limit : int
        Most files returned.

    Returns
    -------
    list of str
        Paths relative to `root`, like ``"gpt2/model.safetensors"``; each one :func:`resolve`
        accepts.

    Raises
    ------
    LoadError
        If `root` is not a readable directory.
    """
    base = _root(root)
    seen = {base}
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
        here = Path(dirpath)
        # Pruning in place steers os.walk: only in-root directories not yet visited.
        kept = []
        for name in sorted(dirnames):
            real = (here / name).resolve()
            if real.is_relative_to(base) and real not in seen:
                seen.add(real)
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = here / name
            real = path.resolve()
            if path.suffix.lower() in EXTENSIONS and real.is_relative_to(base) and real.is_file():
                files.append(path.relative_to(base).as_posix())
                if len(files) == limit:
                    return sorted(files)
    return sorted(files)


def resolve(root: Path, relative: str) -> Path:
    """The real path of `relative` inside `root`, after checking it may be read.

    Parameters
    ----------
    root : Path
        The shared folder.
    relative : str
        A POSIX path relative to `root`, as :func:`list_files` gives.

    Returns
    -------
    Path
        The absolute path with every symlink resolved. Open this path (not `relative` again)
        and pass `relative` as the file name, since its extension (not the target's) names the
        format.

    Raises
    ------
    LoadError
        If `relative` is empty, absolute or contains ``..``, does not exist, leaves `root`
        through a symlink, is not a regular file, or has an extension posviz does not read (a
        sharded checkpoint's index, ``*.safetensors.index.json``, is read).
    """
    base = _root(root)
    parts = PurePosixPath(relative).parts
    if not relative or relative.startswith("/") or ".." in parts or "\0" in relative:
        msg = (
            f"{relative!r} is not a path inside the shared folder: give it relative to the "
            "folder, without a leading '/' or '..', as the file list shows it."
        )
        raise LoadError(msg)
    suffix = PurePosixPath(relative).suffix.lower()
    if suffix not in EXTENSIONS and not relative.lower().endswith(INDEX_SUFFIX):
        msg = (
            f"{relative} has extension {suffix or 'none'!r}, not a format posviz reads. "
            f"Accepted formats: {ACCEPTED_FORMATS}."
        )
        raise LoadError(msg)
    try:
        real = base.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python 3.11)
        # strerror, not str(exc): that names the server's absolute path.
        reason = getattr(exc, "strerror", None) or "a symlink loop"
        msg = f"{relative} is not in the shared folder ({reason}); reload the page to list again."
        raise LoadError(msg) from exc
    if not real.is_relative_to(base):
        msg = (
            f"{relative} is a symlink that leads outside the shared folder; posviz only reads "
            "files inside it. Copy the file into the folder instead of linking to it."
        )
        raise LoadError(msg)
    if not real.is_file():
        msg = f"{relative} is not a regular file (a directory or a device); pick a file."
        raise LoadError(msg)
    return real


def _root(root: Path) -> Path:
    """`root` with symlinks resolved, checked to be a directory."""
    base = Path(root).resolve()
    if not base.is_dir():
        msg = (
            f"The shared folder {root} is not a directory this server can read: mount the "
            "folder of checkpoints there, or point the setting at the mounted folder."
        )
        raise LoadError(msg)
    return base
