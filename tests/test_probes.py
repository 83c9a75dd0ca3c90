"""Position probes against analytic truth, a direct numpy reference, and no-information controls."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import KFold

from posviz import figures, probes, simulate


def test_sinusoidal_absolute_position_is_exact():
    result = probes.absolute_probe(simulate.sinusoidal_table(512, 768), np.arange(512))
    assert result.mae == 0.0
    assert result.r2 > 0.9999


def test_gaussian_rows_hold_no_absolute_position():
    rows = simulate.gaussian(512, 768, seed=0).values
    result = probes.absolute_probe(rows, np.arange(512))
    # Predictions independent of the truth with its spread: MAE ~ n/3 (171 for n = 512).
    assert 0.28 * 512 < result.mae < 0.40 * 512
    assert result.r2 < 0


def test_absolute_probe_matches_a_direct_ridge_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((120, 6))
    y = np.arange(120)
    result = probes.absolute_probe(x, y, alpha=0.5, seed=7)
    expected = np.empty(120)
    scaled = x / x.std()
    for train, test in KFold(5, shuffle=True, random_state=7).split(x):
        # Ridge with an unpenalised intercept: centre the training fold, solve the normal
        # equations (X'X + alpha I) w = X'y.
        mean_x, mean_y = scaled[train].mean(axis=0), y[train].mean()
        xc = scaled[train] - mean_x
        w = np.linalg.solve(xc.T @ xc + 0.5 * np.eye(6), xc.T @ (y[train] - mean_y))
        expected[test] = (scaled[test] - mean_x) @ w + mean_y
    np.testing.assert_allclose(result.predictions, expected, rtol=1e-9, atol=1e-9)
    assert result.mae == np.mean(np.abs(np.round(expected) - y))


def test_relative_order_of_a_sinusoidal_table():
    result = probes.relative_probe(simulate.sinusoidal_table(256, 64), np.arange(256), n_pairs=800)
    assert result.error_rate < 0.1
    assert result.n_test_pairs == 5 * 200


def test_relative_probe_cannot_memorise_rows_of_a_wide_gaussian_table():
    # d >= n: one linear score per row could be memorised if test pairs reused training rows.
    rows = np.random.default_rng(1).standard_normal((100, 200))
    result = probes.relative_probe(rows, np.arange(100), n_pairs=800)
    assert 0.4 < result.error_rate < 0.6


def test_controls_subsampling_and_seeding():
    values = simulate.sinusoidal_table(1500, 32)
    report = probes.probe_with_controls(values, seed=3, max_rows=300, n_pairs=400)
    assert report.subsampled
    assert report.n_rows == 300
    assert report.n_positions == 1500
    positions = report.absolute["table"].positions
    assert len(np.unique(positions)) == 300
    assert np.all(np.diff(positions) > 0)
    assert positions.max() < 1500
    assert list(report.absolute) == list(probes.CONTROLS)
    assert report.absolute["table"].mae < 0.05 * 1500
    for control in ("row-shuffled", "Gaussian"):
        assert report.absolute[control].mae > 0.2 * 1500
        assert 0.35 < report.relative[control].error_rate < 0.65
    again = probes.probe_with_controls(values, seed=3, max_rows=300, n_pairs=400)
    for name in probes.CONTROLS:
        assert again.absolute[name].mae == report.absolute[name].mae
        assert again.relative[name].error_rate == report.relative[name].error_rate
    other = probes.probe_with_controls(values, seed=4, max_rows=300, n_pairs=400)
    assert not np.array_equal(other.absolute["table"].positions, positions)


def test_probe_figure_traces():
    report = probes.probe_with_controls(simulate.sinusoidal_table(200, 16), n_pairs=300)
    fig = figures.probe_predictions(report)
    clouds = [t for t in fig.data if t.type == "scattergl"]
    assert [t.name.split(" (")[0] for t in clouds] == list(probes.CONTROLS)
    assert all(len(t.x) == 200 and t.y.dtype == np.float32 for t in clouds)
    assert fig.data[-1].name == "perfect"
    assert fig.layout.xaxis.title.text == "true position p"
    assert fig.layout.yaxis.title.text == "predicted position"
    assert fig.layout.yaxis.range == pytest.approx((-0.25 * 199, 1.25 * 199))
    assert "seed 0, all 200 rows" in fig.layout.title.text
