"""One source per number: a page's download equals the report's table and a direct pipeline call.

Downloads are read as a click would make them: each page's download buttons register their
deferred file builders, which the tests record and call.
"""

from __future__ import annotations

import io as bytes_io
import json
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import safetensors.numpy
from streamlit.testing.v1 import AppTest

import posviz
from posviz import compare, export, forms, pipeline, probes, report, simulate
from posviz._params import defaults
from posviz.cli import main
from posviz.embedding import Embedding
from tests import apptest


def run_page(page: str, *tables: Embedding, **state) -> AppTest:
    at = apptest(f"pages/{page}")
    for key, table in zip(("posviz.table", "posviz.second"), tables, strict=False):
        at.session_state[key] = table
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def read_csv(built: Callable[[], str]) -> tuple[pd.DataFrame, dict]:
    return export.from_csv(built())


def as_exported(frame: pd.DataFrame) -> pd.DataFrame:
    """A core table as its CSV export reads back (None -> NaN, every float to the last bit)."""
    return export.from_csv(export.to_csv(frame, {}))[0]


def as_json(value: object) -> object:
    """`value` as an export's header reads back (tuples as lists)."""
    return json.loads(json.dumps(value))


# --- spectrum -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Embedding]:
    """A table on disk (for the CLI) and as loaded from there (for the page and the report)."""
    path = str(tmp_path_factory.mktemp("one_source") / "table.npy")
    np.save(path, simulate.learned_like(200, 48, seed=1).values)
    return path, posviz.load(path)


def test_spectrum_downloads_are_the_report_tables_and_the_cli_json(saved, downloads, capsys):
    path, table = saved
    run_page("spectrum.py", table, **{"spectrum.numbers": True, "posviz.center": True})
    section = report.spectrum_section(table, center=True)
    metrics, settings = read_csv(downloads["spectrum_metrics.csv"])
    pd.testing.assert_frame_equal(metrics, as_exported(section.tables["Metrics"]))
    values, values_settings = read_csv(downloads["singular_values.csv"])
    pd.testing.assert_frame_equal(values, as_exported(section.tables["Singular values"]))
    s = pipeline.spectrum(table, center=True)
    assert settings == {
        "analysis": "spectrum",
        "params": s.params,
        "provenance": as_json(table.provenance()),
    }
    assert values_settings == settings
    assert main(["summary", path, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert {key: record[key] for key in ("analysis", "params", "provenance")} == settings
    numbers = record["numbers"]
    assert {key: numbers[key] for key in metrics} == metrics.iloc[0].to_dict()
    top = values["singular_value"].to_numpy()[: len(numbers["singular_values"])]
    assert numbers["singular_values"] == top.tolist()


# --- components -----------------------------------------------------------------------------


def test_components_downloads_are_the_report_tables(saved, downloads):
    _, table = saved
    # The fits and the likeness live in two tabs: a run with each open.
    for tab in ("Sinusoid fits", "Sinusoid span"):
        run_page(
            "components.py",
            table,
            **{"components.section": tab, "components.numbers": True, "posviz.center": True},
        )
    section = report.components_section(table, center=True)  # the core's defaults
    fits, fit_settings = read_csv(downloads["sinusoid_fits.csv"])
    pd.testing.assert_frame_equal(fits, as_exported(section.tables["Sinusoid fits"]))
    likeness, like_settings = read_csv(downloads["sinusoid_likeness.csv"])
    pd.testing.assert_frame_equal(likeness, as_exported(section.tables["Likeness to sinusoids"]))
    expected = pipeline.sinusoid_likeness(table, center=True)
    assert like_settings["analysis"] == "sinusoid_likeness"
    assert like_settings["params"] == expected.params
    fitted = pipeline.fit_sinusoids(table, center=True)
    assert (fit_settings["analysis"], fit_settings["params"]) == ("fit_sinusoids", fitted.params)


# --- similarity -----------------------------------------------------------------------------


def test_similarity_scores_download_is_the_report_table(downloads):
    # Longer than offsets.MAX_OFFSET + 1: a profile to every offset would ring differently.
    table = simulate.learned_like(1500, 16, seed=3)
    run_page(
        "similarity.py",
        table,
        **{
            "similarity.section": "Similarity vs offset",
            "similarity.numbers": True,
            "posviz.center": True,
        },
    )
    page, settings = read_csv(downloads["similarity_scores.csv"])
    section = report.similarity_section(table, center=True)
    pd.testing.assert_frame_equal(page, as_exported(section.tables["Scores"]))
    # The page states the largest offset it used; the same params make the same scores.
    assert settings["analysis"] == "offset_scores"
    assert settings["params"]["max_offset"] == 1024
    scores = pipeline.offset_scores(table, **settings["params"])
    pd.testing.assert_frame_equal(page, as_exported(scores.to_frame()))
    assert f"monotonicity over offsets 1..{scores.window}." in section.note
    profile, _ = read_csv(downloads["offset_profile.csv"])
    pd.testing.assert_frame_equal(
        profile, as_exported(pipeline.offset_profile(table, center=True).to_frame())
    )


# --- compare --------------------------------------------------------------------------------


def test_compare_downloads_are_the_pipeline_results(downloads):
    first = simulate.learned_like(160, 24, seed=5)
    second = simulate.sinusoidal(120, 24)
    state = {"compare.numbers": True, "compare.spectra_numbers": True, "posviz.center": True}
    for section in ("Spectra", "CKA, angles, Procrustes"):  # the tabs with tables
        run_page("compare.py", first, second, **state, **{"compare.section": section})
    matched = pipeline.resample_length(second, n_positions=first.shape[0])
    result = pipeline.compare(first, matched, center=True)
    expected = {
        "compare_measures.csv": result.to_frame(),
        "compare_principal_angles.csv": result.angles_table(),
        "compare_metrics.csv": compare.metrics_table(
            pipeline.spectrum(first, center=True), pipeline.spectrum(second, center=True)
        ),
    }
    settings = {}
    for name, frame in expected.items():
        page, settings[name] = read_csv(downloads[name])
        pd.testing.assert_frame_equal(page, as_exported(frame))
    measures = settings["compare_measures.csv"]
    assert (measures["analysis"], measures["params"]) == ("compare", result.params)
    # The second table as compared: resampled, its source saying how (method, position rule).
    assert measures["provenance"] == as_json([first.provenance(), matched.provenance()])
    assert "linear to 160 rows" in measures["provenance"][1]["source"]
    spectra = settings["compare_metrics.csv"]
    assert spectra["params"] == pipeline.spectrum(first, center=True).params
    assert spectra["provenance"] == as_json([first.provenance(), second.provenance()])


# --- resample -------------------------------------------------------------------------------


def test_resample_downloads_are_the_pipeline_table(downloads):
    table = simulate.learned_like(96, 16, seed=2)
    run_page("resample.py", table)
    expected = pipeline.resample_length(table, n_positions=2 * table.shape[0]).values
    stem = f"{table.name}_{2 * table.shape[0]}"
    npy = np.load(bytes_io.BytesIO(downloads[f"{stem}.npy"]()), allow_pickle=False)
    np.testing.assert_array_equal(npy, expected)
    tensors = safetensors.numpy.load(downloads[f"{stem}.safetensors"]())
    np.testing.assert_array_equal(tensors[table.name], expected)


def test_resample_grid_downloads_are_the_pipeline_table(downloads):
    table = simulate.vit_grid(6, 6, 16, prefix_tokens=1)
    run_page("resample.py", table)
    resampled = pipeline.resample_grid(table, new_grid=(12, 12))
    npy = np.load(bytes_io.BytesIO(downloads[f"{table.name}_144.npy"]()), allow_pickle=False)
    # A grid table is written as timm stores it: (1, prefix + patches, d), the prefix kept.
    np.testing.assert_array_equal(npy[0, 1:], resampled.values)
    np.testing.assert_array_equal(npy[0, :1], table.prefix)


# --- boundaries and probes ------------------------------------------------------------------

#: The Boundaries page's table downloads and the report's tables of the same numbers.
BOUNDARY_EXPORTS = {
    "flagged_positions": "Flagged positions",
    "change_points": "Change points",
    "boundary_summary": "Boundary summary",
}


def test_boundary_exports_are_the_reports_tables(downloads):
    # A norm that steps up at position 128 (a change point) and a boosted first row (a flag).
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((256, 32))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows *= np.where(np.arange(256) < 128, 1.0, 1.3)[:, None]
    rows *= 1 + 0.02 * rng.standard_normal((256, 1))
    rows[0] *= 3.0
    table = Embedding.from_array(rows, name="wpe", source="steps.npy")
    at = run_page("boundaries.py", table, **{"boundaries.section": "Tables"})
    captions = [c.value for c in at.caption]
    page = {name: read_csv(downloads[f"{name}.csv"]) for name in BOUNDARY_EXPORTS}
    section = report.boundaries_section(table)
    for name, caption in BOUNDARY_EXPORTS.items():
        pd.testing.assert_frame_equal(page[name][0], as_exported(section.tables[caption]))
    assert 0 in set(page["flagged_positions"][0]["position"])
    assert page["change_points"][0]["position"].tolist() == [128]
    # The exports state the settings the report used: the core's defaults.
    fitted = forms.boundary_defaults(table.shape)
    settings = page["change_points"][1]["params"]
    assert settings == {
        name: fitted[name]
        for name in (
            "n_directions_removed",
            "hampel_window",
            "threshold",
            "statistic",
            "max_changes",
            "min_size",
            "alpha",
            "null_draws",
            "seed",
        )
    }
    summary = page["boundary_summary"][1]["params"]
    assert summary == {
        "n_directions_removed": fitted["n_directions_removed"],
        "boundary_size": fitted["boundary_size"],
    }
    assert f"window of ±{settings['hampel_window']} positions" in section.note
    # The page's statements of the procedures are the report's.
    stated = [
        c
        for c in captions
        if c.startswith(("Steps on norm: at each boundary", "Mean over the first"))
    ]
    assert len(stated) == 2
    assert all(text in section.note for text in stated)


def test_probe_export_is_the_reports_probe_table(downloads):
    table = Embedding.from_array(
        np.random.default_rng(0).standard_normal((64, 16)), name="wpe", source="noise.npy"
    )
    at = run_page("boundaries.py", table, **{"boundaries.section": "Probes"})
    captions = [c.value for c in at.caption]
    section = report.probes_section(table)
    frame, settings = read_csv(downloads["probes.csv"])
    pd.testing.assert_frame_equal(frame, as_exported(section.tables["Probe results"]))
    assert settings["analysis"] == "probe_with_controls"
    assert settings["params"] == defaults(probes.probe_with_controls)
    # The method, in the same numbered steps on the page and in the report.
    procedure = [c for c in captions if c.startswith("How they were run:")]
    assert len(procedure) == 1
    steps = [line.split(". ", 1)[1] for line in procedure[0].splitlines()[1:]]
    assert steps == section.steps
