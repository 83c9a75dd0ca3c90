"""Tiny GGUF files for the tests, written with ggml-org's own `gguf.GGUFWriter`: learned tables
in several types, rotary models' metadata as llama.cpp's converter writes it (llama3 factors in
``rope_freqs``, LongRoPE's long and short factors), and hostile headers written byte by byte."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np

#: Llama-3.1-8B's position settings (config.json's values).
LLAMA31 = {
    "theta": 500000.0,
    "head_dim": 128,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original": 8192,
    "context": 131072,
}


def write(
    path: Path,
    arch: str,
    *,
    tensors: dict[str, np.ndarray | tuple[np.ndarray, str]] | None = None,
    keys: Callable[[gguf.GGUFWriter], None] | None = None,
    alignment: int | None = None,
) -> Path:
    """A GGUF file at `path`: metadata set by `keys(writer)`, and `tensors` (an array as it is,
    or (raw bytes, GGML type name) for a quantized one)."""
    writer = gguf.GGUFWriter(path, arch)
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    if keys is not None:
        keys(writer)
    for name, value in (tensors or {}).items():
        if isinstance(value, tuple):
            raw, kind = value
            writer.add_tensor(
                name, raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType[kind]
            )
        else:
            writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def quantized(table: np.ndarray, kind: str) -> tuple[np.ndarray, str]:
    """`table` quantized by gguf's own quantizer (Q8_0, Q4_0, Q5_0, …), as `write` takes it."""
    return gguf.quants.quantize(
        np.asarray(table, dtype=np.float32), gguf.GGMLQuantizationType[kind]
    ), kind


def q4_k(values: np.ndarray) -> tuple[np.ndarray, str]:
    """Whole numbers 0-15 as Q4_K bytes that dequantize to exactly them: d = 1, dmin = 0, every
    sub-block's 6-bit scale 1 and min 0 (ggml's block_q4_K: d, dmin, 12 scale bytes, then 128
    bytes holding 256 four-bit values, low nibbles of 32 bytes then their high nibbles)."""
    v = np.asarray(values, dtype=np.uint8)
    rows, cols = v.shape
    blocks = v.reshape(-1, 256)
    out = np.zeros((len(blocks), 144), dtype=np.uint8)
    out[:, 0:2] = np.frombuffer(np.float16(1).tobytes(), np.uint8)
    out[:, 4:16] = [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]
    chunks = blocks.reshape(len(blocks), 4, 2, 32)
    out[:, 16:] = (chunks[:, :, 0, :] | (chunks[:, :, 1, :] << 4)).reshape(len(blocks), 128)
    return out.reshape(rows, cols // 256 * 144), "Q4_K"


def learned(
    path: Path, table: np.ndarray, kind: str = "F32", *, arch: str = "gpt2", vocab: int = 50
) -> Path:
    """A GPT-2-shaped GGUF: ``position_embd.weight`` (stored as `kind`) beside a token table of
    `vocab` rows (the bytes a range reader must not fetch)."""
    if kind == "F32":
        stored: np.ndarray | tuple[np.ndarray, str] = np.asarray(table, dtype=np.float32)
    elif kind == "F16":
        stored = np.asarray(table, dtype=np.float16)
    elif kind == "Q4_K":
        stored = q4_k(table)
    else:
        stored = quantized(table, kind)
    n, d = np.shape(table)

    def keys(w: gguf.GGUFWriter) -> None:
        w.add_context_length(n)
        w.add_embedding_length(d)
        w.add_head_count(max(d // 64, 1))
        w.add_block_count(1)

    tokens = np.linspace(-1, 1, vocab * d, dtype=np.float32).reshape(vocab, d)
    return write(
        path, arch, tensors={"token_embd.weight": tokens, "position_embd.weight": stored}, keys=keys
    )


def llama3_factors(
    *, theta: float, head_dim: int, factor: float, low: float, high: float, original: int
) -> np.ndarray:
    """``rope_freqs.weight`` as llama.cpp's convert_hf_to_gguf.py computes it for rope_type
    llama3 (LlamaModel.generate_extra_tensors): the divisor of each pair's frequency."""
    freqs = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    factors = []
    for freq in freqs:
        wavelength = 2 * math.pi / freq
        if wavelength < original / high:
            factors.append(1)
        elif wavelength > original / low:
            factors.append(factor)
        else:
            smooth = (original / wavelength - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def llama31(path: Path, *, with_factors: bool = True, **changes: Any) -> Path:
    """Llama-3.1-8B's position metadata as llama.cpp writes it (no scaling type: the llama3 rule
    lives in ``rope_freqs.weight``), with `changes` to LLAMA31."""
    p = LLAMA31 | changes

    def keys(w: gguf.GGUFWriter) -> None:
        w.add_context_length(p["context"])
        w.add_embedding_length(4096)
        w.add_block_count(32)
        w.add_head_count(32)
        w.add_head_count_kv(8)
        w.add_rope_dimension_count(p["head_dim"])
        w.add_rope_freq_base(p["theta"])

    tensors: dict[str, Any] = {"token_embd.weight": np.ones((16, 64), dtype=np.float32)}
    if with_factors:
        tensors["rope_freqs.weight"] = llama3_factors(
            theta=p["theta"],
            head_dim=p["head_dim"],
            factor=p["factor"],
            low=p["low_freq_factor"],
            high=p["high_freq_factor"],
            original=p["original"],
        )
    return write(path, "llama", tensors=tensors, keys=keys)


def phi3(path: Path, long: np.ndarray, short: np.ndarray, *, context: int = 131072) -> Path:
    """Phi-3-128k's position metadata as llama.cpp writes it: LongRoPE's factors as tensors,
    the original context and the attention factor the converter computes."""
    original = 4096
    scale = context / original
    attn = math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0

    def keys(w: gguf.GGUFWriter) -> None:
        w.add_context_length(context)
        w.add_rope_scaling_orig_ctx_len(original)
        w.add_embedding_length(3072)
        w.add_block_count(32)
        w.add_head_count(32)
        w.add_head_count_kv(32)
        w.add_rope_dimension_count(2 * len(long))
        w.add_rope_freq_base(10000.0)
        w.add_rope_scaling_attn_factors(attn)
        w.add_sliding_window(262144)

    tensors = {
        "token_embd.weight": np.ones((16, 64), dtype=np.float32),
        "rope_factors_long.weight": np.asarray(long, dtype=np.float32),
        "rope_factors_short.weight": np.asarray(short, dtype=np.float32),
    }
    return write(path, "phi3", tensors=tensors, keys=keys)


# --- hostile headers, byte by byte -------------------------------------------------------------


def string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def header(n_tensors: int, n_keys: int, *, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_keys)


def kv_u32(key: str, value: int) -> bytes:
    return string(key) + struct.pack("<II", 4, value)


def kv_str(key: str, value: str | bytes) -> bytes:
    return string(key) + struct.pack("<I", 8) + string(value)


def tensor_info(name: str, dims: list[int], kind: int, offset: int) -> bytes:
    return (
        string(name)
        + struct.pack("<I", len(dims))
        + struct.pack(f"<{len(dims)}Q", *dims)
        + struct.pack("<IQ", kind, offset)
    )


def padded(head: bytes, data: bytes = b"", alignment: int = 32) -> bytes:
    """`head`, zeros to the alignment, then `data`."""
    return head + bytes(-len(head) % alignment) + data
