"""Issue 45 in the app: each hostile input refused with st.error (or a warning where the file
still holds tables), no crash box, the current table kept, an upload parsed once however often
the page runs, and the memory a refusal takes bounded."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from posviz._params import MAX_RESULT_BYTES
from posviz.io import _gguf
from posviz.ui import loaders
from posviz.ui.text import literal
from tests import apptest, hostile
from tests.app.test_gguf import schemes_page


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per GGUF header read (its parse starts from a fresh `_Progress`)."""
    made: list[int] = []

    class Counted(_gguf._Progress):
        def __init__(self) -> None:
            super().__init__()
            made.append(1)

    monkeypatch.setattr(_gguf, "_Progress", Counted)
    return made


def data_page() -> AppTest:
    """The Data page with a simulated table loaded (the table a refusal must keep)."""
    at = apptest("pages/data.py").run()
    at.button[0].click().run()  # Simulate
    assert at.session_state["posviz.table"] is not None
    return at


def upload(at: AppTest, name: str, data: bytes) -> int:
    """Upload `data` as `name`; the peak memory of that run (tracemalloc)."""
    tracemalloc.start()
    try:
        at.get("file_uploader")[0].set_value((name, data, "application/octet-stream")).run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_64_mib_header_upload_is_refused_once_and_the_table_kept(tmp_path, parses) -> None:
    # Before: 169 s a page run, every run (the upload was parsed again each time).
    at = data_page()
    table = at.session_state["posviz.table"]
    data = hostile.nested_arrays_gguf(tmp_path / "h.gguf").read_bytes()
    peak = upload(at, "h.gguf", data)
    assert not at.exception, at.exception
    assert literal("5,000,000 arrays inside an array") in at.error[0].value
    assert peak < MAX_RESULT_BYTES, f"{peak / 2**20:.0f} MiB"
    for _ in range(3):  # any widget: the page runs again
        at.run()
        assert literal("5,000,000 arrays inside an array") in at.error[0].value
    assert len(parses) == 1
    assert at.session_state["posviz.table"] is table


def test_a_gguf_upload_is_parsed_once_however_often_the_page_runs(parses) -> None:
    at = data_page()
    upload(at, "llama31.gguf", (hostile.HOSTILE / "gguf" / "key_length_0.gguf").read_bytes())
    assert not at.exception, at.exception
    # Listed, its position metadata read, its one table loaded: then never again.
    counted = len(parses)
    for _ in range(3):
        at.run()
    assert len(parses) == counted


def test_a_rope_tensor_of_the_wrong_length_on_the_data_page(tmp_path) -> None:
    # Before: 1.6 GB (the 64 MiB tensor as a Python list), before anything was said.
    at = data_page()
    table = at.session_state["posviz.table"]
    data = hostile.rope_tensor_gguf(tmp_path / "r.gguf", 2**24).read_bytes()
    peak = upload(at, "r.gguf", data)
    assert not at.exception, at.exception
    (warning,) = [w.value for w in at.warning if literal("rope_freqs.weight") in w.value]
    assert literal("holds 16,777,216 values; the rotary width 128 gives 64 pairs") in warning
    # Its one learned tensor is loaded, as a file of one table is.
    assert at.session_state["posviz.table"] is not table
    assert at.session_state["posviz.table"].name == "token_embd.weight"
    assert peak < MAX_RESULT_BYTES, f"{peak / 2**20:.0f} MiB"


def test_a_gguf_upload_on_the_schemes_page_is_read_once(tmp_path, parses) -> None:
    at = schemes_page(**{"schemes.source": "config.json"})
    data = hostile.metadata_gguf(tmp_path / "llama.gguf", {}).read_bytes()
    at.get("file_uploader")[0].set_value(("llama.gguf", data, "x")).run()
    assert not at.exception, at.exception
    assert at.markdown[0].value.startswith("**rotary**")
    assert len(parses) == 1
    for _ in range(3):
        at.run()
    assert len(parses) == 1


@pytest.mark.parametrize("name", list(hostile.GGUF_METADATA))
def test_gguf_metadata_on_the_schemes_page(name: str) -> None:
    # Before: the crash box (ZeroDivisionError, int() of NaN).
    at = schemes_page(**{"schemes.source": "config.json"})
    data = (hostile.HOSTILE / "gguf" / f"{name}.gguf").read_bytes()
    at.get("file_uploader")[0].set_value((f"{name}.gguf", data, "x")).run()
    assert not at.exception, at.exception
    assert literal(hostile.GGUF_METADATA[name][1]) in at.error[0].value


# --- the Heads page, on the shared folder ----------------------------------------------------


def heads_page(root: Path, picked: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(root))
    loaders.shared_files.clear()
    at = apptest("pages/heads.py")
    at.session_state["heads.source"] = "Shared folder"
    at.run()
    at.selectbox(key="heads.shared").set_value(picked).run()
    return at


@pytest.mark.parametrize("case", list(hostile.HEADS_CONFIGS))
def test_a_heads_config_of_the_wrong_type_on_the_heads_page(tmp_path, monkeypatch, case) -> None:
    family, changes, says = hostile.HEADS_CONFIGS[case]
    hostile.heads_checkpoint(tmp_path / case, family, changes)
    at = heads_page(tmp_path, f"{case}/model.safetensors", monkeypatch)
    assert not at.exception, at.exception
    assert literal(says) in at.error[0].value


def test_a_gguf_from_the_shared_folder_on_the_heads_page(tmp_path, monkeypatch) -> None:
    # Before: AttributeError: 'LocalGGUF' object has no attribute 'repo'.
    path = tmp_path / "key_length_0.gguf"
    path.write_bytes((hostile.HOSTILE / "gguf" / "key_length_0.gguf").read_bytes())
    at = heads_page(tmp_path, "key_length_0.gguf", monkeypatch)
    assert not at.exception, at.exception
    assert literal("attention.key_length is 0") in at.error[0].value


def test_weights_holding_nan_on_the_heads_page(tmp_path, monkeypatch) -> None:
    # Before: the crash box (figures/heads.py on NaN numbers).
    hostile.poisoned_checkpoint(tmp_path / "gpt2", "gpt2", "h.0.attn.c_attn.weight", float("nan"))
    at = heads_page(tmp_path, "gpt2/model.safetensors", monkeypatch)
    assert not at.exception, at.exception
    assert literal("h.0.attn.c_attn.weight holds NaN values") in at.error[0].value


def test_heads_past_the_budget_on_the_heads_page(tmp_path, monkeypatch) -> None:
    # Before: minutes and 700 MB in the server, for a 21 MB checkpoint.
    hostile.wide_heads_checkpoint(tmp_path / "wide")
    at = heads_page(tmp_path, "wide/model.safetensors", monkeypatch)
    at.number_input(key="heads.positions").set_value(2048).run()  # all the table holds
    assert not at.exception, at.exception
    assert literal("1,024 heads over 2,048 positions") in at.error[0].value
    assert not at.get("plotly_chart")
