"""figures.boundary: the position statistics' panels with flagged rows marked and change points
labelled by what the rows stand for."""

from __future__ import annotations

import numpy as np
import pytest

import posviz
from posviz import boundary, figures, simulate
from posviz.rows import RowLabels, row_offsets

#: The position table of the all-MiniLM-L6-v2 posviz ships (posviz/examples).
MINILM = "example:all-MiniLM-L6-v2"
TENSOR = "embeddings.position_embeddings.weight"


@pytest.fixture(scope="module")
def minilm() -> np.ndarray:
    return posviz.load(MINILM, tensor=TENSOR).values


def test_position_figure_traces_and_marks():
    table = simulate.learned_like(300, 32, seed=0)
    stats = boundary.position_statistics(table.values, n_directions_removed=4)
    flags = boundary.outliers(stats)
    changes = boundary.change_points(flags, max_changes=2)
    fig = figures.boundary.position_statistics(stats, flags, changes)
    lines = [t for t in fig.data if t.mode == "lines"]
    marks = [t for t in fig.data if t.mode == "markers"]
    # In words (the legend names the two cosine curves: "cos_prev" read as a key there).
    assert [t.name for t in lines] == [
        "row norm",
        "cos to previous row",
        "cos to next row",
        "distance to mean row",
        "residual norm",
    ]
    assert all(t.type == "scatter" and len(t.y) == 300 and t.y.dtype == np.float32 for t in lines)
    assert len(marks) == 4  # one per panel
    assert list(marks[0].x) == [0, 299]
    assert fig.layout.xaxis4.title.text == "position p"
    assert len(fig.layout.shapes) == 4 * len(changes.positions)  # a line per panel
    assert "|robust z| > 8" in fig.layout.title.text


def test_position_figure_downsamples_long_tables_but_keeps_flags():
    n = 20000
    table = simulate.learned_like(n, 16, seed=0)
    stats = boundary.position_statistics(table.values)
    flags = boundary.outliers(stats)
    fig = figures.boundary.position_statistics(stats, flags)
    assert len(fig.data[0].x) == figures.layout.LINE_POINTS
    assert fig.data[0].x[-1] == n - 1
    assert n - 1 in list(fig.data[1].x)
    assert "evenly spaced" in fig.layout.title.text
    assert len(fig.to_json()) < 1_000_000


def test_the_figure_marks_the_step_with_its_z(minilm):
    stats = boundary.position_statistics(minilm)
    flags = boundary.outliers(stats)
    changes = boundary.change_points(flags, null_draws=0)
    fig = figures.boundary.position_statistics(stats, flags, changes)
    p = int(changes.positions[0])
    assert [shape.x0 for shape in fig.layout.shapes] == [p - 0.5] * 3  # one per panel
    labels = [a.text for a in fig.layout.annotations if a.text.startswith("step at")]
    assert labels == [f"step at {p} · z {changes.z[0]:.1f}"]
    # A relative table's axes: the label says the position as they do.
    shifted = figures.boundary.position_statistics(
        stats, flags, changes, labels=RowLabels(first_position=-256)
    )
    assert f"step at {p - 256} ·" in next(
        a.text for a in shifted.layout.annotations if a.text.startswith("step at")
    )
    # DeBERTa's buckets: the step midway between the offsets' centres of its two rows, named
    # by the offsets of the row after it.
    offsets = row_offsets(position_buckets=256, max_relative_positions=512)
    buckets = figures.boundary.position_statistics(
        stats, flags, changes, labels=RowLabels(-256, offsets)
    )
    centres = offsets.centres()
    assert buckets.layout.shapes[0].x0 == (centres[p - 1] + centres[p]) / 2
    assert f"step at {offsets.text([p])[0]} ·" in next(
        a.text for a in buckets.layout.annotations if a.text.startswith("step at")
    )
