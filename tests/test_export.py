"""Exports carry their settings and read back to the same numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from posviz import __version__, export
from posviz.simulate import sinusoidal


def test_csv_round_trip_keeps_numbers_and_settings():
    table = sinusoidal(16, 8)
    settings = export.export_settings(table, centered=False, metric="cosine")
    frame = pd.DataFrame({"k": [1, 2, 3], "value": [np.pi, 1e-300, -2.5e17]})
    back, read_settings = export.from_csv(export.to_csv(frame, settings))
    assert read_settings == json.loads(json.dumps(settings))
    assert read_settings["posviz_version"] == __version__
    assert read_settings["centered"] is False
    pd.testing.assert_frame_equal(back, frame)


def test_json_round_trip():
    frame = pd.DataFrame({"sigma": [1 / 3, 2 / 3]})
    data = json.loads(export.to_json(frame, {"centered": True}))
    assert data["settings"] == {"centered": True}
    assert data["columns"]["sigma"] == [1 / 3, 2 / 3]


def test_figure_html_is_standalone_and_lists_settings():
    html = export.figure_html(go.Figure(go.Scatter(y=[1, 2])), {"tensor": "wpe<script>"})
    assert "<script src=" not in html  # plotly.js inlined: opens offline
    assert len(html) > 3_000_000
    assert "wpe&lt;script&gt;" in html
    assert html.count('id="posviz-settings"') == 1
