"""A table whose rows are DeBERTa's buckets of relative offsets (rel_embeddings of DeBERTa-v3: rows
are buckets −256 … 255, one offset each within ±128, log-bucketed ranges beyond, every offset
beyond at the ends): every page's axes and hovers name each row's offsets, lines over position
are drawn at the offsets' centres, exports carry each row's range, and so does the report."""

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
from posviz.rows import row_offsets
from posviz.schemes.presets import PRESETS
from posviz.similarity import similarity_map
from tests import apptest

REL = "deberta.encoder.rel_embeddings.weight"
#: Buckets of the 512 rows of DeBERTa-v3's table (span 256): one cell each on a map.
RELATIVE = np.arange(-256, 256)
#: The offsets q − k each row covers (256 log buckets over 512 positions, tests/test_rows.py):
#: lines over position draw row r at CENTRES[r].
OFFSETS = row_offsets(position_buckets=256, max_relative_positions=512)
CENTRES = OFFSETS.centres()
#: Rows made 10 times longer than the others: bucket +44 (offset 44, in the exact band) and
#: bucket +200 (offsets 278 … 280).
OUTLIER, FAR = 300, 456


def rel_embeddings() -> np.ndarray:
    rng = np.random.default_rng(3)
    smooth = np.cumsum(rng.standard_normal((512, 32)), axis=0) / 10
    smooth[[OUTLIER, FAR]] *= 10
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
    provenance = table.provenance()
    assert provenance["first_position"] == -256
    rule = provenance["row_labels"]  # what labels the rows, enough to make them again
    assert (rule["position_buckets"], rule["max_relative_positions"]) == (256, 512)
    assert "treat each row as one position" in rule["as_positions"]
    assert table.describe_rows() == (
        "rows 0-511 of 512, buckets -256 … 255 (offsets q − k: one per row within ±128, "
        "log-bucketed ranges beyond; -512 and beyond, 506 and beyond at the ends)"
    )
    assert table.labels.text([OUTLIER, FAR, 511]) == ["44", "278 … 280", "506 and beyond"]
    assert table.source == "model.safetensors"  # the file: `posviz rerun` finds it again
    absolute = posviz.Embedding.from_array(rel_embeddings(), name="t", source="s")
    assert "first_position" not in absolute.provenance()  # exports of other tables unchanged
    assert "row_labels" not in absolute.provenance()


def test_a_trimmed_table_keeps_its_rows_offsets(deberta):
    trimmed = posviz.load(deberta / "model.safetensors", row_start=400)
    assert trimmed.first_position == 400 - 256
    assert trimmed.labels.label(FAR - 400) == "278 … 280"
    assert trimmed.labels.label(111) == "506 and beyond"


def test_a_config_whose_span_is_not_the_tables_rows_is_refused(tmp_path):
    config = {**PRESETS["microsoft/deberta-v3-base"], "position_buckets": 128}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(save({REL: rel_embeddings()}))
    with pytest.raises(posviz.LoadError, match=r"has 512 rows.*2 · 128 = 256"):
        posviz.load(tmp_path / "model.safetensors")


def test_figures_draw_rows_at_their_offsets(table):
    labels = table.labels
    pc = principal_components(table.values, n_components=3)
    trajectories = figures.components.pc_trajectories(pc, overlaid=True, labels=labels)
    line = trajectories.data[0]
    np.testing.assert_array_equal(line.x, CENTRES.astype(np.float32))
    assert line.hovertext[FAR] == "278 … 280"
    assert "offsets %{hovertext}" in line.hovertemplate
    assert trajectories.layout.xaxis.title.text.startswith("offset q − k")
    path = figures.components.pc_path(pc, (1, 2), labels=labels)
    assert path.data[0].customdata[FAR] == "278 … 280"
    assert [trace.name for trace in path.data[2:]] == [
        "first offsets -512 and beyond",
        "last offsets 506 and beyond",
    ]
    assert path.data[1].marker.colorbar.labelalias["200"] == "278 … 280"
    fits = figures.components.sinusoid_fits(pc, fit_sinusoids(pc), labels=labels)
    np.testing.assert_array_equal(fits.data[0].x, CENTRES.astype(np.float32))
    assert "p counts rows (buckets)" in fits.layout.title.text
    m = similarity_map(table.values)
    heat = figures.similarity.similarity_heatmap(m, highlight=[OUTLIER, FAR], labels=labels)
    # A map keeps one cell per bucket; its ticks and hovers name the bucket's offsets.
    np.testing.assert_array_equal(heat.data[0].x, RELATIVE)
    np.testing.assert_array_equal(heat.data[0].y, RELATIVE)
    for axis in (heat.layout.xaxis, heat.layout.yaxis):
        assert axis.labelalias["200"] == "278 … 280"
        assert axis.labelalias["\u2212255"] == "\u2212511 … \u2212506"
        assert "44" not in axis.labelalias  # a bucket of the exact band is its offset
    assert list(heat.data[1].customdata) == ["44", "278 … 280"]  # the flags' marks
    row = similarity_map(table.values, rows=(FAR, FAR + 1), cols=(0, 512), max_side=512)
    profile = figures.similarity.position_profile(
        row, position=FAR, neighbours=[FAR - 1, FAR + 1], labels=labels
    )
    assert profile.layout.title.text.startswith("Cosine similarity of offsets 278 … 280 to every")
    np.testing.assert_array_equal(profile.data[0].x, CENTRES.astype(np.float32))
    assert list(profile.data[1].hovertext) == ["275 … 277", "281 … 283"]
    pair = figures.compare.similarity_pair({"a": m, "b": m}, difference=True, labels=(labels,) * 2)
    for trace in pair.data:  # both maps and their difference
        np.testing.assert_array_equal(trace.x, RELATIVE)
    assert pair.layout.xaxis3.labelalias["200"] == "278 … 280"
    stats = position_statistics(table.values)
    flags = outliers(stats)
    curves = figures.boundary.position_statistics(stats, flags, labels=labels)
    np.testing.assert_array_equal(curves.data[0].x, CENTRES.astype(np.float32))
    flagged = next(t for t in curves.data if t.name == "flagged")
    assert {44.0, 279.0} <= set(flagged.x)
    assert "278 … 280" in list(flagged.hovertext)


def test_exported_rows_carry_their_offsets_and_a_resampled_table_is_positions(table):
    flags = outliers(position_statistics(table.values))
    settings = export.header(flags, table)
    frame = flags.to_frame()
    rows = frame["position"].to_numpy()
    assert {OUTLIER, FAR} <= set(rows)
    out = export.labelled(frame, settings)
    assert list(out.columns[:4]) == ["position", "offset_first", "offset_last", "offsets"]
    np.testing.assert_array_equal(out["position"], rows - 256)
    far = out[out["position"] == 200].iloc[0]  # flagged on one statistic or more
    assert (far["offset_first"], far["offset_last"], far["offsets"]) == (278, 280, "278 … 280")
    exported = json.loads(export.to_json(out, settings))["columns"]
    assert exported["offset_first"][rows.tolist().index(FAR)] == 278
    longer = pipeline.resample_length(table, n_positions=1024)
    # Resampled rows are evenly spaced stand-ins: positions again, no bucket's offsets.
    assert (longer.first_position, longer.shape[0], longer.row_offsets) == (-512, 1024, None)
    assert "row_labels" not in longer.provenance()
    halved = resample.resample_length(table.values, n_positions=256)
    shorter = resample.resampled_table(table, halved)
    assert shorter.positions[[0, -1]].tolist() == [-128, 127]


def test_the_report_names_each_rows_offsets(table):
    page = build_report(table)
    data = json.loads(page.split('type="application/json">')[1].split("</script>")[0])
    assert data["provenance"]["first_position"] == -256
    assert data["provenance"]["row_labels"]["position_buckets"] == 256
    assert data["row_offsets"] == OFFSETS.record()
    assert data["row_offsets"][FAR] == [278, 280]
    (flagged,) = [e for e in data["analyses"] if e["caption"] == "Flagged positions"]
    assert {OUTLIER - 256, FAR - 256} <= set(flagged["columns"]["position"])
    assert "278 … 280" in flagged["columns"]["offsets"]
    assert "<h2>Rows</h2>" in page
    assert "Offsets of each row" in page
    assert "treat each row as one position" in page


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
    np.testing.assert_array_equal(array(trajectories["data"][0]["x"]), CENTRES.astype(np.float32))
    assert trajectories["data"][0]["hovertext"][FAR] == "278 … 280"
    assert trajectories["layout"]["xaxis"]["title"]["text"].startswith("offset q − k")
    exported = json.loads(downloads["pc_projections.json"]())
    assert exported["provenance"]["first_position"] == -256
    assert exported["provenance"]["row_labels"]["max_relative_positions"] == 512
    assert exported["columns"]["position"] == RELATIVE.tolist()
    assert exported["columns"]["offset_first"][0] is None  # row 0: -512 and beyond
    assert exported["columns"]["offset_last"][0] == -512
    assert exported["columns"]["offsets"][FAR] == "278 … 280"
    for kind in ("csv", "json"):
        saved = deberta / f"pc_projections.{kind}"  # beside the checkpoint: rerun finds it there
        saved.write_text(downloads[f"pc_projections.{kind}"]())
        assert main(["rerun", str(saved)]) == 0, capsys.readouterr().out
        out = capsys.readouterr().out
        assert "position[0]: exported -256, recomputed -256  equal" in out
        assert "offsets[456]: exported '278 … 280', recomputed '278 … 280'  equal" in out
        assert "DIFFERS" not in out
    # The fits' tab says what a bucket is to them.
    at.session_state["components.section"] = "Sinusoid fits"
    at.run()
    assert not at.exception, at.exception
    assert any("cycles over the rows, not over offsets" in c.value for c in at.caption)


def test_the_similarity_page_asks_buckets_and_names_their_offsets(table):
    at = page("similarity", table)
    assert not at.exception, at.exception
    # 512² cells: drawn as a picture, one pixel per bucket from the first; ticks in offsets.
    heatmap = charts(at)["similarity_heatmap"]
    (picture, *_) = heatmap["data"]
    drawn = (picture["type"], picture["x0"], picture["y0"], picture["dx"])
    assert drawn == ("image", -256, -256, 1)
    assert heatmap["layout"]["xaxis"]["labelalias"]["200"] == "278 … 280"
    # A picture's hover gives the bucket (Plotly aliases a heatmap's hover, not a picture's).
    assert picture["hovertemplate"].startswith("bucket i=%{y}<br>bucket j=%{x}")
    at.session_state["similarity.section"] = "One position vs all"
    at.run()
    assert not at.exception, at.exception
    slider = at.slider(key="similarity.position")
    assert (slider.label, slider.min, slider.max, slider.value) == ("Bucket", -256, 255, 0)
    slider.set_value(200).run()
    assert any("Bucket 200 is offsets 278 … 280 (q − k)." in c.value for c in at.caption)
    profile = charts(at)["position_profile"]
    assert profile["layout"]["title"]["text"].startswith("Cosine similarity of offsets 278 … 280")
    star = profile["data"][-1]
    assert array(star["x"]).tolist() == [279]
    # The row's own similarity: 1 (cosine of a row with itself).
    assert array(star["y"]).tolist() == [pytest.approx(1.0, abs=1e-6)]
    at.session_state["similarity.section"] = "Similarity vs offset"
    at.run()
    assert not at.exception, at.exception
    assert any("lag k is k rows" in c.value for c in at.caption)


def test_the_boundaries_page_flags_and_exports_offsets(table, downloads):
    at = page("boundaries", table)
    assert not at.exception, at.exception
    (curves,) = charts(at).values()
    np.testing.assert_array_equal(array(curves["data"][0]["x"]), CENTRES.astype(np.float32))
    flagged = next(m.value for m in at.markdown if m.value.startswith("**Flagged**"))
    assert "44; " in flagged
    assert "278 … 280" in flagged
    assert any(
        "source row 0 is bucket -256, offsets -512 and beyond" in c.value for c in at.caption
    )
    assert any("windows and steps are counted in rows" in c.value for c in at.caption)
    at.session_state["boundaries.section"] = "Tables"
    at.run()
    exported = json.loads(downloads["flagged_positions.json"]())
    expected = outliers(position_statistics(table.values)).to_frame()["position"] - 256
    assert exported["columns"]["position"] == expected.tolist()
    assert "278 … 280" in exported["columns"]["offsets"]


def test_the_resample_page_says_buckets_are_taken_as_positions(table):
    at = page("resample", table)
    assert not at.exception, at.exception
    assert any("no longer the buckets of any DeBERTa config" in c.value for c in at.caption)


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
    assert table.labels.label(FAR) == "278 … 280"
    # The link the load wrote opens the same table, labelled alike.
    link = apptest("pages/data.py")
    for key, value in at.query_params.items():
        link.query_params[key] = value[0] if isinstance(value, list) else value
    link.run()
    again = link.session_state["posviz.table"]
    assert (again.sha256, again.first_position) == (table.sha256, -256)
    assert again.labels.label(FAR) == "278 … 280"
    # Without a tensor named, a relative-attention model's relative table is the one opened.
    assert posviz.load("hf:acme/deberta").first_position == -256
