"""posviz.schemes.presets: the known configs offered offline, the rotary ones listed, and a
preset's rotary table built at its main layer type's frequencies, its width known first."""

from __future__ import annotations

import numpy as np
import pytest

from posviz.schemes.presets import (
    PRESETS,
    preset_rotary_table,
    preset_rotary_width,
    rotary_presets,
)


def test_the_rotary_presets_are_all_but_the_alibi_and_relative_ones_in_order():
    others = ["bigscience/bloom", "mosaicml/mpt-7b", "google-t5/t5-small"]
    others.append("microsoft/deberta-v3-base")
    assert rotary_presets() == [name for name in PRESETS if name not in others]


def test_a_presets_table_is_cos_then_sin_of_its_frequencies_by_hand():
    # GPT-J: 64 of each head's 256 columns rotated, θ_i = 10000^(-2i/64), no scaling.
    table = preset_rotary_table("EleutherAI/gpt-j-6b", positions=16)
    theta = 10000.0 ** (-np.arange(32) / 32)
    angles = np.arange(16)[:, None] * theta
    np.testing.assert_allclose(
        table.values, np.hstack([np.cos(angles), np.sin(angles)]), atol=1e-15
    )
    assert table.source.startswith("EleutherAI/gpt-j-6b (config.json excerpt built into posviz)")


def test_a_presets_table_is_its_main_layer_types():
    # Gemma 3: full-attention layers at θ = 1e6 divided by the linear factor 8, sliding ones at
    # θ = 1e4 unscaled: pair 0 turns by 1/8 a position in the first, 1 in the second.
    table = preset_rotary_table("google/gemma-3-4b-it", positions=10)
    assert table.values[1, 0] == pytest.approx(np.cos(1 / 8), rel=1e-15)
    assert table.values[1, 128] == pytest.approx(np.sin(1 / 8), rel=1e-15)
    assert table.name.endswith("full_attention")


@pytest.mark.parametrize(
    ("name", "width"),
    [
        ("EleutherAI/gpt-neox-20b", 24),  # rotary_pct 0.25 of 96
        ("EleutherAI/gpt-j-6b", 64),
        ("microsoft/Phi-3.5-mini-instruct", 96),  # 3072 / 32 heads
        ("google/gemma-3-4b-it", 256),
        ("meta-llama/Llama-3.1-8B", 128),
    ],
)
def test_a_presets_width_is_known_before_its_table_is_built(name, width):
    assert preset_rotary_width(name) == width
    assert preset_rotary_table(name, positions=10).shape == (10, width)
