"""Spectrum figures, checked by their traces and axes; maps drawn as pictures."""

from __future__ import annotations

import base64
import dataclasses
import io

import numpy as np
import plotly.colors
import pytest
from PIL import Image

from posviz import figures
from posviz.collection import Member, analyse
from posviz.figures.similarity import PICTURE_CELLS
from posviz.similarity import grid_similarity, similarity_map
from posviz.simulate import gaussian, learned_like, sinusoidal_table
from posviz.spectrum import THRESHOLDS, spectrum


@pytest.fixture(scope="module")
def learned():
    return spectrum(learned_like(300, 64, seed=0).values)


def test_singular_values_on_a_log_axis_with_the_noise_threshold(learned):
    fig = figures.spectrum.singular_values(learned)
    assert fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis.title.text == "component k"
    assert fig.layout.title.text == "Singular values (rows mean-centred)"
    values, edge = fig.data
    np.testing.assert_allclose(values.y, learned.singular_values, rtol=1e-6)
    assert values.y.dtype == np.float32  # small on the wire
    np.testing.assert_allclose(edge.y, learned.noise_threshold, rtol=1e-6)
    assert f"Gavish & Donoho): {learned.n_above_noise} above" in edge.name
    assert not fig.layout.annotations  # nothing placed in log10 units by mistake


def test_values_below_the_floor_are_drawn_apart():
    s = spectrum(sinusoidal_table(200, 64, base=50.0), center=False)
    fig = figures.spectrum.singular_values(s)
    resolved, below, _ = fig.data
    assert len(resolved.x) + len(below.x) == len(s.singular_values)
    assert "below resolution floor" in below.name
    assert np.all(s.singular_values[np.asarray(below.x) - 1] < s.floor)


def test_explained_variance_marks_every_threshold(learned):
    fig = figures.spectrum.explained_variance(learned)
    curve, marks = fig.data
    np.testing.assert_allclose(curve.y, learned.cumulative, rtol=1e-6)
    assert list(marks.x) == [learned.k_at(t) for t in THRESHOLDS]
    assert fig.layout.title.text.endswith("(rows mean-centred)")


def test_reconstruction_error_starts_at_one(learned):
    fig = figures.spectrum.reconstruction_error(learned)
    (curve,) = fig.data
    assert curve.x[0] == 0
    assert curve.y[0] == pytest.approx(1.0)
    assert np.all(np.diff(curve.y) <= 1e-7)


def test_built_figures_are_kept_per_content_of_what_they_draw():
    from posviz.ui import cache  # imports streamlit: outside the core's tests above

    overview = similarity_map(learned_like(800, 64, seed=0).values, max_side=800)
    assert overview.values.size == 640_000
    first = cache.figure(figures.similarity.similarity_heatmap, overview, highlight=[3])
    assert cache.figure(figures.similarity.similarity_heatmap, overview, highlight=[3]) is first
    # One cell of 640,000 changed: Streamlit's own hash samples arrays this large; this key
    # reads every byte, so the changed map gets its own figure.
    changed = dataclasses.replace(overview, values=overview.values.copy())
    changed.values[417, 233] += 1e-9
    redrawn = cache.figure(figures.similarity.similarity_heatmap, changed, highlight=[3])
    assert redrawn is not first
    assert cache.figure(figures.similarity.similarity_heatmap, overview, highlight=[4]) is not first


def test_long_spectra_are_drawn_as_lines_short_ones_with_markers():
    long = figures.spectrum.singular_values(spectrum(learned_like(1024, 768, seed=0).values))
    assert long.data[0].mode == "lines"
    short = figures.spectrum.singular_values(spectrum(learned_like(300, 64, seed=0).values))
    assert short.data[0].mode == "lines+markers"


# --- similarity maps drawn as pictures ------------------------------------------------------


def decoded(source: str) -> np.ndarray:
    """The RGBA pixels of a PNG data URI."""
    png = base64.b64decode(source.removeprefix("data:image/png;base64,"))
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(int)


def painted(values: np.ndarray, scale: str, cmin: float, cmax: float) -> np.ndarray:
    """The RGB a heatmap paints for `values`, by plotly's own colour-scale sampling (values
    beyond the range take its end colours)."""
    where = np.clip((values - cmin) / (cmax - cmin), 0.0, 1.0)
    colours = plotly.colors.sample_colorscale(scale, where.tolist())
    return np.array([plotly.colors.unlabel_rgb(c) for c in colours])


#: Cells whose colours are checked (plotly's sampling is slow): random, and every corner.
CHECKED = np.random.default_rng(0).integers(0, 515, size=(2000, 2))


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_a_large_map_asked_as_a_picture_is_the_colours_its_heatmap_paints(metric):
    m = similarity_map(learned_like(1030, 32, seed=0).values, metric=metric, center=True)
    assert m.values.size > PICTURE_CELLS  # 515 x 515 block means, the last block shorter
    exact = figures.similarity.similarity_heatmap(m, highlight=[3])
    fig = figures.similarity.similarity_heatmap(m, highlight=[3], picture=True)
    # By default the cells themselves, float32; asked, a picture and no cell values at all.
    assert exact.data[0].type == "heatmap"
    np.testing.assert_array_equal(exact.data[0].z, m.values.astype(np.float32))
    picture, colour_bar = fig.data[:2]
    assert (picture.type, colour_bar.type) == ("image", "scatter")
    assert "heatmap" not in [t.type for t in fig.data]
    assert "%{z" not in picture.hovertemplate
    assert "Exact values on hover" in picture.hovertemplate
    assert len(fig.to_json()) < len(exact.to_json()) / 2  # smooth maps compress further
    # One colour axis for both: a similarity centred at 0, a distance from its min to its max.
    axis = fig.layout.coloraxis
    assert axis == exact.layout.coloraxis
    assert colour_bar.marker.coloraxis == "coloraxis"
    if metric == "cosine":
        largest = np.abs(m.values).max()
        assert (axis.cmin, axis.cmax) == (-largest, largest)
        scale = "RdBu_r"
    else:
        assert (axis.cmin, axis.cmax) == (m.values.min(), m.values.max())
        scale = "Viridis"
    # Each pixel is the colour plotly paints for its cell, to the rounding of 8 bits.
    pixels = decoded(picture.source)
    assert pixels.shape == (*m.values.shape, 4)
    assert np.all(pixels[..., 3] == 255)
    rows, cols = [*CHECKED[:, 0], 0, 514], [*CHECKED[:, 1], 514, 0]
    expected = painted(m.values[rows, cols], scale, axis.cmin, axis.cmax)
    assert np.abs(pixels[rows, cols, :3] - expected).max() <= 1
    # Pixels on the block centres' grid: x0, then one block on.
    assert (picture.x0, picture.dx) == (m.col_positions[0], m.block)
    assert (picture.y0, picture.dy) == (m.row_positions[0], m.block)
    assert [t.name for t in fig.data[2:]] == ["flagged positions"] * 2


def test_a_map_of_at_most_picture_cells_is_always_a_heatmap():
    m = similarity_map(learned_like(256, 16, seed=0).values)
    assert m.values.size == PICTURE_CELLS
    fig = figures.similarity.similarity_heatmap(m, picture=True)
    assert [t.type for t in fig.data] == ["heatmap"]


def test_a_large_mosaic_asked_as_a_picture_has_its_gaps_transparent():
    g = grid_similarity(learned_like(24 * 24, 16, seed=0).values, grid=(24, 24))
    mosaic, _ = figures.similarity.grid_mosaic(g)
    assert mosaic.size > PICTURE_CELLS
    assert [t.type for t in figures.similarity.grid_tiles(g).data] == ["heatmap"]
    picture, _ = figures.similarity.grid_tiles(g, picture=True).data
    pixels = decoded(picture.source)
    gaps = np.isnan(mosaic)
    assert gaps.any()
    assert np.all(pixels[..., 3][gaps] == 0)
    assert np.all(pixels[..., 3][~gaps] == 255)
    cells = np.flatnonzero(~gaps)[::50]
    expected = painted(mosaic.ravel()[cells], "RdBu_r", -1.0, 1.0)
    assert np.abs(pixels[..., :3].reshape(-1, 3)[cells] - expected).max() <= 1


# --- labels stay text -----------------------------------------------------------------------

#: Labels that plotly would draw as markup: a CSS url() that fetches a host, and a link.
HOSTILE = (
    '<span style="background:url(http://x/y)">a</span>',
    '<a href="http://x/y">b</a> & c',
)
#: The markup the house layout itself writes.
HOUSE_TAGS = {"<br>", "<sup>", "</sup>", "<extra>", "</extra>"}


def strings(value: object) -> list[str]:
    """Every string in a figure's JSON tree (titles, names, hovers, texts, tick texts)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def assert_labels_literal(fig, labels=HOSTILE) -> None:
    import re

    text = strings(fig.to_plotly_json())
    tags = {tag for s in text for tag in re.findall(r"<[^<>]*>", s)}
    assert tags <= HOUSE_TAGS, tags - HOUSE_TAGS
    escaped = [figures.layout.escape(label) for label in labels]
    for label in escaped:  # every label still there, as the characters typed
        assert any(label in s for s in text), label


def test_escape_turns_markup_into_its_characters():
    assert figures.layout.escape("a<b>&amp;") == "a&lt;b&gt;&amp;amp;"
    assert figures.layout.escape("step 1000") == "step 1000"


def test_labels_of_compare_and_resample_figures_stay_text():
    from posviz.offsets import offset_profile

    tables = [learned_like(64, 16, seed=s).values for s in (0, 1)]
    named = dict(zip(HOSTILE, tables, strict=True))
    compare = figures.compare
    assert_labels_literal(compare.spectra_overlay({k: spectrum(v) for k, v in named.items()}))
    assert_labels_literal(compare.cumulative_overlay({k: spectrum(v) for k, v in named.items()}))
    assert_labels_literal(compare.offset_overlay({k: offset_profile(v) for k, v in named.items()}))
    maps = {k: similarity_map(v) for k, v in named.items()}
    assert_labels_literal(compare.similarity_pair(maps, difference=True))
    grids = {k: grid_similarity(learned_like(16, 8, seed=0).values, grid=(4, 4)) for k in HOSTILE}
    assert_labels_literal(figures.resample.mosaic_pair(grids))


def test_labels_of_collection_figures_and_report_stay_text():
    from posviz.collection import Member, analyse
    from posviz.report import build_collection_report

    labels = [f"{HOSTILE[0]} step{100 * (i + 1)}" for i in range(2)] + [f"{HOSTILE[1]} step300"]
    members = [Member(label, learned_like(64, 16, seed=i)) for i, label in enumerate(labels)]
    c = analyse(members)
    assert c.ordered  # so the over-training figure is built too
    collection = figures.collection
    for build in (
        collection.metrics_over_step,
        collection.collection_cumulative,
        collection.collection_offsets,
        collection.similarity_grid,
        collection.cka_map,
    ):
        assert_labels_literal(build(c), labels)
    page = build_collection_report(c)  # plotly.js inlined holds markup of its own
    assert '<span style="background' not in page
    assert '<a href="http://x/y">' not in page
    assert figures.layout.escape(HOSTILE[0]) in page


# --- log axes: every decade labelled 10ⁿ, minor ticks unlabelled ------------------------------


def _decades(axis) -> list[float]:
    """The labelled ticks of a log axis, checked: whole decades spanning the axis's range, each
    labelled 10ⁿ (one style on every log axis), none skipped; the 2-9 multiples as unlabelled
    minor ticks of the same ruler."""
    assert axis.type == "log"
    values = list(axis.tickvals)
    exponents = np.log10(values)
    np.testing.assert_allclose(exponents, np.round(exponents), atol=1e-12)
    exponents = np.round(exponents).astype(int)
    assert list(np.diff(exponents)) == [1] * (len(exponents) - 1)  # every decade
    assert list(axis.range) == [exponents[0], exponents[-1]]
    assert len(values) >= 2
    for exponent, text in zip(exponents, axis.ticktext, strict=True):
        assert text == "10" + str(exponent).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    # Ticks drawn as a ruler: the minor ones shorter, in the same direction.
    assert axis.ticks == axis.minor.ticks == "outside"
    assert axis.showline  # the ruler's line: the minor ticks hang from it, not in space
    assert axis.minor.ticklen < axis.ticklen
    if len(values) <= 11:
        minor = np.log10(axis.minor.tickvals)
        assert {round(10 ** (m - np.floor(m + 1e-9))) for m in minor} == set(range(2, 10))
    return values


def test_log_axes_label_every_decade_in_one_style(learned):
    y = _decades(figures.spectrum.singular_values(learned).layout.yaxis)
    assert y[0] <= learned.singular_values[learned.singular_values >= learned.floor].min()
    assert y[-1] >= learned.singular_values[0]
    assert _decades(figures.spectrum.explained_variance(learned).layout.xaxis)[:3] == [1, 10, 100]
    error = figures.spectrum.reconstruction_error(learned)
    assert _decades(error.layout.yaxis)[-1] == 1  # the error starts at 1
    text = figures.spectrum.reconstruction_error(learned).layout.yaxis.ticktext
    assert "10⁻¹" in text
    assert not {"1", "2", "5", "10", "100", "0.2", "0.5"} & set(text)


def test_a_wide_log_axis_labels_every_decade_without_a_comb_of_minor_ticks():
    # Formerly: past eight decades every other one was labelled.
    axis = figures.layout.log_axis(np.array([1e-20, 1.0]))
    assert len(axis["tickvals"]) == 21
    assert axis["ticktext"][0] == "10⁻²⁰"
    assert axis["ticktext"][-1] == "10⁰"
    assert axis["minor"]["tickvals"] == []


def test_a_short_log_axis_spans_whole_decades():
    # Formerly: LongRoPE's factors (1 to 65) were labelled 1 and 10 only.
    axis = figures.layout.log_axis(np.array([1.0, 64.84]))
    assert axis["ticktext"] == ["10⁰", "10¹", "10²"]
    assert figures.layout.log_axis(np.array([3.0]))["ticktext"] == ["10⁰", "10¹"]


def test_compare_spectra_stop_at_float32_resolution_on_decade_axes():
    tables = {"sinusoid": sinusoidal_table(1024, 768), "learned": learned_like(1024, 768).values}
    spectra = {name: spectrum(t) for name, t in tables.items()}
    fig = figures.compare.spectra_overlay(spectra)
    _decades(fig.layout.xaxis)
    _decades(fig.layout.yaxis)
    for trace, s in zip(fig.data, spectra.values(), strict=True):
        # Not 10⁻²¹: the float64 sinusoid's smallest resolved shares are drawn no more.
        lowest = (s.singular_values[0] * np.sqrt(768) * np.finfo(np.float32).eps) ** 2
        assert trace.y.min() >= lowest / (s.singular_values**2).sum() * (1 - 1e-6)
    assert min(fig.layout.yaxis.tickvals) >= 1e-13
    _decades(figures.compare.cumulative_overlay(spectra).layout.xaxis)


def test_similarity_pair_colour_bars_have_titles():
    maps = {
        name: similarity_map(t, metric="cosine")
        for name, t in {"a": sinusoidal_table(64, 16), "b": learned_like(64, 16).values}.items()
    }
    fig = figures.compare.similarity_pair(maps, difference=True)
    assert fig.layout.coloraxis.colorbar.title.text == "cosine similarity"
    assert fig.layout.coloraxis2.colorbar.title.text == "difference (b − a)"


def test_collection_steps_over_two_decades_on_a_decade_axis():
    steps = [1, 30, 1000]
    c = analyse([Member(f"step{s}", learned_like(64, 16, seed=s)) for s in steps])
    fig = figures.collection.metrics_over_step(c)
    assert _decades(fig.layout.xaxis) == [1, 10, 100, 1000]


def test_the_cka_maps_labels_do_not_overlap_and_drop_their_common_start():
    # Formerly: neighbouring checkpoints' labels overlapped, all placed on top of their markers.
    from posviz.collection import gather

    c = analyse(gather.gather(gather.example_run(), []))
    fig = figures.collection.cka_map(c)
    tables = fig.data[-1]
    assert list(tables.text) == ["step100", "step300", "step1000", "step3000", "step10000",
                                 "step30000"]  # fmt: skip
    assert "common start simulated-run-" in fig.layout.title.text
    # The two last checkpoints sit closest: their labels go on different sides.
    assert tables.textposition[-1] != tables.textposition[-2]


def test_label_places_keep_close_labels_apart():
    points = np.array([[0.0, 0.0], [0.01, 0.002], [0.02, 0.004], [1.0, 0.5]])
    labels = ["step10000", "step30000", "step100000", "far"]
    places = figures.collection.label_places(points, labels)
    assert len(set(places[:3])) == 3


def test_a_square_maps_colour_bar_sits_under_it():
    # Formerly: at the figure's right edge, far from a map narrower than the page.
    fig = figures.similarity.similarity_heatmap(similarity_map(learned_like(64, 16).values))
    bar = fig.layout.coloraxis.colorbar
    assert (bar.orientation, bar.x, bar.xanchor, bar.yref) == ("h", 0.5, "center", "container")


def test_the_probe_charts_legend_is_under_the_axis_apart_from_the_subtitle():
    from posviz import probes

    report = probes.probe_with_controls(gaussian(100, 76).values, protocol="linear", repeats=2)
    fig = figures.probes.probe_predictions(report)
    assert "<sup>" in fig.layout.title.text  # predictions outside the drawn range: said
    assert (fig.layout.legend.yref, fig.layout.legend.y, fig.layout.legend.yanchor) == (
        "container",
        0,
        "bottom",
    )


def test_offset_lengths_are_named_in_the_legend_not_across_each_other():
    # Labels placed beside their lines ran across the next line (k=157's label was cut by
    # k=261's on the default table): the lengths are named in the legend instead.
    from posviz.offsets import offset_profile, offset_scores

    p = offset_profile(learned_like(1024, 64, seed=0).values)
    scores = offset_scores(p)
    fig = figures.offsets.offset_profile(p, scores)
    assert not fig.layout.annotations
    lines = {shape.x0: shape.name for shape in fig.layout.shapes if shape.showlegend}
    near, zero = scores.similarity_length, scores.length_zero
    assert lines == {
        near: f"k={near}: m(k) < m(0)/e (similarity length)",
        zero: f"k={zero}: m(k) < 0",
    }
    assert len({shape.line.dash for shape in fig.layout.shapes if shape.showlegend}) == 2
    # Listed after the curves, the shorter length first (plotly put shapes first, k=261 ahead,
    # and reversed the legend of a figure with a filled band).
    assert fig.layout.legend.traceorder == "normal"
    ranks = [t.legendrank or 1000 for t in fig.data if t.showlegend is not False]
    ranks += [s.legendrank for s in fig.layout.shapes if s.showlegend]
    named = [t.name for t in fig.data if t.showlegend is not False]
    named += [s.name for s in fig.layout.shapes if s.showlegend]
    assert [name for _, name in sorted(zip(ranks, named, strict=True))] == [
        "mean over i",
        "±1 std over i",
        f"k={near}: m(k) < m(0)/e (similarity length)",
        f"k={zero}: m(k) < 0",
    ]


def test_path_ends_are_named_in_the_legend_not_written_over_the_path():
    # "first p=0" written beside its marker was drawn over by the path it starts (the default
    # table's PC1 / PC2): the ends are named in the legend, each with its own marker.
    from posviz.components import principal_components

    pc = principal_components(learned_like(1024, 64, seed=0).values, n_components=3)
    fig = figures.components.pc_path(pc, (1, 2))
    ends = [t for t in fig.data if t.showlegend is not False]
    assert [t.name for t in ends] == ["first p=0", "last p=1023"]
    assert [t.marker.symbol for t in ends] == ["circle", "square"]
    assert all(t.mode == "markers" and t.text is None for t in ends)
    assert fig.layout.showlegend is not False
    # Under the axis: above the plot it ran into the subtitle.
    assert "<sup>" in fig.layout.title.text
    legend = fig.layout.legend
    assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")
    np.testing.assert_array_equal(ends[1].x, pc.scores[[-1], 0].astype(np.float32))


@pytest.mark.parametrize("center", [True, False])
def test_sinusoid_span_title_says_whether_rows_were_centred(center):
    # Every other chart of the Components page names the centring that made it; the span's
    # principal angles change with it too.
    from posviz.components import principal_components, sinusoid_likeness

    pc = principal_components(learned_like(256, 32, seed=0).values, n_components=4, center=center)
    fig = figures.components.principal_angles(sinusoid_likeness(pc, n_shuffles=9))
    assert fig.layout.title.text.endswith(f"({figures.layout.center_label(center)})")


def test_the_probe_legend_gives_skill_as_the_page_does():
    # The legend read "skill -0.00" for a control the page beside it gives as "skill -0.001";
    # later "skill 0.000" (its first draw's) beside the page's "skill -0.001" (the mean over
    # its draws). Both now write each number through probes.skill_text, a control's the mean.
    from posviz import probes

    report = probes.probe_with_controls(gaussian(100, 76).values, protocol="linear", repeats=2)
    fig = figures.probes.probe_predictions(report)
    names = [t.name for t in fig.data]
    table = report.absolute["table"]
    assert f"table (MAE {table.mae:.2f}, skill {probes.skill_text(table.skill)})" in names
    for name in probes.CONTROLS[1:]:
        mean = probes.skill_text(report.control_summary(name)[0])
        (label,) = [n for n in names if n.startswith(f"{name}, 1 of {report.n_control_draws}")]
        assert label.endswith(f"skill {mean})")
    # A table a hair below chance read "skill -0.000": it rounds to 0.
    near = dataclasses.replace(table, fold_mae=table.fold_chance_mae * 1.0003)
    fig = figures.probes.probe_predictions(
        dataclasses.replace(report, absolute={**report.absolute, "table": near})
    )
    assert any(t.name.startswith("table (") and t.name.endswith("skill 0.000)") for t in fig.data)


def test_collection_panels_are_titled_as_the_metrics_table_heads_them():
    # The panels read "n above noise" and "sinusoid mean cos2" over the table's
    # "number above noise" and "sinusoid mean cos²".
    from posviz.export import column_label
    from posviz.figures.collection import STEP_METRICS

    c = analyse([Member(f"step{s}", learned_like(64, 16, seed=s)) for s in (1, 30, 1000)])
    fig = figures.collection.metrics_over_step(c)
    titles = [a.text for a in fig.layout.annotations][: len(STEP_METRICS)]
    assert titles == [column_label(m) for m in STEP_METRICS]
    assert "sinusoid mean cos²" in titles


def test_spectrum_axes_write_subscripts_as_subscripts(learned):
    # "σ_k" and "‖X − X_k‖_F" were drawn with their underscores, as typed in LaTeX.
    values = figures.spectrum.singular_values(learned)
    error = figures.spectrum.reconstruction_error(learned)
    texts = [values.layout.yaxis.title.text, values.data[0].name, error.layout.yaxis.title.text]
    assert not any("_" in text for text in texts), texts
    assert values.layout.yaxis.title.text == "singular value σ<sub>k</sub>"
