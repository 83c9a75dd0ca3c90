"""Spectrum figures, checked by their traces and axes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from posviz import figures
from posviz.similarity import similarity_map
from posviz.simulate import learned_like, sinusoidal_table
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
