"""One source per number: a page's export, the report's table and the CLI's JSON agree exactly.

Each block runs one analysis' page (AppTest, with its widgets at their defaults), reads the
files its download buttons would give, and compares them with the report's tables and, where
the CLI prints the same numbers, with `posviz summary --json`, for the same table and settings.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal
from streamlit.testing.v1 import AppTest

import posviz
from posviz import export, report, simulate
from posviz.cli import main
from posviz.embedding import Embedding
from posviz.ui import widgets

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Embedding]:
    """A table on disk (for the CLI) and as loaded from there (for the page and the report)."""
    path = str(tmp_path_factory.mktemp("one_source") / "table.npy")
    np.save(path, simulate.learned_like(200, 48, seed=1).values)
    return path, posviz.load(path)


def page_exports(
    monkeypatch: pytest.MonkeyPatch, page: str, table: Embedding, **state: object
) -> dict[str, tuple[pd.DataFrame, dict]]:
    """Each table the page offers for download, as read back from its CSV: name -> (frame,
    settings)."""
    shown: dict[str, tuple[pd.DataFrame, dict]] = {}
    original = widgets.show_numbers

    def record(frame: pd.DataFrame, *, name: str, settings: dict) -> None:
        shown[name] = export.from_csv(export.to_csv(frame, settings))
        original(frame, name=name, settings=settings)

    monkeypatch.setattr(widgets, "show_numbers", record)
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=60)
    at.session_state["posviz.table"] = table
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return shown


# --- spectrum -------------------------------------------------------------------------------


def test_spectrum_page_exports_equal_the_report_and_the_cli_json(saved, monkeypatch, capsys):
    path, table = saved
    shown = page_exports(monkeypatch, "spectrum.py", table, **{"spectrum.numbers": True})
    section = report.spectrum_section(table, center=True)
    metrics, settings = shown["spectrum_metrics"]
    assert_frame_equal(metrics, section.tables["Metrics"])
    values, values_settings = shown["singular_values"]
    assert_frame_equal(values, section.tables["Singular values"])
    assert settings == values_settings
    assert settings["centered"] is True
    assert settings["sha256"] == table.sha256

    assert main(["summary", path, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert {key: record[key] for key in metrics} == metrics.iloc[0].to_dict()
    top = values["singular_value"].to_numpy()[: len(record["singular_values"])]
    assert record["singular_values"] == top.tolist()


# --- components -----------------------------------------------------------------------------


def test_components_page_exports_equal_the_report(saved, monkeypatch):
    _, table = saved
    shown = page_exports(monkeypatch, "components.py", table, **{"components.numbers": True})
    section = report.components_section(table, center=True, k=report.components.K, seed=0)
    fits, fit_settings = shown["sinusoid_fits"]
    assert_frame_equal(fits, section.tables["Sinusoid fits"])
    likeness, like_settings = shown["sinusoid_likeness"]
    assert_frame_equal(likeness, section.tables["Likeness to sinusoids"])
    assert fit_settings["k"] == like_settings["k"] == len(fits)
    assert like_settings["n_frequencies"] == likeness["n_frequencies"].item()
