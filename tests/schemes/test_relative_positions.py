"""A table whose rows are relative positions (DeBERTa's rel_embeddings, rows −256 … 255): every
page's position axis, hover and exported position column, and the report, label its rows so."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save
from streamlit.testing.v1 import AppTest

import posviz
from posviz import export, figures, pipeline, resample
from posviz.boundary import outliers, position_statistics
from posviz.cli import main
from posviz.components import fit_sinusoids, principal_components
from posviz.report import build_report
from posviz.schemes.presets import PRESETS
from posviz.similarity import similarity_map
from tests import apptest

REL = "deberta.encoder.rel_embeddings.weight"
#: Relative positions of the 512 rows of DeBERTa-v3's table (span 256).
RELATIVE = np.arange(-256, 256)
#: A row made 10 times longer than the others: relative position +44.
OUTLIER = 300


def rel_embeddings() -> np.ndarray:
    rng = np.random.default_rng(3)
    smooth = np.cumsum(rng.standard_normal((512, 32)), axis=0) / 10
    smooth[OUTLIER] *= 10
    return smooth.astype(np.float32)


@pytest.fixture(scope="module")
def deberta(tmp_path_factory) -> Path:
    """A DeBERTa-v3 checkpoint folder: config.json and model.safetensors."""
    folder = tmp_path_factory.mktemp("deberta")
    (folder / "config.json").write_text(json.dumps(PRESETS["microsoft/deberta-v3-base"]))
    (folder / "model.safetensors").write_bytes(save({REL: rel_embeddings()}))
    return folder


@pytest.fixture(scope="module")
def table(deberta):
    return posviz.load(deberta / "model.safetensors")


def array(values: dict | list) -> np.ndarray:
    """A figure array as plotly sends it: base64 typed bytes, or a plain list."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
    return np.asarray(values)


def test_the_table_knows_its_relative_positions(table):
    assert table.first_position == -256
    np.testing.assert_array_equal(table.positions, RELATIVE)
    assert table.provenance()["first_position"] == -256
    assert table.describe_rows() == "rows 0-511 of 512, positions -256 … 255"
    assert table.source == "model.safetensors"  # the file: `posviz rerun` finds it again
    absolute = posviz.Embedding.from_array(rel_embeddings(), name="t", source="s")
    assert "first_position" not in absolute.provenance()  # exports of other tables unchanged


def test_figures_draw_rows_at_their_relative_positions(table):
    first = table.first_position
    pc = principal_components(table.values, n_components=3)
    (line, *_) = figures.components.pc_trajectories(pc, overlaid=True, first_position=first).data
    np.testing.assert_array_equal(line.x, RELATIVE)
    path = figures.components.pc_path(pc, (1, 2), first_position=first)
    np.testing.assert_array_equal(path.data[0].customdata, RELATIVE)
    assert list(path.data[2].text) == ["first p=-256", "last p=255"]
    fits = figures.components.sinusoid_fits(pc, fit_sinusoids(pc), first_position=first)
    np.testing.assert_array_equal(fits.data[0].x, RELATIVE)
    m = similarity_map(table.values)
    heat = figures.similarity.similarity_heatmap(m, highlight=[OUTLIER], first_position=first)
    np.testing.assert_array_equal(heat.data[0].x, RELATIVE)
    np.testing.assert_array_equal(heat.data[0].y, RELATIVE)
    assert list(heat.data[1].customdata) == [OUTLIER - 256]  # the flag's mark, labelled
    row = similarity_map(table.values, rows=(256, 257), cols=(0, 512), max_side=512)
    profile = figures.similarity.position_profile(
        row, position=256, neighbours=[255, 257], first_position=first
    )
    assert profile.layout.title.text.startswith("Cosine similarity of position 0 to every")
    np.testing.assert_array_equal(profile.data[0].x, RELATIVE)
    assert list(profile.data[1].x) == [-1, 1]
    pair = figures.compare.similarity_pair(
        {"a": m, "b": m}, difference=True, first_positions=(first, first)
    )
    for trace in pair.data:  # both maps and their difference
        np.testing.assert_array_equal(trace.x, RELATIVE)
    stats = position_statistics(table.values)
    flags = outliers(stats)
    curves = figures.boundary.position_statistics(stats, flags, first_position=first)
    np.testing.assert_array_equal(curves.data[0].x, RELATIVE)
    flagged = next(t for t in curves.data if t.name == "flagged")
    assert OUTLIER - 256 in list(flagged.x)


def test_exported_positions_are_relative_and_a_resampled_table_stretches_them(table):
    flags = outliers(position_statistics(table.values))
    settings = export.header(flags, table)
    frame = flags.to_frame()
    rows = frame["position"].to_numpy()
    assert OUTLIER in rows
    np.testing.assert_array_equal(export.labelled(frame, settings)["position"], rows - 256)
    longer = pipeline.resample_length(table, n_positions=1024)
    assert (longer.first_position, longer.shape[0]) == (-512, 1024)
    halved = resample.resample_length(table.values, n_positions=256)
    shorter = resample.resampled_table(table, halved)
    assert shorter.positions[[0, -1]].tolist() == [-128, 127]


def test_the_report_labels_relative_positions(table):
    page = build_report(table)
    data = json.loads(page.split('type="application/json">')[1].split("</script>")[0])
    assert data["provenance"]["first_position"] == -256
    (flagged,) = [e for e in data["analyses"] if e["caption"] == "Flagged positions"]
    assert OUTLIER - 256 in flagged["columns"]["position"]
    assert min(flagged["columns"]["position"]) >= -256


def page(name: str, table, **state) -> AppTest:
    at = apptest(f"pages/{name}.py")
    at.session_state["posviz.table"] = table
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def charts(at: AppTest) -> dict[str, dict]:
    return {
        el.proto.id.split("chart.")[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")
    }


def test_the_components_page_and_its_export_rerun(table, deberta, downloads, capsys):
    at = page("components", table, **{"components.numbers": True})
    assert not at.exception, at.exception
    trajectories = charts(at)["pc_trajectories"]
    np.testing.assert_array_equal(array(trajectories["data"][0]["x"]), RELATIVE)
    assert trajectories["layout"]["xaxis"]["title"]["text"] == "position p"
    exported = json.loads(downloads["pc_projections.json"]())
    assert exported["provenance"]["first_position"] == -256
    assert exported["columns"]["position"] == RELATIVE.tolist()
    saved = deberta / "pc_projections.csv"  # beside the checkpoint: rerun finds it there
    saved.write_text(downloads["pc_projections.csv"]())
    assert main(["rerun", str(saved)]) == 0, capsys.readouterr().out
    assert "position[0]: exported -256, recomputed -256  equal" in capsys.readouterr().out


def test_the_similarity_page_asks_and_draws_relative_positions(table):
    at = page("similarity", table)
    assert not at.exception, at.exception
    # 512² cells: drawn as a picture, one pixel per position from the first.
    (picture, *_) = charts(at)["similarity_heatmap"]["data"]
    drawn = (picture["type"], picture["x0"], picture["y0"], picture["dx"])
    assert drawn == ("image", -256, -256, 1)
    at.session_state["similarity.section"] = "One position vs all"
    at.run()
    assert not at.exception, at.exception
    slider = at.slider(key="similarity.position")
    assert (slider.min, slider.max, slider.value) == (-256, 255, 0)
    slider.set_value(44).run()
    profile = charts(at)["position_profile"]
    assert profile["layout"]["title"]["text"].startswith("Cosine similarity of position 44 ")
    star = profile["data"][-1]
    assert array(star["x"]).tolist() == [44]
    # Row 300's own similarity: 1 (cosine of a row with itself).
    assert array(star["y"]).tolist() == [pytest.approx(1.0, abs=1e-6)]


def test_the_boundaries_page_flags_and_exports_relative_positions(table, downloads):
    at = page("boundaries", table)
    assert not at.exception, at.exception
    (curves,) = charts(at).values()
    np.testing.assert_array_equal(array(curves["data"][0]["x"]), RELATIVE)
    assert any(m.value.startswith("**Flagged**") and "44" in m.value for m in at.markdown)
    assert any("source row 0 is position -256" in c.value for c in at.caption)
    at.session_state["boundaries.section"] = "Tables"
    at.run()
    flagged = json.loads(downloads["flagged_positions.json"]())
    expected = outliers(position_statistics(table.values)).to_frame()["position"] - 256
    assert flagged["columns"]["position"] == expected.tolist()
    assert OUTLIER - 256 in flagged["columns"]["position"]


def test_a_hub_deberta_loaded_on_the_data_page_or_by_a_link_is_labelled(fake_hub):
    hub = fake_hub
    config = json.dumps(PRESETS["microsoft/deberta-v3-base"]).encode()
    hub.add("acme/deberta", {"config.json": config, "model.safetensors": save(
        {REL: rel_embeddings()})})  # fmt: skip
    at = apptest("pages/data.py").run()
    at.text_input(key="posviz.table.hub.repo").set_value("acme/deberta")
    next(b for b in at.button if b.label == "Open").click().run()
    next(b for b in at.button if b.label == "Load").click().run()
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    assert (table.name, table.first_position) == (REL, -256)
    # The link the load wrote opens the same table, labelled alike.
    link = apptest("pages/data.py")
    for key, value in at.query_params.items():
        link.query_params[key] = value[0] if isinstance(value, list) else value
    link.run()
    again = link.session_state["posviz.table"]
    assert (again.sha256, again.first_position) == (table.sha256, -256)
    # Without a tensor named, a relative-attention model's relative table is the one opened.
    assert posviz.load("hf:acme/deberta").first_position == -256
