"""posviz.models.sources: the sources `posviz diff` reads (a config.json, a preset, a GGUF, a
runtime's inv_freq or cos/sin dump, transformers' own tensors) compared, and the hints that
name a known mistake: a table read in the other layout, LongRoPE's short factors past the
original context, θ off by a factor."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from posviz.embedding import LoadError
from posviz.models.sources import compare, read_side
from posviz.schemes.diff import from_inv_freq
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import rotary_frequencies
from tests import ggufs
from tests.schemes.runtime import float32_inv_freq, float32_table, spec_of

LLAMA = PRESETS["meta-llama/Llama-3.1-8B"]
PHI = PRESETS["microsoft/Phi-3.5-mini-instruct"]
TRANSFORMERS = Path(__file__).parents[1] / "data" / "transformers_rope"


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
