"""posviz.export.screen: numbers as a reader sees them: float64 rounding noise set to the 0 it
is, by each column's scale (each row's, in a table of named statistics); what is not noise
kept as computed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from posviz import components, simulate
from posviz.export.screen import NOISE, on_screen


def test_a_pure_sinusoids_fit_offsets_read_zero_a_learned_tables_stay():
    # Formerly: sinusoid fit offsets printed as 0.000000000000002.
    for table, noise in ((simulate.sinusoidal(1024, 768), True), (simulate.learned_like(), False)):
        fits = components.fit_sinusoids(components.principal_components(table.values))
        frame = fits.to_frame()
        shown = on_screen(frame)
        tiny = np.abs(frame["offset"]) < 1e-12
        assert tiny.any() == noise
        assert (shown["offset"][tiny] == 0).all()
        pd.testing.assert_series_equal(shown["offset"][~tiny], frame["offset"][~tiny])
        pd.testing.assert_frame_equal(shown.drop(columns="offset"), frame.drop(columns="offset"))


def test_a_table_of_named_statistics_is_rounded_row_by_row():
    frame = pd.DataFrame(
        {"metric": ["k50", "threshold"], "first": [16.0, 1e-9], "second": [16.0, 1e-23]}
    )
    shown = on_screen(frame)
    assert shown["second"].tolist() == [16.0, 0.0]  # noise beside its row's 1e-9
    assert shown["first"].tolist() == [16.0, 1e-9]  # the row's own scale, not the column's
    assert NOISE == 1e-12
