"""posviz.ui.links (with the session state it names): a link copied on any page reopens the table
it was made on, or says on screen why not."""

from __future__ import annotations

import html
import io
import json

import numpy as np
import pytest
from safetensors.numpy import save, save_file
from streamlit.testing.v1 import AppTest

from posviz import simulate
from posviz.embedding import LoadError
from posviz.io.detect import trim_leading
from posviz.ui import links, loaders, state
from tests import apptest, ggufs


def url(at: AppTest) -> dict[str, str]:
    """The URL's keys after a run, as a copied link carries them."""
    return {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}


def reopen(link: dict[str, str], page: str = "app.py") -> AppTest:
    """A new session (a new browser tab) opening `link`."""
    at = apptest(page)
    at.query_params.update(link)
    return at.run()


def shown(at: AppTest) -> list[str]:
    return [html.unescape(w.value).replace("\u2060", "") for w in at.warning]


def pending(at: AppTest) -> list[str]:
    """The notices app.py draws above every page (AppTest's switch_page runs the page alone,
    without app.py: the browser test sees them drawn on every page)."""
    kept = at.session_state.get(state.NOTICES, {})
    return [text for slot, (sha, text) in kept.items() if at.session_state[slot].sha256 == sha]


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# --- the keys, without Streamlit --------------------------------------------------------------


def test_a_simulation_is_named_by_every_option_and_a_trim_by_its_rows():
    table = simulate.learned_like(64, 16, seed=3)
    origin = links.simulation("learned-like", {"n_positions": 64, "d_model": 16, "seed": 3})
    named = links.keys(table, origin, made=table.sha256)
    assert named == {
        "sim": "learned-like",
        "n_positions": "64",
        "d_model": "16",
        "n_frequencies": "24",
        "noise": "0.1",
        "boundary": "4",
        "seed": "3",
        "sha256": table.sha256[:16],
    }
    trimmed = trim_leading(table, 2)
    cut = links.keys(trimmed, origin, made=table.sha256)
    assert (cut["rows"], cut["tensor"]) == ("2:64", "learned_like")
    # Read back, the link makes the same table, bit for bit.
    options = simulate.parse_options("learned-like", cut)
    again = links.recut(simulate.learned_like(**options), cut)
    assert again.sha256 == trimmed.sha256


def test_a_table_no_link_can_carry_is_named_in_words():
    table = simulate.gaussian(32, 8)
    named = links.keys(table, None, made=None)
    assert named == {"table": f"gaussian · {table.source}", "sha256": table.sha256[:16]}
    upload = links.keys(table, {"upload": "E.npy"}, made=None)
    assert upload == {"upload": "E.npy", "tensor": "gaussian", "rows": "0:32"} | {
        "sha256": table.sha256[:16]
    }


@pytest.mark.parametrize(("text", "why"), [("3", "row range"), ("a:b", "row range")])
def test_rows_that_are_not_a_range_are_refused(text, why):
    with pytest.raises(LoadError, match=why):
        links.parse_rows(text)


def test_a_grid_that_is_not_one_is_refused():
    with pytest.raises(LoadError, match="grid like 14x14"):
        links.parse_grid("14by14")


def test_the_same_table_needs_no_notice_another_one_does():
    table = simulate.gaussian(32, 8)
    same = {"sim": "gaussian", "sha256": table.sha256[:16]}
    assert links.not_reopened(same, table, linked=True) is None
    assert links.not_reopened({"sim": "gaussian"}, table, linked=True) is None  # cannot tell
    other = {"sim": "gaussian", "sha256": "0" * 16}
    assert "not the one the link was made on" in links.not_reopened(other, table, linked=True)
    upload = {"upload": "E.npy", "tensor": "wpe", "rows": "0:64", "sha256": "0" * 16}
    said = links.not_reopened(upload, table, linked=False)
    assert "uploaded from the file E.npy (tensor wpe, rows 0-63)" in said
    assert "upload that file on the Data page" in said


# --- in the app ---------------------------------------------------------------------------------


def test_the_app_names_the_default_table_in_its_url():
    # A page switch drops the keys in a browser; app.py puts them back on every run, which the
    # browser test sees (tests/e2e/test_links.py).
    at = apptest("app.py").run()
    first = url(at)
    assert first["sim"] == "learned-like"
    assert first["sha256"] == at.session_state[state.PRIMARY].sha256[:16]
    assert not at.warning


def test_a_simulation_made_on_the_data_page_is_reopened_from_another_page():
    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    at.selectbox(key="posviz.table.kind").set_value("gaussian").run()
    at.number_input[0].set_value(300)  # inside the form: sent with the submit
    at.button[0].click().run()
    at.switch_page("pages/similarity.py").run()
    link = url(at)
    assert (link["sim"], link["n_positions"]) == ("gaussian", "300")
    again = reopen(link)
    assert again.session_state[state.PRIMARY].sha256 == at.session_state[state.PRIMARY].sha256
    assert not again.warning


def test_a_trimmed_table_is_reopened_trimmed():
    at = apptest("app.py")
    at.query_params.update({"sim": "learned-like", "n_positions": "64", "d_model": "16"})
    at.run()
    at.switch_page("pages/boundaries.py").run()
    at.number_input(key="boundaries.trim").set_value(3)
    at.button(key="boundaries.trim_go").click().run()
    assert not at.exception, at.exception
    trimmed = at.session_state[state.PRIMARY]
    assert trimmed.row_start == 3
    link = url(at)
    assert link["rows"] == "3:64"
    again = reopen(link)
    assert again.session_state[state.PRIMARY].sha256 == trimmed.sha256
    assert not again.warning


def test_compares_second_table_travels_once_it_is_not_the_default():
    default = {"second.sim": "sinusoidal", "second.n_positions": "1024", "second.d_model": "768"}
    at = reopen(default)
    assert at.session_state[state.SECOND].sha256 == simulate.sinusoidal(1024, 768).sha256
    assert not [k for k in url(at) if k.startswith("second.")]  # the default: not named
    at = apptest("app.py")
    at.session_state[state.SECOND] = simulate.gaussian(64, 8, seed=4)  # made on a page
    at.run()
    assert url(at)["second.table"].startswith("gaussian")
    assert url(at)["sim"] == "learned-like"
    at = apptest("app.py")
    at.query_params.update(
        {"second.sim": "gaussian", "second.n_positions": "256", "second.seed": "4"}
    )
    at.run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    assert at.session_state[state.SECOND].sha256 == simulate.gaussian(256, seed=4).sha256
    assert url(at)["second.n_positions"] == "256"


def test_an_uploaded_tables_link_says_what_to_upload():
    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    table = simulate.sinusoidal_table(64, 16).astype(np.float32)
    at.file_uploader(key="posviz.table.upload").set_value(
        ("E.npy", npy(table), "application/octet-stream")
    ).run()
    at.switch_page("pages/similarity.py").run()
    link = url(at)
    assert (link["upload"], link["tensor"], link["rows"]) == ("E.npy", "E", "0:64")
    assert "sim" not in link
    again = reopen(link, "app.py")
    (said,) = shown(again)
    assert "uploaded from the file E.npy (tensor E, rows 0-63)" in said
    assert "Showing learned_like, 1,024 x 768" in said
    # Until another table is loaded, every page says so.
    again.switch_page("pages/data.py").run()
    assert len(pending(again)) == 1
    again.file_uploader(key="posviz.table.upload").set_value(
        ("E.npy", npy(table), "application/octet-stream")
    ).run()
    assert pending(again) == []
    assert url(again)["sha256"] == link["sha256"]  # the same table as the link's


def test_a_link_whose_source_changed_says_so():
    table = simulate.gaussian(100, 8, seed=1)
    link = {"sim": "gaussian", "n_positions": "100", "d_model": "8", "seed": "2"}
    at = reopen(link | {"sha256": table.sha256[:16]})
    (said,) = shown(at)
    assert "not the one the link was made on" in said


def test_a_link_without_a_table_says_so():
    at = reopen({"similarity.section": "Similarity vs offset"})
    (said,) = shown(at)
    assert "This link names no table" in said
    assert "learned_like" in said
    assert not reopen({}).warning  # the app's own address is no link


def test_a_file_of_the_shared_folder_is_reopened(tmp_path, monkeypatch):
    rows = simulate.learned_like(40, 8, seed=2).values
    save_file({"wpe.weight": rows, "wte.weight": rows[:20]}, tmp_path / "m.safetensors")
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    loaders.shared_files.clear()
    at = apptest("pages/data.py").run()
    at.selectbox(key="posviz.table.shared.file").set_value("m.safetensors").run()
    next(b for b in at.button if b.label == "Load").click().run()
    assert not at.exception, at.exception
    link = url(at)
    assert (link["shared"], link["tensor"], link["rows"]) == ("m.safetensors", "wpe.weight", "0:40")
    again = reopen(link)
    assert again.session_state[state.PRIMARY].sha256 == at.session_state[state.PRIMARY].sha256
    assert not again.warning
    # Another server, without that folder: said on screen.
    monkeypatch.delenv("POSVIZ_DATA_DIR")
    (said,) = shown(reopen(link))
    assert "The link's file of the shared folder was not opened" in said
    assert "no shared folder" in said


def test_a_hub_link_names_the_commit_it_was_read_at(fake_hub):
    wpe = simulate.learned_like(40, 8, seed=2).values
    repo = fake_hub.add(
        "acme/gpt",
        {"config.json": json.dumps({}).encode(), "model.safetensors": save({"wpe": wpe})},
    )
    at = apptest("pages/data.py").run()
    at.text_input(key="posviz.table.hub.repo").set_value("acme/gpt")
    next(b for b in at.button if b.label == "Open").click().run()
    next(b for b in at.button if b.label == "Load").click().run()
    assert not at.exception, at.exception
    link = url(at)
    assert (link["hub"], link["revision"], link["tensor"]) == ("acme/gpt", repo.commit, "wpe")
    again = reopen(link)
    assert again.session_state[state.PRIMARY].sha256 == at.session_state[state.PRIMARY].sha256
    assert not again.warning


def test_a_hub_gguf_link_reopens_the_file_it_was_read_from(fake_hub, tmp_path):
    # Two files of one table: without the file in the link, the most precise (F16) would be
    # read again instead of the Q8_0 the link was made on.
    wpe = simulate.learned_like(64, 32, seed=2).values.astype(np.float32)
    repo = fake_hub.add(
        "acme/gpt2-GGUF",
        {
            "gpt2-Q8_0.gguf": ggufs.learned(tmp_path / "q8.gguf", wpe, "Q8_0"),
            "gpt2-F16.gguf": ggufs.learned(tmp_path / "f16.gguf", wpe, "F16"),
        },
    )
    at = apptest("pages/data.py").run()
    at.text_input(key="posviz.table.hub.repo").set_value("acme/gpt2-GGUF:Q8_0")
    next(b for b in at.button if b.label == "Open").click().run()
    next(b for b in at.button if b.label == "Load").click().run()
    assert not at.exception, at.exception
    link = url(at)
    assert (link["hub"], link["revision"], link["file"]) == (
        "acme/gpt2-GGUF",
        repo.commit,
        "gpt2-Q8_0.gguf",
    )
    again = reopen(link, "pages/spectrum.py")
    table = again.session_state[state.PRIMARY]
    assert (table.sha256, table.dtype) == (at.session_state[state.PRIMARY].sha256, "Q8_0")
    assert not again.warning
    assert not pending(again)
    assert url(again)["file"] == "gpt2-Q8_0.gguf"  # and its link names it still


def test_a_gguf_of_the_shared_folder_is_reopened_by_its_path(tmp_path, monkeypatch):
    wpe = simulate.learned_like(64, 32, seed=2).values.astype(np.float32)
    (tmp_path / "gguf").mkdir()
    ggufs.learned(tmp_path / "gguf" / "gpt2-Q8_0.gguf", wpe, "Q8_0")
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    loaders.shared_files.clear()
    at = apptest("pages/data.py").run()
    at.selectbox(key="posviz.table.shared.file").set_value("gguf/gpt2-Q8_0.gguf").run()
    next(b for b in at.button if b.label == "Load").click().run()
    assert not at.exception, at.exception
    link = url(at)
    assert (link["shared"], link["tensor"]) == ("gguf/gpt2-Q8_0.gguf", "position_embd.weight")
    again = reopen(link)
    table = again.session_state[state.PRIMARY]
    assert (table.sha256, table.dtype) == (at.session_state[state.PRIMARY].sha256, "Q8_0")
    assert not again.warning


def test_data_opens_its_simulate_form_on_the_current_tables_generator():
    # Formerly: opened first, the Data page showed "sinusoidal" over the learned-like table.
    at = apptest("pages/data.py").run()
    assert at.selectbox(key="posviz.table.kind").value == "learned-like"
    assert {n.label: n.value for n in at.number_input}["Positions"] == 1024
