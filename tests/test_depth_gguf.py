"""Structure planted in layers above 0 is found where planted and nowhere else, from the
safetensors and from the same weights written as GGUF the way llama.cpp's converter writes
them (permuted for llama, not for qwen2); every GGUF architecture posviz reads gives the
safetensors numbers (F32: exactly, the same float32 values; Q8_0: within its error); a GGUF
posviz cannot read is refused before any weight travels.

Fixtures: tests/data/heads/make_depth_fixtures.py (transformers + gguf, in a scratch venv)."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest

from posviz import depth, pipeline
from posviz._params import Refused
from posviz.cli import main
from posviz.models import attention, weights
from tests import ROOT
from tests.ggufs import write

HEADS = ROOT / "tests" / "data" / "heads"
DEPTH = HEADS / "depth"
#: The layer-0 fixtures written as GGUF (tests/data/heads/gguf/), one per llama.cpp family.
GGUF_FAMILIES = ["bert", "mistral", "gemma", "gemma2", "gemma3", "phi3", "phi", "olmo",
                 "olmo2", "stablelm", "gpt_neox", "falcon_multi_query", "falcon_mha",
                 "falcon_new"]  # fmt: skip
SOURCES = ["", "model-F32.gguf", "model-Q8_0.gguf"]


def collect(source: str, **params) -> depth.DepthHeads:
    return depth.collect(depth.plan_depth(attention.open_source(source)), **params)


def labelled(found: depth.DepthHeads) -> dict[str, list[list[int]]]:
    """Each label and the [layer, head] pairs carrying it."""
    return {label: got["heads"] for label, got in found.record()["labels"].items() if got["heads"]}


@pytest.mark.parametrize("source", SOURCES)
def test_a_previous_token_head_planted_in_layer_2_of_a_gpt2_is_found_there_alone(source):
    found = collect(str(DEPTH / "gpt2" / source))
    assert found.indices == [0, 1, 2, 3]
    planted = json.loads((DEPTH / "gpt2" / "planted.json").read_text())
    assert (
        labelled(found)
        == {"previous-token": planted["previous-token"]}
        == {"previous-token": [[2, 1]]}
    )
    previous = found.map("attention_previous")
    assert previous[2, 1] > 0.9  # the model's own block gives 0.968 (the fixture script)
    assert previous[2, 1] > found.null_max("attention_previous")[2]
    others = np.delete(previous.ravel(), 2 * 4 + 1)
    assert others.max() < 0.5


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("source", SOURCES)
def test_rotary_structure_planted_in_layers_1_and_2_is_found_there_alone(family, source):
    found = collect(str(DEPTH / family / source))
    planted = json.loads((DEPTH / family / "planted.json").read_text())
    # Layer 2: key head 0 keeps pair 0 alone, so query heads 0 and 1 use only the fastest pair.
    assert labelled(found) == {"high-frequency": planted["high-frequency"]}
    fast = found.map("fast_share")
    np.testing.assert_allclose(fast[2, :2], 1.0)
    assert np.delete(fast.ravel(), [8, 9]).max() < 0.5
    # Layer 1: key head 1 has no pair 2 (Q8_0 keeps a zero block zero).
    zero = planted["zero_usage"]
    plan = depth.plan_depth(attention.open_source(str(DEPTH / family / source)))
    for heads in depth.stream_depth(plan, n_draws=0):
        usage = heads.result.usage
        expected = np.zeros_like(usage, dtype=bool)
        if heads.index == zero["layer"]:
            expected[zero["heads"], zero["pair"]] = True
        if heads.index == 2:
            expected[:2, 1:] = True  # heads 0 and 1: every pair but 0
        assert np.array_equal(usage == 0, expected), heads.index


def numbers(found: depth.DepthHeads) -> dict[tuple[int, str], np.ndarray]:
    return {(layer.layer, name): v for layer in found.layers for name, v in layer.numbers.items()}


@pytest.mark.parametrize("family", GGUF_FAMILIES)
def test_a_gguf_gives_the_safetensors_numbers_for_every_family(family):
    expected = numbers(collect(str(HEADS / family), n_draws=2))
    got = collect(str(HEADS / "gguf" / f"{family}.gguf"), n_draws=2)
    assert got.plan.plans[0].quantization is None
    found = numbers(got)
    assert found.keys() == expected.keys()
    for key, values in expected.items():
        # The same float32 values, only stored in another order: the same numbers.
        np.testing.assert_allclose(found[key], values, rtol=1e-12, atol=1e-12, err_msg=str(key))


@pytest.mark.parametrize(("family", "rtol"), [("gpt2", 2e-2), ("llama", 1e-2), ("qwen2", 1e-2)])
def test_f32_to_rounding_and_q8_0_within_its_error(family, rtol):
    expected = numbers(collect(str(DEPTH / family), n_draws=2))
    f32 = numbers(collect(str(DEPTH / family / "model-F32.gguf"), n_draws=2))
    q8 = collect(str(DEPTH / family / "model-Q8_0.gguf"), n_draws=2)
    assert q8.plan.plans[0].quantization == "Q8_0"
    for key, values in expected.items():
        np.testing.assert_allclose(f32[key], values, rtol=1e-9, atol=1e-12, err_msg=str(key))
        finite = np.isfinite(values)
        np.testing.assert_allclose(
            numbers(q8)[key][finite], values[finite], rtol=rtol, atol=1e-6, err_msg=str(key)
        )


def test_reading_llamas_gguf_rows_unpermuted_misplaces_the_pairs(monkeypatch):
    # Negative control: without the converter's permutation undone, pair 0 is not pair 0.
    monkeypatch.setitem(
        attention.GGUF_FAMILIES,
        "llama",
        attention.GGUF_FAMILIES["llama"].__class__(
            **{**attention.GGUF_FAMILIES["llama"].__dict__, "permuted": False}
        ),
    )
    found = collect(str(DEPTH / "llama" / "model-F32.gguf"))
    assert labelled(found) != {"high-frequency": [[2, 0], [2, 1]]}


def test_the_record_names_the_quantization_and_reads_as_it_is(capsys):
    source = str(DEPTH / "llama" / "model-Q8_0.gguf")
    assert main(["heads", source, "--layer", "2", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["quantization"] == "Q8_0"
    assert any("stored as Q8_0 and dequantized" in note for note in record["notes"])
    assert any("pair by pair" in note for note in record["notes"])
    types = {t["name"]: t["dtype"] for t in record["provenance"]["tensors"]}
    assert types == {"blk.2.attn_q.weight": "Q8_0", "blk.2.attn_k.weight": "Q8_0",
                     "blk.2.attn_norm.weight": "F32"}  # fmt: skip
    assert record["provenance"]["gguf_keys"][0]["gguf"] == "general.architecture"
    assert main(["heads", str(DEPTH / "qwen2" / "model-F32.gguf"), "--json"]) == 0
    float_record = json.loads(capsys.readouterr().out)
    assert float_record["quantization"] is None
    assert not any("pair by pair" in note for note in float_record["notes"])


def test_an_uploaded_gguf_is_read_from_its_bytes():
    data = (DEPTH / "qwen2" / "model-Q8_0.gguf").read_bytes()
    model = weights.open_gguf(data, label="qwen2-Q8_0.gguf")
    found = depth.collect(depth.plan_depth(model))
    assert labelled(found) == {"high-frequency": [[2, 0], [2, 1]]}


def test_rerun_of_a_gguf_layers_export(capsys, tmp_path):
    source = DEPTH / "llama" / "model-Q8_0.gguf"
    (tmp_path / source.name).write_bytes(source.read_bytes())
    assert main(["heads", str(tmp_path / source.name), "--layers", "1-2", "--json"]) == 0
    out = tmp_path / "layers.json"
    out.write_text(capsys.readouterr().out)
    assert main(["rerun", str(out)]) == 0
    assert "numbers recomputed exactly" in capsys.readouterr().out


# --- by name: one quantization of a GGUF repo -------------------------------------------------


def serve_gguf_repo(fake_hub, repo: str) -> None:
    folder = DEPTH / "llama"
    fake_hub.add(repo, {"README.md": b"tiny", "model-F32.gguf": folder / "model-F32.gguf",
                        "model-Q8_0.gguf": folder / "model-Q8_0.gguf"})  # fmt: skip


def test_a_named_quantization_opens_that_file_alone(capsys, fake_hub):
    serve_gguf_repo(fake_hub, "test/llama-GGUF")
    assert main(["heads", "hf:test/llama-GGUF:Q8_0", "--layers", "all", "--json"]) == 0
    printed = capsys.readouterr()
    record = json.loads(printed.out)
    assert fake_hub.requests_for("model-F32.gguf") == []
    sent = fake_hub.requests_for("model-Q8_0.gguf")
    header = attention.open_model(attention.open_source("hf:test/llama-GGUF:Q8_0"))
    assert record["layers"][0]["quantization"] == "Q8_0"
    assert record["bytes_fetched"] == record["bytes_planned"]
    ranges = [s.nbytes for s in sent]
    # The header (read in growing ranges), then each layer's q, k and norm rows: what was
    # planned, nothing else.
    assert sum(ranges) - record["bytes_planned"] <= len(header.tensors) * 64 + 2**16
    assert f"{record['bytes_planned']:,} to fetch" in printed.err
    assert labelled_record(record) == {"high-frequency": [[2, 0], [2, 1]]}
    fake_hub.log.clear()
    assert main(["heads", "hf:test/llama-GGUF:Q8_0", "--layers", "all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bytes_fetched"] == 0
    assert all(s.nbytes < 2**17 for s in fake_hub.requests_for("model-Q8_0.gguf"))


def labelled_record(record: dict) -> dict:
    return {k: v["heads"] for k, v in record["depth"]["labels"].items() if v["heads"]}


def test_rerun_of_a_named_quantization(capsys, fake_hub, tmp_path):
    serve_gguf_repo(fake_hub, "test/llama-GGUF-rerun")
    assert main(["heads", "hf:test/llama-GGUF-rerun:Q8_0", "--layer", "2", "--json"]) == 0
    out = tmp_path / "heads.json"
    out.write_text(capsys.readouterr().out)
    assert main(["rerun", str(out)]) == 0
    assert "numbers recomputed exactly" in capsys.readouterr().out


# --- refused before any weight travels --------------------------------------------------------


def llama_gguf(path, *, arch: str = "llama", drop: tuple[str, ...] = (), q_type: str = "F32"):
    """The planted llama's F32 GGUF written again: `arch` its architecture, tensors `drop`
    left out, layer 0's attn_q stored as `q_type` (raw bytes: never dequantized)."""
    reader = gguf.GGUFReader(DEPTH / "llama" / "model-F32.gguf")
    tensors: dict = {}
    for tensor in reader.tensors:
        if tensor.name in drop:
            continue
        array = np.array(tensor.data).reshape([int(n) for n in reversed(tensor.shape)])
        tensors[tensor.name] = array
    if q_type != "F32":
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[q_type]]
        raw = np.zeros((32, 32 // block * size), dtype=np.uint8)
        tensors["blk.0.attn_q.weight"] = (raw, q_type)

    def keys(writer: gguf.GGUFWriter) -> None:
        writer.add_context_length(64)
        writer.add_embedding_length(32)
        writer.add_block_count(4)
        writer.add_head_count(4)
        writer.add_head_count_kv(2)
        writer.add_rope_freq_base(10000.0)
        writer.add_rope_dimension_count(8)
        writer.add_layer_norm_rms_eps(1e-6)

    return write(path, arch, tensors=tensors, keys=keys)


@pytest.mark.parametrize(
    ("change", "says"),
    [({"drop": ("blk.3.attn_k.weight",)}, "has no tensor ending with 'blk.3.attn_k.weight'"),
     ({"arch": "mamba3x"}, "GGUF architecture 'mamba3x' is not one whose attention tensors"),
     ({"q_type": "Q8_1"}, "stored as Q8_1, which the gguf package cannot dequantize")],
)  # fmt: skip
def test_a_gguf_posviz_cannot_read_is_refused_before_any_weight(tmp_path, fake_hub, change, says):
    path = llama_gguf(tmp_path / "model-Q4_0.gguf", **change)
    with pytest.raises(Refused, match=says.replace("(", "\\(")):
        depth.plan_depth(attention.open_source(str(path)))
    fake_hub.add("test/bad-GGUF", {"model-Q4_0.gguf": path})
    with pytest.raises(Refused, match=says.replace("(", "\\(")):
        depth.plan_depth(attention.open_source("hf:test/bad-GGUF:Q4_0"))
    reader = gguf.GGUFReader(path)
    data_start = min(int(t.data_offset) for t in reader.tensors)
    # Only the header's ranges: each starts within it (the first is 64 KiB, more than this
    # tiny file, as it is a few MB of a real one); a weight's range would start past it.
    starts = [int(s.range.split("=")[1].split("-")[0]) for s in fake_hub.requests_for(path.name)]
    assert starts
    assert max(starts) < data_start


def test_a_single_layer_of_a_gguf_equals_its_layer_in_the_stream():
    source = str(DEPTH / "gpt2" / "model-Q8_0.gguf")
    model = attention.open_source(source)
    streamed = {h.index: h.record() for h in depth.stream_depth(depth.plan_depth(model))}
    for index, record in streamed.items():
        alone = attention.open_layer(model, layer=index)
        result = pipeline.call(pipeline.HEADS_STEPS[alone.kind], alone)
        assert depth.LayerHeads(0, alone, result).record() == record
