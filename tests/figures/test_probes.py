"""figures.probes: the probes' predictions against true position, each control named with the
skill the page gives."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from posviz import figures, probes, simulate
from posviz.simulate import gaussian


def test_the_probe_charts_legend_is_under_the_axis_apart_from_the_subtitle():
    from posviz import probes

    report = probes.probe_with_controls(gaussian(100, 76).values, protocol="linear", repeats=2)
    fig = figures.probes.probe_predictions(report)
    assert "<sup>" in fig.layout.title.text  # predictions outside the drawn range: said
    assert (fig.layout.legend.yref, fig.layout.legend.y, fig.layout.legend.yanchor) == (
        "container",
        0,
        "bottom",
    )


def test_the_probe_legend_gives_skill_as_the_page_does():
    # The legend read "skill -0.00" for a control the page beside it gives as "skill -0.001";
    # later "skill 0.000" (its first draw's) beside the page's "skill -0.001" (the mean over
    # its draws). Both now write each number through probes.skill_text, a control's the mean.
    from posviz import probes

    report = probes.probe_with_controls(gaussian(100, 76).values, protocol="linear", repeats=2)
    fig = figures.probes.probe_predictions(report)
    names = [t.name for t in fig.data]
    table = report.absolute["table"]
    assert f"table (MAE {table.mae:.2f}, skill {probes.skill_text(table.skill)})" in names
    for name in probes.CONTROLS[1:]:
        mean = probes.skill_text(report.control_summary(name)[0])
        (label,) = [n for n in names if n.startswith(f"{name}, 1 of {report.n_control_draws}")]
        assert label.endswith(f"skill {mean})")
    # A table a hair below chance read "skill -0.000": it rounds to 0.
    near = dataclasses.replace(table, fold_mae=table.fold_chance_mae * 1.0003)
    fig = figures.probes.probe_predictions(
        dataclasses.replace(report, absolute={**report.absolute, "table": near})
    )
    assert any(t.name.startswith("table (") and t.name.endswith("skill 0.000)") for t in fig.data)


def test_probe_figure_traces():
    report = probes.probe_with_controls(simulate.sinusoidal_table(200, 16), n_pairs=300)
    fig = figures.probes.probe_predictions(report)
    clouds = [t for t in fig.data if t.type == "scattergl"]
    assert [re.split(r" \(|, ", t.name)[0] for t in clouds] == list(probes.CONTROLS)
    assert all(len(t.x) == 200 and t.y.dtype == np.float32 for t in clouds)
    assert fig.data[-2].name == "perfect"
    assert fig.data[-1].name.startswith("chance: the mean position")
    assert fig.data[-1].y[0] == pytest.approx(99.5)
    assert fig.layout.xaxis.title.text == "true position p"
    assert fig.layout.yaxis.title.text == "predicted position"
    assert fig.layout.yaxis.range == pytest.approx((-0.25 * 199, 1.25 * 199))
    assert "seed 0, all 200 rows" in fig.layout.title.text
    assert "(nested ridge)" in fig.layout.title.text
