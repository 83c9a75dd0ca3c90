"""figures.heads' depth charts, on the planted GPT-2 (posviz/examples): the map marks the one
labelled head where it was planted and colours shares on 0 … 1, positions by their logarithm;
the labels over depth put each layer's largest head beside its null and the threshold."""

from __future__ import annotations

import numpy as np
import pytest

from posviz import depth, examples
from posviz.figures import heads as figures
from posviz.heads import LABELS
from posviz.models import attention, weights


@pytest.fixture(scope="module")
def planted() -> depth.DepthHeads:
    found = examples.EXAMPLES["planted-gpt2"]
    model = weights.open_checkpoint(found.weights, label=found.label)
    return depth.collect(depth.plan_depth(attention.open_model(model)))


def test_the_map_is_the_number_with_the_labelled_head_marked(planted):
    fig = figures.depth_map(planted, "attention_previous", model="m")
    heatmap, marks = fig.data
    assert np.allclose(heatmap.z, planted.map("attention_previous"), atol=1e-6)  # float32
    assert list(heatmap.y) == [f"layer {i}" for i in range(4)]
    assert (heatmap.zmin, heatmap.zmax) == (0.0, 1.0)  # a share: one scale at any depth
    assert (marks.name, list(marks.x), list(marks.y)) == ("previous-token", ["h1"], ["layer 2"])
    nulls = np.asarray(heatmap.customdata)[:, 0, 1]
    assert np.allclose(nulls, planted.null_max("attention_previous"), atol=1e-6)


def test_numbers_in_positions_are_coloured_by_their_logarithm(planted):
    fig = figures.depth_map(planted, "mean_distance")
    heatmap = fig.data[0]
    assert np.allclose(heatmap.z, np.log10(planted.map("mean_distance")), atol=1e-6)
    ticks = [float(t.replace(",", "")) for t in heatmap.colorbar.ticktext]
    assert np.allclose(np.log10(ticks), heatmap.colorbar.tickvals)


def test_labels_over_depth_stand_each_beside_its_null_and_threshold(planted):
    fig = figures.depth_labels(planted)
    pattern = [label for label, (n, _) in LABELS.items() if n in planted.definitions]
    assert len(fig.layout.annotations) == len(pattern)  # one panel per label
    largest = [t for t in fig.data if t.legendgroup == "largest"]
    nulls = [t for t in fig.data if t.legendgroup == "null"]
    assert len(largest) == len(nulls) == len(pattern)
    previous = largest[0]
    assert np.allclose(previous.y, planted.map("attention_previous").max(axis=1), atol=1e-6)
    assert list(previous.text) == ["", "", "1", ""]
    assert np.allclose(nulls[0].y, planted.null_max("attention_previous"), atol=1e-6)
    thresholds = sorted(s.y0 for s in fig.layout.shapes)
    assert thresholds == sorted(t for _, (n, t) in LABELS.items() if n in planted.definitions)
