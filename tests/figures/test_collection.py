"""figures.collection: a collection's metrics over training steps, its CKA map's labels placed
apart, panels titled as the metrics table heads them, labels kept as text."""

from __future__ import annotations

import numpy as np

from posviz import figures
from posviz.collection import Member, analyse
from posviz.simulate import learned_like
from tests.figures.checks import HOSTILE, assert_labels_literal, decades


def test_labels_of_collection_figures_and_report_stay_text():
    from posviz.collection import Member, analyse
    from posviz.report import build_collection_report

    labels = [f"{HOSTILE[0]} step{100 * (i + 1)}" for i in range(2)] + [f"{HOSTILE[1]} step300"]
    members = [Member(label, learned_like(64, 16, seed=i)) for i, label in enumerate(labels)]
    c = analyse(members)
    assert c.ordered  # so the over-training figure is built too
    collection = figures.collection
    for build in (
        collection.metrics_over_step,
        collection.collection_cumulative,
        collection.collection_offsets,
        collection.similarity_grid,
        collection.cka_map,
    ):
        assert_labels_literal(build(c), labels)
    page = build_collection_report(c)  # plotly.js inlined holds markup of its own
    assert '<span style="background' not in page
    assert '<a href="http://x/y">' not in page
    assert figures.layout.escape(HOSTILE[0]) in page


def test_collection_steps_over_two_decades_on_a_decade_axis():
    steps = [1, 30, 1000]
    c = analyse([Member(f"step{s}", learned_like(64, 16, seed=s)) for s in steps])
    fig = figures.collection.metrics_over_step(c)
    assert decades(fig.layout.xaxis) == [1, 10, 100, 1000]


def test_the_cka_maps_labels_do_not_overlap_and_drop_their_common_start():
    # Formerly: neighbouring checkpoints' labels overlapped, all placed on top of their markers.
    from posviz.collection import gather

    c = analyse(gather.gather(gather.example_run(), []))
    fig = figures.collection.cka_map(c)
    tables = fig.data[-1]
    assert list(tables.text) == ["step100", "step300", "step1000", "step3000", "step10000",
                                 "step30000"]  # fmt: skip
    assert "common start simulated-run-" in fig.layout.title.text
    # The two last checkpoints sit closest: their labels go on different sides.
    assert tables.textposition[-1] != tables.textposition[-2]


def test_label_places_keep_close_labels_apart():
    points = np.array([[0.0, 0.0], [0.01, 0.002], [0.02, 0.004], [1.0, 0.5]])
    labels = ["step10000", "step30000", "step100000", "far"]
    places = figures.collection.label_places(points, labels)
    assert len(set(places[:3])) == 3


def test_collection_panels_are_titled_as_the_metrics_table_heads_them():
    # The panels read "n above noise" and "sinusoid mean cos2" over the table's
    # "number above noise" and "sinusoid mean cos²".
    from posviz.export import column_label
    from posviz.figures.collection import STEP_METRICS

    c = analyse([Member(f"step{s}", learned_like(64, 16, seed=s)) for s in (1, 30, 1000)])
    fig = figures.collection.metrics_over_step(c)
    titles = [a.text for a in fig.layout.annotations][: len(STEP_METRICS)]
    assert titles == [column_label(m) for m in STEP_METRICS]
    assert "sinusoid mean cos²" in titles
