"""figures.offsets: the offset profile with its spread and its lengths named in the legend."""

from __future__ import annotations

import numpy as np
import pytest

from posviz import figures
from posviz.offsets import offset_profile, offset_scores
from posviz.simulate import learned_like


@pytest.fixture(scope="module")
def learned() -> np.ndarray:
    return learned_like(300, 48, seed=2).values


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


def test_profile_figure(learned):
    p = offset_profile(learned, max_offset=50, center=False)
    fig = figures.offsets.offset_profile(p, offset_scores(p, monotonicity_window=10))
    assert [t.type for t in fig.data] == ["scatter"] * 3
    assert fig.data[1].fill == "tonexty"
    np.testing.assert_allclose(fig.data[2].y, p.mean, rtol=1e-6)
    assert fig.layout.xaxis.title.text == "offset k"
