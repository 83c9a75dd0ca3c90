"""posviz.resample against analytic truth and against PyTorch's F.interpolate (saved fixture)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from posviz import resample, simulate
from posviz.io import load, to_npy, to_safetensors
from posviz.resample import resample_grid, resample_length
from posviz.source import Cut

REFERENCE = np.load(Path(__file__).parent / "data" / "interp_reference.npz")
#: (old grid, new grid) per case, as written by tests/data/make_interp_reference.py.
CASES = [((7, 7), (12, 12)), ((14, 14), (10, 10)), ((3, 5), (6, 4)), ((16, 16), (5, 7))]


@pytest.mark.parametrize("method", ["bicubic", "bilinear"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_grid_matches_torch_interpolate(case, method, antialias):
    old, new = CASES[case]
    channels = REFERENCE[f"case{case}_input"]  # (d, H, W) as torch holds it
    rows = channels.reshape(len(channels), -1).T  # (H * W, d), row-major patches
    expected = REFERENCE[f"case{case}_{method}_aa{int(antialias)}"]
    result = resample_grid(rows, old, new_grid=new, method=method, antialias=antialias)
    assert result.grid == new
    got = result.values.T.reshape(expected.shape)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def test_grid_bicubic_is_not_scipy_zoom_bspline():
    # A known pitfall: ndimage.zoom's cubic B-spline gives different numbers.
    from scipy import ndimage

    channels = REFERENCE["case0_input"]
    zoomed = ndimage.zoom(channels[0], (12 / 7, 12 / 7), order=3, grid_mode=True, mode="nearest")
    assert np.abs(zoomed - REFERENCE["case0_bicubic_aa0"][0]).max() > 1e-3


@pytest.mark.parametrize("method", ["bicubic", "bilinear"])
@pytest.mark.parametrize("antialias", [False, True])
def test_axis_weights_rows_sum_to_one_and_same_size_is_identity(method, antialias):
    for n_in, n_out in [(7, 12), (14, 10), (5, 5), (3, 1)]:
        w = resample.axis_weights(n_in, n_out, method=method, antialias=antialias)
        assert w.shape == (n_out, n_in)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    same = resample.axis_weights(9, 9, method=method, antialias=antialias)
    np.testing.assert_array_equal(same, np.eye(9))


@pytest.mark.parametrize("method", ["linear", "cubic"])
@pytest.mark.parametrize("positions", ["ends", "scaled"])
def test_same_length_returns_the_input(method, positions):
    values = simulate.learned_like(64, 16, seed=3).values
    out = resample_length(values, n_positions=64, method=method, positions=positions).values
    np.testing.assert_allclose(out, values, atol=1e-6)
    # As documented: float64 linear bit for bit, cubic within 1 unit in the last place.
    wide = values.astype(np.float64)
    out = resample_length(wide, n_positions=64, method=method, positions=positions).values
    np.testing.assert_array_max_ulp(out, wide, maxulp=0 if method == "linear" else 1)


@pytest.mark.parametrize("method", ["linear", "cubic"])
@pytest.mark.parametrize("positions", ["ends", "scaled"])
@pytest.mark.parametrize("n_new", [7, 50, 123])
def test_linear_in_position_is_resampled_exactly(method, positions, n_new):
    n = 40
    slope, offset = np.array([0.5, -2.0, 3.0]), np.array([1.0, 0.0, -4.0])
    table = offset + np.arange(n)[:, None] * slope
    x = np.arange(n_new) * ((n - 1) / (n_new - 1) if positions == "ends" else n / n_new)
    out = resample_length(table, n_positions=n_new, method=method, positions=positions).values
    np.testing.assert_allclose(out, offset + x[:, None] * slope, rtol=0, atol=1e-12)


def test_position_interpolation_of_a_sinusoid_halves_its_frequency():
    n, d = 256, 8
    table = simulate.sinusoidal_table(n, d)
    w = 10000.0 ** (-np.arange(0, d, 2) / d)  # angular frequency per sin/cos pair
    p = np.arange(2 * n)
    out = resample_length(table, n_positions=2 * n, method="cubic", positions="scaled").values
    expected = np.sin(p[:, None] * w / 2)
    # Exact where p L / L' is a row; a cubic spline in between, close for w <= 0.1 rad/row.
    np.testing.assert_allclose(out[::2, 0::2], expected[::2], atol=1e-12)
    np.testing.assert_allclose(out[: 2 * n - 2, 2::2], expected[: 2 * n - 2, 1:], atol=1e-5)
    # The fastest sinusoid (w = 1 rad/row) has its FFT peak at half the old frequency.
    spectrum = np.abs(np.fft.rfft(out[:, 0]))
    assert abs(2 * np.pi * np.argmax(spectrum) / (2 * n) - 0.5) < 2 * np.pi / (2 * n)


def test_cubic_matches_scipy_cubic_spline():
    table = simulate.learned_like(30, 5, seed=1).values.astype(np.float64)
    x = np.arange(47) * 29 / 46
    expected = CubicSpline(np.arange(30), table)(x)
    got = resample_length(table, n_positions=47, method="cubic").values
    np.testing.assert_allclose(got, expected)


def test_tile_repeats_after_reserved_rows():
    table = np.arange(10.0)[:, None] * [1.0, 1.0]
    out = resample_length(table, n_positions=20, method="tile", reserved=2).values[:, 0]
    assert out.tolist() == [0, 1, *range(2, 10), *range(2, 10), 2, 3]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_positions": 1}, "at least 2 rows"),
        ({"n_positions": 2**26}, "above the limit"),
        ({"n_positions": 20, "method": "tile", "reserved": 9}, "Reserved rows"),
        ({"n_positions": 20, "method": "nearest"}, "Unknown method"),
    ],
)
def test_bad_options_are_refused_with_a_message(kwargs, message):
    with pytest.raises(ValueError, match=message):
        resample_length(np.ones((10, 4)), **kwargs)


def test_resampled_vit_table_keeps_prefix_and_reloads_from_both_downloads():
    table = simulate.vit_grid(6, 6, 16, prefix_tokens=2)
    result = resample_grid(table.values, table.grid, new_grid=(9, 8))
    new = resample.resampled_table(table, result)
    assert (new.shape, new.grid, new.row_start, new.name) == ((72, 16), (9, 8), 2, "pos_embed")
    np.testing.assert_array_equal(new.prefix, table.prefix)
    for name, data in [
        ("x.safetensors", to_safetensors(new)),
        ("x.npy", to_npy(new)),
    ]:
        loaded = load(data, name, Cut(row_start=2))
        np.testing.assert_array_equal(loaded.values, new.values)
        np.testing.assert_array_equal(loaded.prefix, table.prefix)


@pytest.mark.parametrize("n_blocks", [1000, resample.N_BLOCKS])
@pytest.mark.parametrize("method", ["linear", "cubic"])
@pytest.mark.parametrize("positions", ["ends", "scaled"])
def test_float32_in_float32_out_within_the_stated_accuracy(
    monkeypatch, n_blocks, method, positions
):
    # 1000 blocks: 1-row and 1-column blocks, the block-wise paths at their finest.
    monkeypatch.setattr(resample, "N_BLOCKS", n_blocks)
    table = simulate.learned_like(40, 6, seed=5).values
    got = resample_length(table, n_positions=97, method=method, positions=positions).values
    assert got.dtype == np.float32
    x = np.arange(97) * (39 / 96 if positions == "ends" else 40 / 97)
    if method == "cubic":
        expected = CubicSpline(np.arange(40), table.astype(np.float64))(x)
        np.testing.assert_array_equal(got, expected.astype(np.float32))  # one rounding
    else:
        left = np.minimum(np.floor(x).astype(int), 38)
        t = (x - left)[:, None]
        expected = (1 - t) * table[left] + t * table[left + 1]  # float64
        np.testing.assert_allclose(got, expected, rtol=0, atol=4e-7 * np.abs(table).max())


def test_grid_float32_in_float32_out_and_float64_in_float64_out():
    values = simulate.vit_grid(5, 5, 8).values.astype(np.float32)
    got = resample_grid(values, (5, 5), new_grid=(7, 3)).values
    exact = resample_grid(values.astype(np.float64), (5, 5), new_grid=(7, 3)).values
    assert (got.dtype, exact.dtype) == (np.float32, np.float64)
    np.testing.assert_allclose(got, exact, rtol=0, atol=1e-6 * np.abs(values).max())


def test_resampled_table_without_prefix_keeps_the_result_array():
    table = simulate.learned_like(20, 4)
    result = resample_length(table.values, n_positions=30)
    assert np.shares_memory(resample.resampled_table(table, result).values, result.values)
