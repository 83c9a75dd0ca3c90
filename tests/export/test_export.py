"""Exports carry their settings and read back to the same numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from posviz import __version__, export
from posviz.similarity import similarity_map
from posviz.simulate import sinusoidal


def test_csv_round_trip_keeps_numbers_and_settings():
    table = sinusoidal(16, 8)
    settings = export.header(similarity_map(table.values, center=False, rows=(0, 4)), table)
    frame = pd.DataFrame({"k": [1, 2, 3], "value": [np.pi, 1e-300, -2.5e17]})
    back, read_settings = export.from_csv(export.to_csv(frame, settings))
    assert read_settings == json.loads(json.dumps(settings))
    assert list(read_settings) == ["analysis", "params", "provenance"]
    assert read_settings["analysis"] == "similarity_map"
    assert read_settings["params"]["rows"] == [0, 4]  # JSON has no tuples
    assert read_settings["provenance"]["posviz_version"] == __version__
    assert read_settings["provenance"]["sha256"] == table.sha256
    pd.testing.assert_frame_equal(back, frame)


def test_json_round_trip():
    frame = pd.DataFrame({"sigma": [1 / 3, 2 / 3]})
    header = {"analysis": "spectrum", "params": {"center": True}, "provenance": {}}
    data = json.loads(export.to_json(frame, header))
    assert {key: data[key] for key in header} == header
    assert data["columns"]["sigma"] == [1 / 3, 2 / 3]
