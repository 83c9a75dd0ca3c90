"""The Collection page: tables added from every source, one tab at a time, the example, budgets."""

from __future__ import annotations

import functools
import gc
import html
import json

import numpy as np
import pytest
from safetensors.numpy import save
from streamlit.testing.v1 import AppTest

from posviz import simulate
from posviz.collection import Member, gather, table_summary
from posviz.export import column_label
from posviz.similarity import similarity_map
from posviz.ui import loaders, pages, state
from posviz.ui.text import literal
from tests import apptest
from tests.app.test_pages import decode

PAGE = "pages/collection.py"
TABS = pages.page("collection").tabs


def titles(at: AppTest) -> list[str]:
    return [json.loads(el.proto.spec)["layout"]["title"]["text"] for el in at.get("plotly_chart")]


def plain(markdown: str) -> str:
    """The text a `literal()` markdown string shows."""
    return html.unescape(markdown).replace("\u2060", "")


def open_tab(at: AppTest, label: str) -> AppTest:
    at.session_state["collection.section"] = label
    at.run()
    assert not at.exception, at.exception
    return at


def with_members(members: list[Member]) -> AppTest:
    at = apptest(PAGE)
    at.session_state[state.COLLECTION] = members
    return at.run()


def test_an_empty_collection_asks_for_tables_and_offers_the_example():
    at = apptest(PAGE).run()
    assert not at.exception, at.exception
    assert "at least two" in at.info[0].value
    assert at.button(key="collection.example").label.startswith("Try an example")
    assert not at.get("plotly_chart")


@pytest.mark.slow
def test_the_example_is_a_simulated_training_run_drawn_one_tab_at_a_time():
    at = apptest(PAGE).run()
    at.button(key="collection.example").click().run()
    assert not at.exception, at.exception
    members = at.session_state[state.COLLECTION]
    assert [m.step.value for m in members] == [100, 300, 1000, 3000, 10000, 30000]
    # One learned-like table (one seed) over training: its noise falls step by step.
    assert [m.table.values.shape for m in members] == [(512, 128)] * 6
    metrics = at.dataframe[1].value  # [0] is the label editor's
    ranks = metrics[column_label("effective_rank")].tolist()
    assert ranks == sorted(ranks, reverse=True)
    assert metrics["step"].tolist() == ["100", "300", "1,000", "3,000", "10,000", "30,000"]
    assert titles(at) == []  # the Metrics tab: numbers only
    expected = {
        "Over training": "Metrics over training",
        "Spectra": "Cumulative explained variance",
        "Offsets": "Mean cosine similarity against offset",
        "Similarity maps": "Cosine similarity between positions (rows mean-centred; block means",
        "CKA map": "Tables by classic (biased) linear CKA on their first 512 positions",
    }
    for tab, title in expected.items():
        shown = titles(open_tab(at, tab))
        assert len(shown) == 1, (tab, shown)  # one chart drawn at a time
        assert shown[0].startswith(title), (tab, shown)
    shown = titles(open_tab(at, "One table"))
    assert [t.split(" (")[0] for t in shown] == [
        "Cosine similarity between positions",
        "Singular values",
    ]


def test_simulations_are_added_as_a_set_with_a_dash_for_no_step():
    at = apptest(PAGE).run()
    at.text_input(key="collection.sim.n").set_value("96, 128")
    at.text_input(key="collection.sim.seeds").set_value("0, 1")
    at.number_input(key="collection.sim.d").set_value(32)
    at.button(key="collection.sim.add").click().run()
    assert not at.exception, at.exception
    editor, frame = at.dataframe[0].value, at.dataframe[1].value
    assert frame["label"].tolist() == [
        "learned-like n=96 seed=0",
        "learned-like n=96 seed=1",
        "learned-like n=128 seed=0",
        "learned-like n=128 seed=1",
    ]
    assert editor["step"].tolist() == ["-"] * 4
    assert frame["step"].tolist() == ["-"] * 4
    expected = table_summary(simulate.learned_like(128, 32, seed=1).values).metrics
    row = frame.iloc[3]
    for key, value in expected.items():
        assert row[column_label(key)] == pytest.approx(value, rel=1e-12), key
    open_tab(at, "Over training")
    assert not titles(at)
    assert "needs a step" in at.info[0].value
    assert titles(open_tab(at, "CKA map"))[0].startswith(
        "Tables by classic (biased) linear CKA on their first 96"
    )


def test_checkpoints_are_ordered_by_step_and_a_refused_one_is_listed():
    at = with_members(
        [
            Member("ckpt-step2000", simulate.learned_like(64, 16, seed=2)),
            Member("ckpt-step300", simulate.learned_like(64, 16, seed=1)),
            Member("broken-step100", error="broken.npy: file is truncated; export it again."),
            Member("ckpt-step10000", simulate.learned_like(64, 16, seed=3)),
        ]
    )
    assert not at.exception, at.exception
    assert literal("broken.npy: file is truncated") in at.warning[0].value
    frame = at.dataframe[1].value
    # A refused checkpoint keeps its place in the order, with its reason.
    assert frame["step"].tolist() == ["100", "300", "2,000", "10,000"]
    assert frame["label"].tolist()[0] == "broken-step100"
    assert frame["error"].tolist()[0].startswith("broken.npy")
    assert titles(open_tab(at, "Over training"))[0].startswith("Metrics over training")
    # The step slider walks one table: the heatmap follows it.
    open_tab(at, "One table")
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


def test_removing_a_row_in_the_editor_removes_the_table():
    at = with_members([Member(f"m{i}", simulate.learned_like(32, 8, seed=i)) for i in range(3)])
    editor = at.session_state[f"collection.editor.{at.session_state[state.COLLECTION_EDITOR]}"]
    assert editor is not None
    at.session_state[f"collection.editor.{at.session_state[state.COLLECTION_EDITOR]}"] = {
        "edited_rows": {1: {"keep": False}, 0: {"label": "first"}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception, at.exception
    assert [m.label for m in at.session_state[state.COLLECTION]] == ["first", "m2"]


def test_a_shared_subfolder_adds_every_matching_file(tmp_path, monkeypatch):
    run = tmp_path / "pythia" / "run1"
    run.mkdir(parents=True)
    for step, seed in (("step1000", 1), ("step200", 2)):
        np.save(run / f"{step}.npy", simulate.learned_like(48, 8, seed=seed).values)
    (run / "step5000.npy").write_bytes(b"junk")
    np.save(tmp_path / "other.npy", np.eye(4))
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    loaders.shared_files.clear()
    at = apptest(PAGE).run()
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
    assert frame["error"].tolist()[2].startswith("pythia/run1/step5000.npy")


def test_a_files_matching_pattern_is_bounded(tmp_path, monkeypatch):
    np.save(tmp_path / "step1.npy", simulate.learned_like(48, 8, seed=1).values)
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    at = apptest(PAGE).run()
    pattern = at.text_input(key="collection.shared.pattern")
    pattern.set_value("*" * 500_000).run()
    assert not at.exception
    pattern = at.text_input(key="collection.shared.pattern")
    assert pattern.max_chars == gather.MAX_PATTERN
    assert pattern.value == "*" * gather.MAX_PATTERN  # cut on the server: what fnmatch compiles


def test_hub_ids_and_revisions_are_read_from_the_hub(fake_hub):
    for revision, seed in (("step2000", 1), ("step100", 2)):
        wpe = simulate.learned_like(32, 8, seed=seed).values
        fake_hub.add("org/model", {"model.safetensors": save({"wpe.weight": wpe})}, revision)
    gpt2 = simulate.learned_like(40, 8, seed=3).values
    fake_hub.add("gpt2", {"model.safetensors": save({"wpe.weight": gpt2})})
    at = apptest(PAGE).run()
    at.text_area(key="collection.hub.refs").set_value("gpt2\nhf:org/model@nope")
    at.text_input(key="collection.hub.repo").set_value("org/model")
    at.text_input(key="collection.hub.revisions").set_value("step2000, step100").run()
    at.button(key="collection.hub.add").click().run()
    assert not at.exception, at.exception
    frame = at.dataframe[1].value
    assert frame["label"].tolist() == [
        "gpt2",
        "hf:org/model@nope",
        "org/model@step2000",
        "org/model@step100",
    ]
    assert "nope" in frame["error"].tolist()[1]
    members = {m.label: m for m in at.session_state[state.COLLECTION]}
    np.testing.assert_array_equal(members["gpt2"].table.values, gpt2)


def test_more_models_than_a_collection_holds_are_refused_before_the_hub_is_asked(fake_hub):
    at = apptest(PAGE).run()
    at.text_area(key="collection.hub.refs").set_value("\n".join(f"org/m{i}" for i in range(33)))
    at.run()
    assert "33 models named; a collection holds at most 32" in plain(at.error[0].value)
    assert not [b for b in at.button if b.key == "collection.hub.add"]
    assert fake_hub.log == []


def test_posviz_hub_off_removes_the_hub_source(monkeypatch):
    monkeypatch.setenv("POSVIZ_HUB", "off")
    at = apptest(PAGE).run()
    assert not at.exception, at.exception
    assert "Hugging Face Hub" not in [tab.label for tab in at.tabs]
    monkeypatch.setenv("POSVIZ_HUB", "on")
    assert "Hugging Face Hub" in [tab.label for tab in at.run().tabs]


# --- budgets ---------------------------------------------------------------------------------


@pytest.fixture
def built(monkeypatch) -> list[tuple[int, int]]:
    """The shapes of the learned-like tables the page builds (the size probe aside)."""
    shapes = []
    generator = simulate.GENERATORS["learned-like"]

    @functools.wraps(generator)
    def counting(n_positions, d_model, **options):
        if n_positions > 10:
            shapes.append((n_positions, d_model))
        return generator(n_positions, d_model, **options)

    monkeypatch.setitem(simulate.GENERATORS, "learned-like", counting)
    return shapes


def ask(at: AppTest, lengths: str, seeds: str, d_model: int) -> AppTest:
    at.text_input(key="collection.sim.n").set_value(lengths)
    at.text_input(key="collection.sim.seeds").set_value(seeds)
    at.number_input(key="collection.sim.d").set_value(d_model)
    at.button(key="collection.sim.add").click().run()
    assert not at.exception, at.exception
    return at


def test_more_tables_than_a_collection_holds_are_refused_before_any_is_built(built):
    at = ask(apptest(PAGE).run(), "16", "0, 1", 4)
    assert len(built) == 2
    seeds = ", ".join(str(s) for s in range(31))
    ask(at, "16", seeds, 4)
    assert "31 tables asked for, but a collection holds at most 32 and 2 are in it" in (
        plain(at.error[0].value)
    )
    assert len(built) == 2  # nothing more was built
    assert len(at.session_state[state.COLLECTION]) == 2


def test_more_bytes_than_the_budget_are_refused_before_any_is_built(built):
    # 3 tables of 8192 x 4096 float32: 384 MiB, above the 256 MiB of a collection.
    at = ask(apptest(PAGE).run(), "8192", "0, 1, 2", 4096)
    assert built == []
    message = plain(at.error[0].value)
    assert "would hold 384.0 MiB" in message
    assert "above its budget of 256.0 MiB" in message
    assert at.session_state[state.COLLECTION] == []


def test_the_form_cannot_ask_beyond_the_generators_bounds(built):
    at = ask(apptest(PAGE).run(), "70000", "0", 4)
    assert "Positions: one or more whole numbers from 10 to 65,536" in plain(at.error[0].value)
    limit = simulate.PARAMETERS["d_model"].high
    assert at.number_input(key="collection.sim.d").max == limit
    assert at.text_input(key="collection.sim.n").max_chars == 200
    assert built == []


def test_the_widgets_bounds_are_their_functions():
    from posviz._params import Refused, bounds_of
    from posviz.schemes.rotary import rotary_table

    at = apptest(PAGE).run()
    drop = bounds_of(gather.file_request)["row_start"]
    widget = at.number_input(key="collection.upload.drop")  # the shared folder's is the same
    assert (widget.min, widget.max) == (drop.low, drop.high) == (0, 4096)
    rows = at.number_input(key="collection.schemes.rows")
    positions = bounds_of(rotary_table)["positions"]
    assert (rows.min, rows.max) == (positions.low, positions.high)
    with pytest.raises(Refused, match="row_start is 4097"):
        gather.file_request("t", b"", "t.npy", row_start=drop.high + 1)


def test_the_page_states_the_budgets():
    at = apptest(PAGE).run()
    budget = gather.COLLECTION_BYTES // 2**20
    assert any(f"at most 32 tables and {budget} MiB" in c.value for c in at.caption)
    # Formerly the uploader said "1GB per file" (the server's limit) beside it: one limit.
    (uploader,) = at.get("file_uploader")
    assert uploader.proto.max_upload_size_mb == budget


MARKUP = "<a href='http://127.0.0.1:9/x'>run</a> <span style='background:url(x)'>&</span>"


def strings(value: object) -> list[str]:
    """Every string inside a figure's JSON."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


@pytest.mark.parametrize("ordered", [True, False])
def test_labels_reach_every_figure_as_text_not_markup(ordered):
    suffix = "-step" if ordered else "-seed"
    at = with_members(
        [Member(f"{MARKUP}{suffix}{i}", simulate.learned_like(32, 8, seed=i)) for i in range(1, 4)]
    )
    seen = []
    for tab in TABS:
        open_tab(at, tab)
        for spec in at.get("plotly_chart"):
            texts = strings(json.loads(spec.proto.spec))
            assert not [t for t in texts if "<a" in t or "<span" in t], tab
            seen += [t for t in texts if "&lt;a href=" in t]
    assert seen  # the labels are there, escaped


@pytest.mark.slow
def test_the_server_budget_counts_every_live_sessions_collection(monkeypatch):
    gc.collect()  # no earlier test's session left in the count
    # A budget of 1 MiB over the server: two sessions of 512 KiB each fill it.
    monkeypatch.setitem(gather.gather.__kwdefaults__, "max_server_bytes", 2**20)
    first = ask(apptest(PAGE).run(), "256", "0, 1", 256)
    assert len(first.session_state[state.COLLECTION]) == 2
    second = ask(apptest(PAGE).run(), "256", "2, 3, 4", 256)
    message = plain(second.error[0].value)
    assert "everyone using this server hold 0.5 MiB of their budget of 1.0 MiB" in message
    assert second.session_state[state.COLLECTION] == []
    del first  # the session ends: its tables leave the server's count
    gc.collect()
    ask(second, "256", "2, 3", 256)
    assert not second.error
    assert len(second.session_state[state.COLLECTION]) == 2
