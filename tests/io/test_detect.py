"""posviz.io.detect: which tensor is the position table, the rows a name or a zero row marks as
reserved (RoBERTa's padding, ViT's class token) and trimming them."""

from __future__ import annotations

import numpy as np
import pytest

from posviz.embedding import MIN_POSITIONS, Embedding
from posviz.io import TensorInfo, detect, detect_position_tensor, suggest_trim

GPT2 = [
    TensorInfo("transformer.wte.weight", (50257, 768), "F32"),
    TensorInfo("transformer.wpe.weight", (1024, 768), "F32"),
    TensorInfo("transformer.h.0.attn.bias", (1, 1, 1024, 1024), "F32"),
]


VIT = [
    TensorInfo("cls_token", (1, 1, 768), "F32"),
    TensorInfo("pos_embed", (1, 197, 768), "F32"),
    TensorInfo("patch_embed.proj.weight", (768, 3, 16, 16), "F32"),
]


OPT = [
    TensorInfo("model.decoder.embed_tokens.weight", (50272, 768), "F16"),
    TensorInfo("model.decoder.embed_positions.weight", (2050, 768), "F16"),
]


BERT = [
    TensorInfo("bert.embeddings.word_embeddings.weight", (30522, 768), "F32"),
    TensorInfo("bert.embeddings.position_embeddings.weight", (512, 768), "F32"),
    TensorInfo("bert.embeddings.position_ids", (1, 512), "I64"),
    TensorInfo("bert.embeddings.token_type_embeddings.weight", (2, 768), "F32"),
]


BART = [
    TensorInfo("model.encoder.embed_positions.weight", (1026, 768), "F32"),
    TensorInfo("model.decoder.embed_positions.weight", (1026, 768), "F32"),
]


@pytest.mark.parametrize(
    ("infos", "expected"),
    [
        (GPT2, "transformer.wpe.weight"),
        (VIT, "pos_embed"),
        (OPT, "model.decoder.embed_positions.weight"),
        (BERT, "bert.embeddings.position_embeddings.weight"),
        (BART, None),  # two position tables: unsure
        ([TensorInfo("a", (10,), "f4"), TensorInfo("b", (16, 4), "f4")], "b"),
        ([TensorInfo("a", (12, 4), "f4"), TensorInfo("b", (16, 4), "f4")], None),
        ([TensorInfo("pos_embed", (1, 768), "F32")], None),
        ([], None),
    ],
    ids=["gpt2", "vit", "opt", "bert", "bart", "only-2d", "two-2d", "unusable", "empty"],
)
def test_detect_position_tensor(infos: list[TensorInfo], expected: str | None) -> None:
    assert detect_position_tensor(infos) == expected


@pytest.mark.parametrize(
    ("name", "shape", "row_start", "grid", "words"),
    [
        ("pos_embed", (1, 197, 768), 1, (14, 14), "1 class token + 14x14 patch grid"),
        ("pos_embed", (1, 198, 768), 2, (14, 14), "distillation tokens + 14x14"),
        ("pos_embed", (1, 196, 768), 0, (14, 14), "14x14 patch grid, no class token"),
        ("vision_model.embeddings.position_embedding.weight", (257, 1024), 1, (16, 16), "16x16"),
        ("pos_embed", (1, 200, 768), 0, None, ""),
        ("roberta.embeddings.position_embeddings.weight", (514, 768), 2, None, "512 positions"),
        ("model.decoder.embed_positions.weight", (2050, 768), 2, None, "2 reserved rows"),
        ("model.encoder.embed_positions.weight", (1602, 768), 2, None, "1600 positions"),
        ("model.encoder.embed_positions.weight", (1002, 768), 0, None, ""),
        ("transformer.wpe.weight", (1024, 768), 0, None, ""),
        ("table", (66, 8), 2, None, "64 positions"),
        ("table", (34, 8), 0, None, ""),
        ("wpe", (1024,), 0, None, ""),
    ],
)
def test_suggest_trim(
    name: str, shape: tuple[int, ...], row_start: int, grid: tuple[int, int] | None, words: str
) -> None:
    trim = suggest_trim(name, shape)
    assert (trim.row_start, trim.grid) == (row_start, grid)
    assert words in trim.reason
    assert bool(trim.reason) == (row_start > 0 or grid is not None)


def test_zero_leading_rows_roberta_style():
    table = np.random.default_rng(0).standard_normal((10, 4))
    assert detect.zero_leading_rows(table) == 0
    table[1] = 0.0  # padding_idx 1: rows 0 and 1 are reserved
    assert detect.zero_leading_rows(table) == 2


def test_reserved_rows_by_name_and_by_a_zero_row():
    rows = np.random.default_rng(0).standard_normal((66, 8))
    plain = Embedding.from_array(rows[:60], name="wpe", source="s")
    nothing = detect.reserved_rows(plain)
    assert (nothing.rows, nothing.reasons, nothing.most) == (0, (), 60 - MIN_POSITIONS)
    # RoBERTa: 2 + 64 rows by name, and padding row 1 all zeros; either rule finds rows 0-1.
    padded = rows.copy()
    padded[1] = 0.0
    roberta = Embedding.from_array(padded, name="embed_positions.weight", source="s")
    found = detect.reserved_rows(roberta)
    assert found.rows == 2
    assert found.reasons == (
        "RoBERTa/BART/OPT-style table: 2 reserved rows + 64 positions",
        "row 1 is all zeros (an untrained padding row)",
    )
    trimmed = found.trim(roberta, 2)
    np.testing.assert_array_equal(trimmed.values, padded[2:])
    np.testing.assert_array_equal(trimmed.prefix, padded[:2])
    assert trimmed.row_start == 2
    # A trimmed table is not judged by its name again; its rows are.
    assert detect.reserved_rows(trimmed).rows == 0


def test_trimming_keeps_the_names_grid_only_for_the_rows_it_names():
    vit = Embedding.from_array(
        np.random.default_rng(1).standard_normal((17, 8)), name="vit.pos_embed", source="s"
    )
    found = detect.reserved_rows(vit)
    assert (found.rows, found.by_name.grid) == (1, (4, 4))
    assert found.trim(vit, 1).grid == (4, 4)
    assert found.trim(vit, 2).grid is None
    twice = detect.trim_leading(detect.trim_leading(vit, 1), 2)
    assert (twice.row_start, twice.shape) == (3, (14, 8))
    assert twice.describe_rows() == "rows 3-16 of 17 (3 leading rows trimmed)"
