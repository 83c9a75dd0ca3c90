"""Position-scheme presets: config.json excerpts of well-known models, so the Schemes page
works offline. Only the keys the scheme reads are kept, copied from each model's config.json on
the Hub (Phi-3.5's LongRoPE factors are its float32 values rounded to 2 decimals, as they were
written)."""

from __future__ import annotations

from posviz._params import quoted
from posviz.embedding import Embedding, LoadError
from posviz.schemes.config import position_scheme
from posviz.schemes.rotary import rotary_frequencies, rotary_table

__all__ = ["PRESETS", "preset_rotary_table", "preset_rotary_width", "rotary_presets", "unknown"]

#: Model id -> config.json excerpt.
PRESETS: dict[str, dict] = {
    "meta-llama/Llama-3.1-8B": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
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
    "mistralai/Mistral-7B-v0.1": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "sliding_window": 4096,
    },
    "Qwen/Qwen2-7B": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "max_position_embeddings": 131072,
        "rope_theta": 1000000.0,
    },
    "microsoft/Phi-3.5-mini-instruct": {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "type": "longrope",
            "long_factor": [
                1.08,
                1.11,
                1.14,
                1.34,
                1.59,
                1.6,
                1.62,
                2.62,
                3.23,
                3.23,
                4.79,
                7.4,
                7.7,
                9.09,
                12.2,
                17.67,
                24.46,
                28.57,
                30.42,
                30.84,
                32.59,
                32.93,
                42.32,
                44.96,
                50.34,
                50.45,
                57.55,
                57.93,
                58.21,
                60.14,
                62.61,
                62.62,
                62.71,
                63.14,
                63.14,
                63.77,
                63.93,
                63.96,
                63.97,
                64.03,
                64.07,
                64.08,
                64.12,
                64.41,
                64.48,
                64.51,
                64.53,
                64.84,
            ],
            "short_factor": [
                1.0,
                1.02,
                1.03,
                1.03,
                1.05,
                1.05,
                1.05,
                1.05,
                1.05,
                1.07,
                1.1,
                1.11,
                1.16,
                1.16,
                1.17,
                1.29,
                1.34,
                1.68,
                1.79,
                1.82,
                1.85,
                1.88,
                1.91,
                1.94,
                1.99,
                2.02,
                2.02,
                2.02,
                2.02,
                2.02,
                2.02,
                2.03,
                2.03,
                2.03,
                2.03,
                2.03,
                2.03,
                2.03,
                2.03,
                2.03,
                2.08,
                2.09,
                2.19,
                2.22,
                2.59,
                2.73,
                2.75,
                2.84,
            ],
        },
    },
    "deepseek-ai/DeepSeek-V3": {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "num_hidden_layers": 61,
        "qk_rope_head_dim": 64,
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
    "google/gemma-3-4b-it": {
        "model_type": "gemma3",
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 2560,
            "num_attention_heads": 8,
            "head_dim": 256,
            "num_hidden_layers": 34,
            "max_position_embeddings": 131072,
            "rope_theta": 1000000.0,
            "rope_local_base_freq": 10000.0,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
            "sliding_window_pattern": 6,
        },
    },
    "EleutherAI/gpt-neox-20b": {
        "model_type": "gpt_neox",
        "hidden_size": 6144,
        "num_attention_heads": 64,
        "num_hidden_layers": 44,
        "max_position_embeddings": 2048,
        "rotary_pct": 0.25,
        "rotary_emb_base": 10000,
    },
    "EleutherAI/gpt-j-6b": {
        "model_type": "gptj",
        "n_embd": 4096,
        "n_head": 16,
        "n_layer": 28,
        "n_positions": 2048,
        "rotary_dim": 64,
    },
    "HuggingFaceTB/SmolLM3-3B": {
        "model_type": "smollm3",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_hidden_layers": 36,
        "max_position_embeddings": 65536,
        "rope_theta": 5000000.0,
        "no_rope_layer_interval": 4,
    },
    "meta-llama/Llama-4-Scout-17B-16E": {
        "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text",
            "hidden_size": 5120,
            "num_attention_heads": 40,
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
        },
    },
    "Qwen/Qwen2-VL-7B-Instruct": {
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    },
    "bigscience/bloom": {"model_type": "bloom", "hidden_size": 14336, "n_head": 112},
    "mosaicml/mpt-7b": {
        "model_type": "mpt",
        "d_model": 4096,
        "n_heads": 32,
        "max_seq_len": 2048,
        "attn_config": {"alibi": True, "alibi_bias_max": 8},
    },
    "google-t5/t5-small": {
        "model_type": "t5",
        "d_model": 512,
        "num_heads": 8,
        "relative_attention_num_buckets": 32,
        "relative_attention_max_distance": 128,
    },
    "microsoft/deberta-v3-base": {
        "model_type": "deberta-v2",
        "hidden_size": 768,
        "num_attention_heads": 12,
        "max_position_embeddings": 512,
        "relative_attention": True,
        "position_buckets": 256,
        "max_relative_positions": -1,
        "position_biased_input": False,
    },
}


def unknown(name: str) -> LoadError:
    """The refusal of a name posviz has no config.json excerpt of: it lists those it has."""
    return LoadError(
        f"{quoted(name)} is not a model posviz has a config.json excerpt of; it has "
        f"{', '.join(PRESETS)}."
    )


def rotary_presets() -> list[str]:
    """The presets whose scheme is rotary."""
    return [name for name, config in PRESETS.items() if position_scheme(config).kind == "rotary"]


def preset_rotary_table(name: str, *, positions: int | None = None) -> Embedding:
    """The rotary position table of preset `name` (its main layer type, frequencies at its
    context; see :func:`posviz.schemes.rotary.rotary_table`).

    Examples
    --------
    >>> preset_rotary_table("EleutherAI/gpt-j-6b", positions=16).shape
    (16, 64)
    """
    spec = position_scheme(PRESETS[name]).rotary[0]
    source = f"{name} (config.json excerpt built into posviz)"
    return rotary_table(rotary_frequencies(spec), positions=positions, source=source)


def preset_rotary_width(name: str) -> int:
    """Columns of preset `name`'s rotary table (its rotary width), known before building it.

    >>> preset_rotary_width("EleutherAI/gpt-neox-20b")
    24
    """
    return position_scheme(PRESETS[name]).rotary[0].rotary_dim
