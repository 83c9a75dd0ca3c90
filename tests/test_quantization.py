"""A quantized table against its original: the error's size beside float16's and bfloat16's
rounding of the original, checked analytically and on gguf's own Q8_0."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from posviz.embedding import LoadError
from posviz.quantization import _bfloat16, is_quantized, quantization_error
from posviz.spectrum import spectrum

RNG = np.random.default_rng(4)
ORIGINAL = RNG.standard_normal((128, 64))


def test_a_constant_shift_is_measured_exactly() -> None:
    e = quantization_error(ORIGINAL + 0.01, ORIGINAL)
    assert e.max_abs_error == pytest.approx(0.01, rel=1e-12)
    assert e.rms_error == pytest.approx(0.01, rel=1e-12)
    assert e.relative_error == pytest.approx(
        0.01 * np.sqrt(ORIGINAL.size) / np.linalg.norm(ORIGINAL)
    )
    assert e.singular_value_change < 1e-12  # a shift leaves centred singular values alone
    assert e.params == {"k": 10, "center": True}


def test_gguf_q8_0_against_its_original_and_the_nulls() -> None:
    kind = gguf.GGMLQuantizationType.Q8_0
    q = gguf.quants.dequantize(gguf.quants.quantize(ORIGINAL.astype(np.float32), kind), kind)
    e = quantization_error(q, ORIGINAL)
    expected = np.linalg.norm(q - ORIGINAL) / np.linalg.norm(ORIGINAL)
    assert e.relative_error == pytest.approx(expected, rel=1e-12)
    # Q8_0 keeps ~8 bits per block: coarser than float16's 11, finer than nothing.
    assert e.float16_relative_error < e.relative_error < 0.02
    ours = spectrum(q).singular_values[:10]
    theirs = spectrum(ORIGINAL).singular_values[:10]
    assert e.singular_value_change == pytest.approx(np.abs(ours - theirs).max() / theirs[0])


def test_bfloat16_rounds_to_nearest_even() -> None:
    one = np.float32(1.0)
    step = np.float32(2**-7)  # bfloat16's spacing at 1
    values = np.array([one, one + step / 2, one + step * 1.5, one + step * 0.75], np.float32)
    assert _bfloat16(values).tolist() == [1.0, 1.0, 1.0 + 2 * float(step), 1.0 + float(step)]


def test_types_and_shapes() -> None:
    assert [is_quantized(t) for t in ("Q8_0", "IQ2_XS", "MXFP4", "float32", "F16", "bfloat16")] == [
        True, True, True, False, False, False]  # fmt: skip
    with pytest.raises(LoadError, match="compare a table with the one it was made from"):
        quantization_error(ORIGINAL[:10], ORIGINAL)
