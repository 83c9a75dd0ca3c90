"""figures.spectrum: singular values on decade axes beside the noise threshold, explained
variance at every threshold, the reconstruction error from 1."""

from __future__ import annotations

import numpy as np
import pytest

from posviz import figures
from posviz.simulate import learned_like, sinusoidal_table
from posviz.spectrum import THRESHOLDS, spectrum
from tests.figures.checks import decades


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


def test_long_spectra_are_drawn_as_lines_short_ones_with_markers():
    long = figures.spectrum.singular_values(spectrum(learned_like(1024, 768, seed=0).values))
    assert long.data[0].mode == "lines"
    short = figures.spectrum.singular_values(spectrum(learned_like(300, 64, seed=0).values))
    assert short.data[0].mode == "lines+markers"


def test_log_axes_label_every_decade_in_one_style(learned):
    y = decades(figures.spectrum.singular_values(learned).layout.yaxis)
    assert y[0] <= learned.singular_values[learned.singular_values >= learned.floor].min()
    assert y[-1] >= learned.singular_values[0]
    assert decades(figures.spectrum.explained_variance(learned).layout.xaxis)[:3] == [1, 10, 100]
    error = figures.spectrum.reconstruction_error(learned)
    assert decades(error.layout.yaxis)[-1] == 1  # the error starts at 1
    text = figures.spectrum.reconstruction_error(learned).layout.yaxis.ticktext
    assert "10⁻¹" in text
    assert not {"1", "2", "5", "10", "100", "0.2", "0.5"} & set(text)


def test_spectrum_axes_write_subscripts_as_subscripts(learned):
    # "σ_k" and "‖X − X_k‖_F" were drawn with their underscores, as typed in LaTeX.
    values = figures.spectrum.singular_values(learned)
    error = figures.spectrum.reconstruction_error(learned)
    texts = [values.layout.yaxis.title.text, values.data[0].name, error.layout.yaxis.title.text]
    assert not any("_" in text for text in texts), texts
    assert values.layout.yaxis.title.text == "singular value σ<sub>k</sub>"
