"""What a float32 runtime (transformers, llama.cpp) holds of a model's rotary positions, for
the tests comparing sources of them: its inv_freq and its [cos | sin] table."""

from __future__ import annotations

import numpy as np

from posviz.schemes.config import position_scheme
from posviz.schemes.rotary import RotarySpec, rotary_frequencies


def spec_of(config: dict) -> RotarySpec:
    return position_scheme(config).rotary[0]


def float32_inv_freq(spec: RotarySpec, *, context: int | None = None) -> np.ndarray:
    """inv_freq as a float32 runtime holds it (transformers computes it in float32)."""
    return rotary_frequencies(spec, context=context).inv_freq.astype(np.float32)


def float32_table(inv: np.ndarray, positions: int, *, scale: float = 1.0) -> np.ndarray:
    """A float32 runtime's [cos | sin] table: angles m · inv_freq in float32."""
    angles = np.arange(positions, dtype=np.float32)[:, None] * inv.astype(np.float32)[None, :]
    return (scale * np.concatenate([np.cos(angles), np.sin(angles)], axis=1)).astype(np.float32)
