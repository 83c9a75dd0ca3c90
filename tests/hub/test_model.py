"""posviz.hub.model: a model at one commit, from its files' heads alone, locates each tensor's
bytes where the whole file holds them and lists what a local read of the file lists; a config
read alone says where to read it again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

from posviz import io
from posviz.hub.model import ConfigFile, HubModel
from tests import ggufs
from tests.hub.repos import WPE, WTE, header_bytes

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def model_of(files: dict[str, bytes], **fields: object) -> HubModel:
    """The HubModel of a repo holding `files` (safetensors), each known by its head alone."""
    heads = {name: (len(data), data[: header_bytes(data)]) for name, data in files.items()}
    tensors = {name: file for file, data in files.items() for name in _names(data)}
    return HubModel("acme/m", "main", COMMIT, {}, heads, tensors, **fields)


def _names(data: bytes) -> list[str]:
    return [info.name for info in io.list_tensors(data, "x.safetensors")]


def test_each_tensors_span_is_where_the_whole_file_holds_its_bytes():
    data = save({"wte": WTE, "wpe": WPE})
    model = model_of({"model.safetensors": data})
    for name, table in {"wte": WTE, "wpe": WPE}.items():
        begin, end = model.span(name)
        assert data[begin:end] == table.tobytes()
        assert model.entry(name)["shape"] == list(table.shape)
    assert model.file_size("wpe") == len(data)


def test_the_tensors_listed_are_those_a_local_read_lists(tmp_path: Path):
    data = save({"wte": WTE, "wpe": WPE.astype(np.float16)})
    (tmp_path / "model.safetensors").write_bytes(data)
    model = model_of({"model.safetensors": data})
    local = io.list_tensors(tmp_path / "model.safetensors")
    assert {i.name: i for i in model.infos} == {i.name: i for i in local}
    assert {i.dtype for i in local} == {"F32", "F16"}


def test_a_sharded_model_reads_each_tensor_from_its_own_shard():
    first, second = save({"wte": WTE}), save({"wpe": WPE})
    model = model_of({"a.safetensors": first, "b.safetensors": second})
    assert model.tensors == {"wte": "a.safetensors", "wpe": "b.safetensors"}
    begin, end = model.span("wpe")
    assert second[begin:end] == WPE.tobytes()
    assert model.file_size("wpe") == len(second)
    assert model.source("wpe") == f"hf:acme/m@main · commit {COMMIT} · b.safetensors"


def test_the_model_is_named_as_the_user_named_it_and_cited_at_its_commit():
    model = model_of({"model.safetensors": save({"wpe": WPE})})
    assert (model.label, str(model.ref)) == ("hf:acme/m@main", "hf:acme/m@main")
    assert model.source("wpe") == f"hf:acme/m@main · commit {COMMIT} · model.safetensors"


def test_a_configured_model_keeps_its_parsed_heads_and_leaves_the_original_alone():
    model = model_of({"model.safetensors": save({"wpe": WPE})})
    parsed = model._parsed
    configured = model.configured({"model_type": "gpt2"})
    assert configured.config == {"model_type": "gpt2"}
    assert model.config == {}
    assert configured._parsed is parsed  # not parsed again
    assert configured.span("wpe") == model.span("wpe")


def test_a_gguf_files_tensors_are_located_past_its_aligned_header(tmp_path: Path):
    data = ggufs.learned(tmp_path / "m.gguf", WPE).read_bytes()
    header = io.read_gguf_header(lambda begin, end: data[begin:end], len(data), "m")[0]
    heads = {"m.gguf": (len(data), data[: header.nbytes])}
    tensors = {"position_embd.weight": "m.gguf", "token_embd.weight": "m.gguf"}
    model = HubModel("acme/m-GGUF", "main", COMMIT, {}, heads, tensors, file="m.gguf")
    begin, end = model.span("position_embd.weight")
    np.testing.assert_array_equal(np.frombuffer(data[begin:end], np.float32).reshape(64, 16), WPE)
    assert model.gguf_header.data_start == header.data_start
    assert model.label == "hf:acme/m-GGUF@main:m.gguf"


def test_a_config_file_says_where_it_is_read_again():
    config = ConfigFile("acme/m", "main", COMMIT, {}, ("config.json",), 20)
    assert config.gguf is None
    assert config.at_commit == f"hf:acme/m@{COMMIT}"
    assert config.source == f"hf:acme/m@main · commit {COMMIT} · config.json"
    gguf = ConfigFile("acme/m-GGUF", "v1", COMMIT, {}, (), 900, file="m-Q8_0.GGUF")
    assert gguf.gguf == "m-Q8_0.GGUF"
    assert gguf.at_commit == f"hf:acme/m-GGUF@{COMMIT}:m-Q8_0.GGUF"
    assert gguf.source == f"hf:acme/m-GGUF@v1 · commit {COMMIT} · m-Q8_0.GGUF"


def test_a_tensor_the_model_lacks_is_a_key_error():
    with pytest.raises(KeyError):
        model_of({"model.safetensors": save({"wpe": WPE})}).span("wte")
