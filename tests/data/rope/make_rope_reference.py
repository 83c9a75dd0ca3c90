"""Write the rope fixtures: configs as transformers 5 reads and writes them, and what its own code
computes from them (inv_freq, attention factors, cos/sin rows, each layer's attention).

Run by hand in a scratch venv, never by the tests (posviz needs neither torch nor transformers):

    python3 -m venv /tmp/scratch && /tmp/scratch/bin/pip install torch==2.13.0 transformers==5.24.0
    /tmp/scratch/bin/python tests/data/rope/make_rope_reference.py

For each model of HUB (config.json excerpts in the layout the Hub serves, transformers v4's):
- v4/NAME.json: the excerpt as given;
- v5/NAME.json: the same config after transformers' own ``save_pretrained`` (``rope_parameters``
  with ``rope_theta`` and ``partial_rotary_factor`` nested, ``layer_types``, ``per_layer_config``);
- reference.npz: per model and layer type, ``inv_freq`` (float32, as the model's rotary embedding
  holds it at init and at the lengths of LENGTHS), and ``cos``/``sin`` rows at POSITIONS (the
  first half of the rotate_half layout: one column per pair), computed by the rotary embedding
  class's own forward;
- reference.json: the scalars: attention factor per layer type and length, and per layer what
  the attention module built from the config (on the meta device: no weights allocated) holds:
  its softmax ``scaling``, RoPE or not, sliding window, layer type, Llama-4's temperature
  settings; and the message transformers gives for each config of REFUSED.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

HERE = Path(__file__).parent
POSITIONS = [0, 1, 7, 300, 4095, 8191]

HUB: dict[str, dict] = {
    "llama-3.1-8b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    },
    "qwen2-7b": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "num_hidden_layers": 28,
        "max_position_embeddings": 131072,
        "rope_theta": 1000000.0,
        "sliding_window": 131072,
        "use_sliding_window": False,
        "max_window_layers": 28,
    },
    "mistral-7b-v0.1": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "sliding_window": 4096,
    },
    "phi-3.5-mini-longrope": {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "num_hidden_layers": 32,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "long_factor": "PHI", "short_factor": "PHI"},
    },
    "deepseek-v3": {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "num_hidden_layers": 61,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "max_position_embeddings": 163840,
        "rope_theta": 10000,
        "rope_scaling": {
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
            "type": "yarn",
        },
    },
    "gemma-3-4b": {
        "model_type": "gemma3_text",
        "hidden_size": 2560,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "num_hidden_layers": 34,
        "max_position_embeddings": 131072,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
        "query_pre_attn_scalar": 256,
    },
    # transformers 5.24's own defaults for Gemma-4's text model (its docstring's gemma-4-e2b).
    "gemma-4-text": {"model_type": "gemma4_text"},
    "smollm3-3b": {
        "model_type": "smollm3",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "num_hidden_layers": 36,
        "max_position_embeddings": 65536,
        "rope_theta": 5000000.0,
        "no_rope_layer_interval": 4,
        "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(36)],
    },
    "llama-4-scout-text": {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 48,
        "max_position_embeddings": 10485760,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 16.0,
            "high_freq_factor": 1.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "no_rope_layers": [],
        "attention_chunk_size": 8192,
        "attn_temperature_tuning": True,
        "floor_scale": 8192,
        "attn_scale": 0.1,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_local_experts": 16,
        "interleave_moe_layer_step": 1,
    },
    "qwen2-vl-7b": {
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "num_hidden_layers": 28,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    },
    "qwen3-vl-8b": {
        "model_type": "qwen3_vl",
        "text_config": {
            "model_type": "qwen3_vl_text",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_hidden_layers": 36,
            "max_position_embeddings": 262144,
            "rope_theta": 5000000,
            "rope_scaling": {
                "mrope_interleaved": True,
                "mrope_section": [24, 20, 20],
                "rope_type": "default",
            },
        },
    },
    "pythia-160m": {
        "model_type": "gpt_neox",
        "hidden_size": 768,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "max_position_embeddings": 2048,
        "rotary_pct": 0.25,
        "rotary_emb_base": 10000,
    },
    "phi-2": {
        "model_type": "phi",
        "hidden_size": 2560,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "max_position_embeddings": 2048,
        "partial_rotary_factor": 0.4,
        "rope_theta": 10000.0,
    },
    "dynamic-ntk": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 2,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
    },
}
#: Models that came with transformers 5: no v4 layout of theirs exists.
V5_ONLY = {"gemma-4-text"}
#: Lengths the rule is applied at, beyond the one the model starts with (dynamic NTK, LongRoPE).
LENGTHS = {"dynamic-ntk": [4097, 8192, 16384, 100000], "phi-3.5-mini-longrope": [4096, 4097]}
ATTENTION_NAMES = ("self_attn", "attention")
#: Configs transformers 5 refuses, and why.
REFUSED = {
    "yarn-without-factor": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 2,
        "max_position_embeddings": 16384,
        "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 4096},
    },
}


def phi_factors() -> tuple[list[float], list[float]]:
    """Phi-3.5-mini's LongRoPE factors as posviz's preset holds them."""
    import sys

    sys.path.insert(0, str(HERE.parents[2]))
    from posviz.schemes.presets import PRESETS

    scaling = PRESETS["microsoft/Phi-3.5-mini-instruct"]["rope_scaling"]
    return scaling["long_factor"], scaling["short_factor"]


def build(config: dict):
    config = copy.deepcopy(config)
    model_type = config.pop("model_type")
    return AutoConfig.for_model(model_type, **config)


def text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def meta_model(config):
    with torch.device("meta"):
        try:
            return AutoModelForCausalLM.from_config(config)
        except ValueError:
            return AutoModel.from_config(config)


def decoder_layers(model) -> list:
    for module in model.modules():
        layers = getattr(module, "layers", None)
        if isinstance(layers, torch.nn.ModuleList) and len(layers) and attention(layers[0]):
            return list(layers)
    msg = "no decoder layers"
    raise ValueError(msg)


def attention(layer):
    """The layer's attention module (GPT-NeoX names it `attention`)."""
    return next((getattr(layer, n) for n in ATTENTION_NAMES if hasattr(layer, n)), None)


def rotary_class(model):
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RotaryEmbedding") and "Vision" not in name:
            return type(module)
    msg = "no rotary embedding"
    raise ValueError(msg)


def attention_facts(layer) -> dict:
    attn = attention(layer)
    facts = {"scaling": float(attn.scaling), "class": type(attn).__name__}
    for key in (
        "use_rope",
        "sliding_window",
        "layer_type",
        "attn_temperature_tuning",
        "floor_scale",
        "attn_scale",
        "head_dim",
    ):
        value = getattr(attn, key, getattr(layer, key, None))
        if value is not None:
            facts[key] = (
                value
                if isinstance(value, str)
                else int(value)
                if isinstance(value, bool) or float(value).is_integer()
                else float(value)
            )
    return facts


def rows(rotary, length: int, layer_type: str | None, mrope: bool) -> tuple[np.ndarray, np.ndarray]:
    positions = torch.tensor([p for p in POSITIONS if p < length] + [length - 1])
    ids = positions[None]
    if mrope:
        ids = ids[None].expand(3, 1, -1)
    x = torch.zeros(1, len(positions), 8, dtype=torch.float32)
    kwargs = {"layer_type": layer_type} if layer_type else {}
    out = rotary(x, ids, **kwargs)
    if not isinstance(out, tuple):  # Llama-4: freqs_cis, complex
        return out.real[0].numpy(), out.imag[0].numpy()
    cos, sin = out
    half = cos.shape[-1] // 2
    return cos[0, :, :half].numpy(), sin[0, :, :half].numpy()


def main() -> None:
    long_factor, short_factor = phi_factors()
    (HERE / "v4").mkdir(exist_ok=True)
    (HERE / "v5").mkdir(exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    facts: dict[str, dict] = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "positions": POSITIONS,
        "models": {},
        "refused": {},
    }
    for name, hub in HUB.items():
        hub = json.loads(json.dumps(hub).replace('"PHI"', "null"))
        if name.startswith("phi-3.5"):
            hub["rope_scaling"]["long_factor"] = long_factor
            hub["rope_scaling"]["short_factor"] = short_factor
        if name not in V5_ONLY:
            (HERE / "v4" / f"{name}.json").write_text(json.dumps(hub, indent=1) + "\n")
        config = build(hub)
        with tempfile.TemporaryDirectory() as folder:
            config.save_pretrained(folder)
            saved = json.loads((Path(folder) / "config.json").read_text())
        (HERE / "v5" / f"{name}.json").write_text(
            json.dumps(saved, indent=1, sort_keys=True) + "\n"
        )
        again = AutoConfig.from_pretrained(HERE / "v5" / f"{name}.json")  # read back as v5 reads it
        text = text_config(again)
        model = meta_model(again)
        layers = decoder_layers(model)
        cls = rotary_class(model)
        rotary = cls(text)
        parameters = text.rope_parameters
        nested = all(isinstance(v, dict) for v in parameters.values())
        layer_types = sorted(parameters) if nested else [None]
        mrope = "mrope_section" in (parameters if not nested else {})
        max_pos = text.max_position_embeddings
        # The rows at init run to this length (the forward re-applies a dynamic or LongRoPE rule
        # at the sequence's own length).
        entry: dict = {
            "rotary_class": cls.__name__,
            "layer_types": {},
            "layers": [],
            "rows_length": min(max_pos, 8192),
        }
        for layer_type in layer_types:
            key = f"{name}/{layer_type or 'all'}"
            prefix = f"{layer_type}_" if layer_type else ""
            inv = getattr(rotary, f"{prefix}inv_freq")
            scaling = getattr(
                rotary, f"{prefix}attention_scaling", getattr(rotary, "attention_scaling", None)
            )
            arrays[f"{key}/inv_freq"] = inv.numpy().astype(np.float32)
            cos, sin = rows(rotary, entry["rows_length"], layer_type, mrope)
            arrays[f"{key}/cos"], arrays[f"{key}/sin"] = cos, sin
            per_type = {"attention_factor": float(scaling), "at_lengths": {}}
            if mrope:  # time, height and width at positions 1, 2, 3: which pair takes which
                ids = torch.tensor([1, 2, 3]).view(3, 1, 1)
                cos3, _ = rotary(torch.zeros(1, 1, 8), ids)
                arrays[f"{key}/cos_thw_123"] = cos3[0, 0, : cos3.shape[-1] // 2].numpy()
            rope_type = (parameters[layer_type] if layer_type else parameters)["rope_type"]
            for length in LENGTHS.get(name, []):
                fn = ROPE_INIT_FUNCTIONS[rope_type]
                inv_l, factor_l = fn(
                    text, None, seq_len=length, **({"layer_type": layer_type} if layer_type else {})
                )
                arrays[f"{key}/inv_freq@{length}"] = inv_l.numpy().astype(np.float32)
                fresh = cls(text)  # the forward updates the buffers on a longer sequence
                cos_l, sin_l = rows(fresh, length, layer_type, mrope)
                arrays[f"{key}/cos@{length}"], arrays[f"{key}/sin@{length}"] = cos_l, sin_l
                per_type["at_lengths"][str(length)] = float(factor_l)
            entry["layer_types"][layer_type or "all"] = per_type
        entry["layers"] = [attention_facts(layer) for layer in layers]
        facts["models"][name] = entry
        print(name, cls.__name__, layer_types, len(layers))
    for name, hub in REFUSED.items():
        try:
            build(hub)
        except Exception as error:
            facts["refused"][name] = {"config": hub, "error": f"{type(error).__name__}: {error}"}
        else:
            facts["refused"][name] = {"config": hub, "error": None}
    np.savez_compressed(HERE / "reference.npz", **arrays)
    (HERE / "reference.json").write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
