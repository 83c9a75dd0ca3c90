"""posviz.depth: every layer's heads, planned from the headers, read one layer at a time, each
layer the same as that layer read alone."""

from __future__ import annotations

import numpy as np
import pytest

from posviz import depth, pipeline
from posviz._params import Refused
from posviz.models import attention
from tests import ROOT

DATA = ROOT / "tests" / "data" / "heads"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("all", (0, 1, 2, 3)), ("2", (2,)), ("1-2", (1, 2)), ("3,0,0", (0, 3)), ("0-1,3", (0, 1, 3)),
     (2, (2,)), ([3, 1], (1, 3)), (" 1 - 3 ", (1, 2, 3))],
)  # fmt: skip
def test_layers_are_read_as_written(text, expected):
    assert depth.parse_layers(text, 4, label="m") == expected


@pytest.mark.parametrize(
    ("text", "said"),
    [("4", "there is no layer 4"), ("2-9", "there is no layer 9"), ("3-1", "reversed range"),
     ("", "empty"), ("x", "'x' is not a layer"), ("1,,2", "'' is not a layer"),
     ("-1", "is not a layer"), ("1.5", "is not a layer"), ([5], "no layer 5"), ([], "No layers")],
)  # fmt: skip
def test_a_layer_the_model_lacks_is_refused_naming_its_layers(text, said):
    with pytest.raises(Refused, match="m has 4 layers \\(0 … 3\\)") as refusal:
        depth.parse_layers(text, 4, label="m")
    assert said in str(refusal.value)
    assert "\n" not in str(refusal.value)


def test_all_is_refused_when_the_config_does_not_count_the_layers():
    with pytest.raises(Refused, match="does not say how many layers"):
        depth.parse_layers("all", None, label="m")
    assert depth.parse_layers("0-2", None, label="m") == (0, 1, 2)


def without_run_facts(record: dict) -> dict:
    """A layer's record less what depends on the run, not the layer (bytes that travelled)."""
    return {k: v for k, v in record.items() if k != "bytes_fetched"}


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma3", "bert"])
def test_each_layer_equals_that_layer_read_alone(family):
    model = attention.open_source(str(DATA / family))
    plan = depth.plan_depth(model, "all")
    assert plan.layers == tuple(range(plan.n_layers or 0))
    records = [heads.record() for heads in depth.stream_depth(plan, n_draws=3)]
    for record in records:
        alone = attention.open_layer(model, layer=record["layer"])
        result = pipeline.call(pipeline.HEADS_STEPS[alone.kind], alone, n_draws=3)
        expected = depth.LayerHeads(0, alone, result).record()
        assert without_run_facts(record) == without_run_facts(expected)


def test_the_maps_hold_every_layers_numbers_and_labels():
    model = attention.open_source(str(DATA / "llama"))
    found = depth.collect(depth.plan_depth(model))
    assert found.complete
    assert found.indices == [0, 1]
    fast = found.map("fast_share")
    assert fast.shape == (2, 4)
    for row, layer in enumerate(found.layers):
        np.testing.assert_array_equal(fast[row], layer.numbers["fast_share"])
    assert found.label_map().shape == (2, 4)
    frame = found.to_frame()
    assert list(frame["layer"]) == [0] * 4 + [1] * 4
    summary = found.record()
    assert summary["layers"] == [0, 1]
    assert summary["numbers"]["fast_share"]["max"] == [float(fast[0].max()), float(fast[1].max())]
    assert set(summary["labels"]) == {"high-frequency", "low-frequency"}


def test_the_plan_counts_a_shared_position_table_once():
    model = attention.open_source(str(DATA / "gpt2"))
    plan = depth.plan_depth(model)
    per_layer = [sum(r.nbytes for r in p.reads) for p in plan.plans]
    table = next(r.nbytes for r in plan.plans[0].reads if r.role == "positions")
    assert plan.nbytes == sum(per_layer) - table * (len(per_layer) - 1)
    assert plan.to_fetch == 0  # a local file: nothing travels
