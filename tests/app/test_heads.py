"""The Heads page under AppTest: it opens offline on a model shipped with posviz; every layer of
a model with structure planted (found where planted), by upload (safetensors, GGUF), from the
shared folder and from the (fake) Hub; each kind of layer in detail; the refusals keep the
view before; the link reopens the view; the exports rerun."""

from __future__ import annotations

import base64
import html
import json
import socket
from pathlib import Path

import numpy as np
import pytest

from tests import ROOT, apptest

DATA = ROOT / "tests" / "data" / "heads"
DEPTH = DATA / "depth"


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
    """The page on Hub model test/<family>."""
    at = apptest("pages/heads.py")
    at.session_state["heads.source"] = "Hub model"
    at.session_state["heads.opened"] = (f"test/{family}", "main")
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def example(name: str = "planted-gpt2", **query):
    """The page opened by a link naming shipped model `name` (and `query`'s other keys)."""
    at = apptest("pages/heads.py")
    at.query_params["heads.model"] = f"example:{name}"
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def charts(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def depth_map(at) -> dict:
    (fig,) = [f for f in charts(at) if "by layer and head" in f["layout"]["title"]["text"]]
    return fig


def said(elements) -> list[str]:
    """What boxes (at.error, at.info, at.caption) say, their literal text's escapes read."""
    return [html.unescape(e.value) for e in elements]


def values(spec) -> np.ndarray:
    """A figure's array as plotly's JSON carries it (a typed array, or a list)."""
    if isinstance(spec, dict):
        flat = np.frombuffer(base64.b64decode(spec["bdata"]), dtype=spec["dtype"])
        return flat.reshape([int(n) for n in str(spec.get("shape", len(flat))).split(",")])
    return np.asarray(spec, dtype=float)


def labelled(fig: dict) -> dict[str, list[tuple[str, str]]]:
    """Each label's (layer, head) cells as the depth map marks them."""
    return {
        t["name"]: list(zip(t["y"], t["x"], strict=True))
        for t in fig["data"]
        if t["type"] == "scatter"
    }


def upload(at, *paths: Path, names: tuple[str, ...] = ()):
    files = [
        (name, path.read_bytes(), "application/octet-stream")
        for name, path in zip(names or [p.name for p in paths], paths, strict=True)
    ]
    at.segmented_control(key="heads.source").set_value("Upload").run()
    return at.file_uploader(key="heads.upload").set_value(files).run()


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails, as on a machine without a network."""

    def refuse(*args, **kwargs):
        msg = "no network in this test"
        raise OSError(msg)

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_first_open_draws_a_real_model_offline(no_network):
    at = apptest("pages/heads.py").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.query_params["heads.model"] == "example:all-MiniLM-L6-v2"
    assert any("Apache-2.0" in c.value for c in at.caption)
    fig = depth_map(at)
    heatmap = fig["data"][0]
    assert heatmap["y"] == [f"layer {i}" for i in range(6)]
    assert len(heatmap["x"]) == 12
    # all-MiniLM-L6-v2's previous-token heads (tests/data/heads/check_minilm.py's numbers):
    # two in layer 0, two in layer 1, one in layer 2, none deeper.
    previous = labelled(fig)["previous-token"]
    assert sorted({layer for layer, _ in previous}) == ["layer 0", "layer 1", "layer 2"]
    assert len(previous) == 5
    # The layer's own view below it, layer 0 first.
    assert any(c.value.startswith("Layer 0 of ") and "BERT" in c.value for c in at.caption)


def test_the_planted_head_is_found_where_it_was_planted_and_nowhere_else():
    at = example("planted-gpt2")
    assert not at.exception, at.exception
    assert any("Simulated model" in i.value for i in at.info)  # said as such
    fig = depth_map(at)
    assert fig["layout"]["title"]["text"].endswith("attention_previous by layer and head")
    assert labelled(fig) == {"previous-token": [("layer 2", "h1")]}
    planted = json.loads((DEPTH / "gpt2" / "planted.json").read_text())
    assert planted["previous-token"] == [[2, 1]]
    z = values(fig["data"][0]["z"])
    assert z.max() == z[2, 1] > 0.9
    # Layer 2 opens its own view, its labelled head named there too.
    assert any("Layers with labelled heads (how many): 2 (1)" in c.value for c in at.caption)
    at.number_input(key="heads.layer").set_value(2).run()
    assert not at.exception
    assert any(c.value.startswith("Layer 2 of ") for c in at.caption)
    assert [m.value for m in at.metric][2] == "1"  # labelled heads


def test_labels_over_depth_stand_beside_their_null():
    at = example("planted-gpt2", **{"heads.depth": "Labels over depth"})
    assert not at.exception, at.exception
    (fig,) = [f for f in charts(at) if f["layout"]["title"]["text"].startswith("The labels")]
    nulls = [t for t in fig["data"] if t["name"] == "null: largest draw"]
    assert len(nulls) == 4  # previous-token, self, first position, local
    largest = fig["data"][0]
    assert largest["text"] == ["", "", "1", ""]  # one previous-token head, in layer 2


def test_a_link_reopens_the_model_layers_layer_and_number():
    query = {"heads.layers": "1-3", "heads.layer": "3", "heads.number": "toeplitz_share"}
    at = example("planted-gpt2", **query)
    assert not at.exception, at.exception
    fig = depth_map(at)
    assert fig["data"][0]["y"] == ["layer 1", "layer 2", "layer 3"]
    assert fig["layout"]["title"]["text"].endswith("toeplitz_share by layer and head")
    assert at.number_input(key="heads.layer").value == 3
    assert at.query_params["heads.model"] == "example:planted-gpt2"
    for key, value in query.items():
        assert at.query_params[key] == value


def test_a_link_to_an_upload_says_it_cannot_carry_it():
    at = apptest("pages/heads.py")
    at.query_params["heads.model"] = "upload:model.safetensors"
    at.run()
    assert not at.exception
    assert any("cannot carry" in w.value for w in at.warning)
    assert at.query_params["heads.model"] == "example:all-MiniLM-L6-v2"  # what is shown


def test_an_uploaded_checkpoint_and_its_gguf_give_the_planted_heads():
    at = example("planted-gpt2")
    folder = DEPTH / "llama"
    upload(at, folder / "config.json", folder / "model.safetensors")
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.query_params["heads.model"] == "upload:model.safetensors"
    fig = depth_map(at)
    assert fig["layout"]["title"]["text"].endswith("fast_share by layer and head")
    assert labelled(fig) == {"high-frequency": [("layer 2", "h0"), ("layer 2", "h1")]}
    safetensors = values(fig["data"][0]["z"])
    at.file_uploader(key="heads.upload").set_value(
        [("model-Q8_0.gguf", (folder / "model-Q8_0.gguf").read_bytes(), "application/octet-stream")]
    ).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("quantization Q8_0" in c.value for c in at.caption)
    fig = depth_map(at)
    assert labelled(fig) == {"high-frequency": [("layer 2", "h0"), ("layer 2", "h1")]}
    gguf = values(fig["data"][0]["z"])
    assert np.abs(gguf - safetensors).max() < 0.02  # Q8_0 within its error


def test_a_sharded_upload_is_read_as_one_model(tmp_path):
    from tests.cli.test_heads import shard

    shard("mistral", tmp_path / "mistral")
    at = example("planted-gpt2")
    upload(at, *sorted((tmp_path / "mistral").iterdir()))
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.query_params["heads.model"] == "upload:model.safetensors.index.json"
    assert depth_map(at)["data"][0]["y"] == ["layer 0"]


@pytest.mark.parametrize(
    ("files", "says"),
    [
        (["config.json"], "give config.json with model.safetensors"),
        (["model.safetensors"], "give config.json with model.safetensors"),
        (["config.json", "model.safetensors", "model-F32.gguf"], "or one .gguf file"),
    ],
)
def test_a_bad_upload_is_refused_and_the_view_before_stays(files, says):
    at = example("planted-gpt2")
    before = depth_map(at)
    upload(at, *[DEPTH / "llama" / name for name in files])
    assert not at.exception, at.exception
    assert any(says in e and "shown before" in e for e in said(at.error))
    assert depth_map(at) == before
    assert at.query_params["heads.model"] == "example:planted-gpt2"


def test_an_upload_a_family_cannot_read_keeps_the_view_before(tmp_path):
    config = json.loads((DEPTH / "llama" / "config.json").read_text()) | {"model_type": "new"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    at = example("planted-gpt2")
    upload(at, tmp_path / "config.json", DEPTH / "llama" / "model.safetensors")
    assert not at.exception
    assert any("not an architecture" in e.value for e in at.error)
    assert labelled(depth_map(at)) == {"previous-token": [("layer 2", "h1")]}


def test_the_depth_downloads_rerun(downloads, tmp_path):
    from posviz.recompute import read_export, rerun

    at = example("planted-gpt2", **{"heads.depth": "Numbers"})
    assert not at.exception, at.exception
    frame = at.dataframe[0].value
    assert len(frame) == 4 * (4 + 1)  # each layer's 4 heads, then its null row
    nulls = frame[frame["label"] == "null: largest draw"]
    assert nulls["layer"].tolist() == [0, 1, 2, 3]
    head = frame[(frame["layer"] == 2) & (frame["head"] == 1)]
    assert head["label"].tolist() == ["previous-token"]
    assert (head["attention previous"].to_numpy() > nulls["attention previous"].iloc[2]).all()
    exported = json.loads(downloads["heads_depth.json"]())
    assert exported["provenance"]["weights"] == "example:planted-gpt2/model.safetensors"
    assert exported["depth"]["labels"]["previous-token"]["heads"] == [[2, 1]]
    assert all("kernel" not in h for layer in exported["layers"] for h in layer["heads"])
    result = rerun(exported)
    assert result.ok, result.differing[:3]
    assert len(result.checks) > 100
    csv = tmp_path / "heads_depth.csv"
    csv.write_text(downloads["heads_depth.csv"]())
    assert rerun(read_export(csv)).ok


def test_a_stopped_run_keeps_its_layers_and_reads_on():
    at = example("planted-gpt2")
    (run,) = at.session_state["heads.runs"].values()
    del run.numbers[2:], run.records[2:]
    run.stopped = True
    at.run()
    assert not at.exception
    assert any("Stopped after 2 of 4 layers" in i.value for i in at.info)
    assert depth_map(at)["data"][0]["y"] == ["layer 0", "layer 1"]
    at.button(key="heads.resume").click().run()
    assert not at.exception
    assert depth_map(at)["data"][0]["y"] == [f"layer {i}" for i in range(4)]
    assert labelled(depth_map(at)) == {"previous-token": [("layer 2", "h1")]}


def test_more_than_the_limit_is_asked_for_first(fake_hub, monkeypatch):
    from posviz.ui import heads

    monkeypatch.setattr(heads, "ASK_BYTES", 1000)
    serve(fake_hub, "gpt2", repo="gpt2-ask")
    at = opened("gpt2-ask")
    assert not at.exception, at.exception
    assert any("fetches" in w.value and "more than" in w.value for w in at.warning)
    assert len(charts(at)) == 1  # layer 0's own view; no layer read for the depth view yet
    at.button(key="heads.fetch").click().run()
    assert not at.exception
    assert depth_map(at)["data"][0]["y"] == ["layer 0", "layer 1"]  # the fixture's two


@pytest.mark.parametrize(
    ("family", "trace"), [("gpt2", "heatmap"), ("llama", "heatmap"), ("t5", "heatmap")]
)
def test_a_model_by_name_draws_its_heads(fake_hub, family, trace):
    serve(fake_hub, family)
    at = opened(family)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    depth, layer = charts(at)
    assert depth["layout"]["title"]["text"].startswith(f"hf:test/{family}@")
    assert layer["data"][0]["type"] == trace
    assert len(layer["data"][0]["y"]) == 4  # one row per head
    assert any("to fetch from the Hub" in c.value for c in at.caption)  # said before reading
    assert at.query_params["heads.model"].startswith(f"hf:test/{family}@")


def test_numbers_tab_shows_each_number_beside_its_null(fake_hub, downloads):
    serve(fake_hub, "bert", repo="bert-numbers")
    at = opened("bert-numbers", **{"heads.section": "Numbers"})
    assert not at.exception, at.exception
    fig = charts(at)[-1]
    assert any(s.get("type") == "rect" for s in fig["layout"].get("shapes", []))  # the null band
    frame = at.dataframe[-1].value
    # On screen the null is a row under the heads (the table fits the page); the files keep
    # it as a column beside each number.
    assert "attention previous null max" not in frame.columns
    assert frame["label"].tolist()[-1] == "null: largest draw"
    assert len(frame) == 4 + 1
    exported = json.loads(downloads["heads.json"]())
    assert "attention_previous_null_max" in exported["columns"]
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
    at = example(**{"heads.section": "Numbers"})
    at.segmented_control(key="heads.source").set_value("Shared folder").run()
    box = at.selectbox(key="heads.shared")
    # The shards are one model, offered as their index; a folder of one file as that file.
    assert box.options == ["gpt2/model.safetensors", "mistral/model.safetensors.index.json"]
    box.set_value("mistral/model.safetensors.index.json").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("read from the checkpoint" in c.value for c in at.caption)
    assert at.query_params["heads.model"] == "shared:mistral/model.safetensors.index.json"
    exported = json.loads(downloads["heads.json"]())
    assert exported["analysis"] == "rotary_heads"
    # Named by its place in the shared folder, never the server's path.
    assert exported["provenance"]["weights"] == "mistral/model.safetensors.index.json"
    assert exported["provenance"]["config"] == "mistral/config.json"
    index = tmp_path / "mistral" / "model.safetensors.index.json"
    assert rerun(exported, tables=[str(index)]).ok
    # The link reopens it.
    again = apptest("pages/heads.py")
    again.query_params["heads.model"] = "shared:mistral/model.safetensors.index.json"
    again.run()
    assert not again.exception
    assert again.segmented_control(key="heads.source").value == "Shared folder"
    assert any("read from the checkpoint" in c.value for c in again.caption)


def test_a_named_quantization_of_a_hub_repo_is_read_alone(fake_hub):
    from tests.test_depth_gguf import serve_gguf_repo

    serve_gguf_repo(fake_hub, "test/llama-GGUF-page")
    at = opened("llama-GGUF-page:Q8_0")
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("quantization Q8_0" in c for c in said(at.caption))
    assert labelled(depth_map(at)) == {"high-frequency": [("layer 2", "h0"), ("layer 2", "h1")]}
    assert fake_hub.requests_for("model-F32.gguf") == []  # that file alone
    assert at.query_params["heads.model"].endswith(":model-Q8_0.gguf")


def test_another_model_starts_its_positions_and_layer_afresh():
    # The positions analysed and the layer shown are the model's own: MiniLM, picked again
    # after the planted GPT-2 (32 positions, layer 3), was analysed over 32 positions at layer 3.
    at = apptest("pages/heads.py").run()
    first = [c.value for c in at.caption if c.value.startswith("Layers with labelled heads")]
    at.selectbox[0].select_index(1).run()
    assert at.number_input(key="heads.positions").value == 32
    at.number_input(key="heads.layer").set_value(3).run()
    at.selectbox[0].select_index(0).run()
    assert not at.exception, at.exception
    assert at.number_input(key="heads.positions").value == 512
    assert at.number_input(key="heads.layer").value == 0
    assert "heads.positions" not in at.query_params
    again = [c.value for c in at.caption if c.value.startswith("Layers with labelled heads")]
    assert again == first


def test_a_pickle_only_model_by_name_gets_its_conversion_as_code(fake_hub):
    fake_hub.add("test/pickled", {"config.json": (DATA / "gpt2" / "config.json").read_bytes(),
                                  "pytorch_model.bin": b"\x80\x02junk"})  # fmt: skip
    at = opened("pickled")
    assert not at.exception, at.exception
    assert any("only pickle-based weights" in e and "shown before" in e for e in said(at.error))
    (code,) = at.code
    assert "hf_hub_download('test/pickled', 'pytorch_model.bin'" in code.value
    compile(code.value, "<snippet>", "exec")


def test_a_link_to_a_model_that_cannot_be_opened_shows_the_default_and_says_why(fake_hub):
    # The link's model was taken as the one shown and opened again below: a traceback.
    fake_hub.add("test/pickled-link", {"config.json": (DATA / "gpt2" / "config.json").read_bytes(),
                                       "pytorch_model.bin": b"\x80\x02junk"})  # fmt: skip
    at = apptest("pages/heads.py")
    at.query_params["heads.model"] = "hf:test/pickled-link@main"
    at.run()
    assert not at.exception, at.exception
    assert any("only pickle-based weights" in w for w in said(at.warning))
    assert "hf_hub_download('test/pickled-link', 'pytorch_model.bin'" in at.code[0].value
    assert at.query_params["heads.model"] == "example:all-MiniLM-L6-v2"
    assert depth_map(at)["data"]
