"""A context plan's charts: every rule drawn in its colour, the bands and marks where they are."""

from __future__ import annotations

import numpy as np

from posviz import figures
from posviz.figures.plan import RULE_COLOURS
from posviz.schemes.config import position_scheme
from posviz.schemes.plan import RULES, context_plan

LLAMA2 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
          "max_position_embeddings": 4096}  # fmt: skip


def test_ratios_draw_each_rule_against_the_bands():
    plan = context_plan(position_scheme(LLAMA2), target=16384)
    fig = figures.plan.ratios(plan)
    assert [t.name for t in fig.data] == [r.rule for r in plan.rules]
    assert [t.line.color for t in fig.data] == [RULE_COLOURS[r.rule] for r in plan.rules]
    assert set(RULE_COLOURS) == set(RULES)
    np.testing.assert_array_equal(fig.data[4].y, plan.rule("yarn").ratio.astype(np.float32))
    lines = sorted(shape.y0 for shape in fig.layout.shapes if shape.type == "line" and shape.y0)
    assert lines == [0.25, 1.0]  # 1/s and 1; the blended band between them
    assert any(shape.type == "rect" for shape in fig.layout.shapes)
    assert fig.layout.shapes[-1].x0 == 45.5  # the critical dimension 92: pairs 46 on


def test_angles_against_training_and_one_turn():
    plan = context_plan(position_scheme(LLAMA2), target=16384)
    fig = figures.plan.angles(plan)
    trained, *rules = fig.data
    np.testing.assert_allclose(trained.y, 4096 * plan.rule("none").inv_freq, rtol=1e-7)
    assert [t.name for t in rules][:3] == ["none (18 beyond)", "linear (0 beyond)",
                                           "ntk_aware (17 beyond)"]  # fmt: skip
    assert any(abs(shape.y0 - 2 * np.pi) < 1e-12 for shape in fig.layout.shapes if shape.y0)
