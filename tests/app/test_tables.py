"""Tables of numbers as read on screen: no "None" or "NaN", rounding noise as the 0 it is, a
blank cell explained; the downloads keep every number as computed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from posviz import components, simulate
from posviz.export.screen import NOISE, on_screen
from posviz.models.weights import read_config
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import rotary_frequencies
from posviz.spectrum import spectrum
from tests import apptest
from tests.app.test_compare import SAME, run


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


def test_missing_values_are_blank_cells_with_their_reason():
    # Formerly: the probe table showed "None" in 18 cells.
    at = run(simulate.learned_like(64, 16), simulate.learned_like(64, 24), section=SAME)
    at.session_state["compare.numbers"] = True
    at.run()
    assert not at.exception, at.exception
    measures = at.dataframe[0]
    assert measures.proto.placeholder == ""  # not "None"
    assert measures.value["procrustes error"].isna().all()
    assert "A blank cell: not defined for that row." in [c.value for c in at.caption]


def test_longrope_pairs_show_their_division_not_a_column_of_nan():
    # Formerly: LongRoPE's "share" column was NaN in every row.
    config, _, _ = read_config("preset:microsoft/Phi-3.5-mini-instruct")
    (rotary,) = position_scheme(config).rotary
    frame = rotary_frequencies(rotary, context=131072).to_frame()
    assert "share" not in frame
    assert not frame.isna().to_numpy().any()
    np.testing.assert_allclose(frame["division"], rotary.long_factor, rtol=1e-12)


@pytest.mark.parametrize("preset", ["microsoft/Phi-3.5-mini-instruct", "bigscience/bloom"])
def test_the_schemes_numbers_have_no_missing_values(preset):
    at = apptest("pages/schemes.py")
    at.session_state["schemes.preset"] = preset
    at.session_state["schemes.section"] = "Numbers"
    at.session_state["schemes.alibi"] = "Numbers"
    at.run()
    assert not at.exception, at.exception
    assert at.dataframe
    for frame in at.dataframe:
        assert not frame.value.isna().to_numpy().any()
    assert preset in PRESETS


def test_a_table_of_named_quantities_writes_each_number_as_it_is():
    # Formerly: Compare's spectra numbers gave the noise threshold as "0.00000007", the
    # column's fixed decimals set by the counts beside it.
    state = {"compare.spectra_numbers": True}
    first = simulate.learned_like(64, 16)
    at = run(first, simulate.learned_like(64, 24), section="Spectra", **state)
    assert not at.exception, at.exception
    (numbers,) = [d for d in at.dataframe if "metric" in d.value]
    config = json.loads(numbers.proto.columns)
    for column in ("first", "second", "difference"):
        assert config[column]["type_config"]["format"] == "%g"
    # Six significant digits on screen (134.913, not 134.91254305490023); counts stay whole.
    shown = numbers.value.set_index("metric")
    assert shown.loc["k90", "first"] == spectrum(first.values).k_at(0.9)
    for value in shown["first"]:
        assert value == float(f"{value:.6g}")
    assert any(value != round(value) for value in shown["first"])
