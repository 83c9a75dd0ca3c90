"""The Collection page: tables added from simulations, metrics equal the core's, every chart."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from posviz import hub, simulate
from posviz.collection import Member, table_summary
from posviz.embedding import LoadError
from posviz.similarity import similarity_map
from posviz.ui.text import literal
from tests.test_pages import decode

PAGE = str(Path(__file__).parents[1] / "pages/collection.py")


def titles(at: AppTest) -> list[str]:
    return [json.loads(el.proto.spec)["layout"]["title"]["text"] for el in at.get("plotly_chart")]


def test_an_empty_collection_asks_for_tables():
    at = AppTest.from_file(PAGE, default_timeout=30).run()
    assert not at.exception, at.exception
    assert "at least two" in at.info[0].value


def test_simulations_are_added_as_a_set_of_models_with_every_chart_but_over_training():
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    at.text_input(key="collection.sim.n").set_value("96, 128")
    at.text_input(key="collection.sim.seeds").set_value("0, 1")
    at.number_input(key="collection.sim.d").set_value(32)
    at.button(key="collection.sim.add").click().run()
    assert not at.exception, at.exception
    frame = at.dataframe[1].value  # [0] is the label editor's
    assert frame["label"].tolist() == [
        "learned-like n=96 seed=0",
        "learned-like n=96 seed=1",
        "learned-like n=128 seed=0",
        "learned-like n=128 seed=1",
    ]
    expected = table_summary(simulate.learned_like(128, 32, seed=1).values).metrics
    row = frame.iloc[3]
    for key, value in expected.items():
        assert row[key] == pytest.approx(value, rel=1e-12), key
    shown = titles(at)
    assert not any(t.startswith("Metrics over training") for t in shown)
    for start in (
        "Cumulative explained variance",
        "Mean cosine similarity against offset",
        "Cosine similarity between positions (rows mean-centred; block means",
        "Cosine similarity between positions (rows mean-centred; exact)",
        "Singular values",
        "Tables by linear CKA on their first 96 positions",
    ):
        assert any(t.startswith(start) for t in shown), start


def test_checkpoints_are_ordered_by_step_and_a_refused_one_is_listed():
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["posviz.collection"] = [
        Member("ckpt-step2000", simulate.learned_like(64, 16, seed=2)),
        Member("ckpt-step300", simulate.learned_like(64, 16, seed=1)),
        Member("broken-step100", error="broken.npy: file is truncated; export it again."),
        Member("ckpt-step10000", simulate.learned_like(64, 16, seed=3)),
    ]
    at.session_state["posviz.collection.editor"] = 0
    at.run()
    assert not at.exception, at.exception
    assert literal("broken.npy: file is truncated") in at.warning[0].value
    frame = at.dataframe[1].value
    # A refused checkpoint keeps its place in the order, with its reason.
    assert frame["step"].tolist() == [100, 300, 2000, 10000]
    assert frame["label"].tolist()[0] == "broken-step100"
    assert frame["error"].tolist()[0].startswith("broken.npy")
    over = [t for t in titles(at) if t.startswith("Metrics over training")]
    assert len(over) == 1
    # The step slider walks one table: the heatmap follows it.
    at.select_slider(key="collection.walk").set_value("ckpt-step10000").run()
    assert not at.exception, at.exception
    heatmaps = [
        json.loads(el.proto.spec)
        for el in at.get("plotly_chart")
        if "exact" in json.loads(el.proto.spec)["layout"]["title"]["text"]
    ]
    z = decode(heatmaps[0]["data"][0]["z"]).reshape(64, 64)
    table = simulate.learned_like(64, 16, seed=3).values
    expected = similarity_map(table, metric="cosine", center=True).values
    np.testing.assert_allclose(z, expected, atol=1e-6)


def test_a_shared_subfolder_adds_every_matching_file(tmp_path, monkeypatch):
    run = tmp_path / "pythia" / "run1"
    run.mkdir(parents=True)
    for step, seed in (("step1000", 1), ("step200", 2)):
        np.save(run / f"{step}.npy", simulate.learned_like(48, 8, seed=seed).values)
    (run / "step5000.npy").write_bytes(b"junk")
    np.save(tmp_path / "other.npy", np.eye(4))
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    at.selectbox(key="collection.shared.folder").set_value("pythia/run1")
    at.text_input(key="collection.shared.pattern").set_value("step*.npy").run()
    at.button(key="collection.shared.add").click().run()
    assert not at.exception, at.exception
    frame = at.dataframe[1].value
    assert frame["label"].tolist() == [
        "pythia/run1/step200",
        "pythia/run1/step1000",
        "pythia/run1/step5000",
    ]
    assert frame["error"].tolist()[2].startswith("pythia/run1/step5000.npy could not be read")
    assert any(t.startswith("Metrics over training") for t in titles(at))


def test_a_files_matching_pattern_is_bounded(tmp_path, monkeypatch):
    np.save(tmp_path / "step1.npy", simulate.learned_like(48, 8, seed=1).values)
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    pattern = at.text_input(key="collection.shared.pattern")
    pattern.set_value("*" * 500_000).run()
    assert not at.exception
    pattern = at.text_input(key="collection.shared.pattern")
    assert pattern.max_chars == 256
    assert pattern.value == "*" * 256  # cut on the server: what fnmatch compiles


def test_hub_ids_and_revisions_go_through_posviz_hub(monkeypatch):
    """posviz.hub.load stands in for the Hub (its own tests run it against a fake Hub)."""
    asked = []

    def load(ref: str, **options: object):
        asked.append(ref)
        if ref.endswith("@nope"):
            msg = "revision 'nope' not found in org/model"
            raise LoadError(msg)
        return simulate.learned_like(32, 8, seed=len(asked))

    monkeypatch.setattr(hub, "load", load)
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    at.text_area(key="collection.hub.refs").set_value("gpt2\nhf:org/model@nope")
    at.text_input(key="collection.hub.repo").set_value("org/model")
    at.text_input(key="collection.hub.revisions").set_value("step2000, step100").run()
    at.button(key="collection.hub.add").click().run()
    assert not at.exception, at.exception
    refs = ["hf:gpt2", "hf:org/model@nope", "hf:org/model@step2000", "hf:org/model@step100"]
    assert asked == refs
    frame = at.dataframe[1].value
    assert frame["label"].tolist() == [
        "gpt2",
        "hf:org/model@nope",
        "org/model@step2000",
        "org/model@step100",
    ]
    assert frame["error"].tolist()[1] == "revision 'nope' not found in org/model"


def test_posviz_hub_off_removes_the_hub_source(monkeypatch):
    monkeypatch.setenv("POSVIZ_HUB", "off")
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    assert "Hugging Face Hub" not in [tab.label for tab in at.tabs]
    monkeypatch.setenv("POSVIZ_HUB", "on")
    assert "Hugging Face Hub" in [tab.label for tab in at.run().tabs]
