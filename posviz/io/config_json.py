"""config.json read as bytes, then parsed: its size and nesting checked before it is parsed, and
an object of settings required. What the settings mean is `posviz.schemes.config`'s."""

from __future__ import annotations

import json
from pathlib import Path

from posviz._json import max_depth
from posviz.source import LoadError

__all__ = ["MAX_CONFIG_BYTES", "MAX_CONFIG_DEPTH", "parse_config", "read_config_file"]

#: config.json files are a few kB (a few MB with huge label maps); refused above this (as the
#: Hub client refuses any JSON answer) before parsing, and deeper than this.
MAX_CONFIG_BYTES = 16 * 2**20
MAX_CONFIG_DEPTH = 32


def parse_config(data: bytes, *, what: str = "config.json") -> dict:
    """config.json's bytes -> dict, refusing what is too big, too deep or not an object.

    Examples
    --------
    >>> parse_config(b'{"rope_theta": 10000}')
    {'rope_theta': 10000}
    >>> parse_config(b"[" * 100 + b"]" * 100)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    posviz.source.LoadError: config.json is nested deeper than 32 levels; ...
    """
    if len(data) > MAX_CONFIG_BYTES:
        msg = (
            f"{what} is {len(data):,} bytes; a model config is a few kB (limit "
            f"{MAX_CONFIG_BYTES:,}). Check that this is the model's config.json."
        )
        raise LoadError(msg)
    depth = max_depth(data)
    if depth > MAX_CONFIG_DEPTH:
        msg = (
            f"{what} is nested deeper than {MAX_CONFIG_DEPTH} levels; a model config is not. "
            "Check that this is the model's config.json."
        )
        raise LoadError(msg)
    try:
        config = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        msg = f"{what} is not valid JSON ({exc}); give the model's config.json."
        raise LoadError(msg) from exc
    if not isinstance(config, dict):
        msg = f"{what} holds a JSON {type(config).__name__}, not an object of settings."
        raise LoadError(msg)
    return config


def read_config_file(path: str | Path, *, what: str | None = None) -> bytes:
    """The bytes of the config.json at `path`, at most `MAX_CONFIG_BYTES` of them read;
    messages name it `what` (default: `path`).

    Raises
    ------
    LoadError
        If it cannot be read, is not a regular file, or is bigger than `MAX_CONFIG_BYTES`
        (refused unread when its size says so; never more than one byte past the limit read).
    """
    path = Path(path)
    what = what or str(path)
    try:
        if not path.is_file():  # a FIFO would block the read
            msg = f"{what} is not a file; give the model's config.json."
            raise LoadError(msg)
        size = path.stat().st_size
        if size <= MAX_CONFIG_BYTES:  # bigger ones are refused unread
            with path.open("rb") as file:
                data = file.read(MAX_CONFIG_BYTES + 1)  # a file that grew: at most this
            size = len(data)
    except OSError as exc:  # strerror alone: str(exc) names the path itself
        msg = f"Cannot read {what}: {exc.strerror or type(exc).__name__}."
        raise LoadError(msg) from exc
    if size > MAX_CONFIG_BYTES:
        msg = (
            f"{what} is {size:,} bytes; a model config is a few kB (limit "
            f"{MAX_CONFIG_BYTES:,}). Check that this is the model's config.json."
        )
        raise LoadError(msg)
    return data
