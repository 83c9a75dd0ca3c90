"""Across the scheme families (each family's own formulas: test_rotary.py, test_alibi.py,
test_relative.py; config.json read: test_config.py): the numbers tables they export, the
dynamic base's curve and T5's bucket layouts the Schemes page draws beside them."""

from __future__ import annotations

import numpy as np
import pytest

from posviz.schemes.alibi import alibi_bias
from posviz.schemes.config import RelativeBiasSpec, position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.relative import t5_buckets
from posviz.schemes.rotary import RotarySpec, rotary_frequencies


def _rotary(config: dict) -> RotarySpec:
    (spec,) = position_scheme(config).rotary
    return spec


def test_numbers_tables():
    f = rotary_frequencies(_rotary(PRESETS["meta-llama/Llama-3.1-8B"]))
    frame = f.to_frame()
    assert len(frame) == 64
    assert frame["band"].value_counts().to_dict() == {"kept": 29, "divided": 29, "blended": 6}
    np.testing.assert_allclose(frame["turns in 131,072"], 131072 * f.inv_freq / (2 * np.pi))
    alibi = alibi_bias(4, max_distance=10).to_frame()
    assert alibi["distance for -10 logits"].tolist() == [40.0, 160.0, 640.0, 2560.0]


def test_dynamic_base_curve_and_bucket_layouts():
    from posviz.schemes.relative import bucket_layouts
    from posviz.schemes.rotary import dynamic_base_curve

    spec = RotarySpec("dynamic", 64, 10000.0, context=2048, factor=2.0)
    lengths, bases = dynamic_base_curve(spec)
    assert lengths[0] == 1
    assert lengths[-1] == 16 * 2048
    assert np.all(bases[lengths <= 2048] == 10000.0)
    assert bases[-1] == pytest.approx(10000 * (2 * 16 - 1) ** (64 / 62))
    b = bucket_layouts(RelativeBiasSpec(num_buckets=32, max_distance=128, n_heads=8))
    encoder, _ = b.layouts["encoder (bidirectional)"]
    np.testing.assert_array_equal(encoder, t5_buckets(b.relative_positions))
    assert b.params == {}  # every number is the config's
