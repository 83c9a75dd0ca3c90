"""figures.components: principal components over position, their path, the sinusoid fits, the
periodogram and the principal angles, checked by their traces."""

from __future__ import annotations

import numpy as np
import pytest

from posviz import figures, simulate
from posviz.components import (
    fit_sinusoids,
    principal_components,
    sinusoid_likeness,
)
from posviz.simulate import learned_like


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
    from posviz.components import principal_components

    pc = principal_components(learned_like(256, 32, seed=0).values, n_components=4, center=center)
    fig = figures.components.principal_angles(sinusoid_likeness(pc, n_shuffles=9))
    assert fig.layout.title.text.endswith(f"({figures.layout.center_label(center)})")


@pytest.mark.parametrize("overlaid", [True, False])
def test_trajectory_figure_has_one_line_per_pc_with_its_variance_share(components_result, overlaid):
    pc, _, _ = components_result
    fig = figures.components.pc_trajectories(pc, overlaid=overlaid)
    assert [t.type for t in fig.data] == ["scatter"] * 4
    assert fig.data[0].name == f"PC1 ({pc.explained_variance[0]:.1%})"
    np.testing.assert_array_equal(fig.data[2].y, pc.scores[:, 2].astype(np.float32))
    assert fig.data[2].y.dtype == np.float32
    assert "rows mean-centred" in fig.layout.title.text
    xaxis = fig.layout.xaxis if overlaid else fig.layout.xaxis4
    assert xaxis.title.text == "position p"


def test_path_figures_in_2d_and_3d(components_result):
    pc, _, _ = components_result
    flat = figures.components.pc_path(pc, (1, 2))
    assert [t.type for t in flat.data] == ["scatter"] * 4  # path, marks, first, last
    assert flat.layout.xaxis.title.text.startswith("PC1 (")
    np.testing.assert_array_equal(flat.data[0].x, pc.scores[:, 0].astype(np.float32))
    # The coloured markers: evenly spaced, both ends kept, at most MARKER_POINTS of them.
    marked = flat.data[1].customdata
    assert len(marked) == figures.layout.MARKER_POINTS
    assert (marked[0], marked[-1]) == (0, 299)
    np.testing.assert_array_equal(flat.data[1].y, pc.scores[marked, 1].astype(np.float32))
    solid = figures.components.pc_path(pc, (3, 1, 2))
    assert [t.type for t in solid.data] == ["scatter3d", "scatter3d"]
    assert solid.layout.scene.zaxis.title.text.startswith("PC2 (")
    assert list(solid.data[1].text) == ["first p=0", "last p=299"]


def test_long_tables_are_drawn_at_evenly_spaced_positions_and_say_so():
    pc = principal_components(simulate.learned_like(50_257, 16, seed=0).values, n_components=3)
    fig = figures.components.pc_path(pc, (1, 2, 3))
    shown = fig.data[0].customdata
    assert len(shown) == figures.components.PATH_POINTS
    assert shown[0] == 0
    assert shown[-1] == 50_256
    np.testing.assert_array_equal(fig.data[0].z, pc.scores[shown, 2].astype(np.float32))
    assert "5,000 of 50,257 positions, evenly spaced" in fig.layout.title.text
    assert len(fig.to_json()) < 500_000
    fits = fit_sinusoids(pc)
    for lines in (
        figures.components.pc_trajectories(pc, overlaid=False),
        figures.components.sinusoid_fits(pc, fits),
    ):
        x = lines.data[-1].x
        assert len(x) == figures.layout.LINE_POINTS
        assert (x[0], x[-1]) == (0, 50_256)
        np.testing.assert_array_equal(lines.data[-1].y, lines.data[-1].y.astype(np.float32))
        assert "8,192 of 50,257 positions, evenly spaced" in lines.layout.title.text
        assert len(lines.to_json()) < 1_000_000
    np.testing.assert_array_equal(lines.data[-1].y, fits.fitted[x, 2].astype(np.float32))


def test_fit_figure_overlays_data_and_fit_with_r2_in_panel_titles(components_result):
    pc, fits, _ = components_result
    fig = figures.components.sinusoid_fits(pc, fits)
    assert len(fig.data) == 8
    np.testing.assert_array_equal(fig.data[1].y, fits.fitted[:, 0].astype(np.float32))
    assert fig.data[1].line.dash == "dash"
    assert f"R² = {fits.r2[3]:.4f}" in fig.layout.annotations[3].text


def test_periodogram_heatmap_sums_bins_in_blocks_above_the_column_limit(components_result):
    _, fits, _ = components_result
    fig = figures.components.periodogram(fits, max_cycles=20)
    heat = fig.data[0]
    assert heat.type == "heatmap"
    assert heat.z.shape == (4, 21)
    assert fig.layout.xaxis.title.text == "frequency (cycles over the table)"
    binned = figures.components.periodogram(fits, max_cycles=150, columns=50)
    assert binned.data[0].z.shape == (4, 38)  # 151 bins in blocks of 4
    np.testing.assert_allclose(
        binned.data[0].z.sum(axis=1), fits.power[:, :151].sum(axis=1), rtol=1e-5
    )
    np.testing.assert_allclose(binned.data[0].z[:, 0], fits.power[:, :4].sum(axis=1), rtol=1e-6)
    assert "blocks of 4" in binned.layout.title.text


def test_principal_angle_figure_shows_cos2_and_the_chance_level(components_result):
    _, _, likeness = components_result
    fig = figures.components.principal_angles(likeness)
    assert fig.data[0].type == "bar"
    np.testing.assert_allclose(
        fig.data[0].y, np.sort(np.cos(likeness.angles) ** 2)[::-1], rtol=1e-6
    )
    np.testing.assert_allclose(fig.data[1].y, likeness.shuffled.mean())
    assert "5 shuffles, seed 0" in fig.data[1].name
