"""House rules: the core never imports Streamlit (only posviz/ui, app and pages do), only
posviz/figures, the report and the ui draw with Plotly, and pages only draw."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def importers(package: str, *, allowed: tuple[str, ...]) -> list[str]:
    """Modules of posviz/ that import `package`, other than those under `allowed` paths."""
    offenders = []
    for path in (ROOT / "posviz").rglob("*.py"):
        relative = path.relative_to(ROOT / "posviz").as_posix()
        if relative.startswith(allowed):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name.split(".")[0] == package for name in names):
                offenders.append(relative)
    return offenders


def test_pages_only_draw():
    # Parsing, filtering and session keys live in the core and posviz/ui; a page reads widgets
    # and draws results.
    offenders = []
    for path in sorted((ROOT / "pages").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in ("numpy", "pandas", "fnmatch"):
                    offenders.append(f"{path.name} imports {name}")
            if isinstance(node, ast.Attribute) and node.attr == "session_state":
                offenders.append(f"{path.name}:{node.lineno} touches st.session_state")
    assert offenders == []


def test_the_registry_lists_every_page_once():
    from posviz.ui.pages import PAGES

    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pages").glob("*.py"))
    assert sorted(p.file for p in PAGES) == files
    assert len({p.title for p in PAGES}) == len(PAGES)


def test_no_core_module_imports_streamlit():
    assert importers("streamlit", allowed=("ui/",)) == []


def test_only_figures_the_report_and_the_ui_import_plotly():
    # The analyses and export.py stay usable (and fast to import) without a plotting library.
    assert importers("plotly", allowed=("figures/", "ui/", "report.py")) == []


def test_core_imports_without_streamlit_installed():
    # Block the import outright so a transitive import fails too.
    code = (
        "import sys, importlib, pkgutil; sys.modules['streamlit'] = None; import posviz; "
        "[importlib.import_module(m.name) "
        "for m in pkgutil.walk_packages(posviz.__path__, 'posviz.') "
        "if not m.name.startswith('posviz.ui')]"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_the_app_loads_posviz_before_numpy_so_openblas_gets_its_thread_timeout():
    # OpenBLAS reads OPENBLAS_THREAD_TIMEOUT once, when numpy (or scipy) loads its copy. The
    # app imports streamlit, then posviz: streamlit must not have loaded numpy by then.
    code = (
        "import os, sys; os.environ.pop('OPENBLAS_THREAD_TIMEOUT', None); import streamlit; "
        "loaded = 'numpy' in sys.modules; import posviz.ui.widgets; "
        "print(loaded, os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    assert out.stdout.split() == [b"False", b"20"]
    app = (ROOT / "app.py").read_text()
    assert app.index("import streamlit") < app.index("from posviz")
    assert "numpy" not in app.split("from posviz")[0]


def test_a_first_open_loads_no_pandas_no_hub_client_and_no_interpolation():
    # Every first open pays for what its run imports: pandas loads with the first table of
    # numbers shown or exported, the Hub's HTTP client with the first model fetched, scipy's
    # interpolation with cubic resampling.
    code = (
        "import sys; from streamlit.testing.v1 import AppTest; "
        "at = AppTest.from_file('app.py', default_timeout=120).run(); "
        "assert not at.exception and at.title[0].value == 'Spectrum', at; "
        "print(sorted(m for m in ('pandas', 'httpx2', 'scipy.interpolate') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    assert out.stdout.split() == [b"[]"]


def test_what_the_app_imports_is_out_of_the_collectors_way():
    # Streamlit collects garbage after every script run; the app freezes its imports once, on
    # its first run, and importing the widgets alone freezes nothing.
    code = (
        "import gc, posviz.ui.widgets; frozen = gc.get_freeze_count(); "
        "from streamlit.testing.v1 import AppTest; "
        "at = AppTest.from_file('app.py', default_timeout=120).run(); "
        "print(frozen, gc.get_freeze_count() > 50_000)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    assert out.stdout.split() == [b"0", b"True"]
