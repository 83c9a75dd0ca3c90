"""Two sources of one model's rotary positions compared: agreement within float32 for a correct
runtime (as transformers computes in float32), and the first place they part for the known
mistakes (LongRoPE's short factors past the original context, a table in the other layout, θ
off by a factor), with numbers checked analytically."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from posviz._params import Refused
from posviz.embedding import LoadError
from posviz.models.sources import compare, read_side
from posviz.schemes.config import position_scheme
from posviz.schemes.diff import (
    from_inv_freq,
    from_spec,
    from_table,
    scheme_diff,
    split_pair,
    split_table,
)
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import RotarySpec, rotary_frequencies
from tests import ggufs

LLAMA = PRESETS["meta-llama/Llama-3.1-8B"]
PHI = PRESETS["microsoft/Phi-3.5-mini-instruct"]
#: What `posviz diff --json` prints: the issue's keys, with the settings and the hints, under
#: an export's header (the step `posviz rerun` runs again).
RECORD_KEYS = {
    "analysis", "agree", "first_difference", "fields", "inv_freq_max_relative_difference",
    "table_max_abs_difference", "first_position_over_0_01_rad", "pairs_differing",
    "provenance", "params", "hints",
}  # fmt: skip


def spec_of(config: dict) -> RotarySpec:
    return position_scheme(config).rotary[0]


def float32_inv_freq(spec: RotarySpec, *, context: int | None = None) -> np.ndarray:
    """inv_freq as a float32 runtime holds it (transformers computes it in float32)."""
    return rotary_frequencies(spec, context=context).inv_freq.astype(np.float32)


def float32_table(inv: np.ndarray, positions: int, *, scale: float = 1.0) -> np.ndarray:
    """A float32 runtime's [cos | sin] table: angles m · inv_freq in float32."""
    angles = np.arange(positions, dtype=np.float32)[:, None] * inv.astype(np.float32)[None, :]
    return (scale * np.concatenate([np.cos(angles), np.sin(angles)], axis=1)).astype(np.float32)


def config_source(config: dict, **options):
    return from_spec(spec_of(config), label="config", provenance={"config": "c"}, **options)


def test_the_same_spec_agrees_exactly() -> None:
    d = scheme_diff(config_source(LLAMA), config_source(LLAMA))
    assert d.agree
    assert d.first_difference is None
    assert all(f["same"] for f in d.fields)
    assert d.inv_freq_max_relative_difference == 0.0
    assert d.table_max_abs_difference == 0.0
    assert d.first_position_over_0_01_rad is None
    assert d.pairs_differing == []
    assert list(d.positions[[0, -1]]) == [0, 32767]  # the shorter context, at most 32768


def test_a_float32_runtime_agrees_within_the_default_tolerance() -> None:
    spec = spec_of(LLAMA)
    inv = float32_inv_freq(spec)
    d = scheme_diff(config_source(LLAMA), from_inv_freq(inv, label="rt", provenance={}))
    assert d.agree
    assert 0 < d.inv_freq_max_relative_difference < 1e-6
    # float32 frequencies drift: their angle error grows as m · Δθ (fastest pair first).
    delta = np.abs(inv.astype(np.float64) - rotary_frequencies(spec).inv_freq)
    expected = math.ceil(0.01 / delta.max()) if delta.max() else None
    over = d.first_position_over_0_01_rad
    assert (over is None and (expected is None or expected > 32767)) or over in (
        expected - 1, expected, expected + 1)  # fmt: skip


def test_a_float32_table_agrees_and_its_frequencies_are_recovered() -> None:
    spec = spec_of(LLAMA)
    table = float32_table(rotary_frequencies(spec).inv_freq, 4096)
    cos, sin = split_table(table, "half-split")
    dump = from_table(cos, sin, label="t", provenance={}, layout="half-split")
    np.testing.assert_allclose(dump.inv_freq, rotary_frequencies(spec).inv_freq, rtol=2e-7)
    d = scheme_diff(config_source(LLAMA), dump)
    assert d.agree, d.first_difference
    assert list(d.positions[[0, -1]]) == [0, 4095]  # the dump's own positions
    assert 0 < d.table_max_abs_difference < 1e-3  # float32 angles at m ~ 4000
    layout = {f["field"]: f for f in d.fields}["layout"]
    assert (layout["a"], layout["b"], layout["same"]) == ("half-split", "half-split", None)


def test_a_half_split_table_read_as_interleaved(tmp_path: Path) -> None:
    path = tmp_path / "cos_sin.npy"
    np.save(path, float32_table(rotary_frequencies(spec_of(LLAMA)).inv_freq, 1024))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    wrong = compare(read_side(str(config)), read_side(str(path), layout="interleaved"))
    assert not wrong.agree
    assert wrong.first_difference == "table"  # a dump's layout is shown, not compared
    assert wrong.first_position_over_0_01_rad == 0  # cos θ0 read as sin: wrong at once
    assert any("its layout is probably half-split" in h for h in wrong.hints)
    right = compare(read_side(str(config)), read_side(str(path)))
    assert right.agree
    assert right.hints == ()


def test_transformers_cos_and_sin_with_their_attention_factor(tmp_path: Path) -> None:
    """Phi-3.5's rotary_emb output: cos = cos(cat(freqs, freqs)) · attention factor, at a
    length beyond the original context (long factors)."""
    spec = spec_of(PHI)
    f = rotary_frequencies(spec, context=8192)
    angles = np.outer(np.arange(64), f.inv_freq).astype(np.float32)
    emb = np.concatenate([angles, angles], axis=1)
    path = tmp_path / "phi_cos_sin.safetensors"
    save_file(
        {
            "cos": (np.cos(emb) * f.attention_factor)[None].astype(np.float32),
            "sin": (np.sin(emb) * f.attention_factor)[None].astype(np.float32),
        },
        path,
    )
    config = tmp_path / "config.json"
    config.write_text(json.dumps(PHI))
    d = compare(read_side(str(config)), read_side(str(path)), context=8192)
    assert d.agree, (d.first_difference, d.hints)
    fields = {f["field"]: f for f in d.fields}
    assert fields["attention_factor"]["same"] is True
    assert fields["attention_factor"]["b"] == pytest.approx(1.190238, rel=1e-6)
    assert d.params["context"] == 8192


def test_longrope_short_factors_past_the_original_context() -> None:
    spec = spec_of(PHI)
    short = float32_inv_freq(spec, context=4096)
    a = read_side("preset:microsoft/Phi-3.5-mini-instruct")
    runtime = from_inv_freq(short, label="rt", provenance={})
    d = compare(a, dataclasses.replace(a, spec=None, dump=runtime))
    assert not d.agree
    assert d.first_difference == "inv_freq"
    differing = np.flatnonzero(np.array(spec.short_factor) != np.array(spec.long_factor))
    assert d.pairs_differing == differing.tolist()
    assert any("short factors" in hint for hint in d.hints)
    within = compare(a, a, context=4096)  # the same rule at a length within L0 agrees
    assert within.agree


def test_theta_off_by_a_factor_is_named() -> None:
    spec = spec_of(LLAMA)
    moved = rotary_frequencies(dataclasses.replace(spec, base=spec.base * 2)).inv_freq
    side = read_side("preset:meta-llama/Llama-3.1-8B")
    dump = dataclasses.replace(side, spec=None, dump=from_inv_freq(moved, label="x", provenance={}))
    d = compare(side, dump)
    assert d.first_difference == "inv_freq"
    assert d.pairs_differing[0] == 1  # pair 0 turns at 1 rad per position whatever θ
    assert any("θ multiplied by 2 " in hint for hint in d.hints)


def test_the_first_position_over_the_angle_limit_is_exact() -> None:
    a = RotarySpec("default", 8, 10000.0, context=100000)
    b = dataclasses.replace(a, base=10000.0 * (1 + 1e-4))
    d = scheme_diff(
        from_spec(a, label="a", provenance={}), from_spec(b, label="b", provenance={}),
        positions=100000,
    )  # fmt: skip
    delta = np.abs(rotary_frequencies(a).inv_freq - rotary_frequencies(b).inv_freq)
    assert d.first_position_over_0_01_rad == math.floor(0.01 / delta.max()) + 1
    assert d.first_difference == "theta"


def test_an_attention_factor_alone_shows_in_the_table() -> None:
    a = RotarySpec("default", 8, 10000.0, context=512)
    b = dataclasses.replace(
        a, rope_type="yarn", factor=1.0, attention_factor=1.1, original_context=512
    )
    d = scheme_diff(from_spec(a, label="a", provenance={}), from_spec(b, label="b", provenance={}))
    assert d.first_difference == "rope_type"
    assert d.table_max_abs_difference == pytest.approx(0.1, rel=1e-12)  # at m = 0: cos = 1
    assert d.inv_freq_max_relative_difference == 0.0


def test_different_widths() -> None:
    a = from_spec(RotarySpec("default", 8, 10000.0, context=64), label="a", provenance={})
    b = from_inv_freq(np.ones(3), label="b", provenance={})
    d = scheme_diff(a, b)
    assert d.first_difference == "rotary_dim"
    record = d.record()
    assert record["inv_freq_max_relative_difference"] is None
    assert set(record) == RECORD_KEYS
    json.dumps(record, allow_nan=False)


def test_a_table_of_later_positions() -> None:
    inv = rotary_frequencies(RotarySpec("default", 16, 10000.0, context=512)).inv_freq
    angles = np.outer(np.arange(100, 200), inv)
    cos, sin = np.cos(angles), np.sin(angles)
    config = from_spec(RotarySpec("default", 16, 10000.0, context=512), label="c", provenance={})
    right = scheme_diff(config, from_table(cos, sin, label="t", provenance={}, layout="half-split",
                                           first_position=100))  # fmt: skip
    assert right.agree
    assert list(right.positions[[0, -1]]) == [100, 199]
    wrong = scheme_diff(config, from_table(cos, sin, label="t", provenance={}, layout="half-split"))
    assert wrong.inv_freq_max_relative_difference < 1e-12  # the slope is right
    assert wrong.pairs_differing == list(range(8))  # the angles are not: off by 100 θ
    assert wrong.first_difference == "table"


def test_pairs_and_fields_as_tables() -> None:
    d = scheme_diff(config_source(LLAMA), config_source(PRESETS["mistralai/Mistral-7B-v0.1"]))
    assert d.first_difference == "theta"
    frame = d.pair_table()
    assert list(frame.columns) == ["pair", "inv_freq_a", "inv_freq_b", "relative_difference"]
    assert d.field_frame()["same"].tolist()[0] is False


def test_split_pair_layouts() -> None:
    values = np.arange(8.0).reshape(1, 8)
    half = np.concatenate([values[:, :4], values[:, :4]], axis=1)
    assert split_pair(half, half, "half-split")[0].tolist() == [[0, 1, 2, 3]]
    interleaved = np.repeat(values[:, :4], 2, axis=1)
    assert split_pair(interleaved, interleaved, "interleaved")[0].tolist() == [[0, 1, 2, 3]]
    with pytest.raises(LoadError, match="layout 'rows'"):
        split_pair(half, half, "rows")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"tolerance": 0}, "tolerance is 0"),
        ({"tolerance": 2.0}, "tolerance is 2.0"),
        ({"positions": 0}, "positions is 0"),
        ({"positions": 2**20 + 1}, "positions is 1048577"),
    ],
)
def test_settings_out_of_range(options: dict, words: str) -> None:
    with pytest.raises(Refused, match=words):
        scheme_diff(config_source(LLAMA), config_source(LLAMA), **options)


def test_a_gguf_against_its_config(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    d = compare(read_side(str(config)), read_side(str(ggufs.llama31(tmp_path / "l.gguf"))))
    assert d.agree
    assert d.inv_freq_max_relative_difference == 0.0  # θ and the llama3 factors are exact
    record = d.record()
    assert record["analysis"] == "scheme_diff"
    assert "gguf_keys" in record["provenance"][1]  # B's


def test_sources_that_cannot_be_compared(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="ALiBi"):
        read_side("preset:bigscience/bloom")
    two = tmp_path / "two.npz"
    np.savez(two, x=np.ones(4), y=np.ones(4))
    with pytest.raises(LoadError, match="a dump holds one array"):
        read_side(str(two))


TRANSFORMERS = Path(__file__).parents[1] / "data" / "transformers_rope"


@pytest.mark.parametrize(
    ("preset", "dump", "options"),
    [
        ("meta-llama/Llama-3.1-8B", "llama31_inv_freq.npy", {}),
        # float32 cos/sin at positions 131,000 .. 131,063: its angles carry ~1e-2 rad of
        # rounding, which its 64 rows cannot average out of the recovered frequencies
        ("meta-llama/Llama-3.1-8B", "llama31_cos_sin.safetensors", {"first_position": 131000}),
        ("microsoft/Phi-3.5-mini-instruct", "phi35_cos_sin.safetensors", {"first_position": 8000}),
    ],
)
def test_transformers_own_tensors_agree_with_their_config(preset, dump, options) -> None:
    """tests/data/transformers_rope: made by transformers 5.24's rotary embedding classes."""
    a = read_side(f"preset:{preset}")
    b = read_side(str(TRANSFORMERS / dump), **options)
    d = compare(a, b, context=8064 if "phi" in dump else None)
    assert d.agree, (d.first_difference, d.pairs_differing, d.hints)
    if b.dump.kind == "table":
        fields = {f["field"]: f for f in d.fields}
        assert fields["attention_factor"]["same"] is True  # Phi-3.5's 1.19 is in its cos/sin


def test_transformers_longrope_buffer_holds_the_short_factors() -> None:
    """Phi3RotaryEmbedding.inv_freq is the short factors' until a sequence passes 4,096."""
    a = read_side("preset:microsoft/Phi-3.5-mini-instruct")
    b = read_side(str(TRANSFORMERS / "phi35_inv_freq.npy"))
    assert compare(a, b, context=4096).agree
    beyond = compare(a, b, context=131072)
    assert not beyond.agree
    assert any("short factors" in hint for hint in beyond.hints)
