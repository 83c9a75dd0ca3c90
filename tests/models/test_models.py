"""The one loader: every kind of source opened by `posviz.models.load` (what `posviz.load`, the
pages, the CLI and rerun call), read as its model says, the table keeping its source; and the
model a table was read from, found again from that source wherever the caller runs."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import posviz
from posviz import models, simulate
from posviz.models import remote
from posviz.source import (
    Cut,
    HubRef,
    LoadError,
    LocalPath,
    Preset,
    SharedFile,
    Simulation,
    Upload,
    parse_source,
)
from tests import ROOT

DATA = ROOT / "tests" / "data" / "heads"
WPE = "transformer.wpe.weight"


def test_a_model_folder_reads_as_its_weights_file(tmp_path):
    shutil.copytree(DATA / "gpt2", tmp_path / "gpt2")
    by_file = models.load(LocalPath(str(tmp_path / "gpt2" / "model.safetensors")))
    by_folder = models.load(LocalPath(str(tmp_path / "gpt2")))
    assert (by_folder.name, by_folder.sha256) == (WPE, by_file.sha256)
    assert by_folder.provenance() | {"posviz_version": ""} == by_file.provenance() | {
        "posviz_version": ""
    }
    assert by_folder.origin == LocalPath(str(tmp_path / "gpt2"))


def test_a_sharded_checkpoint_reads_its_table_from_the_shard_that_holds_it(tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    tensors = load_file(DATA / "gpt2" / "model.safetensors")
    parts = {
        "model-00001-of-00002.safetensors": {k: v for k, v in tensors.items() if k != WPE},
        "model-00002-of-00002.safetensors": {WPE: tensors[WPE]},
    }
    weight_map = {}
    for name, part in parts.items():
        save_file(part, str(folder / name))
        weight_map |= dict.fromkeys(part, name)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    shutil.copy(DATA / "gpt2" / "config.json", folder / "config.json")
    table = models.load(str(folder), Cut(row_start=2))
    np.testing.assert_array_equal(table.values, tensors[WPE][2:])
    assert table.source == "model-00002-of-00002.safetensors"  # the shard, by its name
    assert models.model_of(table).shards  # its heads: the whole sharded checkpoint


def test_an_upload_keeps_its_name_not_its_bytes(tmp_path):
    data = (DATA / "gpt2" / "model.safetensors").read_bytes()
    table = models.load(Upload("model.safetensors", data), Cut(WPE))
    assert table.origin == Upload("model.safetensors")
    assert table.origin.data is None
    assert models.model_of(table) is None  # no config.json travels with an upload
    with pytest.raises(LoadError, match="the upload's bytes are gone"):
        models.load(table.origin)


def test_a_shared_file_is_read_inside_the_folder_with_its_config(tmp_path, monkeypatch):
    with pytest.raises(LoadError, match="this server has no shared folder"):
        models.load(SharedFile("gpt2/model.safetensors"))
    shutil.copytree(DATA / "gpt2", tmp_path / "gpt2")
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    table = models.load(parse_source("shared:gpt2/model.safetensors"), Cut(WPE, 1))
    assert (table.source, table.row_start, table.origin) == (
        "gpt2/model.safetensors",
        1,
        SharedFile("gpt2/model.safetensors"),
    )
    model = models.model_of(table)
    assert model.label == "gpt2/model.safetensors"  # never the server's own path
    with pytest.raises(LoadError, match="not a path inside the shared folder"):
        models.load(SharedFile("../gpt2/model.safetensors"))


def test_a_simulation_is_made_again_and_cut():
    made = simulate.learned_like(64, 16, seed=3)
    again = posviz.load("sim:learned_like?n_positions=64&d_model=16&seed=3")
    assert again.sha256 == made.sha256
    assert again.origin == Simulation(
        "learned_like", (("n_positions", 64), ("d_model", 16), ("seed", 3))
    )
    cut = posviz.load(str(again.origin), row_start=2)
    np.testing.assert_array_equal(cut.values, made.values[2:])
    assert cut.origin == again.origin
    with pytest.raises(LoadError, match="posviz simulates"):
        posviz.load("sim:nothing")
    with pytest.raises(ValueError, match="n_positions"):
        posviz.load("sim:gaussian?n_positions=5")


def test_a_known_model_gives_its_rotary_table_or_says_where_its_scheme_is():
    table = posviz.load("preset:EleutherAI/gpt-j-6b")
    assert table.shape[1] == 64
    assert table.origin == Preset("EleutherAI/gpt-j-6b")
    with pytest.raises(LoadError, match="posviz summary preset:bigscience/bloom"):
        posviz.load("preset:bigscience/bloom")


def test_a_hub_table_keeps_its_model_at_the_commit_read(fake_hub):
    fake_hub.add(
        "test/gpt2",
        {
            "config.json": (DATA / "gpt2" / "config.json").read_bytes(),
            "model.safetensors": DATA / "gpt2" / "model.safetensors",
        },
    )
    table = posviz.load("hf:test/gpt2")
    commit = table.provenance()["commit"]
    assert table.origin == HubRef("test/gpt2", commit)
    assert posviz.load(str(table.origin)).sha256 == table.sha256
    assert models.model_of(table) == remote.open_config(HubRef("test/gpt2", commit))


def test_a_shipped_model_is_read_and_named_as_its_files_are(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # found in the package wherever posviz runs
    table = posviz.load("example:planted-gpt2")
    assert (table.name, table.source) == (WPE, "example:planted-gpt2/model.safetensors")
    assert table.origin == parse_source("example:planted-gpt2")
    assert models.model_of(table).label == "example:planted-gpt2/model.safetensors"
    with pytest.raises(LoadError, match="not a model shipped with posviz"):
        posviz.load("example:nothing")
