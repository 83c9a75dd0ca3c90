"""posviz.ui.cache: results and figures kept per content of what they are made from."""

from __future__ import annotations

import dataclasses

from posviz import figures
from posviz.similarity import similarity_map
from posviz.simulate import learned_like


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
