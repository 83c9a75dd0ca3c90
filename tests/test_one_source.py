"""One source per number: a page's download equals the report's table and a direct pipeline call.

Downloads are read as a click would make them: each page's download buttons register their
deferred file builders, which the tests record and call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

import posviz
from posviz import components, export, pipeline, report, simulate
from posviz.cli import main
from posviz.embedding import Embedding

PAGES = Path(__file__).parents[1] / "pages"


@pytest.fixture
def downloads(monkeypatch) -> dict[str, Callable[[], bytes | str]]:
    """File name -> the builder a click on its download button runs (latest run wins)."""
    built: dict[str, Callable[[], bytes | str]] = {}
    register = MediaFileManager.add_deferred

    def record(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        built[file_name] = data_callable
        return register(self, data_callable, mimetype, coordinates, file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    return built


def run_page(page: str, *tables: Embedding, **state) -> AppTest:
    at = AppTest.from_file(str(PAGES / page), default_timeout=120)
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
    assert {key: settings[key] for key in s.settings()} == s.settings()
    assert values_settings == settings
    assert main(["summary", path, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert {key: record[key] for key in metrics} == metrics.iloc[0].to_dict()
    top = values["singular_value"].to_numpy()[: len(record["singular_values"])]
    assert record["singular_values"] == top.tolist()


# --- components -----------------------------------------------------------------------------


def test_components_downloads_are_the_report_tables(saved, downloads):
    _, table = saved
    run_page("components.py", table, **{"components.numbers": True, "posviz.center": True})
    section = report.components_section(table, center=True, k=components.K, seed=components.SEED)
    fits, fit_settings = read_csv(downloads["sinusoid_fits.csv"])
    pd.testing.assert_frame_equal(fits, as_exported(section.tables["Sinusoid fits"]))
    likeness, like_settings = read_csv(downloads["sinusoid_likeness.csv"])
    pd.testing.assert_frame_equal(likeness, as_exported(section.tables["Likeness to sinusoids"]))
    expected = pipeline.sinusoid_likeness(table, center=True)
    assert {key: like_settings[key] for key in expected.settings()} == expected.settings()
    fitted = pipeline.fit_sinusoids(table, center=True)
    assert {key: fit_settings[key] for key in fitted.settings()} == fitted.settings()
