"""Folders of files posviz keeps between runs: the Hub's bytes, computed controls.

Each entry is a file named by the sha256 of its key, in a subfolder per kind, written
whole or not at all (a partial file, then a rename), and the folder is bounded in bytes:
past the limit, the least recently used entries go first. Only files of that form in the
store's subfolders are counted or deleted, so a store may live in a folder others use. A
broken or unwritable folder only costs the work of fetching or computing again.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Store"]

_ENTRY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Store:
    """Entries under `root`/<kind>/, at most `limit` bytes in all."""

    root: Path
    kinds: tuple[str, ...]
    limit: int

    def path(self, kind: str, *key: str) -> Path:
        """Where the entry of `kind` with `key` lives (whether or not it exists)."""
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()
        return self.root / kind / digest

    def read(self, kind: str, *key: str, size: int | None = None) -> bytes | None:
        """The entry's bytes (marked as recently used), or None: absent, unreadable, larger
        than the store's limit, or not `size` bytes long when a size is given (both checked
        before reading)."""
        path = self.path(kind, *key)
        try:
            found = path.stat().st_size
            if found > self.limit or (size is not None and found != size):
                return None
            data = path.read_bytes()
            os.utime(path)
        except OSError:
            return None
        return data

    def write(self, kind: str, data: bytes | bytearray, *key: str) -> None:
        """Keep `data` as the entry (unless it alone passes the limit), then keep the limit."""
        if len(data) > self.limit:
            return
        path = self.path(kind, *key)
        with suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.partial")
            partial.write_bytes(data)
            os.replace(partial, path)
            self._evict()

    def _evict(self) -> None:
        files = []
        for path in self.root.glob("*/*"):
            if path.parent.name not in self.kinds or not _ENTRY.fullmatch(path.name):
                continue  # not the store's: never counted, never deleted
            with suppress(OSError):
                stat = path.stat()
                files.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total <= self.limit:
                break
            with suppress(OSError):
                path.unlink()
                total -= size
