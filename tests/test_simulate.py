"""Simulated tables have the structure they claim."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from scipy.linalg import toeplitz

from posviz import simulate
from posviz.embedding import LoadError


def test_sinusoidal_rows_have_norm_sqrt_half_d_and_toeplitz_gram():
    pe = simulate.sinusoidal_table(128, 64)
    np.testing.assert_allclose(np.linalg.norm(pe, axis=1), np.sqrt(32), rtol=1e-12)
    gram = pe @ pe.T
    np.testing.assert_allclose(gram, toeplitz(gram[0]), atol=1e-10)


def test_sinusoidal_matches_the_formula():
    pe = simulate.sinusoidal_table(10, 8, base=100.0)
    p, i = 7, 2
    assert pe[p, 2 * i] == pytest.approx(np.sin(p / 100 ** (2 * i / 8)))
    assert pe[p, 2 * i + 1] == pytest.approx(np.cos(p / 100 ** (2 * i / 8)))


def test_learned_like_is_seeded_smooth_and_has_odd_end_rows():
    a = simulate.learned_like(256, 64, seed=4)
    b = simulate.learned_like(256, 64, seed=4)
    assert a.sha256 == b.sha256
    assert a.sha256 != simulate.learned_like(256, 64, seed=5).sha256
    norms = np.linalg.norm(a.values, axis=1)
    middle = np.median(norms[1:-1])
    assert norms[0] > 2 * middle
    assert norms[-1] > 2 * middle
    x = a.values[1:-1]
    cos = (
        np.sum(x[1:] * x[:-1], axis=1)
        / np.linalg.norm(x[1:], axis=1)
        / np.linalg.norm(x[:-1], axis=1)
    )
    assert np.median(cos) > 0.9  # neighbours are alike


def test_gaussian_has_no_structure():
    g = simulate.gaussian(400, 300, seed=1).values
    assert abs(float(g.mean())) < 0.01
    assert float(g.std()) == pytest.approx(1, abs=0.01)


def test_vit_grid_layout():
    e = simulate.vit_grid(3, 4, 16, prefix_tokens=2)
    assert e.shape == (12, 16)
    assert e.grid == (3, 4)
    assert e.prefix.shape == (2, 16)
    row_part = e.values[:, :8].reshape(3, 4, 8)
    col_part = e.values[:, 8:].reshape(3, 4, 8)
    # The first half encodes the patch row only, the second the column only.
    np.testing.assert_array_equal(row_part, np.broadcast_to(row_part[:, :1], row_part.shape))
    np.testing.assert_array_equal(col_part, np.broadcast_to(col_part[:1], col_part.shape))


def test_vit_grid_needs_d_multiple_of_4():
    with pytest.raises(LoadError, match="multiple of 4"):
        simulate.vit_grid(2, 2, 6)


@pytest.mark.parametrize(
    ("kind", "params", "reason"),
    [
        ("learned-like", {"n_frequencies": "100000"}, "outside 1..256"),
        ("learned-like", {"n_frequencies": "1e10"}, "not a whole number"),
        ("gaussian", {"n_positions": "2.5"}, "not a whole number"),
        ("gaussian", {"seed": "0.5"}, "not a whole number"),
        ("gaussian", {"seed": "-1"}, "outside 0..2,147,483,647"),
        ("gaussian", {"n_positions": "9" * 5000}, "not a whole number"),
        ("sinusoidal", {"base": "nan"}, "outside 2..1e+07"),
        ("sinusoidal", {"base": "inf"}, "outside 2..1e+07"),
        ("sinusoidal", {"base": "ten"}, "not a number"),
        ("2-D grid (ViT)", {"prefix_tokens": "9"}, "outside 0..8"),
    ],
)
def test_link_options_are_bounded_like_the_form(kind, params, reason):
    # Formerly: ?sim=learned-like&n_frequencies=100000 grew the server by 2.8 GB.
    with pytest.raises(LoadError, match=re.escape(reason)):
        simulate.parse_options(kind, params)


def test_link_options_within_bounds_are_typed_and_others_ignored():
    options = simulate.parse_options(
        "learned-like",
        {"n_positions": "64", "noise": "0.5", "seed": "+3", "height": "4", "evil": "x"},
    )
    assert options == {"n_positions": 64, "noise": 0.5, "seed": 3}
    assert isinstance(options["n_positions"], int)
    assert isinstance(options["noise"], float)
    top = {name: str(p.high) for name, p in simulate.PARAMETERS.items()}
    assert simulate.parse_options("learned-like", top)["n_frequencies"] == 256


def test_every_generator_option_has_one_definition():
    for generator in simulate.GENERATORS.values():
        assert set(inspect.signature(generator).parameters) <= set(simulate.PARAMETERS)


def test_tables_below_the_smallest_are_refused_when_simulated():
    with pytest.raises(LoadError, match="outside 10 x 2"):
        simulate.gaussian(9, 4)
    with pytest.raises(LoadError, match="9 positions"):
        simulate.vit_grid(3, 3, 16)
    assert simulate.gaussian(10, 4).shape == (10, 4)
