"""Old import paths of modules that moved into packages in 0.2.0, kept for one release.

``import posviz.rotary`` still gives ``posviz.schemes.rotary`` (the same module object, so a
monkeypatch of one is a monkeypatch of the other), with a DeprecationWarning naming the new
path. Listed in CHANGELOG.md; removed in 0.3.0.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

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
