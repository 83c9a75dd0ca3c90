"""Every page runs without an exception; the upload -> switch page -> chart flow works."""

from __future__ import annotations

import base64
import html
import inspect
import io
import json
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file
from streamlit.testing.v1 import AppTest

from posviz import simulate
from posviz.embedding import MIN_DIMS, MIN_POSITIONS, Embedding
from posviz.spectrum import NO_VARIANCE, spectrum
from posviz.ui import pages
from posviz.ui.text import literal
from tests import ROOT, apptest
from tests.corpus import HOSTILE_WORDS, MARKER, hostile_files

PAGES = [p.file for p in pages.PAGES]


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def decode(values: dict | list) -> np.ndarray:
    """A trace's array as plotly sent it: a typed base64 buffer or a plain list."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
    return np.asarray(values)


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_on_the_default_table(page):
    at = apptest(page).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_on_a_2d_grid_table(page):
    at = apptest(page)
    at.session_state["posviz.table"] = simulate.vit_grid(6, 6, 32)
    at.run()
    assert not at.exception, at.exception


#: Pages with a "Numbers" expander, whose tables are built only once it is opened.
NUMBERS = ["compare", "components", "resample", "similarity", "spectrum"]
#: The tab a page's "Numbers" expander is in, when that is not the tab open at first.
NUMBERS_TAB = {
    "compare": pages.page("compare").tabs[3],
    "similarity": pages.page("similarity").tabs[1],
}
#: The key of a page's Numbers expander, where it is not "<page>.numbers".
NUMBERS_KEY = {"resample": "resample.spectra_numbers"}


@pytest.mark.parametrize("page", NUMBERS)
def test_numbers_are_drawn_once_their_expander_opens(page):
    at = apptest(f"pages/{page}.py")
    if page in NUMBERS_TAB:
        at.session_state[f"{page}.section"] = NUMBERS_TAB[page]
    at.run()
    closed = len(at.dataframe)
    at.session_state[NUMBERS_KEY.get(page, f"{page}.numbers")] = True
    at.run()
    assert not at.exception, at.exception
    assert len(at.dataframe) > closed
    assert any(e.label.startswith("Numbers") for e in at.expander)
    # On screen, labels; the CSV and JSON keep the keys (tests/export/test_export.py).
    headers = [c for frame in at.dataframe for c in frame.value.columns]
    assert not [c for c in headers if "_" in c], headers


def test_app_opens_on_the_spectrum_of_a_simulated_table():
    at = apptest("app.py").run()
    assert not at.exception
    assert at.title[0].value == "Spectrum"
    default = at.session_state["posviz.table"]
    assert default.source.startswith("simulated: learned_like")
    shown = figures(at)
    assert shown[0]["layout"]["title"]["text"] == "Singular values (rows mean-centred)"
    drawn = decode(shown[0]["data"][0]["y"])
    expected = spectrum(default.values).singular_values
    np.testing.assert_allclose(drawn, expected[: len(drawn)], rtol=1e-6)
    assert any(literal("learned_like") in md.value for md in at.sidebar.markdown)
    # Effective rank and "99% in k components" count different things: each says what.
    counts = spectrum(default.values).metrics()
    (explained,) = [c.value for c in at.caption if "Effective rank" in c.value]
    assert f"**Effective rank {counts['effective_rank']:.2f}**" in explained
    assert f"**99% in {counts['k99']} components**" in explained


#: The Spectrum page's charts by tab: only the open tab's chart is built and sent.
SPECTRUM_TABS = {
    "Singular values": "Singular values",
    "Explained variance": "Cumulative explained variance",
    "Reconstruction error": "Relative reconstruction error",
}


def test_spectrum_draws_only_the_open_tab():
    at = apptest("pages/spectrum.py").run()
    assert [t.label for t in at.tabs] == list(SPECTRUM_TABS)
    assert len(at.metric) == 4  # the metrics and the shares stay above the tabs
    assert any("Components for a share" in md.value for md in at.markdown)
    for label, title in SPECTRUM_TABS.items():
        at.session_state["spectrum.section"] = label
        at.run()
        assert not at.exception
        shown = [figure["layout"]["title"]["text"] for figure in figures(at)]
        assert len(shown) == 1
        assert shown[0].startswith(title), shown
        assert len(at.metric) == 4


def test_spectrum_caption_gives_the_effective_rank_as_its_metric_does():
    # The metric read 134.91 and the caption under it "Effective rank 134.9".
    at = apptest("pages/spectrum.py").run()
    (metric,) = [m for m in at.metric if m.label == "effective rank"]
    assert any(f"**Effective rank {metric.value}**" in c.value for c in at.caption)


def test_spectrum_metrics_are_labelled_as_their_numbers_table_heads_them():
    # The metric read "n above noise", its row in the Numbers table "number above noise".
    from posviz.export import column_label
    from posviz.spectrum import DEFINITIONS

    at = apptest("pages/spectrum.py").run()
    assert [m.label for m in at.metric] == [column_label(key) for key in DEFINITIONS]


def test_spectrum_noise_caption_stays_with_the_singular_values():
    # An exactly low-rank table: singular values below the floor are drawn grey and said so.
    values = np.outer(np.arange(1, 65.0), np.ones(16)) + np.outer(np.ones(64), np.arange(16.0))
    at = apptest("pages/spectrum.py")
    at.session_state["posviz.table"] = Embedding.from_array(values, name="low", source="test")
    at.run()
    assert any("rounding noise" in c.value for c in at.caption)
    at.session_state["spectrum.section"] = "Explained variance"
    at.run()
    assert not any("rounding noise" in c.value for c in at.caption)


def test_a_link_opens_a_spectrum_tab():
    at = apptest("pages/spectrum.py")
    at.query_params["spectrum.section"] = "Reconstruction error"
    at.run()
    assert not at.exception
    shown = [figure["layout"]["title"]["text"] for figure in figures(at)]
    assert len(shown) == 1
    assert shown[0].startswith("Relative reconstruction error")


def test_the_simulate_form_shows_how_the_loaded_table_was_made():
    at = apptest("app.py")
    at.query_params.update({"sim": "sinusoidal", "n_positions": "256", "d_model": "64"})
    at.run()
    at.switch_page("pages/data.py").run()
    assert at.selectbox(key="posviz.table.kind").value == "sinusoidal"
    assert {n.label: n.value for n in at.number_input}["Positions"] == 256
    # The default table is learned-like, and the form says so.
    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    assert at.selectbox(key="posviz.table.kind").value == "learned-like"


def test_upload_then_switch_page_shows_the_uploaded_table():
    table = simulate.sinusoidal_table(512, 768).astype(np.float32)
    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    at.tabs[1]  # the upload tab exists
    at.file_uploader(key="posviz.table.upload").set_value(
        ("sinusoid.npy", npy_bytes(table), "application/octet-stream")
    ).run()
    assert not at.exception
    # One candidate in the file: loaded without a click on Load, named after the file.
    loaded = at.session_state["posviz.table"]
    assert (loaded.name, loaded.source, loaded.shape) == ("sinusoid", "sinusoid.npy", (512, 768))
    assert "Loaded sinusoid (rows 0-511 of 512)." in [s.value for s in at.success]
    next(b for b in at.button if b.label == "Load").click().run()  # again: the same table
    assert not at.exception, at.exception
    assert at.session_state["posviz.table"].sha256 == loaded.sha256
    at.switch_page("pages/spectrum.py").run()
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["effective rank"] == "120.96"
    assert shown["stable rank"] == "6.80"
    assert shown["participation ratio"] == "24.12"
    at.toggle(key="posviz.center").set_value(False).run()
    shown = {m.label: m.value for m in at.metric}
    assert shown["effective rank"] == "108.98"
    assert figures(at)[0]["layout"]["title"]["text"] == "Singular values (uncentred)"


def test_a_refused_upload_keeps_the_loaded_table():
    at = apptest("app.py").run()
    before = at.session_state["posviz.table"].sha256
    at.switch_page("pages/data.py").run()
    at.file_uploader(key="posviz.table.upload").set_value(
        ("model.pt", b"\x80\x04\x95 not really a pickle", "application/octet-stream")
    ).run()
    assert not at.exception
    assert any("pickle" in e.value.lower() for e in at.error)
    assert at.session_state["posviz.table"].sha256 == before


def test_every_hostile_upload_is_refused_by_name_and_the_table_stays(tmp_path):
    # The browser test uploads a few of these through the real chooser; here every one.
    at = apptest("app.py").run()
    before = at.session_state["posviz.table"].sha256
    at.switch_page("pages/data.py").run()
    for name, path in hostile_files(tmp_path).items():
        at.file_uploader(key="posviz.table.upload").set_value(
            (path.name, path.read_bytes(), "application/octet-stream")
        ).run()
        refusals = [html.unescape(e.value) for e in at.error]  # shown literally: escaped
        if not refusals:  # listed fine: refused on reading
            next(b for b in at.button if b.label == "Load").click().run()
            refusals = [html.unescape(e.value) for e in at.error]
        refusals = [r for r in refusals if path.name in r]
        assert not at.exception, (name, at.exception)
        assert refusals, (name, [e.value for e in at.error])
        assert HOSTILE_WORDS[name].lower() in refusals[0].lower(), (name, refusals)
        assert at.session_state["posviz.table"].sha256 == before, name
    assert not (tmp_path / MARKER).exists()


def test_a_link_reopens_the_same_simulated_table_and_view():
    at = apptest("app.py")
    at.query_params.update(
        {"sim": "sinusoidal", "n_positions": "512", "d_model": "768", "posviz.center": "false"}
    )
    at.run()
    assert not at.exception
    table = at.session_state["posviz.table"]
    assert table.source == "simulated: sinusoidal(n=512, d=768, base=10000)"
    shown = {m.label: m.value for m in at.metric}
    assert shown["effective rank"] == "108.98"  # uncentred, as the link says


def test_a_link_asking_for_a_huge_table_is_refused_before_allocating():
    at = apptest("app.py")
    at.query_params.update({"sim": "gaussian", "n_positions": "1000000", "d_model": "100000"})
    at.run()
    assert not at.exception
    assert "not made" in at.warning[0].value
    assert at.session_state["posviz.table"].source.startswith("simulated: learned_like")


def test_simulating_names_the_table_in_the_url():
    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    at.selectbox(key="posviz.table.kind").set_value("gaussian").run()
    at.number_input[0].set_value(300)  # inside the form: sent with the submit
    at.button[0].click().run()
    assert not at.exception
    assert at.session_state["posviz.table"].shape == (300, 768)
    assert at.query_params["sim"] == "gaussian"
    assert at.query_params["n_positions"] == "300"


def test_page_settings_live_in_the_url():
    at = apptest("app.py")
    at.query_params.update({"sim": "sinusoidal", "n_positions": "256", "d_model": "64"})
    at.query_params["similarity.metric"] = "dot product"  # a choice is named by its label
    at.run()
    at.switch_page("pages/similarity.py").run()
    assert not at.exception
    assert at.radio(key="similarity.metric").value == "dot"
    assert at.session_state["posviz.table"].shape == (256, 64)


def smallest(kind: str) -> Embedding:
    """A table of exactly the smallest size posviz analyses (a grid needs d % 4 == 0)."""
    if kind == "grid":
        return simulate.vit_grid(2, MIN_POSITIONS // 2, 4)
    shape = (MIN_POSITIONS, MIN_DIMS)
    values = np.ones(shape) if kind == "constant" else np.random.default_rng(0).normal(size=shape)
    return Embedding.from_array(values, name=kind, source="test")


@pytest.mark.parametrize("kind", ["random", "constant", "grid"])
@pytest.mark.parametrize("page", PAGES)
def test_page_runs_on_the_smallest_table(page, kind):
    # Formerly: "Leading rows to trim" had min > max on a 2-row table (Boundaries crashed).
    at = apptest(page)
    at.session_state["posviz.table"] = smallest(kind)
    at.run()
    assert not at.exception, at.exception
    # Compare's k components need a table of rank k: a degenerate table is told so.
    told = ("pick k up to", "has no variance")
    errors = [e.value for e in at.error if not any(t in e.value for t in told)]
    assert not errors, errors
    if page == "pages/spectrum.py":
        shown = {m.label: m.value for m in at.metric}
        assert (shown["stable rank"] == "undefined") == (kind == "constant")
        assert any(NO_VARIANCE in i.value for i in at.info) == (kind == "constant")


@pytest.mark.parametrize(
    "query",
    [
        {"sim": "learned-like", "n_frequencies": "100000"},
        {"sim": "learned-like", "n_frequencies": "1e10"},
        {"sim": "gaussian", "n_positions": "2.5"},
        {"sim": "gaussian", "seed": "0.5"},
        {"sim": "sinusoidal", "n_positions": "9"},
        {"sim": "2-D grid (ViT)", "height": "1", "width": "1"},
    ],
)
def test_a_link_with_options_beyond_the_form_is_refused_with_a_warning(query):
    # Formerly: unbounded or fractional link options took the server's memory or crashed.
    at = apptest("app.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    assert "not made" in at.warning[0].value
    assert at.session_state["posviz.table"].source.startswith("simulated: learned_like(n=1024")
    # The card and its Report button are still drawn.
    assert "Report (HTML)" in [b.label for b in at.button]


def test_the_form_offers_exactly_the_bounds_the_link_parser_accepts():
    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    for kind in simulate.GENERATORS:
        at.selectbox(key="posviz.table.kind").set_value(kind).run()
        bounds = {n.label: (n.min, n.max) for n in at.number_input}
        for name in inspect.signature(simulate.GENERATORS[kind]).parameters:
            p = simulate.PARAMETERS[name]
            assert bounds[p.label] == (p.low, p.high), name


MARKDOWN = "![x](http://127.0.0.1:9/x.png) [Log in again](http://127.0.0.1:9/) **b** :red[r]"


def test_text_from_a_link_is_shown_literally():
    # Formerly: an image in a URL value made every visitor's browser fetch an outside URL.
    at = apptest("app.py")
    at.query_params.update({"sim": "sinusoidal", "base": MARKDOWN})
    at.run()
    warning = at.warning[0].value
    assert "](" not in warning
    assert literal(MARKDOWN[:40]) in warning


def test_tensor_and_file_names_are_shown_literally(tmp_path):
    # Formerly: tensor and file names were rendered as markdown in the card, captions and
    # the "holds N tensors" line.
    path = tmp_path / "t.safetensors"
    save_file({MARKDOWN: simulate.sinusoidal_table(16, 8).astype(np.float32)}, path)
    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    at.file_uploader(key="posviz.table.upload").set_value(
        (f"{MARKDOWN}.safetensors", path.read_bytes(), "application/octet-stream")
    ).run()
    next(b for b in at.button if b.label == "Load").click().run()
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    assert table.name == MARKDOWN
    shown = [*at.markdown, *at.caption, *at.success]  # "holds", the table caption, "Loaded"
    card = apptest("app.py")
    card.session_state["posviz.table"] = table
    card.run()
    shown += [*card.sidebar.markdown, *card.sidebar.caption]  # name and source in the card
    texts = [e.value for e in shown if "Log in again" in e.value]
    assert len(texts) == 5, texts
    for text in texts:
        assert "](" not in text, text
        assert "**b**" not in text
        assert ":red[" not in text


def test_a_fresh_server_says_it_is_opening_and_later_visits_do_not():
    # In a new interpreter, as a fresh server: the first visit loads the analyses.
    code = """
import streamlit as st
from tests import apptest
told = []
shown = st.progress
st.progress = lambda *args, **kwargs: told.append(kwargs.get("text")) or shown(*args, **kwargs)
for visit in range(2):
    at = apptest("app.py").run()
    assert not at.exception, at.exception
    assert not at.get("progress"), "the bar is gone once the page is drawn"
    print(visit, sorted(set(told)))
    told.clear()
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-2:] == [
        "0 ['Opening posviz: loading its analyses (step 1 of 2, 1 more)']",
        "1 []",
    ]
