"""posviz.schemes.alibi: ALiBi's slopes as MPT and BLOOM compute them (the power-of-two shortcut
only where it holds), the bias and its falls, heads x distances within the budget."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posviz._params import Refused
from posviz.schemes.alibi import alibi_bias, alibi_slopes


def test_alibi_12_heads():
    expected = [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
    expected += [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]  # 0.7071, 0.3536, 0.1768, 0.0884
    np.testing.assert_allclose(alibi_slopes(12), expected, rtol=1e-15)


def _mpt_gen_slopes(n_heads: int, alibi_bias_max: float) -> np.ndarray:
    """MPT's ``gen_slopes``, transcribed: the next power of 2's slopes, odd ones first."""
    n = 2 ** math.ceil(math.log2(n_heads))
    slopes = 1.0 / 2 ** (np.arange(1, n + 1) * (alibi_bias_max / n))
    if n != n_heads:
        slopes = np.concatenate([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes


@pytest.mark.parametrize("n_heads", [1, 2, 3, 5, 12, 16, 32, 40, 71, 112, 128])
def test_alibi_matches_mpt_and_the_shortcut_only_for_powers_of_two(n_heads):
    slopes = alibi_slopes(n_heads)
    np.testing.assert_allclose(slopes, _mpt_gen_slopes(n_heads, 8.0), rtol=1e-15)
    np.testing.assert_allclose(
        alibi_slopes(n_heads, alibi_bias_max=16), _mpt_gen_slopes(n_heads, 16.0), rtol=1e-15
    )
    shortcut = 2.0 ** (-8 * np.arange(1, n_heads + 1) / n_heads)
    power_of_two = n_heads & (n_heads - 1) == 0
    assert np.allclose(slopes, shortcut, rtol=1e-15) == power_of_two


def test_alibi_112_heads_bloom_176b():
    slopes = alibi_slopes(112)
    np.testing.assert_allclose(slopes[:64], 2.0 ** (-np.arange(1, 65) / 8))
    np.testing.assert_allclose(slopes[64:], 2.0 ** (-np.arange(1, 96, 2) / 16))
    assert abs(slopes[-1] - 2.0 ** (-8)) > 0.01  # the shortcut's last slope


def test_alibi_bias_and_falls():
    b = alibi_bias(12, max_distance=100)
    assert b.bias.shape == (12, 101)
    np.testing.assert_allclose(b.bias[0, 10], -5.0)
    np.testing.assert_allclose(b.falls[0], [2, 10, 20])  # slope 1/2
    np.testing.assert_allclose(b.falls[8], np.array([1, 5, 10]) * 2**0.5)
    with pytest.raises(Refused, match="n_heads is 0; it must be a whole number from 1 to 4,096"):
        alibi_slopes(0)


def test_alibi_heads_times_distances_within_the_budget():
    alibi_bias(4096, max_distance=8191)  # 256 MiB exactly
    with pytest.raises(
        Refused, match="The bias of 4,096 heads to distance 8,192 would take 256 MiB"
    ):
        alibi_bias(4096, max_distance=8192)
    with pytest.raises(Refused, match="max_distance is 10000000; it must be a whole number"):
        alibi_bias(8, max_distance=10**7)
