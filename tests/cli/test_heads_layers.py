"""`posviz heads SOURCE --layers …`: every layer named, one JSON object whose layers are the
`--layer N` objects, progress on stderr, refusals before anything travels, a Hub model's rows
fetched once (an interrupted run resumes), and `posviz rerun` of it."""

from __future__ import annotations

import json
import shutil

import pytest

from posviz import depth
from posviz.cli import main
from posviz.recompute import read_export
from tests import ROOT
from tests.cli.test_heads import header_bytes, serve

DATA = ROOT / "tests" / "data" / "heads"


def run_json(capsys, *argv: str) -> tuple[dict, str]:
    assert main(["heads", *argv, "--json"]) == 0
    printed = capsys.readouterr()
    return json.loads(printed.out), printed.err


def same_layer(a: dict, b: dict) -> bool:
    """Equal but for what the run, not the layer, decides: the bytes that travelled."""
    return {k: v for k, v in a.items() if k != "bytes_fetched"} == {
        k: v for k, v in b.items() if k != "bytes_fetched"
    }


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_every_layer_object_is_the_one_layer_n_prints(capsys, family):
    source = str(DATA / family)
    record, err = run_json(capsys, source, "--layers", "all", "--positions", "5")
    assert [layer["layer"] for layer in record["layers"]] == [0, 1]
    for layer in record["layers"]:
        alone, _ = run_json(capsys, source, "--layer", str(layer["layer"]), "--positions", "5")
        assert same_layer(layer, alone)
    assert record["depth"]["layers"] == [0, 1]
    assert record["n_layers"] == 2
    assert record["layers_asked"] == [0, 1]
    assert "layer 1/2: layer 0" in err
    assert "layer 2/2: layer 1" in err
    # Which positions are which: the numbers' and the printed kernels'.
    first = record["layers"][0]
    if family == "gpt2":
        assert first["positions_analysed"] == 32
        assert first["positions_printed"] == 5
        assert len(first["heads"][0]["kernel"]) == 5


def test_positions_printed_is_what_the_kernels_hold(capsys):
    # Formerly 64 (the --positions default) beside positions_analysed 32, the kernels of 32
    # rows; and in a rotary layer's record, which prints no kernel at all.
    learned, _ = run_json(capsys, str(DATA / "gpt2"))
    assert learned["positions_printed"] == learned["positions_analysed"] == 32
    assert len(learned["heads"][0]["kernel"]) == len(learned["heads"][0]["offset_profile"]) == 32
    rotary, _ = run_json(capsys, str(DATA / "llama"))
    assert "positions_printed" not in rotary
    assert "positions_analysed" not in rotary


def test_the_text_has_a_legend_of_its_columns(capsys):
    assert main(["heads", str(DATA / "llama"), "--layers", "0-1"]) == 0
    out = capsys.readouterr().out
    assert "columns:" in out
    assert "  weighted_wavelength: usage-weighted wavelength" in out
    assert "  label: " in out
    assert "weighted_wavelength" in out.splitlines()[2]  # the header is not cut
    assert main(["heads", str(DATA / "llama"), "--layer", "1"]) == 0
    single = capsys.readouterr().out
    assert "columns:" in single
    assert "weighted_wavelength " in single


@pytest.mark.parametrize(
    ("layers", "says"),
    [("2", "there is no layer 2"), ("1-0", "reversed range"), ("x", "'x' is not a layer"),
     ("", "empty"), ("0-5", "there is no layer 5")],
)  # fmt: skip
def test_a_layer_the_model_lacks_exits_2_naming_its_layers(capsys, fake_hub, layers, says):
    serve(fake_hub, "llama", repo="test/llama-bad-layers")
    assert main(["heads", "hf:test/llama-bad-layers", "--layers", layers]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "has 2 layers (0 … 1)" in err
    assert len(err.strip().splitlines()) == 1
    sent = sum(r.nbytes for r in fake_hub.requests_for("model.safetensors"))
    assert sent == header_bytes(DATA / "llama" / "model.safetensors")  # the header only


def test_a_hub_model_says_its_bytes_first_and_a_second_run_fetches_nothing(capsys, fake_hub):
    serve(fake_hub, "llama", repo="test/llama-layers")
    record, err = run_json(capsys, "hf:test/llama-layers", "--layers", "all")
    planned = record["bytes_planned"]
    assert f"{planned:,} bytes, {planned:,} to fetch" in err.splitlines()[0]
    assert record["bytes_fetched"] == planned
    ranges = [r for r in fake_hub.requests_for("model.safetensors") if r.nbytes > 16]
    header = ranges[0].nbytes
    assert sum(r.nbytes for r in ranges) - header == planned
    fake_hub.log.clear()
    again, err = run_json(capsys, "hf:test/llama-layers", "--layers", "all")
    assert "0 to fetch" in err.splitlines()[0]
    assert again["bytes_fetched"] == 0
    assert fake_hub.requests_for("model.safetensors") == []
    assert [same_layer(a, b) for a, b in zip(record["layers"], again["layers"], strict=True)] == [
        True,
        True,
    ]


def test_a_run_stopped_half_way_keeps_what_it_read(fake_hub):
    serve(fake_hub, "gpt2", repo="test/gpt2-stopped")
    from posviz.models import attention

    model = attention.open_source("hf:test/gpt2-stopped")
    plan = depth.plan_depth(model, "all")
    stream = depth.stream_depth(plan, n_draws=1)
    first = next(stream)
    stream.close()  # the stop button
    assert first.bytes_fetched > 0
    fake_hub.log.clear()
    resumed = depth.plan_depth(attention.open_source("hf:test/gpt2-stopped"), "all")
    layer_one = resumed.plan_of(1)
    # Layer 0's rows and the shared position table are cached: only layer 1's own rows travel.
    own = sum(r.nbytes for r in layer_one.reads if r.role != "positions")
    assert resumed.to_fetch == own
    done = depth.collect(resumed, n_draws=1)
    assert [layer.bytes_fetched for layer in done.layers] == [0, own]


def test_rerun_recomputes_every_layer_and_the_depth_summary(capsys, tmp_path):
    record, _ = run_json(capsys, str(DATA / "gpt2"), "--layers", "all", "--positions", "4")
    out = tmp_path / "layers.json"
    out.write_text(json.dumps(record))
    assert main(["rerun", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "depth numbers.attention_previous.max[1]: exported" in printed
    assert "learned_heads (layer 1) heads[0].attention_previous" in printed
    # A number of the summary changed by hand: found.
    record["depth"]["numbers"]["attention_previous"]["max"][1] += 0.5
    out.write_text(json.dumps(record))
    assert main(["rerun", str(out)]) == 1
    assert "depth numbers.attention_previous.max[1]" in capsys.readouterr().out


def test_a_report_has_every_layers_heads_and_rerun_checks_each(capsys, fake_hub, tmp_path):
    folder = DATA / "depth" / "gpt2"
    files = {"config.json": (folder / "config.json").read_bytes(),
             "model.safetensors": folder / "model.safetensors"}  # fmt: skip
    fake_hub.add("test/gpt2-planted", files)
    out = tmp_path / "report.html"
    assert main(["report", "hf:test/gpt2-planted", "-o", str(out)]) == 0
    page = out.read_text()
    assert "<h3>Heads by layer</h3>" in page
    assert "h1 previous-token" in page
    assert "Layers 0, 1, 2, 3 of hf:test/gpt2-planted" in page
    assert "<h3>Heads, layer 2</h3>" not in page  # in the data block, not on the page
    data = read_export(out)
    layers = [a for a in data["analyses"] if a["caption"].startswith("Heads, layer")]
    assert [a["provenance"]["layer"] for a in layers] == [0, 1, 2, 3]
    assert layers[2]["columns"]["label"][1] == "previous-token"
    capsys.readouterr()
    assert main(["rerun", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "learned_heads label[1]: exported 'previous-token'" in printed


def test_layers_beyond_the_hub_cache_are_said_before_they_travel(capsys, fake_hub, monkeypatch):
    serve(fake_hub, "llama", repo="test/llama-small-cache")
    monkeypatch.setenv("POSVIZ_HUB_CACHE_SIZE", "1kB")
    assert main(["heads", "hf:test/llama-small-cache", "--layers", "all"]) == 0
    err = capsys.readouterr().err
    assert "the Hub cache holds 1,000 bytes (POSVIZ_HUB_CACHE_SIZE)" in err
    assert err.index("Hub cache holds") < err.index("layer 1/2")


def test_a_shipped_or_shared_model_is_read_by_its_source_name(capsys, tmp_path, monkeypatch):
    # example:NAME and shared:PATH are sources as the Heads page names them; posviz heads
    # refused both ("is no model's weights") while posviz summary read them.
    record, _ = run_json(capsys, "example:planted-gpt2", "--layers", "all")
    labelled = [
        (layer["layer"], head["head"], head["label"])
        for layer in record["layers"]
        for head in layer["heads"]
        if head["label"]
    ]
    assert labelled == [(2, 1, "previous-token")]  # planted there, nowhere else
    assert record["layers"][2]["provenance"]["weights"] == "example:planted-gpt2/model.safetensors"
    shared = tmp_path / "team" / "gpt2"
    shutil.copytree(DATA / "gpt2", shared)
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path / "team"))
    from_folder, _ = run_json(capsys, "shared:gpt2/model.safetensors")
    from_path, _ = run_json(capsys, str(DATA / "gpt2" / "model.safetensors"))
    assert from_folder["heads"] == from_path["heads"]
    assert from_folder["provenance"]["weights"] == "gpt2/model.safetensors"
