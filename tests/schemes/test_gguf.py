"""A GGUF file's position metadata read as the config.json keys transformers would have: the
same Scheme as the model's config.json gives (within float32, GGUF's storage), every key named."""

from __future__ import annotations

import math
from pathlib import Path

import gguf
import numpy as np
import pytest

import posviz
from posviz.embedding import LoadError
from posviz.models import weights
from posviz.schemes.config import position_scheme
from posviz.schemes.gguf import llama3_parameters
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import rotary_frequencies
from tests import ggufs

#: float32 storage of θ and factors: relative differences from config.json's float64 values.
F32 = 2**-23


def fed(model: weights.LocalGGUF) -> dict[str, str]:
    return {read.gguf: read.config for read in model.keys}


def same_frequencies(a, b, *, context: int | None = None, rtol: float = 2 * F32) -> None:
    fa, fb = rotary_frequencies(a, context=context), rotary_frequencies(b, context=context)
    np.testing.assert_allclose(fa.inv_freq, fb.inv_freq, rtol=rtol)
    assert fa.attention_factor == pytest.approx(fb.attention_factor, rel=rtol)


def test_llama31_factors_in_rope_freqs_read_as_its_llama3_rule(tmp_path: Path) -> None:
    model = weights.open_gguf(ggufs.llama31(tmp_path / "llama.gguf"))
    (spec,) = position_scheme(model.config).rotary
    (expected,) = position_scheme(PRESETS["meta-llama/Llama-3.1-8B"]).rotary
    assert spec == expected  # every field: rule, θ, width, context, factor, band edges
    same_frequencies(spec, expected)
    keys = fed(model)
    assert keys["llama.rope.freq_base"] == "rope_theta"
    assert keys["llama.context_length"] == "max_position_embeddings"
    assert keys["rope_freqs.weight"] == "rope_scaling (llama3)"
    (note,) = [r.note for r in model.keys if r.gguf == "rope_freqs.weight"]
    assert "factor 8," in note
    assert "original context 8192" in note


def test_llama32_factor_32_is_recognised_too() -> None:
    factors = ggufs.llama3_factors(
        theta=500000.0, head_dim=64, factor=32.0, low=1.0, high=4.0, original=8192
    )
    parameters, difference = llama3_parameters(factors, base=500000.0, dim=64)
    assert parameters["factor"] == 32.0
    assert difference < 1e-6
    assert llama3_parameters(factors[::-1], base=500000.0, dim=64) is None


def test_other_rope_freqs_are_read_as_exact_per_pair_factors(tmp_path: Path) -> None:
    factors = np.linspace(1.0, 3.0, 64, dtype=np.float32) ** 2  # no llama3 rule
    path = ggufs.write(
        tmp_path / "odd.gguf",
        "llama",
        keys=lambda w: (
            w.add_context_length(4096),
            w.add_rope_dimension_count(128),
            w.add_rope_freq_base(10000.0),
        ),
        tensors={"rope_freqs.weight": factors},
    )
    model = weights.open_gguf(path)
    (spec,) = position_scheme(model.config).rotary
    f = rotary_frequencies(spec)
    unscaled = 10000.0 ** (-np.arange(0, 128, 2) / 128)
    np.testing.assert_allclose(f.inv_freq, unscaled / factors.astype(np.float64), rtol=1e-15)
    assert f.attention_factor == 1.0
    (read,) = [r for r in model.keys if r.gguf == "rope_freqs.weight"]
    assert "no llama3 rule" in read.note


def test_phi3_longrope_factors_as_tensors(tmp_path: Path) -> None:
    config = PRESETS["microsoft/Phi-3.5-mini-instruct"]
    long, short = config["rope_scaling"]["long_factor"], config["rope_scaling"]["short_factor"]
    model = weights.open_gguf(ggufs.phi3(tmp_path / "phi3.gguf", long, short))
    (spec,) = position_scheme(model.config).rotary
    (expected,) = position_scheme(config).rotary
    assert (spec.rope_type, spec.rotary_dim, spec.original_context, spec.context) == (
        "longrope", 96, 4096, 131072)  # fmt: skip
    np.testing.assert_allclose(spec.long_factor, expected.long_factor, rtol=F32)
    for context in (4096, 4097, 131072):  # short factors within the original context
        same_frequencies(spec, expected, context=context)
    assert fed(model)["rope_factors_short.weight"] == "rope_scaling.short_factor"
    assert fed(model)["phi3.rope.scaling.attn_factor"] == "rope_scaling.attention_factor"
    assert fed(model)["phi3.attention.sliding_window"] == "sliding_window"


def test_yarn_keys_as_deepseek_v3_converts_them(tmp_path: Path) -> None:
    def keys(w: gguf.GGUFWriter) -> None:
        w.add_context_length(163840)
        w.add_head_count(128)
        w.add_key_length(192)
        w.add_rope_dimension_count(64)
        w.add_rope_freq_base(10000.0)
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(40.0)
        w.add_rope_scaling_orig_ctx_len(4096)
        w.add_rope_scaling_yarn_log_mul(0.1 * 1.0)

    model = weights.open_gguf(ggufs.write(tmp_path / "ds.gguf", "deepseek2", keys=keys))
    (spec,) = position_scheme(model.config).rotary
    (expected,) = position_scheme(PRESETS["deepseek-ai/DeepSeek-V3"]).rotary
    assert (spec.rope_type, spec.rotary_dim, spec.interleaved) == ("yarn", 64, True)
    same_frequencies(spec, expected)  # attention factor 1: mscale / mscale_all_dim
    assert fed(model)["deepseek2.rope.dimension_count"] == "qk_rope_head_dim"


def test_gemma3_sliding_layers_get_llama_cpps_base(tmp_path: Path) -> None:
    def keys(w: gguf.GGUFWriter) -> None:
        w.add_context_length(131072)
        w.add_head_count(8)
        w.add_key_length(256)
        w.add_rope_freq_base(1e6)
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(8.0)

    model = weights.open_gguf(ggufs.write(tmp_path / "g.gguf", "gemma3", keys=keys))
    specs = position_scheme(model.config).rotary
    expected = position_scheme(PRESETS["google/gemma-3-4b-it"]).rotary
    assert [s.layer_type for s in specs] == [s.layer_type for s in expected]
    for a, b in zip(specs, expected, strict=True):
        same_frequencies(a, b)
    (read,) = [r for r in model.keys if r.gguf == "gemma3.rope.freq_base_swa"]
    assert "llama.cpp" in read.note


def test_a_linear_factor_of_older_files(tmp_path: Path) -> None:
    path = ggufs.write(
        tmp_path / "old.gguf",
        "llama",
        keys=lambda w: (w.add_float32("llama.rope.scale_linear", 4.0), w.add_head_count(4),
                        w.add_embedding_length(256), w.add_context_length(2048)),
    )  # fmt: skip
    (spec,) = position_scheme(weights.open_gguf(path).config).rotary
    assert (spec.rope_type, spec.factor, spec.rotary_dim) == ("linear", 4.0, 64)


def test_partial_rotation_keeps_its_width(tmp_path: Path) -> None:
    # Phi-2: 32 of 80 head columns rotate; 80 · (32 / 80) must not round down to 31.
    def keys(w: gguf.GGUFWriter) -> None:
        w.add_head_count(32)
        w.add_embedding_length(2560)
        w.add_rope_dimension_count(32)
        w.add_context_length(2048)

    model = weights.open_gguf(ggufs.write(tmp_path / "phi2.gguf", "phi2", keys=keys))
    (spec,) = position_scheme(model.config).rotary
    assert spec.rotary_dim == 32
    for head in range(2, 400, 2):
        for rot in range(2, head, 2):
            share = rot / head
            if int(head * share) != rot:
                share = math.nextafter(share, 1.0)
            assert int(head * share) == rot


def test_a_gpt2_gguf_is_a_learned_table(tmp_path: Path) -> None:
    path = ggufs.learned(tmp_path / "gpt2.gguf", np.eye(32, 64), "F16")
    model = weights.open_gguf(path)
    assert position_scheme(model.config).kind == "learned_absolute"
    assert posviz.load(path).name == "position_embd.weight"


def test_alibi_models(tmp_path: Path) -> None:
    def keys(w: gguf.GGUFWriter) -> None:
        w.add_head_count(32)
        w.add_max_alibi_bias(8.0)

    scheme = position_scheme(
        weights.open_gguf(ggufs.write(tmp_path / "mpt.gguf", "mpt", keys=keys)).config
    )
    assert (scheme.kind, scheme.alibi.n_heads, scheme.alibi.alibi_bias_max) == ("alibi", 32, 8.0)


def test_a_rotary_gguf_without_a_table_is_refused_with_its_scheme(tmp_path: Path) -> None:
    path = ggufs.llama31(tmp_path / "llama.gguf")
    with pytest.raises(LoadError, match=r"its GGUF metadata says it uses rotary"):
        posviz.load(path)
    assert posviz.load(path, tensor="token_embd.weight").shape == (16, 64)


def _width(w: gguf.GGUFWriter) -> None:
    """A rotary width of 128 columns (64 pairs)."""
    w.add_rope_dimension_count(128)


@pytest.mark.parametrize(
    ("tensors", "keys", "words"),
    [
        ({"rope_freqs.weight": np.zeros(64, np.float32)}, _width, "finite and positive"),
        ({"rope_factors_long.weight": np.ones(64, np.float32)}, _width, "without the other"),
        ({"rope_freqs.weight": np.ones(64, np.float32)}, None, "no key gives its rotary width"),
        ({"rope_freqs.weight": np.ones((2, 32), np.float32)}, _width, r"in shape \[2, 32\]"),
        ({}, lambda w: w.add_string("llama.rope.scaling.type", "ntk"), "knows none, linear"),
        ({}, lambda w: w.add_string("llama.context_length", "long"), "expected int"),
    ],
)
def test_unreadable_position_metadata_is_named(tmp_path: Path, tensors, keys, words) -> None:
    path = ggufs.write(tmp_path / "bad.gguf", "llama", tensors=tensors, keys=keys)
    with pytest.raises(LoadError, match=words):
        weights.open_gguf(path)


def test_no_architecture_is_refused(tmp_path: Path) -> None:
    data = ggufs.padded(ggufs.header(0, 1) + ggufs.kv_u32("x", 1))
    with pytest.raises(LoadError, match=r"general\.architecture"):
        weights.open_gguf(data, label="bare.gguf")


def test_the_sha256_covers_the_rope_tensors(tmp_path: Path) -> None:
    a = weights.open_gguf(ggufs.llama31(tmp_path / "a.gguf"))
    b = weights.open_gguf(ggufs.llama31(tmp_path / "b.gguf", factor=4.0))
    again = weights.open_gguf((tmp_path / "a.gguf").read_bytes(), label="a.gguf")
    assert a.sha256 == again.sha256 != b.sha256
