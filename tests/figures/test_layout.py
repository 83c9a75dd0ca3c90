"""figures.layout, the house style every figure shares: labels escaped to their characters, log
axes labelled at whole decades."""

from __future__ import annotations

import numpy as np

from posviz import figures


def test_escape_turns_markup_into_its_characters():
    assert figures.layout.escape("a<b>&amp;") == "a&lt;b&gt;&amp;amp;"
    assert figures.layout.escape("step 1000") == "step 1000"


def test_a_wide_log_axis_labels_every_decade_without_a_comb_of_minor_ticks():
    # Formerly: past eight decades every other one was labelled.
    axis = figures.layout.log_axis(np.array([1e-20, 1.0]))
    assert len(axis["tickvals"]) == 21
    assert axis["ticktext"][0] == "10⁻²⁰"
    assert axis["ticktext"][-1] == "10⁰"
    assert axis["minor"]["tickvals"] == []


def test_a_short_log_axis_spans_whole_decades():
    # Formerly: LongRoPE's factors (1 to 65) were labelled 1 and 10 only.
    axis = figures.layout.log_axis(np.array([1.0, 64.84]))
    assert axis["ticktext"] == ["10⁰", "10¹", "10²"]
    assert figures.layout.log_axis(np.array([3.0]))["ticktext"] == ["10⁰", "10¹"]
