"""Make tests/data/heads/: one tiny random model per attention family of HEADS.md, saved by
transformers' own save_pretrained, and what the model itself computes from it.

Not run by the tests (posviz's requirements never hold torch or transformers). Made with
torch 2.13.0 (CPU) and transformers 5.24.0 in a scratch venv outside the repo:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch==2.13.0 'transformers>=5,<6'
    /tmp/venv/bin/python tests/data/heads/make_heads_fixtures.py

Per family, a folder <family>/ with config.json and model.safetensors (the MLP tensors
dropped: posviz never reads them, and they are most of the bytes; every name and value kept is
as save_pretrained wrote it), and expected.npz:

- ``x``: the layer's input for 12 random tokens (captured by a forward pre-hook), [T, H];
- ``q``, ``k``: the query and key states exactly as the model hands them to its attention
  function (after norms, biases, q/k norms and the rotation), [n_heads, T, d] and
  [n_kv_heads, T, d]; ``scaling``: the logit scale the model passes with them;
- learned absolute tables: ``kernel`` [n_heads, P, P], the model's own logits q·k·scaling
  when the token part of the input is zero (so the layer sees position alone), P positions;
- T5: ``bias`` [n_heads, T, T], the model's compute_bias for T queries and keys.

Every parameter is perturbed by N(0, 0.2) so that biases and norm gains are not trivial.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.falcon import modeling_falcon
from transformers.models.gpt_neo import modeling_gpt_neo

HERE = Path(__file__).parent
T = 12  # tokens
SMALL = {"vocab_size": 16}

captured: dict[str, torch.Tensor | float] = {}


def capture(module, query, key, value, attention_mask, scaling=None, **kwargs):
    """An attention function that records the first call's query and key, then runs sdpa."""
    if "q" not in captured:
        captured["q"], captured["k"] = query.detach().clone(), key.detach().clone()
        captured["scaling"] = float(scaling if scaling is not None else query.shape[-1] ** -0.5)
    kwargs.pop("softcap", None)  # Gemma-2: only what follows layer 0's q/k differs
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, **kwargs
    )


AttentionInterface.register("capture", capture)

_falcon_rope = modeling_falcon.apply_rotary_pos_emb


def _falcon_capture(q, k, cos, sin, unsqueeze_dim=1):
    q, k = _falcon_rope(q, k, cos, sin, unsqueeze_dim)
    if "q" not in captured:
        captured["q"], captured["k"] = q.detach().clone(), k.detach().clone()
        captured["scaling"] = q.shape[-1] ** -0.5
    return q, k


modeling_falcon.apply_rotary_pos_emb = _falcon_capture
_neo_attn = modeling_gpt_neo.GPTNeoSelfAttention._attn


def _neo_capture(self, query, key, value, attention_mask=None):
    if "q" not in captured:  # GPT-Neo's own eager attention: logits are q·k, unscaled
        captured["q"], captured["k"] = query.detach().clone(), key.detach().clone()
        captured["scaling"] = 1.0
    return _neo_attn(self, query, key, value, attention_mask)


modeling_gpt_neo.GPTNeoSelfAttention._attn = _neo_capture

#: family -> (config class, model class, config, how the layer's input is made position-only)
DECODER = {"hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 16, **SMALL}
FAMILIES = {
    "gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        {"n_embd": 32, "n_head": 4, "n_layer": 2, "n_inner": 16, "n_positions": 32, **SMALL},
    ),
    "gpt_neo": (
        "GPTNeoConfig",
        "GPTNeoForCausalLM",
        {"hidden_size": 32, "num_heads": 4, "num_layers": 2, "intermediate_size": 16,
         "max_position_embeddings": 32, "attention_types": [[["global", "local"], 1]],
         "window_size": 4, **SMALL},
    ),
    "bert": (
        "BertConfig",
        "BertForMaskedLM",
        {**DECODER, "num_hidden_layers": 2, "max_position_embeddings": 32, "type_vocab_size": 2},
    ),
    "roberta": (
        "RobertaConfig",
        "RobertaForMaskedLM",
        {
            **DECODER,
            "num_hidden_layers": 1,
            "max_position_embeddings": 34,
            "type_vocab_size": 1,
            "pad_token_id": 1,
        },
    ),
    "vit": (
        "ViTConfig",
        "ViTModel",
        {
            "hidden_size": 32,
            "num_attention_heads": 4,
            "intermediate_size": 16,
            "num_hidden_layers": 1,
            "image_size": 8,
            "patch_size": 2,
            "num_channels": 1,
        },
    ),
    "deit": (
        "DeiTConfig",
        "DeiTModel",
        {
            "hidden_size": 32,
            "num_attention_heads": 4,
            "intermediate_size": 16,
            "num_hidden_layers": 1,
            "image_size": 8,
            "patch_size": 2,
            "num_channels": 1,
        },
    ),
    "opt": (
        "OPTConfig",
        "OPTForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "ffn_dim": 16, "max_position_embeddings": 32,
         "word_embed_proj_dim": 32},
    ),
    "opt_post_ln": (
        "OPTConfig",
        "OPTForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "ffn_dim": 16, "max_position_embeddings": 32,
         "word_embed_proj_dim": 16, "do_layer_norm_before": False},
    ),
    "llama": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {**DECODER, "num_hidden_layers": 2, "num_key_value_heads": 2,
         "max_position_embeddings": 64},
    ),
    "mistral": (
        "MistralConfig",
        "MistralForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "num_key_value_heads": 2},
    ),
    "qwen2": (
        "Qwen2Config",
        "Qwen2ForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "num_key_value_heads": 2},
    ),
    "gemma": (
        "GemmaConfig",
        "GemmaForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "num_key_value_heads": 1, "head_dim": 16},
    ),
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "num_key_value_heads": 2, "head_dim": 16,
         "query_pre_attn_scalar": 16},
    ),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {**DECODER, "num_hidden_layers": 2, "num_key_value_heads": 2, "head_dim": 16,
         "query_pre_attn_scalar": 16, "sliding_window": 8},
    ),
    "phi3": (
        "Phi3Config",
        "Phi3ForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "num_key_value_heads": 2, "partial_rotary_factor": 0.5,
         "pad_token_id": 0},
    ),
    "phi": (
        "PhiConfig",
        "PhiForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "partial_rotary_factor": 0.5, "qk_layernorm": True},
    ),
    "olmo": (
        "OlmoConfig", "OlmoForCausalLM", {**DECODER, "num_hidden_layers": 1, "pad_token_id": 0}
    ),
    "olmo2": (
        "Olmo2Config",
        "Olmo2ForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "num_key_value_heads": 2, "pad_token_id": 0},
    ),
    "stablelm": (
        "StableLmConfig",
        "StableLmForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "num_key_value_heads": 2, "partial_rotary_factor": 0.5,
         "use_qkv_bias": True, "qk_layernorm": True},
    ),
    "gpt_neox": (
        "GPTNeoXConfig",
        "GPTNeoXForCausalLM",
        {**DECODER, "num_hidden_layers": 1, "rotary_pct": 0.5},
    ),
    "gptj": (
        "GPTJConfig",
        "GPTJForCausalLM",
        {"n_embd": 32, "n_head": 4, "n_layer": 1, "n_inner": 16, "rotary_dim": 4, **SMALL},
    ),
    "falcon_multi_query": (
        "FalconConfig",
        "FalconForCausalLM",
        {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1, "multi_query": True,
         "new_decoder_architecture": False, "parallel_attn": True, "bias": False, **SMALL},
    ),
    "falcon_mha": (
        "FalconConfig",
        "FalconForCausalLM",
        {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1, "multi_query": False,
         "new_decoder_architecture": False, "parallel_attn": True, "bias": True, **SMALL},
    ),
    "falcon_new": (
        "FalconConfig",
        "FalconForCausalLM",
        {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1, "num_kv_heads": 2,
         "new_decoder_architecture": True, "parallel_attn": True, "bias": False, **SMALL},
    ),
    "t5": (
        "T5Config",
        "T5EncoderModel",
        {"d_model": 32, "d_kv": 8, "num_heads": 4, "num_layers": 1, "d_ff": 16,
         "relative_attention_num_buckets": 8, "relative_attention_max_distance": 16, **SMALL},
    ),
}  # fmt: skip
#: Learned absolute tables: the kernel is taken from these many positions.
LEARNED = {
    "gpt2": 12,
    "gpt_neo": 12,
    "deit": 18,
    "bert": 12,
    "roberta": 12,
    "vit": 17,
    "opt": 12,
    "opt_post_ln": 12,
}
#: Families stored in half precision (save_pretrained keeps the model's dtype).
HALF = {"llama": torch.bfloat16, "gemma": torch.float16}
#: Tensors save_pretrained writes that posviz never reads (feed-forward and output layers).
UNREAD = ("mlp", "ffn", "fc1", "fc2", "intermediate", "output.dense", "lm_head", "dense_h_to_4h",
          "dense_4h_to_h", "DenseReluDense", "cls.", "pooler", "mixer", "c_fc", "c_proj",
          "feed_forward")  # fmt: skip


def build(family: str):
    config_name, model_name, options = FAMILIES[family]
    config = getattr(transformers, config_name)(**options)
    eager = family.startswith("falcon") or family == "gpt_neo"
    implementation = "eager" if eager else "capture"
    torch.manual_seed(sum(map(ord, family)))
    model = getattr(transformers, model_name)._from_config(
        config, attn_implementation=implementation
    )
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    dtype = HALF.get(family)
    if dtype is not None:  # stored in half precision; computed in float32 from the same values
        with torch.no_grad():  # parameters only: the rotary inv_freq buffer stays float32
            for p in model.parameters():
                p.copy_(p.to(dtype).to(torch.float32))
    return model.eval(), dtype


def layer0(model):
    for name, module in model.named_modules():
        if name.endswith(("layers.0", "layer.0", "h.0", "block.0")):
            return module
    msg = "no layer 0"
    raise LookupError(msg)


def run(model, family: str, inputs: dict) -> dict:
    captured.clear()
    seen = {}

    def keep(module, args, kwargs):
        seen.setdefault("x", (args[0] if args else kwargs["hidden_states"]).detach().clone())

    hook = layer0(model).register_forward_pre_hook(keep, with_kwargs=True)
    with torch.no_grad():
        model(**inputs)
    hook.remove()
    return {
        "x": seen["x"][0],
        "q": captured["q"][0],
        "k": captured["k"][0],
        "scaling": captured["scaling"],
    }


def position_only(model, family: str, n: int) -> dict:
    """The model's own input with its token part zero: layer 0 then sees position alone."""
    if family in ("vit", "deit"):
        with torch.no_grad():  # the patches' projection and the class token(s) set to zero
            model.embeddings.patch_embeddings.projection.weight.zero_()
            model.embeddings.patch_embeddings.projection.bias.zero_()
            model.embeddings.cls_token.zero_()
            if family == "deit":
                model.embeddings.distillation_token.zero_()
        return {"pixel_values": torch.zeros(1, 1, 8, 8)}
    width = model.get_input_embeddings().weight.shape[1]
    inputs = {"inputs_embeds": torch.zeros(1, n, width)}
    if family in ("bert",):
        inputs["token_type_ids"] = torch.zeros(1, n, dtype=torch.long)
    if family == "roberta":  # position ids from input ids; given here as the model makes them
        inputs["position_ids"] = torch.arange(2, n + 2)[None]
    return inputs


def save(model, family: str, dtype) -> Path:
    out = HERE / family
    shutil.rmtree(out, ignore_errors=True)
    saved = model if dtype is None else copy.deepcopy(model).to(dtype)
    saved.save_pretrained(out, safe_serialization=True)
    weights = out / "model.safetensors"
    tensors = {k: v for k, v in load_file(weights).items() if not any(u in k for u in UNREAD)}
    save_file(tensors, weights, metadata={"format": "pt"})
    for extra in out.iterdir():  # generation_config.json and the like: not read
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()
    return out


def main() -> None:
    for family in FAMILIES:
        model, dtype = build(family)
        generator = torch.Generator().manual_seed(0)
        if family in ("vit", "deit"):
            inputs = {"pixel_values": torch.randn(1, 1, 8, 8, generator=generator)}
        else:
            inputs = {"input_ids": torch.randint(2, 16, (1, T), generator=generator)}
        expected = {}
        if family == "t5":
            with torch.no_grad():
                attention = model.encoder.block[0].layer[0].SelfAttention
                expected["bias"] = attention.compute_bias(T, T)[0].numpy()
        else:
            got = run(model, family, inputs)
            expected |= {"x": got["x"].numpy(), "q": got["q"].numpy(), "k": got["k"].numpy()}
            expected["scaling"] = np.float64(got["scaling"])
        out = save(model, family, dtype)  # before ViT's patches are zeroed below
        if family in LEARNED:
            got = run(model, family, position_only(model, family, LEARNED[family]))
            kernel = torch.einsum("hid,hjd->hij", got["q"], got["k"]) * got["scaling"]
            expected["kernel"] = kernel.numpy()
        np.savez_compressed(out / "expected.npz", **expected)
        size = sum(f.stat().st_size for f in out.iterdir())
        print(f"{family}: {size:,} bytes, {sorted(expected)}")
    info = {"torch": torch.__version__, "transformers": transformers.__version__}
    (HERE / "versions.json").write_text(json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
