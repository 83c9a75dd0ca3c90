"""posviz.figures, the package: every figure module is one of its names, as pages and the report
reach them (``figures.<module>.<builder>``); each module's own figures: test_<module>.py."""

from __future__ import annotations

import importlib

from posviz import figures
from tests import ROOT


def test_every_figure_module_is_a_name_of_the_package():
    modules = sorted(path.stem for path in (ROOT / "posviz" / "figures").glob("[!_]*.py"))
    assert sorted(figures.__all__) == modules
    for name in modules:
        assert getattr(figures, name) is importlib.import_module(f"posviz.figures.{name}")
