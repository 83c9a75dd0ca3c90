"""The Schemes page: every preset's scheme drawn, a rotary table opened as the current table,
uploaded configs read and bad ones refused with a message."""

from __future__ import annotations

import html
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import posviz
from posviz.schemes.presets import PRESETS
from tests import ROOT, apptest

PAGE = str(ROOT / "pages/schemes.py")


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def page(**state) -> AppTest:
    at = apptest(PAGE)
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def test_llama31_ladder_marks_its_bands_and_contexts():
    at = page()
    assert not at.exception, at.exception
    (fig,) = figures(at)
    names = [trace["name"] for trace in fig["data"]]
    assert names == ["unscaled", "scaled: kept (29)", "scaled: blended (6)", "scaled: divided (29)"]
    assert fig["layout"]["yaxis"]["type"] == "log"
    marked = {shape["y0"] for shape in fig["layout"]["shapes"]}
    assert marked == {8192, 131072}
    labels = {a["text"]: a["y"] for a in fig["layout"]["annotations"]}
    assert labels == {"original context 8,192": np.log10(8192), "context 131,072": np.log10(131072)}
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["rotary width"] == "128"
    assert metrics["pairs beyond L₀"] == "29"


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_runs(name):
    at = page(**{"schemes.preset": name})
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.markdown[0].value.startswith("**")  # the scheme in words


@pytest.mark.parametrize(
    ("section", "trace_type"),
    [("Bands", "scatter"), ("Similarity decay", "scatter"), ("Numbers", None)],
)
def test_rotary_sections(section, trace_type):
    at = page(**{"schemes.section": section})
    assert not at.exception, at.exception
    if trace_type:
        (fig,) = figures(at)
        assert fig["data"][0]["type"] == trace_type
        assert len(fig["data"]) == (4 if section == "Similarity decay" else 1)
    else:
        assert len(at.dataframe) == 1


def test_longrope_and_dynamic_sections():
    at = page(**{"schemes.preset": "microsoft/Phi-3.5-mini-instruct",
                 "schemes.section": "LongRoPE factors"})  # fmt: skip
    assert not at.exception, at.exception
    (fig,) = figures(at)
    assert [len(t["y"]["bdata"]) > 0 for t in fig["data"]] == [True, True]


def test_open_the_rotary_table_makes_it_the_current_table():
    at = page(**{"schemes.preset": "mistralai/Mistral-7B-v0.1", "schemes.rows": 512})
    at.button[0].click().run()
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    assert table.shape == (512, 128)
    np.testing.assert_allclose(table.values[3, :64], np.cos(3 * 10000.0 ** (-np.arange(64) / 64)))
    assert "is now the current table" in at.success[0].value
    # Every page then analyses it.
    spectrum = apptest("pages/spectrum.py")
    spectrum.session_state["posviz.table"] = table
    spectrum.run()
    assert not spectrum.exception, spectrum.exception


def test_alibi_and_t5():
    at = page(**{"schemes.preset": "bigscience/bloom"})
    assert not at.exception, at.exception
    (fig,) = figures(at)
    assert len(fig["data"][0]["x"]["bdata"]) > 0
    assert "112 heads" in fig["layout"]["title"]["text"]
    at = page(**{"schemes.preset": "google-t5/t5-small"})
    (fig,) = figures(at)
    assert [t["name"] for t in fig["data"]] == ["encoder (bidirectional)", "decoder (causal)"]
    assert "open the model from the Hub" in at.info[0].value


def test_an_uploaded_config_and_a_bad_one():
    at = page(**{"schemes.source": "config.json"})
    assert not at.exception, at.exception
    config = json.dumps(PRESETS["EleutherAI/gpt-j-6b"]).encode()
    at.get("file_uploader")[0].set_value(("config.json", config, "application/json")).run()
    assert not at.exception, at.exception
    assert at.metric[0].value == "64"
    bad = b'{"rope_theta": -3, "hidden_size": 64, "num_attention_heads": 4}'
    at.get("file_uploader")[0].set_value(("config.json", bad, "application/json")).run()
    assert not at.exception, at.exception
    assert "must not be negative" in at.error[0].value


@pytest.mark.parametrize(
    ("config", "says"),
    [
        # A 40-byte config of 20,000 heads cost 36 s and kept +780 MB per upload.
        ({"model_type": "bloom", "n_head": 20_000}, "n_head in config.json is 20000"),
        # T5's distance 10**6: 99 s and +1.4 GB kept.
        (
            {**PRESETS["google-t5/t5-small"], "relative_attention_max_distance": 10**6},
            "relative_attention_max_distance in config.json is 1000000",
        ),
        (
            {**PRESETS["EleutherAI/gpt-j-6b"], "rope_scaling": {"rope_type": [1]}},
            "rope_type in config.json is [1]; expected a name",
        ),
    ],
    ids=["alibi-heads", "t5-distance", "rope_type-list"],
)
def test_a_config_that_would_size_an_allocation_is_refused_with_a_message(config, says):
    at = page(**{"schemes.source": "config.json"})
    data = json.dumps(config).encode()
    at.get("file_uploader")[0].set_value(("config.json", data, "application/json")).run()
    assert not at.exception, at.exception
    assert says in html.unescape(at.error[0].value)  # shown as literal text
    assert not at.get("plotly_chart")


def test_the_schemes_steps_are_cached_as_every_other_step():
    # One cache mechanism, byte-bounded (issue 37: the Schemes caches counted entries).
    from posviz import pipeline
    from posviz.ui import cache

    drawn = {s.run for s in pipeline.STEPS.values() if s.takes in ("scheme", "schemes")}
    assert drawn <= set(cache._CACHED)


def test_a_sinusoidal_model_opens_its_table():
    marian = {"model_type": "marian", "d_model": 512, "max_position_embeddings": 512}
    at = page(**{"schemes.source": "config.json"})
    at.get("file_uploader")[0].set_value(("c.json", json.dumps(marian).encode(), "x")).run()
    assert "fixed sinusoidal" in at.info[0].value.lower()
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert at.session_state["posviz.table"].shape == (512, 512)
    # A width no table may hold is said, the table kept (it was a traceback).
    wide = {**marian, "d_model": 10**6}
    at.get("file_uploader")[0].set_value(("c.json", json.dumps(wide).encode(), "x")).run()
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert "above the limit of 67,108,864" in html.unescape(at.error[0].value)
    assert at.session_state["posviz.table"].shape == (512, 512)


def hub_page(repo: str) -> AppTest:
    at = page(**{"schemes.source": "Hub model"})
    at.text_input(key="schemes.repo").set_value(repo)
    at.button[0].click().run()
    assert not at.exception, at.exception
    return at


def test_t5_from_the_hub_draws_each_heads_bias(fake_hub, downloads):
    from safetensors.numpy import save

    bias = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    name = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    config = json.dumps(PRESETS["google-t5/t5-small"]).encode()
    fake_hub.add("acme/t5-page", {"config.json": config, "model.safetensors": save({name: bias})})
    at = hub_page("acme/t5-page")
    assert not [s for s in fake_hub.log if "safetensors" in s.path]  # config.json only so far
    at.toggle(key="schemes.read_bias").set_value(True).run()
    assert not at.exception, at.exception
    heat = figures(at)[-1]["data"][0]
    assert heat["type"] == "heatmap"
    assert "relative_attention_bias" in figures(at)[-1]["layout"]["title"]["text"]
    # Its numbers rerun from the Hub at the commit the page read (the tensor read again).
    at.session_state["schemes.bias_numbers"] = True
    at.run()
    data = json.loads(downloads["relative_bias.json"]())
    assert data["analysis"] == "relative_bias"
    assert data["provenance"]["tensor"] == name
    assert data["columns"]["head_7"][0] == bias[15, 7]  # key 128 before: the far bucket
    result = posviz.rerun(data)
    assert result.ok
    assert len(result.checks) == 257 * 11


def test_deberta_from_the_hub_opens_its_relative_table(fake_hub):
    from safetensors.numpy import save

    rel = np.random.default_rng(0).standard_normal((512, 32)).astype(np.float32)
    config = json.dumps(PRESETS["microsoft/deberta-v3-base"]).encode()
    weights = save({"deberta.encoder.rel_embeddings.weight": rel})
    fake_hub.add("acme/deberta-page", {"config.json": config, "model.safetensors": weights})
    at = hub_page("acme/deberta-page")
    assert any("row r is bucket r − 256" in c.value for c in at.caption)
    at.session_state["schemes.row_offsets"] = True  # the offsets of every row, on request
    at.run()
    (rows,) = at.dataframe
    assert rows.value["offsets q − k"].tolist()[456] == "278 … 280"
    at.button[1].click().run()  # [0] is the form's Open
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    np.testing.assert_array_equal(table.values, rel)
    assert table.labels.label(456) == "278 … 280"
    assert "rows are buckets -256 … 255; offsets q − k: one per row within ±128" in (
        at.success[0].value
    )


def test_an_unknown_hub_model_is_said(fake_hub):
    at = hub_page("acme/missing")
    assert "no such model on the Hub" in at.error[0].value


@pytest.mark.parametrize("wrong", [False, True])
def test_a_stored_inv_freq_checked_on_the_page(fake_hub, wrong):
    from safetensors.numpy import save

    inv_freq = (10000.0 ** (-np.arange(0, 128, 2) / 128)).astype(np.float32)
    if wrong:
        inv_freq = inv_freq[::-1].copy()
    name = "model.layers.0.self_attn.rotary_emb.inv_freq"
    repo = f"acme/old-mistral-{wrong}"
    config = json.dumps(PRESETS["mistralai/Mistral-7B-v0.1"]).encode()
    fake_hub.add(repo, {"config.json": config, "model.safetensors": save({name: inv_freq})})
    at = hub_page(repo)
    at.toggle(key="schemes.inv_freq").set_value(True).run()
    assert not at.exception, at.exception
    if wrong:
        assert "does not match" in at.error[0].value
    else:
        assert "matches" in at.success[0].value


def test_overlay_of_several_rotary_models():
    at = page(**{"schemes.overlay": True})
    assert not at.exception, at.exception
    ladders, decays = figures(at)[-2:]
    names = [t["name"] for t in ladders["data"]]
    assert names == [
        "meta-llama/Llama-3.1-8B",
        "mistralai/Mistral-7B-v0.1",
        "Qwen/Qwen2-7B",
        "microsoft/Phi-3.5-mini-instruct",
    ]  # this model, then the first three other rotary presets
    assert decays["layout"]["xaxis"]["type"] == "log"


def test_the_collection_takes_rotary_tables():
    at = apptest("pages/collection.py")
    at.session_state["collection.schemes.models"] = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen2-7B"]
    at.session_state["collection.schemes.rows"] = 256
    at.run()
    at.button(key="collection.schemes.add").click().run()
    assert not at.exception, at.exception
    members = at.session_state["posviz.collection"]
    assert [m.label for m in members] == ["meta-llama/Llama-3.1-8B", "Qwen/Qwen2-7B"]
    assert [m.table.shape for m in members] == [(256, 128), (256, 128)]


# --- widgets that follow the model (issue 33 item 7) -----------------------------------------


def ladder_contexts(at: AppTest) -> set[str]:
    (ladder,) = figures(at)
    return {a["text"] for a in ladder["layout"]["annotations"]}


def test_a_new_model_opens_at_its_own_length_and_rows():
    at = page()
    assert at.number_input(key="schemes.context").value == 131072
    at.number_input(key="schemes.context").set_value(5000).run()
    at.session_state["schemes.section"] = "Bands"  # another section keeps the length chosen
    at.run()
    assert at.number_input(key="schemes.context").value == 5000
    at.session_state["schemes.section"] = "Frequency ladder"
    # GPT-J (2048 positions) kept Llama's 131072 and drew "context 131,072" on its ladder.
    at.selectbox(key="schemes.preset").set_value("EleutherAI/gpt-j-6b").run()
    assert not at.exception, at.exception
    assert at.number_input(key="schemes.context").value == 2048
    assert at.number_input(key="schemes.rows").value == 2048
    assert ladder_contexts(at) == {"context 2,048"}
    # DeepSeek-V3 opened at Llama's 131072: its own is 163840, its table its original 4096 rows.
    at.selectbox(key="schemes.preset").set_value("deepseek-ai/DeepSeek-V3").run()
    assert at.number_input(key="schemes.context").value == 163840
    assert at.number_input(key="schemes.rows").value == 4096
    assert ladder_contexts(at) == {"original context 4,096", "context 163,840"}
    # Through another kind of scheme (whose page draws no length) and back: the length chosen
    # for this model is kept (as every setting is, across pages too); another model's own.
    at.number_input(key="schemes.context").set_value(777).run()
    at.selectbox(key="schemes.preset").set_value("bigscience/bloom").run()
    at.selectbox(key="schemes.preset").set_value("deepseek-ai/DeepSeek-V3").run()
    assert at.number_input(key="schemes.context").value == 777
    at.selectbox(key="schemes.preset").set_value("EleutherAI/gpt-j-6b").run()
    assert at.number_input(key="schemes.context").value == 2048


def test_every_model_dependent_widget_follows_the_model():
    at = page(**{"schemes.preset": "google/gemma-3-4b-it", "schemes.overlay": True})
    assert at.selectbox(key="schemes.layer").value == "full_attention"
    at.selectbox(key="schemes.layer").set_value("sliding_attention").run()
    chosen = at.multiselect(key="schemes.chosen")
    assert "google/gemma-3-4b-it" not in chosen.options
    chosen.set_value(["Qwen/Qwen2-7B"]).run()
    at.selectbox(key="schemes.preset").set_value("mistralai/Mistral-7B-v0.1").run()
    assert not at.exception, at.exception
    assert at.multiselect(key="schemes.chosen").value == [
        "meta-llama/Llama-3.1-8B", "Qwen/Qwen2-7B", "microsoft/Phi-3.5-mini-instruct",
    ]  # fmt: skip
    # Back to Gemma-3: its first layer type, not the sliding one chosen before.
    at.selectbox(key="schemes.preset").set_value("google/gemma-3-4b-it").run()
    assert at.selectbox(key="schemes.layer").value == "full_attention"
    # ALiBi: BLOOM names no context (alibi_bias's default 2048); MPT's is its max_seq_len.
    at.selectbox(key="schemes.preset").set_value("bigscience/bloom").run()
    assert at.number_input(key="schemes.distance").value == 2048
    at.number_input(key="schemes.distance").set_value(100).run()
    at.selectbox(key="schemes.preset").set_value("mosaicml/mpt-7b").run()
    assert at.number_input(key="schemes.distance").value == 2048
    assert not at.exception, at.exception


def test_an_uploaded_config_opens_at_its_own_length():
    at = page(**{"schemes.source": "config.json"})
    for context in (2048, 32768):
        config = {**PRESETS["mistralai/Mistral-7B-v0.1"], "max_position_embeddings": context}
        data = json.dumps(config).encode()
        at.get("file_uploader")[0].set_value(("config.json", data, "application/json")).run()
        assert at.number_input(key="schemes.context").value == context


def test_the_widgets_bounds_are_their_functions():
    from posviz._params import bounds_of
    from posviz.schemes.rotary import rotary_frequencies, rotary_table

    at = page()
    context, rows = at.number_input(key="schemes.context"), at.number_input(key="schemes.rows")
    assert (context.min, context.max) == (1, bounds_of(rotary_frequencies)["context"].high)
    assert (rows.min, rows.max) == (10, 8192) == (
        bounds_of(rotary_table)["positions"].low, bounds_of(rotary_table)["positions"].high
    )  # fmt: skip


# --- each layer (issue 33 item 3) ----------------------------------------------------------


def layers_page(name: str, **state) -> AppTest:
    at = page(**{"schemes.preset": name, "schemes.section": "Layers", **state})
    assert not at.exception, at.exception
    return at


def test_nope_layers_on_the_strip_and_in_the_table():
    at = layers_page("HuggingFaceTB/SmolLM3-3B")
    assert "36 layers: 27 RoPE, 9 NoPE (layers 3-35, every 4th)" in html.unescape(
        " ".join(c.value for c in at.caption)
    )
    (strip,) = figures(at)
    nope = next(t for t in strip["data"] if t["name"] == "NoPE")
    assert [b + 0.5 for b in nope["base"]] == list(range(3, 36, 4))
    (table,) = at.dataframe
    frame = table.value
    assert len(frame) == 36
    assert frame.loc[frame["rope"] == False, "layer"].tolist() == list(range(3, 36, 4))  # noqa: E712


def test_gemma3_sliding_and_full_layers():
    at = layers_page("google/gemma-3-4b-it")
    frame = at.dataframe[0].value
    full = frame["layer type"] == "full_attention"
    assert frame.loc[full, "layer"].tolist() == [5, 11, 17, 23, 29]
    assert frame.loc[full, "base"].tolist() == [1e6] * 5
    assert set(frame.loc[~full, "base"]) == {1e4}
    assert set(frame.loc[~full, "sliding window"]) == {1024}


def test_qwen2_vl_pairs_of_each_axis():
    at = layers_page("Qwen/Qwen2-VL-7B-Instruct", **{"schemes.mrope": True})
    frame = at.dataframe[0].value
    assert (frame["time pairs"].iloc[0], frame["height pairs"].iloc[0],
            frame["width pairs"].iloc[0]) == ("0-15", "16-39", "40-63")  # fmt: skip
    _, pairs = figures(at)
    assert [t["name"] for t in pairs["data"]] == ["time", "height", "width"]


def test_llama4_temperature_at_the_length_chosen():
    at = layers_page("meta-llama/Llama-4-Scout-17B-16E", **{"schemes.context": 16384})
    frame = at.dataframe[0].value
    column = frame["attention temperature at 16383"]
    assert column[~frame["rope"].astype(bool)].tolist() == [1 + 0.1 * np.log(3)] * 12


@pytest.mark.parametrize(
    ("preset", "title"),
    [
        ("meta-llama/Llama-3.1-8B", "Overlay several rotary models"),
        ("bigscience/bloom", "Rotary models side by side (this model's positions are not rotary"),
    ],
)
def test_the_overlay_says_when_the_model_is_not_rotary(preset, title):
    # It read "Overlay several rotary models" above BLOOM's ALiBi, as if BLOOM were one.
    at = apptest("pages/schemes.py")
    at.session_state["schemes.preset"] = preset
    at.run()
    assert not at.exception, at.exception
    assert any(e.label.startswith(title) for e in at.expander)
