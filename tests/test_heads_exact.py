"""The heads' numbers, null draws and offset profiles against values saved before the kernels
were made faster (tests/data/heads/exact/reference.npz, written by this file's `main` at commit
e670073): every one equal to rtol 1e-12 (the profile's means near 0, sums of values ± its
largest, to 1e-13 of its largest too: summed in another order, they differ by rounding), on
learned kernels (causal and not, with a null over
fewer queries than `NULL_QUERIES` and over a sample of them, rows crossing block edges, sharp
and flat attention), ALiBi and T5 (decoder and encoder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from posviz.heads import PatternHeads, alibi_heads, learned_heads, t5_heads
from posviz.schemes.alibi import alibi_slopes

REFERENCE = Path(__file__).parent / "data" / "heads" / "exact" / "reference.npz"
RTOL = 1e-12


def learned(n: int, causal: bool, sharpness: float, n_draws: int) -> PatternHeads:
    """4 query heads on 2 key heads of 8 columns, with biases, over `n` positions of a random
    table; `sharpness` scales the weights (large: attention on a few keys)."""
    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, 16))
    wq, wk = rng.normal(size=(2, 4, 8, 16)) * sharpness
    return learned_heads(
        x, wq, wk[:2], rng.normal(size=(4, 8)), rng.normal(size=(2, 8)), causal,
        n_draws=n_draws, seed=3,
    )  # fmt: skip


CASES = {
    "learned_causal_300": lambda: learned(300, True, 1.0, 3),
    "learned_encoder_300": lambda: learned(300, False, 1.0, 3),
    "learned_causal_40_sharp": lambda: learned(40, True, 4.0, 2),
    "learned_encoder_129_flat": lambda: learned(129, False, 0.1, 2),
    "learned_causal_1024": lambda: learned(1024, True, 0.5, 1),
    "alibi_300": lambda: alibi_heads(alibi_slopes(6), n_positions=300),
    "t5_encoder_300": lambda: t5_heads(
        np.random.default_rng(5).normal(size=(32, 3)), n_positions=300, n_draws=3
    ),
    "t5_decoder_200": lambda: t5_heads(
        np.random.default_rng(6).normal(size=(32, 3)), False, n_positions=200, n_draws=3
    ),
}


def arrays(result: PatternHeads) -> dict[str, np.ndarray]:
    """What the reference holds of a result: every number, every null draw, the profile."""
    out = {f"number_{name}": values for name, values in result.numbers.items()}
    out |= {f"null_{name}": values for name, values in result.null.items()}
    return out | {"offset_profile": result.offset_profile}


@pytest.mark.parametrize("case", CASES)
def test_numbers_equal_the_values_saved_before_the_kernels_were_made_faster(case):
    saved = np.load(REFERENCE)
    expected = {k.split("/", 1)[1]: saved[k] for k in saved.files if k.startswith(case + "/")}
    got = arrays(CASES[case]())
    assert sorted(got) == sorted(expected)
    for name, values in got.items():
        scale = np.nanmax(np.abs(values)) if name == "offset_profile" else 0.0
        np.testing.assert_allclose(values, expected[name], rtol=RTOL, atol=0.1 * RTOL * scale,
                                   err_msg=name)  # fmt: skip


def main() -> None:
    """Write the reference (run once, at the commit named in the docstring)."""
    saved = {f"{case}/{k}": v for case, make in CASES.items() for k, v in arrays(make()).items()}
    np.savez_compressed(REFERENCE, **saved)


if __name__ == "__main__":
    main()
