"""The cached steps keep each core function's settings for a type checker (mypy).

A page calls ``cache.run(pipeline.<step>, table, **settings)``; a misspelt or mistyped setting
must be a type error, not a silent ``**params``. One mypy run (a minute: run once per module)
checks a small file of wrong calls (each must be reported), the pages (none of their keywords
may be) and the whole of posviz/ (CI runs it: the README's command has no marker filter).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

CALLS = """
from posviz import pipeline
from posviz.compare import Comparison
from posviz.components import PrincipalComponents
from posviz.simulate import learned_like
from posviz.ui import cache

table = learned_like(16, 4, seed=0)
good: PrincipalComponents = cache.run(
    pipeline.principal_components, table, n_components=3, center=False
)
cache.run(pipeline.principal_components, table, n_components="3")  # WRONG: arg-type
cache.run(pipeline.principal_components, table, n_component=3)  # WRONG: call-arg
cache.run(pipeline.similarity_map, table, metric="dot", max_side="800")  # WRONG: arg-type
cache.run(pipeline.offset_profile, table, spread=True, max_offset=None)
wrong: int = cache.run(pipeline.spectrum, table)  # WRONG: assignment
both: Comparison = cache.run(pipeline.compare, table, table, n_components=2)
cache.run(pipeline.compare, table, n_components=2)  # WRONG: call-arg
cache.run(pipeline.alibi_bias, 8, max_distance=4.5)  # WRONG: arg-type
cache.spectrum(table)  # WRONG: attr-defined
"""


def errors(*paths: Path) -> list[tuple[Path, int, str]]:
    """(file, line, message) of each mypy error in `paths` (the config in pyproject.toml)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--cache-dir",
            "/dev/null",
            "--no-error-summary",
            *map(str, paths),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr  # 2: mypy itself failed
    found = re.findall(r"^(.+?):(\d+): error: (.*)$", done.stdout, flags=re.MULTILINE)
    return [(Path(path), int(line), message) for path, line, message in found]


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> list[tuple[Path, int, str]]:
    """mypy's errors in the wrong calls, the pages and the package, from one run."""
    calls = tmp_path_factory.mktemp("typing") / "calls.py"
    calls.write_text(CALLS)
    return errors(ROOT / "posviz", calls, *sorted((ROOT / "pages").glob("*.py")))


@pytest.mark.slow
def test_wrong_settings_are_type_errors_and_the_pages_have_none(found):
    # Every wrong call, and only those, is reported, with the reason.
    lines = CALLS.splitlines()
    wrong = {i + 1 for i, text in enumerate(lines) if "# WRONG" in text}
    in_calls = {line: message for path, line, message in found if path.name == "calls.py"}
    assert set(in_calls) == wrong, in_calls
    for line, message in in_calls.items():
        assert f"[{lines[line - 1].rsplit('WRONG: ', 1)[1]}]" in message, message
    # Pages: every keyword they pass is one the function takes (and none it needs is missing).
    # The types of the values are checked only above: mypy also questions values that the pages
    # narrow at run time (an Optional grid inside ``if table.grid``, number_input's int | float).
    names = re.compile(r"^(Unexpected keyword argument|Missing named argument)")
    assert [e for e in found if e[0].parent.name == "pages" and names.match(e[2])] == []


@pytest.mark.slow
def test_the_package_type_checks(found):
    package = [f"{path}:{line}: {msg}" for path, line, msg in found if path.parts[0] == "posviz"]
    assert package == [], "\n".join(package)
