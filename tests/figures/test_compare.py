"""figures.compare: two or more tables overlaid, their labels kept as text, spectra drawn to
float32's resolution on decade axes."""

from __future__ import annotations

import numpy as np

from posviz import figures
from posviz.similarity import grid_similarity, similarity_map
from posviz.simulate import learned_like, sinusoidal_table
from posviz.spectrum import spectrum
from tests.figures.checks import HOSTILE, assert_labels_literal, decades


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


def test_compare_spectra_stop_at_float32_resolution_on_decade_axes():
    tables = {"sinusoid": sinusoidal_table(1024, 768), "learned": learned_like(1024, 768).values}
    spectra = {name: spectrum(t) for name, t in tables.items()}
    fig = figures.compare.spectra_overlay(spectra)
    decades(fig.layout.xaxis)
    decades(fig.layout.yaxis)
    for trace, s in zip(fig.data, spectra.values(), strict=True):
        # Not 10⁻²¹: the float64 sinusoid's smallest resolved shares are drawn no more.
        lowest = (s.singular_values[0] * np.sqrt(768) * np.finfo(np.float32).eps) ** 2
        assert trace.y.min() >= lowest / (s.singular_values**2).sum() * (1 - 1e-6)
    assert min(fig.layout.yaxis.tickvals) >= 1e-13
    decades(figures.compare.cumulative_overlay(spectra).layout.xaxis)


def test_similarity_pair_colour_bars_have_titles():
    maps = {
        name: similarity_map(t, metric="cosine")
        for name, t in {"a": sinusoidal_table(64, 16), "b": learned_like(64, 16).values}.items()
    }
    fig = figures.compare.similarity_pair(maps, difference=True)
    assert fig.layout.coloraxis.colorbar.title.text == "cosine similarity"
    assert fig.layout.coloraxis2.colorbar.title.text == "difference (b − a)"
