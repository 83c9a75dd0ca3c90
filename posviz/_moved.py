"""Old import paths of modules and names that moved in 0.2.0, kept for one release.

``import posviz.rotary`` still gives ``posviz.schemes.rotary`` (the same module object, so a
monkeypatch of one is a monkeypatch of the other), with a DeprecationWarning naming the new
path; so does ``from posviz.schemes.config import parse_config`` for a name that left a module
which stays (that module's ``__getattr__`` asks :func:`attribute`). The new module is imported
by name, when the old path is used: the layers of the house (tests/test_architecture.py) are
those of the new paths. Listed in CHANGELOG.md; removed in 0.3.0.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

MOVED = {
    "posviz.scheme": "posviz.schemes.config",
    "posviz.rotary": "posviz.schemes.rotary",
    "posviz.alibi": "posviz.schemes.alibi",
    "posviz.relative": "posviz.schemes.relative",
    "posviz.scheme_presets": "posviz.schemes.presets",
    "posviz.scheme_hub": "posviz.models.weights",
    "posviz.schemes.weights": "posviz.models.weights",
    "posviz.schemes.attention": "posviz.models.attention",
    "posviz.schemes.sources": "posviz.models.sources",
    "posviz.scheme_summary": "posviz.records",
    "posviz.schemes.record": "posviz.records",
    "posviz.hub.config": "posviz.models.remote",
    "posviz.cli_schemes": "posviz.cli.schemes",
    "posviz._rerun": "posviz.recompute",
    "posviz.export.rerun": "posviz.recompute",
    "posviz.gather": "posviz.collection.gather",
    "posviz.datadir": "posviz.io.datadir",
}


#: Names that left a module which stays: {old module: {name: "new.module:new.name"}}.
MOVED_NAMES = {
    "posviz.hub": {
        "Reference": "posviz.source:HubRef",
        "parse_ref": "posviz.source:HubRef.parse",
        "load": "posviz:load",
    },
    "posviz.hub.model": {"Reference": "posviz.source:HubRef"},
    "posviz.records": {
        name: f"posviz.models.weights:{name}"
        for name in ("checkpoint_provenance", "config_provenance", "gguf_provenance", "read_config")
    },
    "posviz.schemes.config": {
        name: f"posviz.io.config_json:{name}"
        for name in ("MAX_CONFIG_BYTES", "MAX_CONFIG_DEPTH", "parse_config", "read_config_file")
    },
}


def _found(path: str) -> Any:
    """The object `path` (``"module:name.attr"``) names, its module imported by name."""
    where, _, names = path.partition(":")
    found: Any = importlib.import_module(where)
    for part in names.split("."):
        found = getattr(found, part)
    return found


# posviz.hub's functions that read a model as its config says moved to posviz.models.remote
# and take a posviz.source.HubRef and Cut instead of strings and keywords: these keep the
# 0.1 calls working (their names in the warning say the new call).
def _open_model(repo: str, revision: str = "main", file: str | None = None) -> Any:
    return _found("posviz.models.remote:open_model")(
        _found("posviz.source:HubRef")(repo, revision, file)
    )


def _open_config(repo: str, revision: str = "main", file: str | None = None) -> Any:
    return _found("posviz.models.remote:open_config")(
        _found("posviz.source:HubRef")(repo, revision, file)
    )


def _load_model(
    model: Any,
    *,
    tensor: str | None = None,
    row_start: int = 0,
    row_stop: int | None = None,
    grid: tuple[int, int] | None = None,
    progress: Any = None,
    max_bytes: int | None = None,
) -> Any:
    cut = _found("posviz.source:Cut")(tensor, row_start, row_stop, grid)
    return _found("posviz.models.remote:load_model")(
        model, cut, progress=progress, max_bytes=max_bytes
    )


def _is_hub_ref(text: str) -> bool:
    return text.startswith("hf:")


#: Functions of a module that stays whose arguments changed as they moved: {old module:
#: {name: (the new call, what takes the old call)}}.
RESHAPED: dict[str, dict[str, tuple[str, Callable[..., Any]]]] = {
    "posviz.hub": {
        "open_model": (
            "posviz.models.remote.open_model(HubRef(repo, revision, file))",
            _open_model,
        ),
        "open_config": (
            "posviz.models.remote.open_config(HubRef(repo, revision, file))",
            _open_config,
        ),
        "open_model_at": (
            "posviz.models.remote.open_model_at(opened)",
            lambda opened: _found("posviz.models.remote:open_model_at")(opened),
        ),
        "load_model": (
            "posviz.models.remote.load_model(model, Cut(tensor, row_start, row_stop, grid))",
            _load_model,
        ),
        "is_hub_ref": ("isinstance(posviz.source.parse_source(text), HubRef)", _is_hub_ref),
    },
}


def attribute(module: str, name: str) -> object:
    """`name` of `module` where it moved (or what takes its old call), with a
    DeprecationWarning (for the old module's ``__getattr__``); AttributeError for a name that
    never was there."""
    if name in RESHAPED.get(module, {}):
        call, adapter = RESHAPED[module][name]
        msg = f"{module}.{name} is {call} since posviz 0.2.0; the old call goes in 0.3.0"
        warnings.warn(msg, DeprecationWarning, stacklevel=3)
        return adapter
    new = MOVED_NAMES.get(module, {}).get(name)
    if new is None:
        msg = f"module {module!r} has no attribute {name!r}"
        raise AttributeError(msg)
    where, _, path = new.partition(":")
    msg = f"{module}.{name} moved to {where}.{path} in posviz 0.2.0; the old path goes in 0.3.0"
    warnings.warn(msg, DeprecationWarning, stacklevel=3)
    return _found(new)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        msg = f"{spec.name} moved to {new} in posviz 0.2.0; the old path goes in 0.3.0"
        warnings.warn(msg, DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the new module ran when it was imported


def install() -> None:
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
