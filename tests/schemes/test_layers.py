"""The per-layer map as a table (`layer_table`): each row as transformers 5 builds that layer's
attention (tests/data/rope's reference facts), the temperature and θ at a length by hand, and
mrope's pairs as written equal to the axes transformers gives them."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from posviz._params import Refused
from posviz.schemes.config import position_scheme
from posviz.schemes.layers import MROPE_AXES, Mrope, layer_table, spans
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import rotary_frequencies
from tests.schemes.test_rope import ARRAYS, MODELS, REFERENCE, config


def expand(text: str) -> list[int]:
    """The whole numbers `spans` wrote: "0-9, every 3rd; 60-63" -> 0, 3, 6, 9, 60 … 63."""
    found = []
    for part in re.split(r"; |, (?!every)", text):
        match = re.fullmatch(r"(\d+)-(\d+)(?:, every (\d+)\w\w)?|(\d+)", part)
        assert match, part
        first, last, step, single = match.groups()
        if single:
            found.append(int(single))
        else:
            found += range(int(first), int(last) + 1, int(step or 1))
    return found


@pytest.mark.parametrize("name", MODELS)
def test_each_row_is_the_layer_transformers_builds(name):
    frame = layer_table(position_scheme(config(name)).layers).to_frame()
    facts = REFERENCE["models"][name]["layers"]
    assert frame["layer"].tolist() == list(range(len(facts)))
    for row, fact in zip(frame.to_dict("records"), facts, strict=True):
        rope = bool(fact.get("use_rope", 1))
        assert row["rope"] is rope
        if "sliding_window" in fact or "layer_type" in fact:
            assert row["sliding_window"] == fact.get("sliding_window")
        if "layer_type" in fact:
            assert row["layer_type"] == fact["layer_type"]
        if not rope:  # what a NoPE layer lacks is blank, not a number
            assert row["rope_type"] is row["rotary_dim"] is row["rotating_pairs"] is None
            assert math.isnan(row["base"])
        else:  # width and rotating pairs as transformers' inv_freq of the layer's rule
            rule = row["layer_type"] if f"{name}/{row['layer_type']}/inv_freq" in ARRAYS else "all"
            inv_freq = ARRAYS[f"{name}/{rule}/inv_freq"]
            assert row["rotary_dim"] == 2 * len(inv_freq)
            assert row["rotating_pairs"] == np.count_nonzero(inv_freq)


def test_the_temperature_at_the_last_position_by_hand():
    layers = position_scheme(PRESETS["meta-llama/Llama-4-Scout-17B-16E"]).layers
    # transformers: log1p(floor((position + 1) / floor_scale)) · attn_scale + 1, at L − 1.
    for length, floors in ((8191, 0), (8192, 1), (16384, 2), (10_485_760, 1280)):
        frame = layer_table(layers, context=length).to_frame()
        column = frame[f"attention_temperature_at_{length - 1}"]
        nope = ~frame["rope"]
        assert nope.sum() == 12
        np.testing.assert_allclose(column[nope], 1 + 0.1 * math.log1p(floors), rtol=1e-15)
        assert column[~nope].isna().all()
    # Its default length is the model's context.
    assert layer_table(layers).context == 10_485_760


def test_theta_as_applied_moves_with_the_length_under_dynamic_ntk():
    layers = position_scheme(config("dynamic-ntk")).layers
    spec = layers[0].rotary
    for length in (spec.context, 2 * spec.context, 100_000):
        t = layer_table(layers, context=length)
        applied = rotary_frequencies(spec, context=length).base_applied
        assert t.base_applied.tolist() == [applied] * len(layers)
    assert t.base_applied[0] > spec.base
    assert t.params == {"context": 100_000}


@pytest.mark.parametrize("name", ["qwen2-vl-7b", "qwen3-vl-8b"])
def test_mrope_columns_name_the_pairs_of_each_axis(name):
    layers = position_scheme(config(name)).layers
    row = layer_table(layers).to_frame().iloc[0]
    axes = layers[0].mrope.axes()  # checked against transformers in test_rope.py
    for axis in MROPE_AXES:
        assert expand(row[f"{axis}_pairs"]) == np.flatnonzero(axes == axis).tolist()


@pytest.mark.parametrize("section", [(2, 1, 1), (16, 24, 24), (24, 20, 20), (5, 0, 3)])
@pytest.mark.parametrize("interleaved", [False, True])
def test_spans_write_every_number_once(section, interleaved):
    axes = Mrope(section, interleaved).axes()
    for axis in MROPE_AXES:
        pairs = np.flatnonzero(axes == axis).tolist()
        assert expand(spans(pairs)) == pairs if pairs else spans(pairs) == ""


def test_models_without_mrope_or_temperature_have_no_such_columns():
    frame = layer_table(position_scheme(PRESETS["mistralai/Mistral-7B-v0.1"]).layers).to_frame()
    assert list(frame) == [
        "layer", "layer_type", "rope", "rope_type", "base", "base_applied", "rotary_dim",
        "rotating_pairs", "sliding_window",
    ]  # fmt: skip
    assert frame["sliding_window"].tolist() == [4096] * 32


def test_the_map_in_words():
    def words(name: str) -> str:
        return layer_table(position_scheme(PRESETS[name]).layers).describe()

    assert words("google/gemma-3-4b-it") == (
        "34 layers: 34 RoPE; sliding_attention: 29, full_attention: 5; a sliding window of "
        "1,024 keys in 29."
    )
    assert words("meta-llama/Llama-4-Scout-17B-16E") == (
        "48 layers: 36 RoPE, 12 NoPE (layers 3-47, every 4th); chunked_attention: 36, "
        "full_attention: 12."
    )


def test_a_length_out_of_bounds_is_refused():
    layers = position_scheme(PRESETS["HuggingFaceTB/SmolLM3-3B"]).layers
    with pytest.raises(Refused, match="context is 0"):
        layer_table(layers, context=0)
