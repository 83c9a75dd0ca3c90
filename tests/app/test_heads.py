"""The Heads page under AppTest: a model by name from the (fake) Hub, each kind of layer, the
refusals, and its exports."""

from __future__ import annotations

import json

import pytest

from tests import ROOT, apptest

DATA = ROOT / "tests" / "data" / "heads"


def serve(fake_hub, family: str, config: dict | None = None, repo: str | None = None):
    """Serve a fixture as test/<repo>: each test names its own repo, since the page's caches
    (shared by all sessions, as in the app) key a model by its name and commit."""
    folder = DATA / family
    files = {
        "config.json": json.dumps(config).encode()
        if config
        else (folder / "config.json").read_bytes(),
        "model.safetensors": folder / "model.safetensors",
    }
    fake_hub.add(f"test/{repo or family}", files)


def opened(family: str, **state):
    at = apptest("pages/heads.py")
    at.session_state["heads.opened"] = (f"test/{family}", "main")
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def charts(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_first_open_names_models_to_try():
    at = apptest("pages/heads.py").run()
    assert not at.exception
    assert any("openai-community/gpt2" in i.value for i in at.info)


@pytest.mark.parametrize(
    ("family", "trace"), [("gpt2", "heatmap"), ("llama", "heatmap"), ("t5", "heatmap")]
)
def test_a_model_by_name_draws_its_heads(fake_hub, family, trace):
    serve(fake_hub, family)
    at = opened(family)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    (fig,) = charts(at)
    assert fig["data"][0]["type"] == trace
    assert len(fig["data"][0]["y"]) == 4  # one row per head
    assert any("kB travel from the Hub" in c.value for c in at.caption)  # said before reading


def test_numbers_tab_shows_each_number_beside_its_null(fake_hub, downloads):
    serve(fake_hub, "bert", repo="bert-numbers")
    at = opened("bert-numbers", **{"heads.section": "Numbers"})
    assert not at.exception, at.exception
    (fig,) = charts(at)
    assert any(s.get("type") == "rect" for s in fig["layout"].get("shapes", []))  # the null band
    frame = at.dataframe[0].value
    assert {"attention previous", "attention previous null max"} <= set(frame.columns)
    exported = json.loads(downloads["heads.json"]())
    assert exported["analysis"] == "learned_heads"  # export.header: the step that made it
    assert exported["provenance"]["config"].startswith("hf:test/bert-numbers@")
    assert exported["provenance"]["layer"] == 0


def test_rerun_of_the_pages_download(fake_hub, downloads, tmp_path):
    from posviz.recompute import rerun

    serve(fake_hub, "opt", repo="opt-rerun")
    at = opened("opt-rerun", **{"heads.section": "Numbers"})
    assert not at.exception
    result = rerun(json.loads(downloads["heads.json"]()))
    assert result.ok
    assert len(result.checks) > 20


def test_layers_without_heads_and_unknown_models_say_why(fake_hub):
    serve(fake_hub, "llama", {"model_type": "mamba", "hidden_size": 32}, repo="mamba")
    at = opened("mamba")
    assert not at.exception
    assert any("no position encoding" in i.value for i in at.info)
    config = json.loads((DATA / "llama" / "config.json").read_text()) | {"model_type": "new"}
    serve(fake_hub, "gpt2", config, repo="newfangled")
    at = opened("newfangled")
    assert not at.exception
    assert any("not an architecture" in e.value for e in at.error)


def test_the_shared_folder_offers_a_sharded_checkpoint_as_its_index(
    tmp_path, monkeypatch, downloads
):
    from posviz.recompute import rerun
    from tests.cli.test_heads import shard

    shard("mistral", tmp_path / "mistral")
    (tmp_path / "gpt2").mkdir()
    for name in ("config.json", "model.safetensors"):
        (tmp_path / "gpt2" / name).write_bytes((DATA / "gpt2" / name).read_bytes())
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    at = apptest("pages/heads.py")
    at.session_state["heads.source"] = "Shared folder"
    at.session_state["heads.section"] = "Numbers"
    at.run()
    box = at.selectbox(key="heads.shared")
    # The shards are one model, offered as their index; a folder of one file as that file.
    assert box.options == ["gpt2/model.safetensors", "mistral/model.safetensors.index.json"]
    box.set_value("mistral/model.safetensors.index.json").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("read from the checkpoint" in c.value for c in at.caption)
    exported = json.loads(downloads["heads.json"]())
    assert exported["analysis"] == "rotary_heads"
    # Named by its place in the shared folder, never the server's path.
    assert exported["provenance"]["weights"] == "mistral/model.safetensors.index.json"
    assert exported["provenance"]["config"] == "mistral/config.json"
    index = tmp_path / "mistral" / "model.safetensors.index.json"
    assert rerun(exported, tables=[str(index)]).ok
