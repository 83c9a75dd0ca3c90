"""Write row_offsets.json: which rows of DeBERTa's ``rel_embeddings`` transformers' own code reads
for each relative offset, for a few configs (posviz's `posviz.rows.row_offsets` is tested on it).

Run by hand in a scratch venv, never by the tests (posviz needs neither torch nor transformers):

    python3 -m venv /tmp/scratch && /tmp/scratch/bin/pip install torch==2.13.0 transformers==5.24.0
    /tmp/scratch/bin/python tests/data/deberta/make_row_offsets.py

For each config of CONFIGS, the model's own modules are built from it (``DebertaV2Encoder`` and
``DisentangledSelfAttention``: the table's rows and the span ``pos_ebd_size`` as they set them),
and the file records:

- ``rows_by_offset``: for every offset q − k in ±(max_position_embeddings − 1), the row that the
  content→position term reads (``clamp(relative_pos + att_span, 0, 2 att_span − 1)`` with
  ``relative_pos`` from ``build_relative_position`` over a whole sequence of that length). The
  position→content term's index is that matrix transposed (``-r_pos``, checked here) and its
  scores are transposed after the gather, so for the pair (query q, key k) it reads the same row;
- ``row_offsets``: for each row, the first and last offset that reads it among
  ±``WIDE`` (``make_log_bucket_position`` on each offset, then the clamp): ``null`` for an end
  that reaches ±WIDE (the row takes every offset beyond: the clamped end rows), and the whole
  entry ``null`` for a row no offset reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from transformers import DebertaV2Config
from transformers.models.deberta_v2 import modeling_deberta_v2 as deberta

HERE = Path(__file__).parent
#: Offsets checked for the row ranges: far beyond every config's max_relative_positions.
WIDE = 1 << 14

BASE = {"model_type": "deberta-v2", "relative_attention": True, "num_hidden_layers": 1}
CONFIGS: dict[str, dict] = {
    # microsoft/deberta-v3-base and -large: 256 log buckets, 512 positions.
    "deberta-v3-base": BASE | {
        "hidden_size": 768, "num_attention_heads": 12, "max_position_embeddings": 512,
        "position_buckets": 256, "max_relative_positions": -1, "position_biased_input": False,
        "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm", "share_att_key": True,
    },
    "deberta-v3-large": BASE | {
        "hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 512,
        "position_buckets": 256, "max_relative_positions": -1, "position_biased_input": False,
        "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm", "share_att_key": True,
    },
    # microsoft/deberta-v2-xlarge: the same buckets, a wider model.
    "deberta-v2-xlarge": BASE | {
        "hidden_size": 1536, "num_attention_heads": 24, "max_position_embeddings": 512,
        "position_buckets": 256, "max_relative_positions": -1, "position_biased_input": False,
        "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm", "share_att_key": True,
    },
    # DebertaV2Config's defaults: no log buckets, span = max_position_embeddings (rows are
    # offsets within ±span, the end rows clamped).
    "deberta-v2-no-buckets": BASE | {
        "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 512,
        "pos_att_type": ["p2c", "c2p"],
    },
    # An explicit max_relative_positions wider than the context: 128 buckets over 1024.
    "buckets-128-of-1024": BASE | {
        "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 512,
        "position_buckets": 128, "max_relative_positions": 1024, "pos_att_type": ["p2c", "c2p"],
    },
    # Buckets wider than the log range: the first log steps skip buckets (rows never read).
    "gapped-64-of-40": BASE | {
        "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 64,
        "position_buckets": 64, "max_relative_positions": 40, "pos_att_type": ["p2c", "c2p"],
    },
}  # fmt: skip


def rows_by_offset(config: DebertaV2Config) -> tuple[int, int, list[int]]:
    """(rows of rel_embeddings, att_span, the c2p row of each offset in ±(L − 1))."""
    encoder = deberta.DebertaV2Encoder(config)
    attention = deberta.DisentangledSelfAttention(config)
    rows = encoder.rel_embeddings.weight.shape[0]
    span = attention.pos_ebd_size
    length = config.max_position_embeddings
    hidden = torch.zeros(1, length, 8)
    relative = encoder.get_rel_pos(hidden)[0]  # [query, key]: the bucket of q − k
    c2p = torch.clamp(relative + span, 0, span * 2 - 1)
    # Called as DisentangledSelfAttention calls it; with as many keys as queries it returns
    # relative_pos itself.
    r_pos = deberta.build_rpos(
        hidden, hidden, relative, attention.max_relative_positions, attention.position_buckets
    )
    p2c = torch.clamp(-r_pos + span, 0, span * 2 - 1)
    q = torch.arange(length)[:, None]
    k = torch.arange(length)[None, :]
    offsets = (q - k).expand(length, length)
    by_offset = {}
    for delta, row in zip(offsets.flatten().tolist(), c2p.flatten().tolist(), strict=True):
        assert by_offset.setdefault(delta, row) == row, "one row per offset"
    # position->content reads, for the pair (q, k), the row content->position reads for (k, q).
    assert torch.equal(p2c, c2p.T)
    return rows, span, [by_offset[d] for d in range(-(length - 1), length)]


def row_offsets(attention: deberta.DisentangledSelfAttention) -> list[list[int | None] | None]:
    """Each row's first and last offset among ±WIDE (None at ±WIDE), None for a row never read."""
    span = attention.pos_ebd_size
    offsets = torch.arange(-WIDE, WIDE + 1)
    if attention.position_buckets > 0:
        buckets = deberta.make_log_bucket_position(
            offsets, attention.position_buckets, attention.max_relative_positions
        ).to(torch.long)
    else:
        buckets = offsets
    rows = torch.clamp(buckets + span, 0, span * 2 - 1)
    out: list[list[int | None] | None] = []
    for row in range(2 * span):
        read = offsets[rows == row]
        if not len(read):
            out.append(None)
            continue
        first, last = int(read.min()), int(read.max())
        assert int(read.numel()) == last - first + 1, "a row's offsets are contiguous"
        out.append([None if first == -WIDE else first, None if last == WIDE else last])
    return out


def main() -> None:
    out = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "wide": WIDE,
        "configs": {},
    }
    for name, values in CONFIGS.items():
        config = DebertaV2Config(**values)
        rows, span, by_offset = rows_by_offset(config)
        attention = deberta.DisentangledSelfAttention(config)
        assert rows == 2 * span
        out["configs"][name] = {
            "config": values,
            "rows": rows,
            "att_span": span,
            "position_buckets": attention.position_buckets,
            "max_relative_positions": attention.max_relative_positions,
            "rows_by_offset": by_offset,
            "row_offsets": row_offsets(attention),
        }
    text = json.dumps(out, separators=(",", ":"))
    (HERE / "row_offsets.json").write_text(text + "\n")
    print(f"wrote row_offsets.json ({len(text):,} bytes), transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
