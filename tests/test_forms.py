"""The forms' bounds and defaults: the signatures' defaults, fitted to short tables."""

from __future__ import annotations

import numpy as np

from posviz import boundary, forms
from posviz._params import defaults


def test_the_defaults_are_the_signatures_and_fit_short_tables():
    fitted = forms.boundary_defaults((1000, 64))
    assert fitted == {
        "n_directions_removed": 0,
        "hampel_window": 16,
        "threshold": 8.0,
        "boundary_size": 8,
        "statistic": "norm",
        "max_changes": 3,
        "min_size": 16,
        "alpha": 0.01,
        "null_draws": 20,
        "seed": 0,
    }
    for core in (
        boundary.position_statistics,
        boundary.outliers,
        boundary.change_points,
        boundary.boundary_summary,
    ):
        for name, default in defaults(core).items():
            assert fitted[name] == default, (core, name)
    # At the smallest table each default is within what the table allows, and works.
    short = forms.boundary_defaults((10, 4))
    assert forms.boundary_limits((10, 4)) == {
        "n_directions_removed": 3,
        "hampel_window": 5,
        "boundary_size": 4,
        "min_size": 5,
    }
    assert (short["hampel_window"], short["boundary_size"], short["min_size"]) == (5, 4, 5)
    stats = boundary.position_statistics(np.random.default_rng(0).standard_normal((10, 4)))
    summary = boundary.boundary_summary(stats, boundary_size=short["boundary_size"])
    assert summary.params["boundary_size"] == 4
