"""Tables of numbers as read on the pages: no "None" or "NaN", a blank cell explained, each
number to six significant digits (rounding noise as the 0 it is: tests/export/test_screen.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from posviz import simulate
from posviz.models.weights import read_config
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import rotary_frequencies
from posviz.spectrum import spectrum
from tests import apptest
from tests.app.test_compare import SAME, run


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
