"""GGUF files in the app: the Schemes page reads a GGUF's metadata (its keys listed) and compares
it with another source; the Data page loads a quantized table, and the Spectrum page states the
quantization's error against the original."""

from __future__ import annotations

import json

import numpy as np
from streamlit.testing.v1 import AppTest

from posviz.embedding import Embedding
from posviz.io import _gguf
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import rotary_frequencies
from posviz.ui import loaders
from posviz.ui.text import literal
from tests import apptest, ggufs
from tests.app.test_schemes import figures

TABLE = np.random.default_rng(3).standard_normal((64, 256)).astype(np.float32)


def schemes_page(**state) -> AppTest:
    at = apptest("pages/schemes.py")
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def test_a_gguf_upload_gives_its_scheme_and_agrees_with_its_config(tmp_path) -> None:
    data = ggufs.llama31(tmp_path / "llama.gguf").read_bytes()
    at = schemes_page(**{"schemes.source": "config.json", "schemes.compare": True})
    at.get("file_uploader")[0].set_value(("llama.gguf", data, "application/octet-stream")).run()
    assert not at.exception, at.exception
    assert at.markdown[0].value.startswith("**rotary**")
    assert {m.label: m.value for m in at.metric}["rotary width"] == "128"
    keys = at.dataframe[0].value  # the GGUF keys read, each with the config key it fed
    assert "rope_scaling (llama3)" in keys["config"].tolist()
    # B: the model's config.json, built into posviz: they agree
    at.selectbox(key="schemes.compare.preset").set_value("meta-llama/Llama-3.1-8B").run()
    assert not at.exception, at.exception
    assert "agree within 1e-06" in at.success[-1].value
    pairs, angles = figures(at)[-2:]
    assert pairs["layout"]["yaxis"]["type"] == "log"
    assert angles["layout"]["xaxis"]["title"]["text"] == "position m"


def test_a_runtime_dump_with_the_short_factors_past_the_original_context(tmp_path) -> None:
    spec = position_scheme(PRESETS["microsoft/Phi-3.5-mini-instruct"]).rotary[0]
    path = tmp_path / "inv_freq.npy"
    np.save(path, rotary_frequencies(spec, context=4096).inv_freq.astype(np.float32))
    at = schemes_page(**{
        "schemes.preset": "microsoft/Phi-3.5-mini-instruct",
        "schemes.compare": True,
        "schemes.compare.kind": "File",
    })  # fmt: skip
    at.get("file_uploader")[0].set_value(("inv_freq.npy", path.read_bytes(), "x")).run()
    assert not at.exception, at.exception
    assert "first at **inv_freq**" in at.error[0].value
    assert any("short factors" in i.value for i in at.info)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["pairs differing"] == "48"


def test_a_quantized_table_names_its_type_and_its_error(tmp_path) -> None:
    data = ggufs.learned(tmp_path / "gpt2-q8.gguf", TABLE, "Q8_0").read_bytes()
    at = apptest("pages/data.py").run()
    at.get("file_uploader")[0].set_value(("gpt2-Q8_0.gguf", data, "x")).run()
    assert not at.exception, at.exception
    assert at.selectbox[-1].value == "position_embd.weight"  # detected by its GGUF name
    (load,) = [b for b in at.button if b.label == "Load"]
    load.click().run()
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    assert (table.name, table.dtype) == ("position_embd.weight", "Q8_0")
    spectrum = apptest("pages/spectrum.py")
    spectrum.session_state["posviz.table"] = table
    spectrum.run()
    assert not spectrum.exception, spectrum.exception
    assert f"stored as **{literal('Q8_0')}**" in spectrum.info[0].value
    original = Embedding.from_array(TABLE, name="wpe", source="gpt2.safetensors")
    spectrum.session_state["posviz.second"] = original
    spectrum.run()
    assert not spectrum.exception, spectrum.exception
    note = spectrum.info[0].value
    relative = np.linalg.norm(table.values - TABLE) / np.linalg.norm(TABLE)
    assert f"**{relative:.3g}**" in note
    assert "float16 would give" in note


def test_a_rotary_gguf_on_the_data_page_says_it_has_no_table(tmp_path) -> None:
    data = ggufs.llama31(tmp_path / "llama.gguf").read_bytes()
    at = apptest("pages/data.py").run()
    at.get("file_uploader")[0].set_value(("llama.gguf", data, "x")).run()
    assert not at.exception, at.exception
    assert "GGUF metadata says it uses rotary" in at.warning[0].value


def test_a_hub_gguf_on_the_schemes_page(fake_hub, tmp_path) -> None:
    fake_hub.add("acme/Llama-GGUF", {"L-Q8_0.gguf": ggufs.llama31(tmp_path / "l.gguf")})
    at = schemes_page(**{"schemes.source": "Hub model"})
    at.text_input(key="schemes.repo").set_value("acme/Llama-GGUF:Q8_0")
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert at.markdown[0].value.startswith("**rotary**")
    assert json.dumps(at.session_state["schemes.opened"]) == '["acme/Llama-GGUF", "main", "Q8_0"]'


def test_the_data_pages_hub_tab_opens_a_gguf_file_by_its_quantization(fake_hub, tmp_path) -> None:
    from tests.app.test_hub import button, open_model

    fake_hub.add(
        "acme/gpt2-GGUF",
        {
            "gpt2-Q8_0.gguf": ggufs.learned(tmp_path / "q8.gguf", TABLE, "Q8_0"),
            "gpt2-F16.gguf": ggufs.learned(tmp_path / "f16.gguf", TABLE, "F16"),
        },
    )
    at = apptest("pages/data.py").run()
    open_model(at, "acme/gpt2-GGUF:Q8_0")
    assert at.selectbox(key="posviz.table.hub.tensor").value == "position_embd.weight"
    button(at, "Load").click().run()
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    assert table.dtype == "Q8_0"
    assert table.source.endswith("gpt2-Q8_0.gguf")
    assert at.query_params["file"] == "gpt2-Q8_0.gguf"  # the link reopens this file


def test_a_shared_gguf_on_the_schemes_page(tmp_path, monkeypatch) -> None:
    from posviz.ui import loaders

    ggufs.llama31(tmp_path / "Llama-3.1-8B-Q8_0.gguf")
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    loaders.shared_files.clear()
    at = schemes_page(**{"schemes.source": "Shared folder"})
    at.selectbox(key="schemes.shared").set_value("Llama-3.1-8B-Q8_0.gguf").run()
    assert not at.exception, at.exception
    assert at.markdown[0].value.startswith("**rotary**")
    assert {m.label: m.value for m in at.metric}["rotary width"] == "128"
    keys = at.dataframe[0].value  # the GGUF keys read, each with the config key it fed
    assert "rope_scaling (llama3)" in keys["config"].tolist()
    # The per-layer map of main's Layers tab, from the GGUF's block count.
    at.session_state["schemes.section"] = "Layers"
    at.run()
    assert not at.exception, at.exception
    layers = at.dataframe[-1].value
    assert len(layers) == 32  # llama.block_count
    # The GGUF stands for the weights too: a stored inv_freq is looked for in its tensors.
    at.toggle(key="schemes.inv_freq").set_value(True).run()
    assert not at.exception, at.exception
    assert "stores no inv_freq buffer" in at.info[-1].value


def test_a_shared_gguf_as_b_is_named_as_the_folder_lists_it(downloads, tmp_path, monkeypatch):
    # The server's path is not the visitor's business (issue 37): on screen, in the figures
    # and in the exports the file is named as the shared folder lists it; rerun finds it there.
    import posviz
    from posviz.ui import loaders

    ggufs.llama31(tmp_path / "Llama-3.1-8B-old.gguf", with_factors=False)
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    loaders.shared_files.clear()
    at = schemes_page(**{
        "schemes.preset": "meta-llama/Llama-3.1-8B",
        "schemes.compare": True,
        "schemes.compare.kind": "Shared folder",
    })  # fmt: skip
    at.selectbox(key="schemes.compare.shared").set_value("Llama-3.1-8B-old.gguf").run()
    assert not at.exception, at.exception
    assert "first at **rope_type**" in at.error[0].value
    shown = [e.value for e in [*at.markdown, *at.caption, *at.error, *at.info]]
    assert not [text for text in shown if str(tmp_path) in text]
    assert not [f for f in figures(at) if str(tmp_path) in json.dumps(f)]
    record = json.loads(downloads["scheme_diff.json"]())
    assert record["provenance"][1]["config"] == "Llama-3.1-8B-old.gguf"
    assert str(tmp_path) not in json.dumps(record)
    assert posviz.rerun(record, base=tmp_path).ok


def test_a_shared_gguf_on_the_data_page_is_parsed_once(tmp_path, monkeypatch) -> None:
    # Its header was parsed twice on every run of the page (a 10 MB vocabulary: ~1 s a run).
    ggufs.learned(tmp_path / "gpt2.gguf", TABLE)
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    loaders.shared_files.clear()
    parsed = []
    real = _gguf._parse

    def counted(*args, **kwargs):
        parsed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_gguf, "_parse", counted)
    at = apptest("pages/data.py").run()
    at.selectbox(key="posviz.table.shared.file").set_value("gpt2.gguf").run()
    assert not at.exception, at.exception
    first = len(parsed)
    assert first > 0
    for _ in range(3):
        at.run()
    assert len(parsed) == first
    assert any(literal("gpt2.gguf") in m.value and "2 tensors" in m.value for m in at.markdown)
