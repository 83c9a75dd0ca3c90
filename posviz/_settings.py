"""Every environment variable posviz reads, read here and nowhere else (docs/deployment.md).

Each is read when asked, not at import, so a test's ``monkeypatch.setenv`` or a server
restarted with a new value takes effect.
"""

from __future__ import annotations

import os
from pathlib import Path

# numpy and scipy each bundle an OpenBLAS whose idle threads spin for 2^28 cycles before
# sleeping; every hand-over between them (a numpy product, then a scipy LAPACK call) then
# runs against the other's spinning threads on the same cores. At 2^20 cycles they yield
# the cores almost at once, so the spectrum, the probes and compare() no longer wait at each
# hand-over, and two BLAS threads beat one for them (figures: benchmarks/README.md). Read
# when numpy first loads, so set when posviz is imported, before it does (a value already in
# the environment wins).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")

#: The table `posviz serve PATH` hands to the app it starts (a path or ``hf:REPO@REV``).
SERVED_TABLE = "POSVIZ_OPEN"

_OFF = {"off", "0", "false", "no"}
_ON = {"1", "on", "yes", "true"}


def data_dir() -> Path | None:
    """POSVIZ_DATA_DIR: the team's read-only shared folder of tables and checkpoints."""
    folder = os.environ.get("POSVIZ_DATA_DIR")
    return Path(folder) if folder else None


def cache_size() -> str:
    """POSVIZ_CACHE_SIZE: the bytes the app's result caches may hold (default 1GB)."""
    return os.environ.get("POSVIZ_CACHE_SIZE", "1GB")


def hub_enabled() -> bool:
    """POSVIZ_HUB: ``off`` removes every Hub source, for air-gapped servers."""
    return os.environ.get("POSVIZ_HUB", "on").strip().lower() not in _OFF


def hub_cache_dir() -> Path:
    """posviz's own folder for the Hub cache: POSVIZ_HUB_CACHE/posviz-hub (the setting may
    name a folder others use, such as /tmp), else posviz/hub under the user's cache directory
    (XDG_CACHE_HOME, else ~/.cache)."""
    if folder := os.environ.get("POSVIZ_HUB_CACHE"):
        return Path(folder) / "posviz-hub"
    return _user_cache() / "hub"


def results_cache_dir() -> Path | None:
    """POSVIZ_RESULTS_CACHE: the folder of results kept between runs (the probes' Gaussian
    control), else posviz/results under the user's cache directory; ``off``: none kept."""
    folder = os.environ.get("POSVIZ_RESULTS_CACHE", "")
    if folder.strip().lower() in _OFF:
        return None
    return Path(folder) if folder else _user_cache() / "results"


def _user_cache() -> Path:
    """posviz's folder in the user's cache directory (XDG_CACHE_HOME, else ~/.cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "posviz"


def hub_cache_size(default: str) -> str:
    """POSVIZ_HUB_CACHE_SIZE: the bytes the Hub's disk cache may hold."""
    return os.environ.get("POSVIZ_HUB_CACHE_SIZE", default)


def hub_offline() -> bool:
    """HF_HUB_OFFLINE, as huggingface_hub reads it (checked at each call, not at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _ON


def hub_endpoint() -> str | None:
    """HF_ENDPOINT: the Hub to ask (a mirror, or a test's fake Hub); None for the default."""
    return os.environ.get("HF_ENDPOINT") or None


def browser_path() -> str | None:
    """BROWSER_PATH: the Chromium kaleido drives for PNG/SVG export, when not on PATH."""
    return os.environ.get("BROWSER_PATH") or None


def served_table() -> str | None:
    """The table `posviz serve` named (see `SERVED_TABLE`)."""
    return os.environ.get(SERVED_TABLE) or None


def serve_table(ref: str) -> None:
    """Name `ref` as the served table for the app server this process becomes."""
    os.environ[SERVED_TABLE] = ref
