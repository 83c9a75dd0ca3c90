"""posviz.hub against a fake Hub on 127.0.0.1: the same numbers as a local file, only the needed
bytes on the wire, and a clear message for every fault of a repo's content (the disk cache:
test_cache.py; HTTP's faults: test_client.py)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save, save_file

import posviz
from posviz import io, models
from posviz.cli import main
from posviz.embedding import LoadError
from posviz.source import Cut
from tests import ROOT
from tests.fakehub import FakeHub
from tests.hub.repos import CONFIG, GPT2, OVERHEAD, RNG, WPE, WTE, gpt2_repo, header_bytes


def test_numbers_equal_the_same_tensor_from_a_local_file(fake_hub, tmp_path):
    gpt2_repo(fake_hub)
    save_file(GPT2, tmp_path / "model.safetensors")
    local = io.load(tmp_path / "model.safetensors", None, Cut(row_start=1))
    remote = posviz.load("hf:acme/gpt2", row_start=1)
    assert remote.name == "transformer.wpe.weight"
    np.testing.assert_array_equal(remote.values, local.values)
    assert remote.sha256 == local.sha256
    assert remote.row_start == 1
    assert remote.dtype == "float32"


def test_only_header_config_and_tensor_travel(fake_hub):
    weights = gpt2_repo(fake_hub)
    posviz.load("hf:acme/gpt2")
    budget = header_bytes(weights) + len(CONFIG) + WPE.nbytes + OVERHEAD
    assert fake_hub.bytes_sent() <= budget
    assert fake_hub.bytes_sent() < len(weights) / 2  # wte, twice wpe's size, never travelled
    tensor_reads = [s for s in fake_hub.requests_for("model.safetensors") if s.nbytes > 1000]
    assert [s.nbytes for s in tensor_reads] == [WPE.nbytes]


def test_the_source_names_repo_revision_commit_and_file(fake_hub):
    repo = fake_hub.add("acme/gpt2", {"model.safetensors": save(GPT2)})
    table = posviz.load("hf://acme/gpt2@main")
    assert table.source == f"hf:acme/gpt2@main · commit {repo.commit} · model.safetensors"


def test_sharded_repo_reads_the_shard_holding_the_table(fake_hub, tmp_path):
    first, second = save({"transformer.wte.weight": WTE}), save({"transformer.wpe.weight": WPE})
    index = {
        "weight_map": {
            "transformer.wte.weight": "model-00001-of-00002.safetensors",
            "transformer.wpe.weight": "model-00002-of-00002.safetensors",
        }
    }
    fake_hub.add(
        "acme/sharded",
        {
            "config.json": CONFIG,
            "model.safetensors.index.json": json.dumps(index).encode(),
            "model-00001-of-00002.safetensors": first,
            "model-00002-of-00002.safetensors": second,
        },
    )
    table = posviz.load("hf:acme/sharded")
    np.testing.assert_array_equal(table.values, WPE)
    assert table.source.endswith("model-00002-of-00002.safetensors")
    big_reads = [s for s in fake_hub.log if s.nbytes > 1000]
    assert [s.nbytes for s in big_reads] == [WPE.nbytes]


def test_a_revision_branch_and_a_repo_without_namespace(fake_hub):
    fake_hub.add("gpt2", {"model.safetensors": save({"wpe": WPE})})
    branch = fake_hub.add("gpt2", {"model.safetensors": save({"wpe": 2 * WPE})}, "step100")
    main = posviz.load("hf:gpt2")
    step = posviz.load("hf:gpt2@step100", tensor="wpe")
    np.testing.assert_array_equal(step.values, 2 * main.values)
    assert f"commit {branch.commit}" in step.source


def test_bf16_becomes_float32_exactly(fake_hub):
    bits = (WPE.view(np.uint32) >> 16).astype(np.uint16)
    header = {"wpe": {"dtype": "BF16", "shape": list(WPE.shape), "data_offsets": [0, bits.nbytes]}}
    text = json.dumps(header).encode()
    fake_hub.add(
        "acme/bf16", {"model.safetensors": struct.pack("<Q", len(text)) + text + bits.tobytes()}
    )
    table = posviz.load("hf:acme/bf16")
    np.testing.assert_array_equal(table.values, (bits.astype(np.uint32) << 16).view(np.float32))
    assert table.dtype == "bfloat16"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("hf:acme/nothing", "no such model on the Hub; check the id"),
        ("hf:acme/gpt2@nobranch", "no such revision; give a branch, a tag, refs/pr/N"),
        ("hf:acme gpt2", "is not a model id"),
        ("hf:acme/../x", "is not a model id"),
    ],
)
def test_unknown_repo_revision_or_malformed_id(fake_hub, ref, message):
    gpt2_repo(fake_hub)
    with pytest.raises(LoadError, match=message):
        posviz.load(ref)


def test_unknown_tensor_lists_the_ones_there(fake_hub):
    gpt2_repo(fake_hub)
    with pytest.raises(LoadError, match=r"has no tensor 'wpe'; it holds: transformer.wpe"):
        posviz.load("hf:acme/gpt2", tensor="wpe")


def test_pickle_only_repo_is_refused_with_the_way_out(fake_hub):
    old = fake_hub.add("acme/old", {"config.json": CONFIG, "pytorch_model.bin": b"\x80\x02junk"})
    with pytest.raises(LoadError, match=r"only pickle-based weights.*hf:acme/old@refs/pr/1") as e:
        posviz.load("hf:acme/old")
    assert fake_hub.requests_for("pytorch_model.bin") == []
    # The way out as code to run (formerly prose naming torch.load and save_file): the file
    # downloaded at the commit the revision resolved to, converted beside it.
    assert e.value.snippet.splitlines()[-2:] == [
        "state = torch.load(hf_hub_download('acme/old', 'pytorch_model.bin', "
        f"revision={old.commit!r}), weights_only=True)",
        "save_file({k: v.contiguous() for k, v in state.items()}, 'pytorch_model.safetensors')",
    ]
    compile(e.value.snippet, "<snippet>", "exec")


def test_a_sharded_pickle_only_repo_gets_a_loop_over_its_shards(fake_hub):
    shards = ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"]
    fake_hub.add("acme/big", dict.fromkeys(shards, b"\x80\x02junk"))
    with pytest.raises(LoadError, match="only pickle-based weights") as e:
        posviz.load("hf:acme/big")
    code = e.value.snippet
    compile(code, "<snippet>", "exec")
    pairs = [(s, s.removesuffix(".bin") + ".safetensors") for s in shards]
    assert f"for name, out in {pairs!r}:" in code


def test_the_safetensors_conversion_pr_opens(fake_hub):
    fake_hub.add("acme/old", {"pytorch_model.bin": b"\x80\x02junk"})
    fake_hub.add("acme/old", {"model.safetensors": save({"wpe": WPE})}, "refs/pr/1")
    np.testing.assert_array_equal(posviz.load("hf:acme/old@refs/pr/1").values, WPE)


@pytest.mark.parametrize(
    ("config", "scheme"),
    [
        ({"model_type": "llama", "rope_theta": 10000.0}, "rotary embeddings"),
        ({"model_type": "gpt_neox", "rotary_pct": 0.25}, "rotary embeddings"),
        ({"model_type": "mpt", "attn_config": {"alibi": True}}, "ALiBi"),
        ({"model_type": "t5", "relative_attention_num_buckets": 32}, "relative position buckets"),
    ],
)
def test_a_model_without_a_learned_table_says_so(fake_hub, config, scheme):
    weights = save({"model.embed_tokens.weight": WTE})
    fake_hub.add(
        "acme/rope", {"config.json": json.dumps(config).encode(), "model.safetensors": weights}
    )
    with pytest.raises(LoadError, match=f"has no learned absolute position table.*uses {scheme}"):
        posviz.load("hf:acme/rope")
    assert [s for s in fake_hub.log if s.nbytes > 1000] == []  # no tensor fetched
    # Named explicitly, any 2-D tensor still loads.
    table = posviz.load("hf:acme/rope", tensor="model.embed_tokens.weight")
    np.testing.assert_array_equal(table.values, WTE)


def test_a_header_that_lies_is_refused_before_any_tensor_is_fetched(fake_hub):
    header = {"wpe": {"dtype": "F32", "shape": [64, 16], "data_offsets": [0, 10**9]}}
    text = json.dumps(header).encode()
    fake_hub.add(
        "acme/liar", {"model.safetensors": struct.pack("<Q", len(text)) + text + b"0" * 64}
    )
    with pytest.raises(LoadError, match="outside the 64-byte data region"):
        posviz.load("hf:acme/liar")
    claims = struct.pack("<Q", 2**40) + b"{}"
    fake_hub.add("acme/huge", {"model.safetensors": claims})
    with pytest.raises(LoadError, match="header claims 1,099,511,627,776 bytes"):
        posviz.load("hf:acme/huge")
    assert max(s.nbytes for s in fake_hub.log if "safetensors" in s.path) < 200


def test_a_tensor_above_the_size_limit_is_refused_before_fetching(fake_hub, monkeypatch):
    monkeypatch.setattr("posviz.embedding.MAX_ELEMENTS", 100)
    gpt2_repo(fake_hub)
    with pytest.raises(LoadError, match=r"above the limit of 100"):
        posviz.load("hf:acme/gpt2")
    assert [s for s in fake_hub.log if s.nbytes > 1000] == []


def test_a_shard_index_naming_a_missing_file_is_refused(fake_hub):
    index = {"weight_map": {"wpe": "model-00001-of-00002.safetensors"}}
    fake_hub.add("acme/broken", {"model.safetensors.index.json": json.dumps(index).encode()})
    with pytest.raises(LoadError, match=r"not a shard index listing the repo's \.safetensors"):
        posviz.load("hf:acme/broken")


def test_hub_off(fake_hub, monkeypatch):
    gpt2_repo(fake_hub)
    monkeypatch.setenv("POSVIZ_HUB", "off")
    with pytest.raises(LoadError, match="POSVIZ_HUB=off"):
        posviz.load("hf:acme/gpt2")
    assert fake_hub.log == []


# --- command line ----------------------------------------------------------------------------


def test_cli_summary_of_a_hub_model_equals_the_local_files(fake_hub, tmp_path, capsys):
    gpt2_repo(fake_hub)
    save_file(GPT2, tmp_path / "model.safetensors")
    assert main(["summary", str(tmp_path / "model.safetensors"), "--json"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(["summary", "hf:acme/gpt2@main", "--json"]) == 0
    remote = json.loads(capsys.readouterr().out)
    # The same numbers of the same bytes; only where they came from differs.
    assert remote["numbers"] == local["numbers"]
    assert remote["params"] == local["params"]
    assert remote["provenance"]["sha256"] == local["provenance"]["sha256"]
    assert remote["provenance"]["repo"] == "acme/gpt2"
    assert remote["provenance"]["source"].startswith("hf:acme/gpt2@main · commit ")
    assert remote["provenance"]["commit"] in remote["provenance"]["source"]


def test_cli_hints_the_class_token_of_a_hub_vit(fake_hub, capsys):
    pos_embed = RNG.standard_normal((1, 17, 8)).astype(np.float32)
    fake_hub.add("acme/vit", {"model.safetensors": save({"vit.embeddings.pos_embed": pos_embed})})
    assert main(["summary", "hf://acme/vit"]) == 0
    out = capsys.readouterr().out
    assert "1 class token + 4x4 patch grid; pass --drop-prefix 1" in out
    assert "hf:acme/vit@main · commit" in out


def test_cli_refuses_a_pickle_only_repo_with_exit_2(fake_hub, capsys):
    fake_hub.add("acme/old", {"pytorch_model.bin": b"\x80\x02junk"})
    assert main(["summary", "hf:acme/old"]) == 2
    err = capsys.readouterr().err
    assert "only pickle-based weights" in err
    assert "    from huggingface_hub import hf_hub_download\n" in err  # the code, indented


@pytest.mark.slow
def test_python_dash_m_posviz_report_of_a_hub_model(fake_hub, tmp_path):
    gpt2_repo(fake_hub)
    out = tmp_path / "report.html"
    args = ["report", "hf:acme/gpt2", "--tensor", "transformer.wpe.weight", "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "posviz", *args], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "hf:acme/gpt2@main · commit" in out.read_text()


# --- hostile repos --------------------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000
INDEX = "model.safetensors.index.json"
SHARD = "model-00001-of-00001.safetensors"
PLAIN = {"config.json": CONFIG, "model.safetensors": save(GPT2)}


def sharded(weight_map: dict, **shards: bytes) -> dict[str, bytes]:
    return {"config.json": CONFIG, INDEX: json.dumps({"weight_map": weight_map}).encode()} | shards


#: case: (the repo's files, its faults, what the message names besides the model).
HOSTILE_REPOS = {
    "deep config.json": ({"config.json": DEEP, "model.safetensors": save(GPT2)}, {}, "config.json"),
    "config.json 65 levels deep": (
        {"config.json": b"[" * 65 + b"]" * 65, "model.safetensors": save(GPT2)},
        {},
        "config.json",
    ),
    "index values are lists": (sharded({"wpe": [SHARD]}, **{SHARD: save(GPT2)}), {}, INDEX),
    "index values of mixed types": (
        sharded({"wpe": SHARD, "wte": 3}, **{SHARD: save(GPT2)}),
        {},
        INDEX,
    ),
    "a shard outside the commit's path": (
        sharded({"wpe": "../../x.safetensors"}, **{"../../x.safetensors": save(GPT2)}),
        {},
        INDEX,
    ),
    "siblings that are no list": (PLAIN, {"api": {"siblings": {"rfilename": "x"}}}, "list"),
    "siblings that are a number": (PLAIN, {"api": {"siblings": 7}}, "list"),
    "a redirect loop": (PLAIN, {"loop": True}, "config.json"),
    "a body that is not gzip": (PLAIN, {"bad_gzip": True}, "config.json"),
}


@pytest.mark.parametrize("case", HOSTILE_REPOS)
def test_hostile_repo_content_is_a_load_error_naming_the_file(fake_hub, case, capsys):
    files, faults, named = HOSTILE_REPOS[case]
    fake_hub.add("acme/hostile", files, **faults)
    with pytest.raises(LoadError, match="hf:acme/hostile@main") as refused:
        posviz.load("hf:acme/hostile")
    assert named in str(refused.value)
    # The command line says so and exits 2, without a traceback.
    assert main(["summary", "hf:acme/hostile"]) == 2
    err = capsys.readouterr().err
    assert named in err
    assert "Traceback" not in err


def many_shards(fake_hub: FakeHub, n_shards: int, per_shard: int, name: str = "acme/many") -> None:
    """A repo of `n_shards` shards of `per_shard` one-value tensors each (the last holds wpe)."""
    tiny = np.zeros(1, np.float32)
    shards = {
        f"model-{i:05d}-of-{n_shards:05d}.safetensors": save(
            {f"layer{i}.{j}": tiny for j in range(per_shard)}
            | ({"transformer.wpe.weight": WPE} if i == n_shards - 1 else {})
        )
        for i in range(n_shards)
    }
    weight_map = {"transformer.wpe.weight": list(shards)[-1]} | {
        f"layer{i}.0": file for i, file in enumerate(shards)
    }
    index = json.dumps({"weight_map": weight_map}).encode()
    fake_hub.add(name, {"config.json": CONFIG, "model.safetensors.index.json": index} | shards)


@pytest.mark.slow
def test_tensor_and_header_limits_hold_for_all_shards_together(fake_hub, monkeypatch):
    # 16 shards of 4,500 tensors: each file within the limits, the model 72,000 tensors.
    many_shards(fake_hub, 16, 4_500)
    with pytest.raises(LoadError, match=r"describe more than 65,536 tensors in all") as refused:
        posviz.load("hf:acme/many")
    assert "shard 15 of 16" in str(refused.value)
    # The header bytes too: with a budget of two shards' headers, the third is not fetched.
    fake_hub.log.clear()
    shard_head = header_bytes(save({f"layer0.{j}": np.zeros(1, np.float32) for j in range(4_500)}))
    monkeypatch.setattr(io, "MAX_HEADER_BYTES", 2 * shard_head + 100)
    many_shards(fake_hub, 16, 4_500, name="acme/many2")
    with pytest.raises(LoadError, match=r"headers \(all its shards together\) past the limit"):
        posviz.load("hf:acme/many2")
    assert fake_hub.bytes_sent() < 3 * shard_head


@pytest.mark.parametrize("revision", [".", "a/./b", "main/", "a//b", "a\\\\..\\\\b"])
def test_revisions_naming_dot_or_empty_segments_are_refused(fake_hub, revision):
    gpt2_repo(fake_hub)
    with pytest.raises(LoadError, match="is not a revision"):
        posviz.load(f"hf:acme/gpt2@{revision}")
    assert fake_hub.log == []


def test_a_tensor_above_max_bytes_is_refused_before_it_is_requested(fake_hub):
    gpt2_repo(fake_hub)
    with pytest.raises(LoadError, match=r"above this server's upload limit of 0 MiB"):
        models.load("hf:acme/gpt2", max_bytes=WPE.nbytes - 1)
    assert [s for s in fake_hub.requests_for("model.safetensors") if s.nbytes > 1000] == []
    assert models.load("hf:acme/gpt2", max_bytes=WPE.nbytes).shape == WPE.shape


@pytest.mark.parametrize(
    ("files", "converted"),
    [
        (["pytorch_model.bin", "training_args.bin", "optimizer.pt"], ["pytorch_model.bin"]),
        (["model.pt", "rng_state.pth", "ckpt-9/model.pt"], ["model.pt"]),
        (["ckpt-9/model.pt"], ["ckpt-9/model.pt"]),
    ],
)
def test_the_conversion_converts_the_weights_not_a_training_runs_state(fake_hub, files, converted):
    fake_hub.add("acme/trained", dict.fromkeys(files, b"\x80\x02junk"))
    with pytest.raises(LoadError, match="only pickle-based weights") as e:
        posviz.load("hf:acme/trained")
    loads = [line for line in e.value.snippet.splitlines() if "hf_hub_download(" in line]
    assert [line.split("'")[3] for line in loads] == converted
