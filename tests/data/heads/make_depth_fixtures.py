"""Make tests/data/heads/depth/ and tests/data/heads/gguf/: models with structure planted in
layers above 0, and checkpoints written as GGUF the way llama.cpp's converter writes them.

Not run by the tests (posviz's requirements never hold torch or transformers). Made with
torch 2.13.0 (CPU), transformers 5.x and gguf (gguf-py, ggml-org's package) in a scratch venv
outside the repo:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch==2.13.0 transformers gguf
    /tmp/venv/bin/python tests/data/heads/make_depth_fixtures.py

depth/<family>/ holds config.json and model.safetensors saved by transformers' own
save_pretrained (the MLP tensors dropped, as make_heads_fixtures.py does), model-F32.gguf and
model-Q8_0.gguf (the same weights written as llama.cpp's converter writes them), and
planted.json saying what was planted where:

- gpt2: 4 layers; head 1 of layer 2 attends to the previous position. Its query and key rows
  read the position table's sinusoidal part (the table is made of sin/cos pairs, so position
  i - 1 is a rotation of position i): k(x_j) is the rotation of q(x_i) by one position, so
  q(x_i) · k(x_j) peaks at j = i - 1. Every other head keeps transformers' initialisation.
- llama and qwen2: 4 layers, 4 query heads on 2 key heads, head_dim 8 (4 pairs). Layer 2:
  key head 0 keeps only pair 0 (the fastest): query heads 0 and 1 use that pair alone. Layer 1:
  key head 1 loses pair 2 (its rows 2 and 6 are zero): u_h(2) = 0 for query heads 2 and 3.

gguf/<family>.gguf: the layer-0 fixtures of make_heads_fixtures.py (tests/data/heads/<family>/)
written as GGUF F32 by the same converter rules, one per architecture llama.cpp has.

The converter's rules followed (ggml-org/llama.cpp, convert_hf_to_gguf.py and conversion/*.py):
- llama, mistral (arch "llama") and olmo: q and k rows (and biases) permuted by
  `LlamaModel.permute`: row i + j·d/2 of each head becomes row 2i + j (k: per kv head); qwen2,
  phi2, phi3, gemma*, olmo2, stablelm, gptneox, falcon are not permuted (NEOX rope).
- gpt2: Conv1D c_attn transposed to rows q | k | v (`GPT2Model.modify_tensors`).
- gptneox: query_key_value's per-head [q_h; k_h; v_h] rows reordered to q | k | v.
- falcon: query_key_value's per-group rows (n_head/n_head_kv query heads, k, v) reordered to
  q | k | v; n_head_kv from num_kv_heads (1 for the multi-query layout).
- gemma, gemma2, gemma3: every "norm.weight" stored as 1 + w.
- stablelm: the per-head q/k LayerNorms stacked into one [n_heads, d] tensor each.
- 1-D tensors (norms, biases) stay F32; 2-D weights are F32 or Q8_0 (gguf.quants.quantize).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gguf
import numpy as np
import torch
import transformers
from safetensors.numpy import load_file as load_numpy
from safetensors.torch import load_file, save_file

HERE = Path(__file__).parent
DEPTH = HERE / "depth"
GGUF = HERE / "gguf"
UNREAD = ("mlp", "ffn", "fc1", "fc2", "intermediate", "output.dense", "lm_head", "dense_h_to_4h",
          "dense_4h_to_h", "cls.", "pooler", "c_fc", "c_proj", "feed_forward", "o_proj",
          "v_proj", "wte", "embed_tokens", "word_embeddings")  # fmt: skip
PREFIXES = ("model.", "transformer.", "gpt_neox.", "bert.")
Q8 = gguf.GGMLQuantizationType.Q8_0


# --- the planted models ---------------------------------------------------------------------


def sinusoid_table(n: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of sin/cos pairs (zero mean, equal norms: a LayerNorm only rescales them) and the
    angular frequency of each pair."""
    pairs = width // 2
    omega = 2 * np.pi / np.geomspace(4, 2 * n, pairs)
    angle = np.arange(n)[:, None] * omega[None, :]
    table = np.empty((n, width))
    table[:, 0::2], table[:, 1::2] = np.cos(angle), np.sin(angle)
    return table, omega


def sharpest(omega: np.ndarray, k: int, n: int) -> list[int]:
    """The `k` pairs whose cosines, summed, stand highest at offset 0 above every other offset
    within ±(n - 1)."""
    from itertools import combinations

    offsets = np.arange(1, n)
    best, found = -np.inf, []
    for pairs in combinations(range(len(omega)), k):
        margin = k - np.cos(np.outer(offsets, omega[list(pairs)])).sum(axis=1).max()
        if margin > best:
            best, found = margin, list(pairs)
    return found


def previous_share(model: torch.nn.Module, layer: int, head: int) -> float:
    """The attention of a GPT-2 block's head on the previous position, its input the position
    rows alone (as posviz reads a layer), averaged over queries 1 … n − 1: the model's own
    block (ln_1, c_attn, its scaling) on them."""
    block = model.transformer.h[layer]
    with torch.no_grad():
        x = block.ln_1(model.transformer.wpe.weight)
        qkv = block.attn.c_attn(x)
        hidden, d = x.shape[1], x.shape[1] // model.config.n_head
        q = qkv[:, head * d : (head + 1) * d]
        k = qkv[:, hidden + head * d : hidden + (head + 1) * d]
        logits = (q @ k.T) / d**0.5
        n = len(x)
        logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -torch.inf)
        weights = logits.softmax(dim=1)
    return float(weights[torch.arange(1, n), torch.arange(0, n - 1)].mean())


def planted_gpt2() -> tuple[torch.nn.Module, dict]:
    config = transformers.GPT2Config(n_embd=32, n_head=4, n_layer=4, n_inner=16, n_positions=32,
                                     vocab_size=16)  # fmt: skip
    torch.manual_seed(2)
    model = transformers.GPT2LMHeadModel(config).eval()
    n, hidden, d = 32, 32, 8
    table, omega = sinusoid_table(n, hidden)
    with torch.no_grad():
        model.transformer.wpe.weight.copy_(torch.tensor(table * 0.5, dtype=torch.float32))
        block = model.transformer.h[2]
        block.ln_1.weight.fill_(1.0)
        block.ln_1.bias.zero_()
        weight = block.attn.c_attn.weight  # Conv1D [in, 3 out]: columns q | k | v
        bias = block.attn.c_attn.bias
        head = 1
        q_cols = slice(head * d, (head + 1) * d)
        k_cols = slice(hidden + head * d, hidden + (head + 1) * d)
        weight[:, q_cols] = 0
        weight[:, k_cols] = 0
        bias[q_cols] = 0
        bias[k_cols] = 0
        # The head's 8 columns read the 4 pairs whose cosines, summed, peak at offset 0 most
        # clearly over ±31 positions; the key's columns read them rotated back by one
        # position's angle, so q(x_i) · k(x_j) = s² Σ cos(w (i - j - 1)) (up to the norm's
        # scale): largest at j = i - 1.
        chosen = sharpest(omega, d // 2, n)
        strength = 6.0
        for c, pair in enumerate(chosen):
            a, b = 2 * pair, 2 * pair + 1
            w = omega[pair]
            weight[a, head * d + 2 * c] = strength
            weight[b, head * d + 2 * c + 1] = strength
            weight[a, hidden + head * d + 2 * c] = strength * np.cos(w)
            weight[b, hidden + head * d + 2 * c] = -strength * np.sin(w)
            weight[a, hidden + head * d + 2 * c + 1] = strength * np.sin(w)
            weight[b, hidden + head * d + 2 * c + 1] = strength * np.cos(w)
    print("gpt2 layer 2 head 1: attention on the previous position", previous_share(model, 2, 1))
    planted = {"previous-token": [[2, 1]], "note": "head 1 of layer 2 attends to position i - 1"}
    return model, planted


def planted_rotary(kind: str) -> tuple[torch.nn.Module, dict]:
    names = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config",
             "Qwen2ForCausalLM")}[kind]  # fmt: skip
    config = getattr(transformers, names[0])(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=16,
        num_hidden_layers=4, max_position_embeddings=64, vocab_size=16,
    )  # fmt: skip
    torch.manual_seed(3 if kind == "llama" else 4)
    model = getattr(transformers, names[1])(config).eval()
    d = 8
    with torch.no_grad():
        for p in model.parameters():  # biases and norm gains not trivial
            p.add_(torch.randn_like(p) * 0.2)
        k2 = model.model.layers[2].self_attn.k_proj
        keep = [0, d // 2]  # pair 0: rows 0 and 4 of kv head 0
        for row in range(d):
            if row not in keep:
                k2.weight[row] = 0
                if k2.bias is not None:
                    k2.bias[row] = 0
        k1 = model.model.layers[1].self_attn.k_proj
        for row in (d + 2, d + 2 + d // 2):  # kv head 1, pair 2: rows 2 and 6 of it
            k1.weight[row] = 0
            if k1.bias is not None:
                k1.bias[row] = 0
    planted = {
        "high-frequency": [[2, 0], [2, 1]],
        "zero_usage": {"layer": 1, "heads": [2, 3], "pair": 2},
        "note": "layer 2: kv head 0 keeps pair 0 only; layer 1: kv head 1 has no pair 2",
    }
    return model, planted


def save(model: torch.nn.Module, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, safe_serialization=True)
    weights = out / "model.safetensors"
    tensors = {k: v for k, v in load_file(weights).items() if not any(u in k for u in UNREAD)}
    save_file(tensors, weights, metadata={"format": "pt"})
    for extra in out.iterdir():
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()


# --- GGUF as llama.cpp's converter writes it ----------------------------------------------------


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """`LlamaModel.permute`: each head's row i + j·d/2 becomes row 2i + j."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


ARCH = {"gpt2": "gpt2", "bert": "bert", "llama": "llama", "mistral": "llama", "qwen2": "qwen2",
        "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3", "phi3": "phi3", "phi": "phi2",
        "olmo": "olmo", "olmo2": "olmo2", "stablelm": "stablelm", "gpt_neox": "gptneox",
        "falcon_multi_query": "falcon", "falcon_mha": "falcon",
        "falcon_new": "falcon"}  # fmt: skip


def tensors_of(family: str, state: dict[str, np.ndarray], config: dict) -> dict[str, np.ndarray]:
    """The GGUF tensors (llama.cpp's names) of the attention and position weights."""
    arch = ARCH[family]
    text = {**config, **config.get("text_config", {})}
    hidden = text.get("hidden_size") or text.get("n_embd")
    n_head = text.get("num_attention_heads") or text.get("n_head")
    n_kv = text.get("num_key_value_heads") or n_head
    d = text.get("head_dim") or hidden // n_head
    out: dict[str, np.ndarray] = {}
    plain = {}
    for name, value in state.items():
        for prefix in PREFIXES:
            name = name.removeprefix(prefix)
        plain[name] = value
    for name, w in plain.items():
        parts = name.split(".")
        if parts[0] in ("layers", "h"):
            layer, rest = int(parts[1]), ".".join(parts[2:])
        elif parts[:2] == ["encoder", "layer"]:
            layer, rest = int(parts[2]), ".".join(parts[3:])
        else:
            layer, rest = None, name
        blk = f"blk.{layer}."
        kind = rest.rsplit(".", 1)[-1]  # weight / bias
        if arch in ("gemma", "gemma2", "gemma3") and rest.endswith("norm.weight"):
            w = w + 1  # Gemma(3)RMSNorm's 1 + w, as the converter stores it
        if rest in ("input_layernorm." + kind, "ln_1." + kind, "ln_attn." + kind):
            out[blk + "attn_norm." + kind] = w
        elif rest in ("self_attn.q_proj." + kind, "attention.self.query." + kind):
            if arch in ("llama", "olmo"):
                w = permute(w, n_head)
            out[blk + "attn_q." + kind] = w
        elif rest in ("self_attn.k_proj." + kind, "attention.self.key." + kind):
            if arch in ("llama", "olmo"):
                w = permute(w, n_kv)
            out[blk + "attn_k." + kind] = w
        elif rest in ("self_attn.q_norm.weight", "self_attn.q_layernorm." + kind):
            out[blk + "attn_q_norm." + kind] = w
        elif rest in ("self_attn.k_norm.weight", "self_attn.k_layernorm." + kind):
            out[blk + "attn_k_norm." + kind] = w
        elif rest == "self_attn.qkv_proj.weight":  # Phi-3: rows q | k | v as they are
            out[blk + "attn_qkv.weight"] = w
        elif rest == "attn.c_attn." + kind:  # GPT-2's Conv1D, transposed
            out[blk + "attn_qkv." + kind] = w.T if kind == "weight" else w
        elif rest == "attention.query_key_value." + kind:  # GPT-NeoX: per head -> q | k | v
            view = w.reshape(n_head, 3, d, *w.shape[1:])
            out[blk + "attn_qkv." + kind] = np.concatenate([view[:, i].reshape(-1, *w.shape[1:])
                                                           for i in range(3)])  # fmt: skip
        elif rest == "self_attention.query_key_value." + kind:  # Falcon: groups -> q | k | v
            groups = 1 if text.get("multi_query") and not text.get(
                "new_decoder_architecture") else text["num_kv_heads"]  # fmt: skip
            view = w.reshape(groups, n_head // groups + 2, d, *w.shape[1:])
            q = view[:, :-2].reshape(-1, *w.shape[1:])
            k = view[:, -2].reshape(-1, *w.shape[1:])
            v = view[:, -1].reshape(-1, *w.shape[1:])
            out[blk + "attn_qkv." + kind] = np.concatenate([q, k, v])
        elif ".norms." in rest:  # StableLM: stacked below
            continue
        elif name in ("wpe.weight", "embeddings.position_embeddings.weight"):
            out["position_embd.weight"] = w
        elif name == "embeddings.token_type_embeddings.weight":
            out["token_types.weight"] = w
        elif name.startswith("embeddings.LayerNorm."):
            out["token_embd_norm." + kind] = w
    for layer in range(text.get("num_hidden_layers") or text.get("n_layer") or 0):
        for which, count in (("q", n_head), ("k", n_kv)):
            stack = [plain.get(f"layers.{layer}.self_attn.{which}_layernorm.norms.{h}.weight")
                     for h in range(count)]  # fmt: skip
            if stack[0] is not None:
                out[f"blk.{layer}.attn_{which}_norm.weight"] = np.stack(stack)
    return out


def write_gguf(path: Path, family: str, folder: Path, *, quantized: bool = False) -> None:
    config = json.loads((folder / "config.json").read_text())
    text = {**config, **config.get("text_config", {})}
    state = {k: v.astype(np.float32) for k, v in load_numpy(folder / "model.safetensors").items()}
    arch = ARCH[family]
    writer = gguf.GGUFWriter(str(path), arch)
    hidden = text.get("hidden_size") or text.get("n_embd")
    n_head = text.get("num_attention_heads") or text.get("n_head")
    n_layers = text.get("num_hidden_layers") or text.get("n_layer")
    writer.add_context_length(text.get("max_position_embeddings") or text.get("n_positions"))
    writer.add_embedding_length(hidden)
    writer.add_block_count(n_layers)
    writer.add_head_count(n_head)
    rope = text.get("rope_parameters") or {}
    rope = rope.get("full_attention", rope)
    if arch == "falcon":
        kv = 1 if text.get("multi_query") and not text.get("new_decoder_architecture") else (
            text["num_kv_heads"])  # fmt: skip
        writer.add_head_count_kv(kv)
    elif arch not in ("gpt2", "bert"):
        writer.add_head_count_kv(text.get("num_key_value_heads") or n_head)
    if "head_dim" in text and arch.startswith("gemma"):
        writer.add_key_length(text["head_dim"])
        writer.add_value_length(text["head_dim"])
    if arch not in ("gpt2", "bert"):
        head = text.get("head_dim") or hidden // n_head
        share = rope.get("partial_rotary_factor", text.get("partial_rotary_factor",
                         text.get("rotary_pct", 1.0)))  # fmt: skip
        writer.add_rope_dimension_count(int(share * head))
        writer.add_rope_freq_base(rope.get("rope_theta", 10000.0))
    if "rms_norm_eps" in text:
        writer.add_layer_norm_rms_eps(text["rms_norm_eps"])
    for key in ("layer_norm_eps", "layer_norm_epsilon"):
        if key in text:
            writer.add_layer_norm_eps(text[key])
    if arch == "olmo":
        writer.add_layer_norm_eps(1e-5)
    if text.get("sliding_window") and arch in ("gemma2", "gemma3"):
        writer.add_sliding_window(text["sliding_window"])
    file_type = gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32
    writer.add_file_type(file_type)
    for name, value in tensors_of(family, state, config).items():
        value = np.ascontiguousarray(value, dtype=np.float32)
        if quantized and value.ndim == 2 and value.shape[-1] % 32 == 0:
            writer.add_tensor(name, gguf.quants.quantize(value, Q8), raw_dtype=Q8)
        else:
            writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> None:
    DEPTH.mkdir(exist_ok=True)
    for family, make in (("gpt2", planted_gpt2), ("llama", lambda: planted_rotary("llama")),
                         ("qwen2", lambda: planted_rotary("qwen2"))):  # fmt: skip
        model, planted = make()
        out = DEPTH / family
        save(model, out)
        (out / "planted.json").write_text(json.dumps(planted, indent=1) + "\n")
        write_gguf(out / "model-F32.gguf", family, out)
        write_gguf(out / "model-Q8_0.gguf", family, out, quantized=True)
        print(family, sorted(p.name for p in out.iterdir()))
    GGUF.mkdir(exist_ok=True)
    for family in ARCH:
        if family in ("gpt2", "llama", "qwen2"):
            continue  # the planted models above
        write_gguf(GGUF / f"{family}.gguf", family, HERE / family)
        print(family, (GGUF / f"{family}.gguf").stat().st_size)
    info = {"torch": torch.__version__, "transformers": transformers.__version__,
            "gguf": gguf.__version__ if hasattr(gguf, "__version__") else "?"}  # fmt: skip
    (DEPTH / "versions.json").write_text(json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
