"""Write the context planner's fixtures: for each model and target of CASES, every rule's
config.json fields as posviz's planner writes them, and what transformers 5's own code computes
from the config with those fields written in (transformers 5 layout and transformers 4 layout,
each read by transformers 5).

Run by hand in a scratch venv, never by the tests (posviz needs neither torch nor transformers):

    python3 -m venv /tmp/scratch && /tmp/scratch/bin/pip install torch==2.13.0 transformers
    /tmp/scratch/bin/python tests/data/plan/make_plan_reference.py

- configs/NAME.json: the model shapes this script adds (Llama-2-7B, Llama-3-8B: config.json
  excerpts as the Hub serves them); the others are tests/data/rope/v4/'s;
- reference.json: per case and rule, the fields the planner wrote (so a test notices when the
  planner writes other ones) and transformers' attention factor per layout;
- reference.npz: per case, rule and layout, ``inv_freq`` as transformers holds it (float32):
  the rotary class built from the planned config (its init applies every rule but dynamic and
  LongRoPE at any length), or ``ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=N)`` for dynamic
  and LongRoPE, whose forward recomputes them at the sequence's length.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE.parent / "rope"))

import make_rope_reference as rope  # noqa: E402  (its config and model helpers)

from posviz.schemes.config import position_scheme  # noqa: E402
from posviz.schemes.plan import context_plan, planned_config  # noqa: E402

ADDED = {
    "llama-2-7b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "num_hidden_layers": 32,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
    },
    "llama-3-8b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
    },
}
#: (model, target): Llama-2 at the issue's lengths and at a factor that is no whole number.
CASES = [
    ("llama-2-7b", 8192),
    ("llama-2-7b", 10000),
    ("llama-2-7b", 16384),
    ("llama-3-8b", 65536),
    ("llama-3.1-8b", 131072),
    ("phi-3.5-mini-longrope", 131072),
    ("phi-2", 8192),
    ("pythia-160m", 6000),
    ("deepseek-v3", 16384),
    ("gemma-3-4b", 262144),
    ("qwen2-vl-7b", 65536),
]


def hub_config(name: str) -> dict:
    if name in ADDED:
        return ADDED[name]
    return json.loads((HERE.parent / "rope" / "v4" / f"{name}.json").read_text())


def transformers_inv_freq(planned: dict, rope_type: str, layer_type: str, target: int):
    """inv_freq and attention factor as transformers 5 computes them from `planned`."""
    config = rope.build(planned)
    text = rope.text_config(config)
    nested = layer_type != "all"
    kwargs = {"layer_type": layer_type} if nested else {}
    if rope_type in ("dynamic", "longrope"):
        inv, factor = ROPE_INIT_FUNCTIONS[rope_type](text, None, seq_len=target, **kwargs)
        return inv, factor
    model = rope.meta_model(config)
    rotary = rope.rotary_class(model)(text)
    prefix = f"{layer_type}_" if nested else ""
    inv = getattr(rotary, f"{prefix}inv_freq")
    factor = getattr(rotary, f"{prefix}attention_scaling", getattr(rotary, "attention_scaling", 1))
    return inv, factor


def main() -> None:
    (HERE / "configs").mkdir(exist_ok=True)
    for name, config in ADDED.items():
        (HERE / "configs" / f"{name}.json").write_text(json.dumps(config, indent=1) + "\n")
    arrays: dict[str, np.ndarray] = {}
    facts: dict = {"transformers": transformers.__version__, "torch": torch.__version__}
    facts["cases"] = {}
    for name, target in CASES:
        config = hub_config(name)
        plan = context_plan(position_scheme(config), target=target)
        layer_type = plan.spec.layer_type
        case = f"{name}@{target}"
        facts["cases"][case] = {}
        for rule in plan.rules:
            entry = {
                "rope_theta": rule.rope_theta,
                "rope_parameters": rule.rope_parameters,
                "rope_scaling": rule.rope_scaling,
                "max_position_embeddings": rule.max_position_embeddings,
                "attention_factor": {},
            }
            main = rule.rope_parameters.get(layer_type, rule.rope_parameters)
            for layout in ("v5", "v4"):
                planned = planned_config(config, rule, layout=layout)
                inv, factor = transformers_inv_freq(planned, main["rope_type"], layer_type, target)
                arrays[f"{case}/{rule.rule}/{layout}"] = inv.numpy().astype(np.float32)
                entry["attention_factor"][layout] = float(factor)
            facts["cases"][case][rule.rule] = entry
            print(case, rule.rule, entry["attention_factor"])
    np.savez_compressed(HERE / "reference.npz", **arrays)
    (HERE / "reference.json").write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
