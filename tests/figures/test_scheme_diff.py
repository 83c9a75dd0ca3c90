"""figures.scheme_diff: each pair's relative inv_freq difference on a log axis, those past the
tolerance red and exact zeros drawn at 10⁻¹⁸ with a note; the angle error over positions, the
largest within each drawn point's span, the first position past 0.01 rad marked."""

from __future__ import annotations

import dataclasses

import numpy as np

from posviz import figures
from posviz.figures.layout import LINE_POINTS
from posviz.schemes.diff import ANGLE_LIMIT, from_spec, scheme_diff
from posviz.schemes.rotary import RotarySpec

SPEC = RotarySpec("default", 16, 10000.0, context=4096)


def source(spec: RotarySpec, label: str):
    return from_spec(spec, label=label, provenance={})


def test_pairs_past_the_tolerance_are_red_on_a_log_axis():
    d = scheme_diff(source(SPEC, "a"), source(dataclasses.replace(SPEC, base=20000.0), "b"))
    fig = figures.scheme_diff.pair_differences(d)
    (trace,) = fig.data
    np.testing.assert_array_equal(trace.y, np.maximum(d.relative_difference, 1e-18).astype("f4"))
    past = d.relative_difference > 1e-6
    assert not past[0]  # pair 0 turns at 1 rad a position whatever θ
    assert past[1:].all()
    assert list(trace.marker.color) == ["#1f77b4", *["#d62728"] * 7]
    assert [s.y0 for s in fig.layout.shapes] == [1e-6]  # the tolerance
    assert fig.layout.yaxis.type == "log"
    assert [a.text for a in fig.layout.annotations] == [
        "tolerance 1e-06",
        "exactly equal: drawn at 10⁻¹⁸",
    ]


def test_equal_sources_are_drawn_at_the_floor_and_say_so():
    d = scheme_diff(source(SPEC, "a"), source(SPEC, "b"))
    fig = figures.scheme_diff.pair_differences(d)
    assert set(fig.data[0].y) == {np.float32(1e-18)}
    assert "exactly equal: drawn at 10⁻¹⁸" in [a.text for a in fig.layout.annotations]


def test_sources_of_different_widths_are_said_not_compared():
    d = scheme_diff(source(SPEC, "a"), source(dataclasses.replace(SPEC, rotary_dim=8), "b"))
    fig = figures.scheme_diff.pair_differences(d)
    assert fig.data == ()
    (note,) = fig.layout.annotations
    assert note.text == "The widths differ (8 and 4 pairs): not compared."


def test_the_angle_error_keeps_each_spans_largest_and_marks_the_first_past_the_limit():
    b = source(dataclasses.replace(SPEC, base=10001.0), "b")
    d = scheme_diff(source(SPEC, "a"), b, positions=3 * LINE_POINTS + 5)
    assert len(d.positions) == 3 * LINE_POINTS + 5
    fig = figures.scheme_diff.angle_error(d)
    (trace,) = fig.data
    edges = np.linspace(0, len(d.positions), LINE_POINTS + 1).astype(int)
    np.testing.assert_array_equal(trace.x, d.positions[edges[:-1]])
    for i in (0, 1, LINE_POINTS // 2, LINE_POINTS - 1):
        span = d.angle_error[edges[i] : edges[i + 1]]
        assert trace.y[i] == np.float32(max(span.max(), 1e-18))
    first = d.first_position_over_0_01_rad
    assert first is not None
    assert d.angle_error[first - 1] <= ANGLE_LIMIT < d.angle_error[first]
    (limit, mark) = fig.layout.shapes
    assert (limit.y0, mark.x0) == (ANGLE_LIMIT, first)
    assert f"first past: {first:,}" in [a.text for a in fig.layout.annotations]
