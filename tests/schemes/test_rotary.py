"""posviz.schemes.rotary: each rope rule's frequencies against known answers computed by hand
from the papers' and transformers' rules (Llama 3.1's bands, YaRN's ramp and mscale, LongRoPE's
factors), the content-free similarity and its bound, the rotary table's rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posviz._params import Refused
from posviz.embedding import LoadError
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import (
    RotarySpec,
    dynamic_base,
    inv_freq_difference,
    rotary_decay,
    rotary_frequencies,
    rotary_table,
)


def _rotary(config: dict) -> RotarySpec:
    (spec,) = position_scheme(config).rotary
    return spec


def test_llama31_keeps_29_blends_6_divides_29():
    f = rotary_frequencies(_rotary(PRESETS["meta-llama/Llama-3.1-8B"]))
    # By hand: wavelength 2π · 500000^(i/64) < 8192/4 = 2048 for i < 28.2 (29 pairs kept),
    # > 8192 for i > 34.98 (29 pairs divided by 8); 6 between.
    kept_below = 64 * math.log(2048 / (2 * math.pi)) / math.log(500000)
    divided_above = 64 * math.log(8192 / (2 * math.pi)) / math.log(500000)
    assert (math.floor(kept_below) + 1, 64 - math.ceil(divided_above)) == (29, 29)
    assert f.band_counts() == {"kept": 29, "blended": 6, "divided": 29}
    np.testing.assert_allclose(f.inv_freq[:29], f.inv_freq_unscaled[:29], rtol=0)
    np.testing.assert_allclose(f.inv_freq[35:], f.inv_freq_unscaled[35:] / 8, rtol=1e-15)
    # Blended pair 29: smooth = (8192/λ − 1) / 3, inv = (1 − smooth) inv/8 + smooth inv.
    inv = 500000 ** (-58 / 128)
    smooth = (8192 * inv / (2 * math.pi) - 1) / 3
    assert f.inv_freq[29] == pytest.approx((1 - smooth) * inv / 8 + smooth * inv, rel=1e-14)
    assert f.attention_factor == 1.0
    assert f.pairs_beyond_original_context == 29


def test_yarn_factor_4_without_mscale():
    spec = RotarySpec("yarn", 128, 10000.0, context=16384, original_context=4096, factor=4.0)
    f = rotary_frequencies(spec)
    assert f.attention_factor == pytest.approx(0.1 * math.log(4) + 1, rel=1e-15)
    # Correction range by hand: 128 ln(4096 / (2π · 32)) / (2 ln 10000) = 20.94 -> floor 20;
    # 128 ln(4096 / 2π) / (2 ln 10000) = 45.03 -> ceil 46.
    # A pair with ramp r is divided by 1 / (1 − r + r/s): 1 kept, s divided.
    assert f.division[20] == 1
    assert f.division[46] == pytest.approx(4, rel=1e-15)
    assert f.division[33] == pytest.approx(1 / (1 - 13 / 26 + 13 / 26 / 4), rel=1e-14)
    assert f.band_counts() == {"kept": 21, "blended": 25, "divided": 18}
    no_truncate = rotary_frequencies(RotarySpec(**{**spec.__dict__, "truncate": False}))
    low = 128 * math.log(4096 / (2 * math.pi * 32)) / (2 * math.log(10000))
    high = 128 * math.log(4096 / (2 * math.pi)) / (2 * math.log(10000))
    ramp = (30 - low) / (high - low)
    assert no_truncate.division[30] == pytest.approx(1 / (1 - ramp + ramp / 4), rel=1e-14)


def test_yarn_mscale_ratio_and_explicit_attention_factor():
    deepseek = rotary_frequencies(_rotary(PRESETS["deepseek-ai/DeepSeek-V3"]))
    assert deepseek.spec.rotary_dim == 64
    assert deepseek.spec.interleaved
    assert deepseek.attention_factor == 1.0  # mscale(40, 1) / mscale(40, 1)
    spec = RotarySpec("yarn", 64, 1e4, context=8192, factor=4.0, mscale=0.707, mscale_all_dim=1.0)
    expected = (0.1 * 0.707 * math.log(4) + 1) / (0.1 * math.log(4) + 1)
    assert rotary_frequencies(spec).attention_factor == pytest.approx(expected, rel=1e-15)
    explicit = RotarySpec("yarn", 64, 1e4, context=8192, factor=4.0, attention_factor=0.5)
    assert rotary_frequencies(explicit).attention_factor == 0.5


def test_default_linear_and_dynamic():
    default = rotary_frequencies(RotarySpec("default", 8, 10000.0))
    np.testing.assert_allclose(default.inv_freq, [1, 0.1, 0.01, 0.001], rtol=1e-15)
    linear = rotary_frequencies(RotarySpec("linear", 8, 10000.0, factor=4.0))
    np.testing.assert_allclose(linear.inv_freq, [0.25, 0.025, 0.0025, 0.00025], rtol=1e-15)
    spec = RotarySpec("dynamic", 128, 10000.0, context=4096, factor=2.0)
    assert rotary_frequencies(spec).base_applied == 10000.0  # within max_position_embeddings
    at_8192 = rotary_frequencies(spec, context=8192)
    base = 10000 * (2 * 8192 / 4096 - 1) ** (128 / 126)
    assert at_8192.base_applied == pytest.approx(base, rel=1e-14)
    np.testing.assert_allclose(at_8192.inv_freq, base ** (-np.arange(0, 128, 2) / 128))
    np.testing.assert_allclose(dynamic_base(spec, np.array([100, 4096, 8192])), [1e4, 1e4, base])


def test_longrope_short_within_and_long_beyond_the_original_context():
    spec = _rotary(PRESETS["microsoft/Phi-3.5-mini-instruct"])
    assert (spec.rotary_dim, spec.factor, spec.original_context) == (96, 32.0, 4096)
    short = rotary_frequencies(spec, context=4096)
    long = rotary_frequencies(spec, context=4097)
    np.testing.assert_allclose(short.inv_freq * spec.short_factor, short.inv_freq_unscaled)
    np.testing.assert_allclose(long.inv_freq * spec.long_factor, long.inv_freq_unscaled)
    assert long.attention_factor == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))
    # Bands from the division: short factors (1 to 2.84) are below the factor 32: blended;
    # long ones of 32 or more: divided.
    assert short.band[0] == "kept"
    assert short.band[1] == "blended"
    assert long.band_counts() == {"blended": 20, "divided": 28}
    np.testing.assert_array_equal(long.band == "divided", np.array(spec.long_factor) >= 32)


def test_content_free_similarity_and_roformer_bound():
    f = rotary_frequencies(RotarySpec("default", 128, 10000.0, context=2048))
    d = rotary_decay(f, max_distance=2048, n_distances=100)
    assert d.distances[:65].tolist() == list(range(65))
    assert d.distances[-1] == 2048
    assert np.all(np.diff(d.distances) > 0)
    assert len(d.distances) <= 65 + 100
    assert d.similarity[0] == 1.0
    assert d.bound[0] == pytest.approx((64 + 1) / 2)
    one_pair = rotary_decay(rotary_frequencies(RotarySpec("default", 2, 10.0)), max_distance=9)
    np.testing.assert_allclose(one_pair.similarity, np.cos(np.arange(10)), atol=1e-15)
    np.testing.assert_allclose(one_pair.bound, 1.0)  # |S_1| = |e^{iΔ}| = 1
    # Within the original context nothing changes; the scaled curve decays slower beyond it.
    scaled = rotary_decay(rotary_frequencies(_rotary(PRESETS["meta-llama/Llama-3.1-8B"])))
    assert scaled.similarity[0] == scaled.similarity_unscaled[0] == 1.0
    assert not np.allclose(scaled.similarity, scaled.similarity_unscaled)


def test_rotary_table_rows_are_cos_then_sin_and_gram_depends_on_offset_only():
    f = rotary_frequencies(RotarySpec("default", 16, 10000.0, context=64))
    t = rotary_table(f)
    assert t.shape == (64, 16)
    np.testing.assert_array_equal(t.values[0], [1.0] * 8 + [0.0] * 8)
    np.testing.assert_allclose(t.values[5, :8], np.cos(5 * f.inv_freq))
    np.testing.assert_allclose(t.values[5, 8:], np.sin(5 * f.inv_freq))
    # <row m, row n> = Σ cos((m − n) θ) = (d/2) · B(m − n).
    gram = t.values @ t.values.T
    d = rotary_decay(f, max_distance=63)
    np.testing.assert_allclose(np.diag(gram, 7), 8 * d.similarity[7], atol=1e-12)
    assert rotary_table(f, positions=10).shape == (10, 16)
    with pytest.raises(Refused, match=r"positions is 9000; .* from 10 to 8,192"):
        rotary_table(f, positions=9000)
    with pytest.raises(Refused, match=r"context is 0; .* from 1 to 2,147,483,648"):
        rotary_frequencies(f.spec, context=0)


def test_frequencies_record_their_params():
    spec = RotarySpec("dynamic", 64, 10000.0, context=1024, factor=2.0)
    f = rotary_frequencies(spec, context=4096)
    assert f.params == {"context": 4096}
    again = rotary_frequencies(spec, **f.params)
    np.testing.assert_array_equal(again.inv_freq, f.inv_freq)
    d = rotary_decay(f, max_distance=100)
    assert d.params == {"context": 4096, "max_distance": 100, "n_distances": 1024}


def test_stored_inv_freq_checked():
    f = rotary_frequencies(RotarySpec("default", 8, 10000.0))
    assert inv_freq_difference(f.inv_freq_unscaled.astype(np.float32), f) < 1e-7
    assert inv_freq_difference(np.array([1.0, 0.1, 0.01, 0.002]), f) == pytest.approx(1.0)
    with pytest.raises(LoadError, match="3 values"):
        inv_freq_difference(np.ones(3), f)
