"""posviz.io._npz: an archive's members listed without inflating them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from posviz.io import list_tensors


def test_npz_listing_does_not_inflate_members(tmp_path: Path, bytes_read: list[int]) -> None:
    noise = np.random.default_rng(1).standard_normal((512, 256))  # 1 MiB, incompressible
    np.savez_compressed(tmp_path / "a.npz", wpe=noise, other=noise[:4])
    infos = list_tensors(tmp_path / "a.npz")
    assert {(i.name, i.shape) for i in infos} == {("wpe", (512, 256)), ("other", (4, 256))}
    assert sum(bytes_read) < 64 * 1024
