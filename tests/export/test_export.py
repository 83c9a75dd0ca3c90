"""Exports carry their settings and read back to the same numbers."""

from __future__ import annotations

import json
import struct

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from posviz import __version__, export, figures
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


def test_figure_html_is_standalone_and_lists_settings():
    html = figures.export.figure_html(go.Figure(go.Scatter(y=[1, 2])), {"tensor": "wpe<script>"})
    assert "<script src=" not in html  # plotly.js inlined: opens offline
    assert len(html) > 3_000_000
    assert "wpe&lt;script&gt;" in html
    assert html.count('id="posviz-settings"') == 1


@pytest.mark.slow
@pytest.mark.skipif(
    figures.export.static_image_browser() is None,
    reason="no Chromium for kaleido: apt-get install chromium (or set BROWSER_PATH)",
)
def test_png_and_svg_render_through_kaleido():
    from posviz import simulate
    from posviz.spectrum import spectrum

    table = simulate.sinusoidal(64, 16)
    result = spectrum(table.values)
    fig = figures.spectrum.singular_values(result)
    png = figures.export.figure_image(fig, "png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (2200, 1200)  # 1100 x 600 at scale 2, for print
    settings = export.header(result, table)
    svg = figures.export.figure_image(fig, "svg", settings=settings).decode()
    assert svg.lstrip().startswith("<svg")
    assert "Singular values (rows mean-centred)" in svg
    # Formerly: the image named the analysis, not the table: a pasted figure lost its source.
    assert f"sha256 {table.sha256[:16]}" in svg
    assert "sinusoidal 64 x 16, rows 0-63 of 64" in svg


def test_a_signed_figure_keeps_its_source_under_everything_and_the_original_unchanged():
    from posviz import similarity, simulate

    table = simulate.learned_like(64, 16)
    fig = figures.similarity.similarity_heatmap(similarity.similarity_map(table.values))
    settings = export.step_header("similarity_map", {}, table)
    signed = figures.export.signed(fig, settings)
    (line,) = [a for a in signed.layout.annotations if "sha256" in a.text]
    assert line.text.startswith("learned_like 64 x 16, rows 0-63 of 64, simulated: learned_like(")
    assert signed.layout.margin.b == fig.layout.margin.b + 24
    # The colour bar under the map moves up by the line's height; the cached figure is as it was.
    assert signed.layout.coloraxis.colorbar.y == pytest.approx(24 / 600)
    assert fig.layout.coloraxis.colorbar.y == 0
    assert not fig.layout.annotations
