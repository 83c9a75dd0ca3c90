"""House rules: imports run down the layers table below and never in a circle; the core never
imports Streamlit (only posviz/ui, app and pages do), only posviz/figures, the report and the ui
draw with Plotly, pages only draw, and every module has a test module of its name."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys

import pytest

from tests import ROOT

#: The house, bottom to top (docs/architecture.md draws it): each package of posviz/ (a folder,
#: or a module at the top) on one floor. A package imports packages of its own floor or below,
#: never above, and no two packages import each other, even through others: so a package whose
#: modules belong on two floors fails here, and is split (export's headers from rerun, the
#: schemes' formulas from reading models' weights).
LAYERS = {
    # foundations: settings, bounds, numerics, disk; what moved (imported by name, on use)
    "_version": 0,
    "_settings": 0,
    "_params": 0,
    "_json": 0,
    "_linalg": 0,
    "_ridge": 0,
    "_disk": 0,
    "_moved": 0,
    # where a table comes from, the table, and what its rows stand for
    "source": 1,
    "embedding": 1,
    "rows": 1,
    "examples": 1,  # models shipped for the Heads page to open offline
    # formats (bytes -> named tensors), simulated tables, export headers (numbers, provenance)
    "io": 2,
    "simulate": 2,
    "export": 2,
    # transport: the Hub's files, range reads, the disk cache
    "hub": 3,
    # position schemes: formulas, and config.json / GGUF metadata read into a Scheme
    "schemes": 4,
    # one module per question about a table, and models read as their config says
    "spectrum": 5,
    "similarity": 5,
    "offsets": 5,
    "components": 5,
    "boundary": 5,
    "probes": 5,
    "compare": 5,
    "quantization": 5,
    "resample": 5,
    "heads": 5,
    "forms": 5,
    "models": 5,
    # many tables at once; the summary records of a scheme and of a layer's heads
    "collection": 6,
    "records": 6,
    # the one step registry, and the words of every analysis
    "pipeline": 7,
    "depth": 7,  # every layer of a model: the heads steps run one layer at a time
    "glossary": 7,
    "figures": 8,
    "recompute": 8,  # `posviz rerun`: runs the pipeline's steps
    "report": 9,
    "cli": 9,
    "ui": 10,
    "__init__": 11,  # the package's front door: load, rerun and the lazy submodules
    "__main__": 11,
}


def module_imports() -> dict[str, set[str]]:
    """Each module of posviz/ and the posviz modules it imports, at the top or in a function."""
    modules = {}
    for path in (ROOT / "posviz").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name: str) -> str:
        while name not in modules:
            name = name.rpartition(".")[0]
        return name

    imports: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.split(".")[0] == "posviz"}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("posviz"):
                # `from posviz import io` imports posviz.io; `from posviz.io import load` posviz.io
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else node.module)
        imports[name] = {resolve(t) for t in targets} - {name}
    return imports


def package(module: str) -> str:
    """The package of posviz/ a module belongs to (``posviz`` itself: its front door)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def package_imports() -> dict[str, set[str]]:
    """Each package and the other packages its modules import."""
    graph: dict[str, set[str]] = {}
    for module, targets in module_imports().items():
        graph.setdefault(package(module), set()).update(package(t) for t in targets)
    return {name: targets - {name} for name, targets in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every circle of imports in `graph`, as ``a -> b -> a``."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append(" -> ".join([*path[path.index(node) :], node]))
            return
        if node in done:
            return
        for target in sorted(graph.get(node, ())):
            visit(target, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return found


def test_every_package_has_one_floor():
    assert sorted(set(package_imports()) - set(LAYERS)) == []
    assert sorted(set(LAYERS) - set(package_imports())) == []


def test_packages_import_down_the_layers():
    upward = [
        f"{a} (layer {LAYERS[a]}) imports {b} (layer {LAYERS[b]})"
        for a, targets in package_imports().items()
        for b in targets
        if LAYERS[b] > LAYERS[a]
    ]
    assert upward == []


def test_no_two_packages_import_each_other_not_even_through_others():
    assert cycles(package_imports()) == []


def test_no_import_cycles_not_even_through_a_function_level_import():
    assert cycles(module_imports()) == []


def test_the_house_fails_a_package_on_two_floors():
    # As export/ was when it held rerun: its headers below the pipeline, rerun above it.
    graph = package_imports() | {"export": {"pipeline"}}
    assert "export -> pipeline -> export" in cycles(graph | {"pipeline": {"export"}})
    assert any(LAYERS[b] > LAYERS[a] for a, bs in graph.items() for b in bs)


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
            # st.stop() would also stop app.py, which draws the sidebar card after the page:
            # a page returns from a function instead.
            if isinstance(node, ast.Attribute) and node.attr == "stop":
                offenders.append(f"{path.name}:{node.lineno} calls st.stop()")
    assert offenders == []


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


@pytest.mark.slow
def test_a_first_open_loads_no_pandas_no_hub_client_and_no_scipy_beyond_linalg():
    # Every first open pays for what its run imports: pandas loads with the first table of
    # numbers shown or exported, the Hub's HTTP client with the first model fetched, scipy's
    # interpolation with cubic resampling, its FFT with the first offset profile, its
    # optimisers with the first sinusoid fit or probe (scipy.optimize and scipy.integrate were
    # a third of the CPU a first open spent importing beyond Streamlit's).
    unwanted = (
        "pandas",
        "httpx2",
        "scipy.interpolate",
        "scipy.fft",
        "scipy.optimize",
        "scipy.integrate",
    )
    code = (
        "import sys; from streamlit.testing.v1 import AppTest; "
        "at = AppTest.from_file('app.py', default_timeout=120).run(); "
        "assert not at.exception and at.title[0].value == 'Spectrum', at; "
        f"print(sorted(m for m in {unwanted} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    assert out.stdout.split() == [b"[]"]


@pytest.mark.slow
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


def test_the_figures_and_the_pipeline_export_every_name_used_from_them():
    """`__all__` of posviz/figures/*.py and posviz/pipeline.py lists each name of theirs that
    another module, a page, app.py or the docs use (imported, or read as an attribute)."""
    public = [f"posviz.figures.{p.stem}" for p in (ROOT / "posviz/figures").glob("[!_]*.py")]
    public.append("posviz.pipeline")
    sources = [*(ROOT / "posviz").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]
    texts = {path: path.read_text() for path in [*sources, *(ROOT / "docs").glob("*.md")]}
    texts[ROOT / "README.md"] = (ROOT / "README.md").read_text()
    # ``from posviz.x import a, b as c`` and its parenthesised form, function-level ones too.
    imports = re.compile(r"^\s*from ([\w.]+) import (\([^)]*\)|[^\n]*)", re.MULTILINE)
    imported: dict[str, set[str]] = {}
    for text in texts.values():
        for module, names in imports.findall(text):
            imported.setdefault(module, set()).update(re.findall(r"\w+", names))
    for name in public:
        path = ROOT / f"{name.replace('.', '/')}.py"
        body = ast.parse(texts[path]).body
        exported = importlib.import_module(name).__all__  # the pipeline's: from its registry
        defined = {node.name for node in body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
        defined |= {
            target.id
            for node in body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        attribute = re.compile(rf"\b_?{re.escape(name.removeprefix('posviz.'))}\.(\w+)")
        used = imported.get(name, set()).copy()
        for other, text in texts.items():
            if other != path:
                used |= set(attribute.findall(text))
        missing = sorted(used & {d for d in defined if not d.startswith("_")} - set(exported))
        assert missing == [], f"{name} does not export {missing}"


#: Modules of posviz/ without a test module of their name, and why: each is drawn as part of a
#: page and tested as that page (AppTest, Chromium), or has nothing of its own to test.
WITHOUT_A_TEST_MODULE = {
    # Leaves Streamlit's pages-folder mode on a fresh server's first request (a browser's:
    # tests/e2e/test_browser.py's first load).
    "posviz/ui/__init__.py",
    # The Schemes page's parts, tested as the page: tests/app/test_schemes.py,
    # test_schemes_plan.py, test_gguf.py; tests/e2e/test_schemes.py, test_plan.py.
    "posviz/ui/schemes.py",
    "posviz/ui/scheme_compare.py",
    "posviz/ui/context_plan.py",
}


def expected_test_file(path: str) -> str | None:
    """The test module of posviz/`path` (a module, or a package's __init__.py):
    tests/<package>/test_<module>.py, leading underscores dropped; None for a module with none
    (the front door, __main__, _version, _moved's old paths)."""
    parts = path.removeprefix("posviz/").removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
        if not parts:
            return None
        parts.append(parts[-1])
    elif parts[-1] in ("__main__", "_version", "_moved"):
        return None
    *package, name = parts
    return "/".join(["tests", *package, f"test_{name.lstrip('_')}.py"])


def test_every_module_has_a_test_module_of_its_name():
    # docs/architecture.md: tests/ mirrors posviz/. A new module comes with its test module.
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "posviz").rglob("*.py"))
    missing = [m for m in modules if (t := expected_test_file(m)) and not (ROOT / t).is_file()]
    assert missing == sorted(WITHOUT_A_TEST_MODULE)
    assert expected_test_file("posviz/io/_npy.py") == "tests/io/test_npy.py"
    assert expected_test_file("posviz/hub/__init__.py") == "tests/hub/test_hub.py"
    assert expected_test_file("posviz/_disk.py") == "tests/test_disk.py"


def test_every_folder_of_tests_is_a_package():
    # Test modules of one name in several folders (tests/test_spectrum.py, tests/figures/
    # test_spectrum.py) import as tests.<folder>.test_<name> only when each folder is a package.
    folders = {p.parent for p in (ROOT / "tests").rglob("test_*.py")}
    assert sorted(f for f in folders if not (f / "__init__.py").is_file()) == []
