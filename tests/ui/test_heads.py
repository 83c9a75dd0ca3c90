"""posviz.ui.heads, the Heads page's model (the page itself: tests/app/test_heads.py): sizes as
the page says them, where a shown model comes from, the layers the depth view reads unless
told, and a numbers table with each null as one row under its layer's heads."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from posviz import depth
from posviz.ui import heads


@pytest.mark.parametrize(
    ("nbytes", "said"),
    [
        (0, "0.0 kB"),
        (99_999, "100.0 kB"),
        (100_000, "0.10 MB"),
        (123_456_789, "123.46 MB"),
        (999_999_999, "1,000.00 MB"),
        (10**9, "1.00 GB"),
        (1_234_567_890_123, "1,234.57 GB"),
    ],
)
def test_sizes_as_the_page_says_them(nbytes, said):
    assert heads.size(nbytes) == said


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("example:planted-gpt2", "Example"),
        ("upload:model.safetensors", "Upload"),
        ("shared:runs/gpt2/model.safetensors", "Shared folder"),
        ("hf:openai-community/gpt2@0123456789abcdef0123456789abcdef01234567", "Hub model"),
    ],
)
def test_a_shown_model_says_where_it_comes_from(text, kind):
    assert heads.Shown(text, model=None).kind == kind


def test_the_depth_view_reads_every_layer_a_config_counts_else_layer_0():
    counted = SimpleNamespace(config={"model_type": "gpt2", "n_layer": 12})
    assert heads.default_layers(counted) == depth.ALL
    nested = SimpleNamespace(config={"text_config": {"num_hidden_layers": 4}})
    assert heads.default_layers(nested) == depth.ALL
    assert heads.default_layers(SimpleNamespace(config={"model_type": "gpt2"})) == "0"


def frame(kv_head: list[int], layers: list[int] | None = None) -> pd.DataFrame:
    n = len(kv_head)
    columns = {
        "head": list(range(n)),
        "kv_head": kv_head,
        "label": ["previous-token"] + [""] * (n - 1),
    }
    columns |= {"previous": [0.9, *[0.1] * (n - 1)], "previous_null_max": [0.2] * n}
    table = pd.DataFrame(columns)
    return table.assign(layer=layers) if layers is not None else table


def test_a_layers_null_is_one_row_under_its_heads():
    shown = heads.beside_null(frame([0, 1, 2]))
    assert list(shown.columns) == ["head", "label", "previous"]  # kv_head: each head its own
    assert shown["label"].tolist() == ["previous-token", "", "", heads.NULL_ROW]
    assert shown["previous"].tolist() == [0.9, 0.1, 0.1, 0.2]
    assert shown["head"].isna().tolist() == [False, False, False, True]
    assert str(shown["head"].dtype) == "Int64"  # whole numbers, a blank in the null's row


def test_heads_sharing_a_key_head_keep_it_and_each_layer_gets_its_own_null():
    both = pd.concat([frame([0, 0], [0, 0]), frame([0, 0], [1, 1]).assign(previous_null_max=0.5)])
    shown = heads.beside_null(both, by="layer")
    assert "kv_head" in shown  # heads share a key head: said
    assert shown["label"].tolist() == ["previous-token", "", heads.NULL_ROW] * 2
    assert shown.loc[shown["label"] == heads.NULL_ROW, "layer"].tolist() == [0, 1]
    assert shown.loc[shown["label"] == heads.NULL_ROW, "previous"].tolist() == [0.2, 0.5]


def test_a_table_without_nulls_is_shown_as_it_is():
    plain = frame([0, 1]).drop(columns="previous_null_max")
    assert heads.beside_null(plain) is plain
