"""Write interp_reference.npz: PyTorch's 2-D interpolation on small fixed grids.

Run once by hand from the repository root (needs torch, which posviz never needs):

    pip install torch && python tests/data/make_interp_reference.py

tests/test_resample.py compares posviz.resample against the saved outputs to 1e-5. Every
case is F.interpolate(x, size=..., mode=..., align_corners=False, antialias=...) on a seeded
float32 grid of 3 channels, for both antialias settings, upsampling, downsampling and mixed.
"""

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

CASES = [((7, 7), (12, 12)), ((14, 14), (10, 10)), ((3, 5), (6, 4)), ((16, 16), (5, 7))]


def main() -> None:
    rng = np.random.default_rng(0)
    arrays: dict[str, np.ndarray] = {}
    for index, (old, new) in enumerate(CASES):
        grid = rng.standard_normal((3, *old)).astype(np.float32)
        arrays[f"case{index}_input"] = grid
        for mode in ("bicubic", "bilinear"):
            for antialias in (False, True):
                out = F.interpolate(
                    torch.from_numpy(grid)[None],
                    size=new,
                    mode=mode,
                    align_corners=False,
                    antialias=antialias,
                )
                arrays[f"case{index}_{mode}_aa{int(antialias)}"] = out[0].numpy()
    arrays["torch_version"] = np.array(torch.__version__)
    np.savez_compressed(Path(__file__).with_name("interp_reference.npz"), **arrays)


if __name__ == "__main__":
    main()
