"""`import posviz` from a notebook: the documented surface, its laziness, and its worked example."""

from __future__ import annotations

import doctest
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posviz
from posviz.simulate import sinusoidal_table
from tests import ROOT

DOC = ROOT / "docs" / "python-api.md"


@pytest.mark.slow
def test_the_worked_example_runs_and_prints_what_the_page_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)  # the example writes its checkpoint to the working folder
    text = DOC.read_text()
    assert "```python" not in text  # every example is a checked ```pycon block
    blocks = re.findall(r"```pycon\n(.*?)```", text, flags=re.DOTALL)
    example = doctest.DocTestParser().get_doctest("\n".join(blocks), {}, DOC.name, str(DOC), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(example, out=report.append)
    assert runner.failures == 0, "".join(report)
    assert runner.tries >= 15


def test_import_posviz_loads_neither_streamlit_nor_plotly_until_a_figure_is_asked_for():
    code = (
        "import sys, posviz; before = {'streamlit', 'plotly'} & set(sys.modules); "
        "posviz.spectrum, posviz.similarity; middle = 'plotly' in sys.modules; "
        "posviz.figures; print(sorted(before), middle, 'plotly' in sys.modules, "
        "'streamlit' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    assert out.stdout.split() == [b"[]", b"False", b"True", b"False"]


def test_the_lazy_names_are_the_modules_and_unknown_names_still_fail():
    import posviz.spectrum as spectrum_module

    assert posviz.spectrum is spectrum_module
    assert {"figures", "simulate", "spectrum", "load"} <= set(dir(posviz))
    with pytest.raises(AttributeError, match="no attribute 'spectra'"):
        _ = posviz.spectra


def test_load_reads_a_file_with_the_row_options(tmp_path: Path):
    path = tmp_path / "vit.npy"
    array = np.arange(2 * 17 * 8, dtype=np.float32).reshape(2, 17, 8)[:1]  # (1, 17, 8)
    np.save(path, array)
    table = posviz.load(path, row_start=1, grid=(4, 4))
    assert table.shape == (16, 8)
    assert table.grid == (4, 4)
    np.testing.assert_array_equal(table.values, array[0, 1:])
    with pytest.raises(posviz.LoadError, match=r"missing\.npy"):
        posviz.load(tmp_path / "missing.npy")


def test_load_sends_hub_references_to_the_hub_model_reader(monkeypatch: pytest.MonkeyPatch):
    from posviz.models import remote
    from posviz.source import Cut, HubRef

    calls = []
    table = posviz.Embedding.from_array(sinusoidal_table(16, 4), name="wpe", source="hf:x")
    monkeypatch.setattr(remote, "open_model", lambda ref: calls.append(ref) or "model")
    monkeypatch.setattr(remote, "load_model", lambda *args, **_: calls.append(args) or table)
    assert posviz.load("hf:org/model@v1", tensor="wpe", row_start=2) is table
    assert calls == [HubRef("org/model", "v1"), ("model", Cut("wpe", 2))]


@pytest.mark.parametrize(
    "text", ["hf:gpt2", "hf:org/model@v1", "hf://org/model", "model.safetensors", "./hf.npy"]
)
def test_load_reads_a_hub_reference_from_hf_text_only(text: str):
    from posviz.source import HubRef, parse_source

    assert isinstance(parse_source(text), HubRef) == text.startswith("hf:")
