"""One layer's queries and keys read per architecture, checked against the models themselves:
the fixtures in tests/data/heads/ hold what transformers' own layer 0 hands to its attention
(tests/data/heads/make_heads_fixtures.py); reading the checkpoint with posviz's rules and
recomputing the states from the layer's input must give the same numbers."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from posviz import io
from posviz.embedding import LoadError
from posviz.heads import learned_heads, pair_columns
from posviz.models import attention, weights
from posviz.models.attention import NoHeadsView, open_layer, plan_layer
from posviz.schemes.rotary import rotary_frequencies
from tests import ROOT

DATA = ROOT / "tests" / "data" / "heads"
FAMILIES = sorted(p.name for p in DATA.iterdir() if (p / "expected.npz").exists())
LEARNED = ["bert", "deit", "gpt2", "gpt_neo", "opt", "opt_post_ln", "roberta", "vit"]


def checkpoint(family: str) -> weights.LocalCheckpoint:
    return weights.open_checkpoint(DATA / family / "model.safetensors", label=f"{family}/model")


def rotate(states: np.ndarray, layer: attention.AttentionLayer) -> np.ndarray:
    """RoPE on the first rotary_dim columns of (heads, T, d) states, positions 0 … T − 1,
    written out from the formula (cos/sin of position times θ_k on each pair's two columns)."""
    spec = layer.plan.rotary
    theta = rotary_frequencies(spec).inv_freq
    a, b = pair_columns(spec.rotary_dim, interleaved=spec.interleaved)
    angle = np.arange(states.shape[1])[:, None] * theta[None, :]
    out = states.copy()
    x, y = states[..., a], states[..., b]
    out[..., a] = x * np.cos(angle) - y * np.sin(angle)
    out[..., b] = y * np.cos(angle) + x * np.sin(angle)
    return out


def states(layer: attention.AttentionLayer, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The query and key states of input `x` [T, H] from the weights posviz read, by einsum."""
    h = layer.norm(x)
    q = np.einsum("hdc,tc->htd", layer.wq.astype(np.float64), h)
    k = np.einsum("hdc,tc->htd", layer.wk.astype(np.float64), h)
    if layer.bq is not None:
        q += layer.bq[:, None, :]
    if layer.bk is not None:
        k += layer.bk[:, None, :]
    if layer.plan.options["head_norm"] == "projection":  # OLMo-2: over the whole projection
        for s, norms in ((q, layer.q_norm), (k, layer.k_norm)):
            flat = s.transpose(1, 0, 2).reshape(s.shape[1], -1)
            gain = np.concatenate([n.weight for n in norms])
            flat = flat / np.sqrt((flat**2).mean(-1, keepdims=True) + layer.plan.eps) * gain
            s[...] = flat.reshape(s.shape[1], s.shape[0], -1).transpose(1, 0, 2)
    elif layer.q_norm is not None:
        q = np.stack([n(q[i]) for i, n in enumerate(layer.q_norm)])
        k = np.stack([n(k[i]) for i, n in enumerate(layer.k_norm)])
    if layer.plan.rotary is not None:
        q, k = rotate(q, layer), rotate(k, layer)
    return q, k


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "t5"])
def test_query_and_key_states_are_the_models_own(family):
    expected = np.load(DATA / family / "expected.npz")
    layer = open_layer(checkpoint(family))
    q, k = states(layer, expected["x"].astype(np.float64))
    if family.startswith("opt"):  # OPT's module multiplies q by d^-0.5 before attention
        q = q * layer.plan.head_dim**-0.5
    if expected["k"].shape[0] == layer.plan.n_heads:  # Falcon-40B's code repeats its kv heads
        k = k[np.arange(layer.plan.n_heads) // (layer.plan.n_heads // layer.plan.n_kv_heads)]
    scale = max(np.abs(expected["q"]).max(), np.abs(expected["k"]).max())
    np.testing.assert_allclose(q, expected["q"], atol=2e-5 * scale, rtol=0)
    np.testing.assert_allclose(k, expected["k"], atol=2e-5 * scale, rtol=0)


@pytest.mark.parametrize("family", LEARNED)
def test_positional_kernel_is_the_models_own_logits_on_position_alone(family):
    expected = np.load(DATA / family / "expected.npz")["kernel"]
    layer = open_layer(checkpoint(family))
    result = learned_heads(
        layer.inputs, layer.wq, layer.wk, layer.bq, layer.bk, layer.plan.causal,
        layer.plan.logit_scale, n_draws=0,
    )  # fmt: skip
    n = expected.shape[1]
    kernels = np.array([result.kernel(h, n) for h in range(result.n_heads)])
    np.testing.assert_allclose(kernels, expected, atol=2e-5 * np.abs(expected).max(), rtol=0)


def test_t5_bias_is_the_models_compute_bias():
    from posviz.heads import t5_offset_bias

    expected = np.load(DATA / "t5" / "expected.npz")["bias"]  # [heads, query, key]
    layer = open_layer(checkpoint("t5"))
    spec = layer.plan.options
    n = expected.shape[1]
    bias = t5_offset_bias(
        layer.relative_bias, n, bidirectional=True, num_buckets=spec["num_buckets"],
        max_distance=spec["max_distance"],
    )  # fmt: skip
    i = np.arange(n)
    np.testing.assert_allclose(bias[:, i[:, None] - i[None, :] + n - 1], expected, atol=1e-6)


def test_negative_control_a_wrong_layout_does_not_match():
    # GPT-NeoX's fused rows split as [q | k | v] thirds (a common mistake) must not match.
    expected = np.load(DATA / "gpt_neox" / "expected.npz")
    layer = open_layer(checkpoint("gpt_neox"))
    plan = layer.plan
    wrong = attention.read_layer(
        attention.replace(plan, layout="rows"),
        lambda name, rows: io.read_tensor(DATA / "gpt_neox" / "model.safetensors", name),
        model="neox",
    )
    q, _ = states(wrong, expected["x"].astype(np.float64))
    assert np.abs(q - expected["q"]).max() > 0.1


def test_fused_rows_read_only_the_query_and_key_rows():
    plan = open_layer(checkpoint("phi3")).plan
    (qkv,) = [r for r in plan.reads if r.role == "qkv"]
    n_heads, n_kv, d = plan.n_heads, plan.n_kv_heads, plan.head_dim
    assert qkv.rows == (0, (n_heads + n_kv) * d)
    assert qkv.nbytes == (n_heads + n_kv) * d * plan.hidden_size * 4


def test_layer_above_0_says_it_is_position_alone():
    layer = open_layer(checkpoint("gpt2"), layer=1)
    assert layer.plan.layer == 1
    assert any("position alone" in note for note in layer.plan.notes)
    assert layer.wq.shape == (4, 8, 32)
    with pytest.raises(LoadError, match="there is no layer 2"):
        open_layer(checkpoint("gpt2"), layer=2)


def test_gemma3_local_layer_rotates_at_its_own_base():
    layer = open_layer(checkpoint("gemma3"))
    assert layer.plan.rotary.base == 10000.0  # its sliding layers', not the global 1e6


def headers(tensors: dict[str, tuple[str, list[int]]]) -> dict[str, io.TensorInfo]:
    return {
        name: io.TensorInfo(name, tuple(shape), dtype) for name, (dtype, shape) in tensors.items()
    }


LLAMA = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 1}  # fmt: skip


def llama_headers(**changes) -> dict[str, io.TensorInfo]:
    tensors = {
        "model.layers.0.self_attn.q_proj.weight": ("BF16", [32, 32]),
        "model.layers.0.self_attn.k_proj.weight": ("BF16", [16, 32]),
        "model.layers.0.input_layernorm.weight": ("BF16", [32]),
    }
    return headers({**tensors, **changes})


def test_plan_says_the_bytes_before_any_is_read():
    plan = plan_layer(LLAMA, llama_headers(), label="m")
    assert plan.nbytes == (32 * 32 + 16 * 32 + 32) * 2
    # A task head's prefix or none: matched by suffix.
    bare = {k.removeprefix("model."): v for k, v in llama_headers().items()}
    assert plan_layer(LLAMA, bare, label="m").nbytes == plan.nbytes


@pytest.mark.parametrize(
    ("config", "tensors", "words"),
    [
        ({**LLAMA, "model_type": "mamba_like"}, {}, "not an architecture posviz reads"),
        (LLAMA, {"model.layers.0.self_attn.q_proj.weight": ("I8", [32, 32])}, "quantized"),
        (LLAMA, {"model.layers.0.self_attn.k_proj.weight": ("BF16", [32, 32])}, "has shape"),
        (
            LLAMA,
            {"model.layers.0.self_attn.q_proj.weight": None,
             "model.layers.0.self_attn.q_proj.qweight": ("I32", [4, 32])},
            "quantized",
        ),
        ({**LLAMA, "quantization_config": {"quant_method": "gptq"}}, {}, "gptq"),
        ({**LLAMA, "num_hidden_layers": 1, "hidden_size": 2**15, "num_attention_heads": 32,
          "num_key_value_heads": 32}, None, "limit of 256 MiB"),
    ],
)  # fmt: skip
def test_bad_models_are_refused_from_their_headers(config, tensors, words):
    if tensors is None:  # a layer too big to fetch
        big = {"model.layers.0.self_attn.q_proj.weight": ("F32", [2**15, 2**15]),
               "model.layers.0.self_attn.k_proj.weight": ("F32", [2**15, 2**15]),
               "model.layers.0.input_layernorm.weight": ("F32", [2**15])}  # fmt: skip
        found = headers(big)
    else:
        found = {k: v for k, v in llama_headers(**{k: v for k, v in tensors.items() if v}).items()
                 if tensors.get(k, 1) is not None}  # fmt: skip
        found |= headers({k: v for k, v in tensors.items() if v and k not in found})
    with pytest.raises(LoadError, match=words):
        plan_layer(config, found, label="m")


@pytest.mark.parametrize(
    ("config", "kind"),
    [
        ({**LLAMA, "model_type": "deepseek_v3", "qk_rope_head_dim": 64, "kv_lora_rank": 512},
         "mla"),
        ({**LLAMA, "model_type": "smollm3", "num_hidden_layers": 2, "no_rope_layers": [0, 1]},
         "nope"),
        ({"model_type": "mamba", "hidden_size": 32}, "none"),
        ({"model_type": "deberta-v2", "relative_attention": True, "hidden_size": 32,
          "max_position_embeddings": 512, "num_attention_heads": 4}, "relative_table"),
    ],
)  # fmt: skip
def test_layers_without_a_per_head_view_say_what_they_are(config, kind):
    with pytest.raises(NoHeadsView) as raised:
        plan_layer(config, llama_headers(), label="m")
    assert raised.value.kind == kind


def test_alibi_reads_nothing():
    plan = plan_layer({"model_type": "bloom", "n_head": 6, "hidden_size": 48}, {}, label="b")
    assert plan.kind == "alibi"
    assert plan.reads == ()
    assert plan.n_heads == 6


def test_a_vision_tower_with_the_same_suffix_is_not_read(tmp_path):
    vision = "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight"
    text = "language_model.model.layers.0.self_attn.q_proj.weight"
    found = llama_headers() | headers({vision: ("F32", [8, 8])})
    found[text] = found.pop("model.layers.0.self_attn.q_proj.weight")
    plan = plan_layer(LLAMA, found, label="m")
    assert any(r.name == text for r in plan.reads)


def test_rows_of_a_local_file_are_read_alone(tmp_path):
    array = np.arange(60, dtype=np.float32).reshape(6, 10)
    path = tmp_path / "w.safetensors"
    save_file({"w": array}, str(path))
    np.testing.assert_array_equal(io.read_rows(path, "w", 2, 5), array[2:5])
    with pytest.raises(LoadError, match="no rows"):
        io.read_rows(path, "w", 4, 9)


def test_fixture_headers_are_what_save_pretrained_wrote():
    # The fixtures keep transformers' names and dtypes (Llama in bfloat16, Gemma in float16).
    def dtypes(family: str) -> set[str]:
        raw = (DATA / family / "model.safetensors").read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + n])
        return {v["dtype"] for k, v in header.items() if k != "__metadata__"}

    assert dtypes("llama") == {"BF16"}
    assert dtypes("gemma") == {"F16"}
    assert json.loads(Path(DATA / "versions.json").read_text())["transformers"].startswith("5.")
