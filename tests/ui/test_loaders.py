"""posviz.ui.loaders, the table loader's parts (the Data page drawing them: tests/app/): an
upload listed from its header, or refused with the precise reason; what a GGUF's metadata says
of its table; a shared folder's sharded checkpoints offered as their index."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from posviz.embedding import LoadError
from posviz.ui import loaders
from tests import ROOT, ggufs

TABLE = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_an_upload_is_listed_from_its_header():
    infos, reason = loaders._list_upload(npy(TABLE), "wpe.npy")
    assert [(i.name, i.shape, i.dtype) for i in infos] == [("table", (64, 8), "float32")]
    assert reason == ""


def test_an_upload_without_a_table_is_refused_with_the_precise_reason():
    with pytest.raises(LoadError, match=r"^v\.npy.*1-D"):
        loaders._list_upload(npy(np.arange(100.0)), "v.npy")


def test_a_rotary_ggufs_metadata_says_it_has_no_learned_table(tmp_path):
    data = ggufs.llama31(tmp_path / "llama.gguf").read_bytes()
    _, reason = loaders._list_upload(data, "llama.gguf")
    assert reason.startswith("llama.gguf has no learned absolute position table")
    assert "rotary" in reason
    learned = ggufs.learned(tmp_path / "gpt2.gguf", TABLE).read_bytes()
    assert loaders._list_upload(learned, "gpt2.gguf")[1] == ""


def test_a_ggufs_refused_metadata_leaves_its_tensors_to_pick():
    path = ROOT / "tests/data/hostile/gguf/head_count_1e9.gguf"
    reason = loaders._gguf_reason(path, "h.gguf")
    assert reason.startswith("Its position metadata is refused (")
    assert reason.endswith("); its tensors can still be loaded.")


def checkpoint(folder: Path, **shards: dict[str, np.ndarray]) -> None:
    """A model folder as save_pretrained leaves it: config.json and its weights (one file, or
    shards and their index)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    for name, tensors in shards.items():
        save_file(tensors, folder / name)
    if len(shards) > 1:
        weight_map = {t: name for name, tensors in shards.items() for t in tensors}
        index = {"weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))


def test_a_sharded_checkpoint_is_offered_as_its_index_in_place_of_its_shards(tmp_path):
    checkpoint(tmp_path / "single", **{"model.safetensors": {"wpe": TABLE}})
    shards = {
        "model-00001-of-00002.safetensors": {"wte": TABLE},
        "model-00002-of-00002.safetensors": {"wpe": TABLE},
    }
    checkpoint(tmp_path / "run" / "sharded", **shards)
    (tmp_path / "loose").mkdir()
    np.save(tmp_path / "loose" / "t.npy", TABLE)
    files = [
        "loose/t.npy",
        "run/sharded/model-00001-of-00002.safetensors",
        "run/sharded/model-00002-of-00002.safetensors",
        "single/model.safetensors",
    ]
    assert loaders._sharded(tmp_path, files) == [
        "loose/t.npy",
        "run/sharded/model.safetensors.index.json",
        "single/model.safetensors",
    ]


@pytest.mark.parametrize(
    ("nbytes", "said"),
    [(0, "0.0 kB"), (99_999, "100.0 kB"), (10**5, "0.10 MB"), (10**10, "10000.00 MB")],
)
def test_sizes_as_the_loader_says_them(nbytes, said):
    assert loaders._size(nbytes) == said
