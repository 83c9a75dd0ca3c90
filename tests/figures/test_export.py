"""figures.export: a figure written as standalone HTML, PNG or SVG, signed with its source."""

from __future__ import annotations

import struct

import plotly.graph_objects as go
import pytest

from posviz import export, figures


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
