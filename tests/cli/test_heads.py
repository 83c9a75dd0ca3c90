"""`posviz heads SOURCE --json`: its keys, the bytes it fetches from a (fake) Hub, its
refusals before any weight travels, and `posviz rerun` of its output."""

from __future__ import annotations

import json
import shutil
import struct
from hashlib import sha256

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from posviz import pipeline
from posviz.cli import main
from posviz.records import HEADS_POSITIONS
from tests import ROOT
from tests.refusals import refused

DATA = ROOT / "tests" / "data" / "heads"


def run_json(capsys, *argv: str) -> dict:
    assert main(["heads", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def serve(fake_hub, family: str, repo: str | None = None, **faults):
    folder = DATA / family
    files = {"config.json": (folder / "config.json").read_bytes()}
    files["model.safetensors"] = folder / "model.safetensors"
    return fake_hub.add(repo or f"test/{family}", files, **faults)


def header_bytes(path) -> int:
    with open(path, "rb") as file:
        return 8 + struct.unpack("<Q", file.read(8))[0]


def test_learned_json_has_every_key_the_issue_names(capsys):
    record = run_json(capsys, str(DATA / "gpt2" / "model.safetensors"))
    for key in ("analysis", "params", "provenance", "scheme", "layer", "n_heads", "n_kv_heads",
                "head_dim", "bytes_fetched", "heads", "null"):  # fmt: skip
        assert key in record
    # The header every export has: the registered step that made the numbers, its params.
    assert record["analysis"] == "learned_heads"
    assert pipeline.STEPS["learned_heads"].takes == "layer"
    assert record["params"] == {"n_positions": None, "local_window": 8, "n_draws": 8, "seed": 0}
    assert record["provenance"]["config"].endswith("gpt2/config.json")
    assert record["provenance"]["weights"].endswith("gpt2/model.safetensors")
    assert record["provenance"]["layer"] == 0
    assert record["scheme"] == "learned_absolute"
    assert (record["n_heads"], record["n_kv_heads"], record["head_dim"]) == (4, 4, 8)
    tensors = record["provenance"]["tensors"]
    assert {t["name"] for t in tensors} >= {
        "transformer.h.0.attn.c_attn.weight",
        "transformer.wpe.weight",
    }
    assert all(len(t["sha256"]) == 64 for t in tensors)
    head = record["heads"][0]
    assert {"head", "kv_head", "label", "attention_previous", "kernel", "offset_profile"} <= set(
        head
    )
    n = min(HEADS_POSITIONS, 32)  # the fixture's table has 32 positions
    assert np.asarray(head["kernel"]).shape == (n, n)
    assert len(head["offset_profile"]) == n
    assert record["null"]["draws"] == 8
    assert set(record["null"]["spread"]) == set(record["definitions"])


#: The keys issue 34 lists for `posviz heads SOURCE --json`, and those of each head.
ISSUE_KEYS = ("analysis", "params", "provenance", "scheme", "layer", "n_heads", "n_kv_heads",
              "head_dim", "bytes_fetched", "heads", "null")  # fmt: skip
HEAD_KEYS = {
    "learned_absolute": {"head", "kv_head", "label", "kernel", "offset_profile"},
    "rotary": {"head", "kv_head", "label", "usage", "usage_share", "usage_folded"},
}


def test_a_hub_gpt2_and_a_local_llama_print_the_keys_the_issue_lists(capsys, fake_hub):
    serve(fake_hub, "gpt2", repo="test/gpt2-keys")
    hub = run_json(capsys, "hf:test/gpt2-keys")
    local = run_json(capsys, str(DATA / "llama" / "model.safetensors"))
    assert (hub["analysis"], local["analysis"]) == ("learned_heads", "rotary_heads")
    assert hub["bytes_fetched"] > 0
    assert local["bytes_fetched"] == 0
    assert "rotary_dim" in local
    for record in (hub, local):
        assert set(ISSUE_KEYS) <= set(record)
        assert all(len(t["sha256"]) == 64 for t in record["provenance"]["tensors"])
        for head in record["heads"]:
            assert HEAD_KEYS[record["scheme"]] | set(record["definitions"]) <= set(head)
        assert set(record["null"]) >= {"draws", "spread"}


def test_rotary_json_has_usage_by_pair(capsys):
    record = run_json(capsys, str(DATA / "phi3" / "model.safetensors"), "--positions", "8")
    assert record["scheme"] == "rotary"
    assert record["rotary_dim"] == 4  # partial_rotary_factor 0.5 of head_dim 8
    head = record["heads"][3]
    assert head["kv_head"] == 1
    assert len(head["usage"]) == len(head["usage_share"]) == len(head["usage_folded"]) == 2
    assert sum(head["usage_share"]) == pytest.approx(1)
    assert head["label"] is None


def test_a_hub_model_fetches_only_its_query_and_key_rows(capsys, fake_hub):
    serve(fake_hub, "phi3")
    assert main(["heads", "hf:test/phi3", "--json"]) == 0
    printed = capsys.readouterr()
    record = json.loads(printed.out)
    assert f"{(6 * 8 * 32 + 32) * 4:,} to fetch" in printed.err  # said before fetching
    weights = fake_hub.requests_for("model.safetensors")
    ranges = [s for s in weights if s.nbytes > 16]
    header = header_bytes(DATA / "phi3" / "model.safetensors")
    planned = record["bytes_fetched"]
    # qkv rows of q and k only: (4 + 2) x 8 rows of 32 float32; the input norm's 32.
    assert planned == (6 * 8 * 32 + 32) * 4
    assert sum(s.nbytes for s in weights) == 8 + (header - 8) + planned
    assert len(ranges) == 3  # the header, qkv's q/k rows, the norm
    assert record["analysis"] == "rotary_heads"
    assert record["provenance"]["config"].startswith("hf:test/phi3@")
    # A second time, nothing but the revision's answer travels: the rows are cached.
    fake_hub.log.clear()
    again = run_json(capsys, "hf:test/phi3")
    assert again["bytes_fetched"] == 0
    assert fake_hub.requests_for("model.safetensors") == []


def test_an_unknown_architecture_is_refused_before_any_weight(capsys, fake_hub, tmp_path):
    config = json.loads((DATA / "llama" / "config.json").read_text())
    config["model_type"] = "newfangled"
    files = {"config.json": json.dumps(config).encode(),
             "model.safetensors": DATA / "llama" / "model.safetensors"}  # fmt: skip
    fake_hub.add("test/new", files)
    assert main(["heads", "hf:test/new"]) == 2
    assert "not an architecture posviz reads" in capsys.readouterr().err
    header = header_bytes(DATA / "llama" / "model.safetensors")
    assert sum(s.nbytes for s in fake_hub.requests_for("model.safetensors")) == header


def test_rerun_recomputes_every_number(capsys, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(DATA / "bert", folder)
    out = tmp_path / "heads.json"
    out.write_text(
        json.dumps(run_json(capsys, str(folder / "model.safetensors"), "--positions", "6"))
    )
    assert main(["rerun", str(out)]) == 0
    assert " 0 differ" not in capsys.readouterr().out
    # Other weights under the same name: refused, naming the tensor.
    tensors = load_file(folder / "model.safetensors")
    name = "bert.encoder.layer.0.attention.self.query.weight"
    tensors[name] = tensors[name] * 2
    save_file(tensors, str(folder / "model.safetensors"))
    assert main(["rerun", str(out)]) == 2
    assert "not the one exported" in capsys.readouterr().err


def test_rerun_of_a_hub_model(capsys, fake_hub, tmp_path):
    serve(fake_hub, "gpt_neox")
    out = tmp_path / "heads.json"
    out.write_text(json.dumps(run_json(capsys, "hf:test/gpt_neox")))
    assert main(["rerun", str(out)]) == 0
    assert "numbers recomputed exactly" in capsys.readouterr().out


def test_layers_without_heads_say_so(capsys, tmp_path):
    assert main(["heads", str(DATA / "gpt2" / "config.json")]) == 2
    assert "give the weights beside it" in capsys.readouterr().err
    assert main(["heads", str(DATA / "gpt2" / "model.safetensors"), "--layer", "7"]) == 2
    assert "there is no layer 7" in capsys.readouterr().err


def test_a_report_of_a_table_that_came_with_its_model_has_its_heads(capsys, fake_hub, tmp_path):
    serve(fake_hub, "gpt2", repo="test/gpt2-report")
    out = tmp_path / "report.html"
    assert main(["report", "hf:test/gpt2-report", "-o", str(out)]) == 0
    page = out.read_text()
    assert "<h2>Heads</h2>" in page
    assert "(GPT-2, learned), from their weights alone" in page
    capsys.readouterr()
    assert main(["rerun", str(out)]) == 0
    assert "heads attention_previous[0]: exported" in capsys.readouterr().out


def test_a_report_reads_the_heads_of_the_model_its_table_came_from(capsys, tmp_path, monkeypatch):
    # Issue 45: the report looked for "model.safetensors" in the folder it ran in. Run from
    # GPT-2's folder, BERT's report carried GPT-2's layer-0 heads under BERT's name; given an
    # absolute path it had no Heads section at all.
    for family in ("bert", "gpt2"):
        shutil.copytree(DATA / family, tmp_path / family)
    monkeypatch.chdir(tmp_path / "gpt2")
    config_bytes = (tmp_path / "bert" / "config.json").read_bytes()
    out = tmp_path / "report.html"
    for given in (str(tmp_path / "bert" / "model.safetensors"), "../bert/model.safetensors"):
        assert main(["report", given, "-o", str(out)]) == 0, capsys.readouterr().err
        page = out.read_text()
        assert "<h2>Heads</h2>" in page
        assert "(BERT, learned), from their weights alone" in page
        assert "(GPT-2, learned)" not in page
        data = json.loads(page.split('id="posviz-data" type="application/json">')[1].split("<")[0])
        heads = next(a for a in data["analyses"] if a["caption"] == "Heads, layer 0")
        # Its config.json is BERT's, named as the table names its file (by its name alone: a
        # report from the app names no server path): rerun reads it from the table's file.
        assert heads["provenance"]["config"] == "config.json"
        assert heads["provenance"]["sha256"] == sha256(config_bytes).hexdigest()
        assert main(["rerun", str(out), "--table", given]) == 0, capsys.readouterr().err


def test_a_sharded_hub_model_is_read_through_its_index(capsys, fake_hub, tmp_path):
    tensors = load_file(DATA / "mistral" / "model.safetensors")
    layer = {k: v for k, v in tensors.items() if ".layers.0." in k}
    rest = {k: v for k, v in tensors.items() if k not in layer}
    files = {"config.json": (DATA / "mistral" / "config.json").read_bytes()}
    weight_map = {}
    for name, part in (("model-00001-of-00002.safetensors", rest),
                       ("model-00002-of-00002.safetensors", layer)):  # fmt: skip
        save_file(part, str(tmp_path / name))
        files[name] = tmp_path / name
        weight_map |= dict.fromkeys(part, name)
    files["model.safetensors.index.json"] = json.dumps({"weight_map": weight_map}).encode()
    fake_hub.add("test/sharded", files)
    sharded = run_json(capsys, "hf:test/sharded")
    whole = run_json(capsys, str(DATA / "mistral" / "model.safetensors"))
    assert [h["usage"] for h in sharded["heads"]] == [h["usage"] for h in whole["heads"]]
    first = fake_hub.requests_for("model-00001-of-00002.safetensors")
    assert sum(s.nbytes for s in first) == header_bytes(
        tmp_path / "model-00001-of-00002.safetensors"
    )


def shard(family: str, folder) -> dict[str, str]:
    """`family`'s fixture saved as save_pretrained shards a checkpoint: layer 0's tensors in a
    second shard, the rest in the first, model.safetensors.index.json and config.json beside;
    returns the weight map."""
    folder.mkdir(parents=True)
    tensors = load_file(DATA / family / "model.safetensors")
    layer = {k: v for k, v in tensors.items() if ".layers.0." in k or ".h.0." in k}
    rest = {k: v for k, v in tensors.items() if k not in layer}
    parts = {"model-00001-of-00002.safetensors": rest, "model-00002-of-00002.safetensors": layer}
    weight_map = {}
    for name, part in parts.items():
        save_file(part, str(folder / name))
        weight_map |= dict.fromkeys(part, name)
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    shutil.copy(DATA / family / "config.json", folder / "config.json")
    return weight_map


def test_a_sharded_local_checkpoint_is_read_through_its_index(capsys, tmp_path):
    shard("mistral", tmp_path / "model")
    whole = run_json(capsys, str(DATA / "mistral" / "model.safetensors"))
    by_folder = run_json(capsys, str(tmp_path / "model"))
    index = tmp_path / "model" / "model.safetensors.index.json"
    by_index = run_json(capsys, str(index))
    for record in (by_folder, by_index):
        assert [h["usage"] for h in record["heads"]] == [h["usage"] for h in whole["heads"]]
        # Named by the index the folder holds, so rerun finds it again.
        assert record["provenance"]["weights"] == str(index)
        assert record["provenance"]["config"] == str(tmp_path / "model" / "config.json")
    assert {t["sha256"] for t in by_index["provenance"]["tensors"]} == {
        t["sha256"] for t in whole["provenance"]["tensors"]
    }
    out = tmp_path / "heads.json"
    out.write_text(json.dumps(by_folder))
    assert main(["rerun", str(out)]) == 0
    assert "numbers recomputed exactly" in capsys.readouterr().out
    # Another layer 0 in the shard: refused, naming the tensor.
    second = tmp_path / "model" / "model-00002-of-00002.safetensors"
    tensors = load_file(second)
    name = next(k for k in tensors if k.endswith("q_proj.weight"))
    tensors[name] = tensors[name] * 2
    save_file(tensors, str(second))
    assert main(["rerun", str(out)]) == 2
    assert f"its tensor '{name}' has sha256" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("weight_map", "says"),
    [
        ({"a": "../model.safetensors"}, "plain file names"),
        ({"a": "model.bin"}, "plain file names"),
        ({"a": "missing.safetensors"}, "lists missing.safetensors, which is not a file beside it"),
        ({}, "plain file names"),
        ([1, 2], "plain file names"),
    ],
)
def test_a_shard_index_that_is_not_one_is_refused(capsys, tmp_path, weight_map, says):
    shard("mistral", tmp_path / "model")
    index = tmp_path / "model" / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    line = refused(capsys, "heads", str(tmp_path / "model"))
    assert says in line


def test_a_folder_without_weights_is_refused(capsys, tmp_path):
    shutil.copy(DATA / "llama" / "config.json", tmp_path / "config.json")
    line = refused(capsys, "heads", str(tmp_path))
    assert "holds no model.safetensors and no single shard index" in line


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--layer", "-1"], "layer is -1; it must be a whole number from 0 to"),
        (["--draws", "100000"], "n_draws is 100000; it must be a whole number from 0 to 1,000"),
        (["--seed", "-3"], "seed is -3"),
        (["--positions", "0"], "--positions is 0; it must be a whole number from 1 to 2,048"),
        (["--context", "100"], "--context is a rotary rule's setting; layer 0 is learned"),
        (["--context", str(10**12)], "context is 1000000000000; it must be a whole number"),
    ],
)
def test_settings_out_of_their_bounds_are_refused_before_reading(capsys, argv, says):
    model = "llama" if "--context" in argv and argv[-1] != "100" else "gpt2"
    line = refused(capsys, "heads", str(DATA / model / "model.safetensors"), *argv)
    assert says in line
