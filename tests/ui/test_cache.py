"""posviz.ui.cache: the app's shared caches never hand one session's table (name, source, prefix
rows) to another that holds the same values; every step of the registry cached under its name;
figures kept per content of what they draw."""

from __future__ import annotations

import dataclasses

import numpy as np

from posviz import figures, pipeline
from posviz.embedding import Embedding
from posviz.similarity import similarity_map
from posviz.simulate import learned_like
from posviz.ui import cache

RNG = np.random.default_rng(0)
#: Two sources of the same 64 analysed rows: a private model with a class-token row in front,
#: and a public file without.
VALUES = RNG.standard_normal((64, 16)).astype(np.float32)
PRIVATE = Embedding.from_array(
    np.vstack([np.full((1, 16), 7.0, np.float32), VALUES]),
    name="secret.cls_and_positions",
    source="hf:acme/private-model@main",
    row_start=1,
)
PUBLIC = Embedding.from_array(VALUES, name="wpe.weight", source="public.npy")


def test_a_resampled_table_is_the_callers_own():
    assert PRIVATE.sha256 == PUBLIC.sha256  # the values' digest cannot tell them apart
    first = cache.run(pipeline.resample_length, PRIVATE, n_positions=80)
    second = cache.run(pipeline.resample_length, PUBLIC, n_positions=80)
    assert (first.name, first.row_start) == ("secret.cls_and_positions", 1)
    np.testing.assert_array_equal(first.prefix, np.full((1, 16), 7.0))
    # The second session gets its own table: its name and source, no class-token row.
    assert (second.name, second.row_start, second.prefix.shape) == ("wpe.weight", 0, (0, 16))
    assert second.source.startswith("public.npy → ")
    np.testing.assert_array_equal(second.values, first.values)
    assert "private" not in str(second.provenance())


def test_a_grid_resampling_keeps_the_callers_table():
    grid = RNG.standard_normal((16, 8)).astype(np.float32)
    with_cls = Embedding.from_array(
        np.vstack([np.ones((1, 8), np.float32), grid]),
        name="vit.pos",
        source="private.safetensors",
        row_start=1,
        grid=(4, 4),
    )
    plain = Embedding.from_array(grid, name="pos", source="public.npy", grid=(4, 4))
    assert cache.run(pipeline.resample_grid, with_cls, new_grid=(6, 6)).row_start == 1
    again = cache.run(pipeline.resample_grid, plain, new_grid=(6, 6))
    assert (again.name, again.row_start, again.n_source_rows) == ("pos", 0, 36)


def test_a_collection_holds_the_callers_tables():
    def build(table: Embedding):
        other = Embedding.from_array(VALUES[::-1], name="b", source="b.npy")
        return cache.collection(("a", "b"), (table, other), (None, None), center=True)

    first, second = build(PRIVATE), build(PUBLIC)
    assert first.members[0].table is PRIVATE
    assert second.members[0].table is PUBLIC


def test_every_step_of_the_registry_is_cached_under_its_name_and_spinner():
    assert set(cache._CACHED) == {step.run for step in pipeline.STEPS.values()}
    for step in pipeline.STEPS.values():
        cached = cache._CACHED[step.run]
        assert cached.__name__ == step.name  # one cache per step (Streamlit keys by name)
        assert step.spinner.endswith("…")


def test_the_old_cached_names_still_work_with_a_warning():
    import pytest

    with pytest.warns(DeprecationWarning, match=r"cache\.run\(pipeline\.resample_length"):
        old = cache.resample_length(PUBLIC, n_positions=80)
    assert old is cache.run(pipeline.resample_length, PUBLIC, n_positions=80)
    with pytest.raises(AttributeError):
        cache.no_such_step  # noqa: B018


def test_built_figures_are_kept_per_content_of_what_they_draw():
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
