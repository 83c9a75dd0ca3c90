"""Which tensors hold one attention layer's queries and keys, per architecture, and only
those read: from a model on the Hub (range reads, a sharded checkpoint's shards through its
index) or a safetensors checkpoint on disk with its config.json.

One table, `FAMILIES`, says per architecture (../shared/HEADS.md, each rule checked against
the model's own query/key states in transformers 5.24: tests/data/heads/) where a layer's
query and key rows are, how its heads are sliced out of fused tensors, which normalisation
the layer's input goes through, where the learned position table is, and which rows of it
position i reads. Tensor names are matched by suffix (a task head adds a prefix, a
multimodal checkpoint another), never by an assumed prefix.

Planning (:func:`plan_layer`) reads config.json and the safetensors headers only: every
refusal (an unknown architecture, a quantized, missing or wrongly shaped tensor, a layer's
q/k above `MAX_LAYER_BYTES`) comes before a byte of weights travels, and the plan says how many
bytes will. :func:`read_layer` then reads exactly the planned rows.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path

import numpy as np

from posviz import hub, io
from posviz._params import MAX_RESULT_BYTES, Bound, bounded
from posviz.embedding import LoadError
from posviz.heads import MAX_POSITIONS, Norm
from posviz.io import datadir
from posviz.models import remote, weights
from posviz.schemes._values import first as _first
from posviz.schemes._values import given, integer, number, shown
from posviz.schemes.alibi import HEADS, alibi_slopes
from posviz.schemes.config import AlibiSpec, RelativeBiasSpec, Scheme, position_scheme
from posviz.schemes.layers import MAX_LAYERS
from posviz.schemes.rope import RotarySpec
from posviz.source import HubRef, LocalPath, SharedFile, Shipped, Source, as_source

__all__ = [
    "FAMILIES",
    "LAYERS",
    "MAX_LAYER_BYTES",
    "AttentionLayer",
    "Family",
    "LayerPlan",
    "NoHeadsView",
    "Read",
    "language_model",
    "n_layers_of",
    "open_layer",
    "open_model",
    "open_source",
    "plan_layer",
    "read_layer",
    "read_planned",
]

#: A layer's tensors read at most (its q/k rows, norms and the position table): Llama-3.1-8B
#: layer 0 takes 40 MiB (bf16), GPT-J's fp32 layer 128 MiB. Refused above, before fetching:
#: the memory one result may take.
MAX_LAYER_BYTES = MAX_RESULT_BYTES
#: Stored dtypes read; anything else is quantized (int8/int4 packs, fp8 with block scales).
FLOAT_DTYPES = ("F32", "F16", "BF16")
_ITEM_BYTES = {"F32": 4, "F16": 2, "BF16": 2}
#: Checkpoint parts that hold another model's layers under the same suffixes.
_OTHER_TOWERS = re.compile(r"(^|\.)(vision|visual|audio|image)[\w]*\.")


class NoHeadsView(LoadError):
    """The layer has no per-head view of position posviz computes, and says why: no position
    encoding (NoPE), multi-head latent attention, a fixed sinusoidal table, DeBERTa's
    disentangled attention. `kind` names which."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Family:
    """Where one architecture keeps a layer's queries and keys.

    Attributes
    ----------
    name : str
        As shown (``"GPT-2"``).
    model_types : tuple of str
        config.json's ``model_type`` values it covers.
    kind : {"learned", "rotary"}
    layer : str
        A layer's name prefix, with ``{l}`` for its index (``"h.{l}"``).
    q, k : str
        The query and key projections under the layer ("" when fused).
    fused : str
        The fused projection under the layer ("" when separate).
    layout : str
        ``separate`` (Linear [out, in]); ``conv1d`` (GPT-2: [in, 3·out], columns q | k | v);
        ``rows`` (rows q | k | v, GQA sizes: Phi-3, Falcon multi-query); ``per_head``
        (rows per head [q_h; k_h; v_h]: GPT-NeoX, Falcon MHA); ``groups`` (Falcon's new
        decoder architecture: per kv group, its query heads, then k, then v).
    norms : tuple of str
        The layer input's norm, first present wins (Falcon: ``ln_attn`` before
        ``input_layernorm``); empty: none (post-LN BERT, OLMo-2).
    norm_kind : {"layer_norm", "rms_norm", "none"}
    gain_offset : float
        Gemma's RMSNorm multiplies by 1 + weight.
    head_norm : str
        A q/k norm before the rotation: ``gemma`` (per head [d], RMS, 1 + w), ``projection``
        (OLMo-2: RMS over the whole projection [n·d]), ``shared_ln`` (Phi: one LayerNorm [d]
        for all heads), ``per_head_ln`` (StableLM: LayerNorm per head, no bias); "" none.
    positions : str
        The learned table under the model's root (learned kinds).
    first_row : str
        Which row position 0 reads: ``"0"``, ``"2"`` (OPT), ``"padding"`` (RoBERTa:
        padding_idx + 1).
    token_type : str
        BERT: the token type table, whose row 0 every position's input adds.
    position_norm : str
        BERT: the embeddings' LayerNorm the sum goes through (the layer itself has none).
    causal : bool
    q_norm, k_norm : str
        Where `head_norm`'s tensors are under the layer (default: transformers' names).
    gguf : str
        The GGUF architecture (``general.architecture``) whose llama.cpp names these are; ""
        for a safetensors checkpoint's.
    permuted : bool
        GGUF: llama.cpp's converter stored each head's q and k rows pair by pair (row i and
        i + d/2 of a head as rows 2i, 2i + 1: its NORM rope), read back in transformers'
        order.
    """

    name: str
    model_types: tuple[str, ...]
    kind: str
    layer: str
    q: str = ""
    k: str = ""
    fused: str = ""
    layout: str = "separate"
    norms: tuple[str, ...] = ()
    norm_kind: str = "none"
    gain_offset: float = 0.0
    head_norm: str = ""
    positions: str = ""
    first_row: str = "0"
    token_type: str = ""
    position_norm: str = ""
    causal: bool = True
    q_norm: str = ""
    k_norm: str = ""
    gguf: str = ""
    permuted: bool = False


#: Every architecture posviz reads, per ../shared/HEADS.md.
FAMILIES = (
    Family("GPT-2", ("gpt2",), "learned", "h.{l}", fused="attn.c_attn", layout="conv1d",
           norms=("ln_1",), norm_kind="layer_norm", positions="wpe.weight"),
    Family("GPT-Neo", ("gpt_neo",), "learned", "h.{l}", "attn.attention.q_proj",
           "attn.attention.k_proj", norms=("ln_1",), norm_kind="layer_norm",
           positions="wpe.weight"),
    Family("BERT", ("bert", "electra"), "learned", "encoder.layer.{l}", "attention.self.query",
           "attention.self.key", positions="embeddings.position_embeddings.weight",
           token_type="embeddings.token_type_embeddings.weight",
           position_norm="embeddings.LayerNorm", causal=False),
    Family("RoBERTa", ("roberta", "xlm-roberta", "camembert"), "learned", "encoder.layer.{l}",
           "attention.self.query", "attention.self.key",
           positions="embeddings.position_embeddings.weight", first_row="padding",
           token_type="embeddings.token_type_embeddings.weight",
           position_norm="embeddings.LayerNorm", causal=False),
    Family("ViT", ("vit", "deit"), "learned", "encoder.layer.{l}", "attention.attention.query",
           "attention.attention.key", norms=("layernorm_before",), norm_kind="layer_norm",
           positions="embeddings.position_embeddings", causal=False),
    Family("OPT", ("opt",), "learned", "decoder.layers.{l}", "self_attn.q_proj", "self_attn.k_proj",
           norms=("self_attn_layer_norm",), norm_kind="layer_norm",
           positions="decoder.embed_positions.weight", first_row="2"),
    Family("Llama", ("llama", "mistral", "mixtral", "qwen2"), "rotary", "layers.{l}",
           "self_attn.q_proj", "self_attn.k_proj", norms=("input_layernorm",),
           norm_kind="rms_norm"),
    Family("Gemma", ("gemma", "gemma2", "gemma3", "gemma3_text"), "rotary", "layers.{l}",
           "self_attn.q_proj", "self_attn.k_proj", norms=("input_layernorm",),
           norm_kind="rms_norm", gain_offset=1.0, head_norm="gemma"),
    Family("Phi-3", ("phi3",), "rotary", "layers.{l}", fused="self_attn.qkv_proj", layout="rows",
           norms=("input_layernorm",), norm_kind="rms_norm"),
    Family("Phi", ("phi",), "rotary", "layers.{l}", "self_attn.q_proj", "self_attn.k_proj",
           norms=("input_layernorm",), norm_kind="layer_norm", head_norm="shared_ln"),
    Family("OLMo", ("olmo",), "rotary", "layers.{l}", "self_attn.q_proj", "self_attn.k_proj",
           norm_kind="layer_norm"),
    Family("OLMo-2", ("olmo2",), "rotary", "layers.{l}", "self_attn.q_proj", "self_attn.k_proj",
           head_norm="projection"),
    Family("StableLM", ("stablelm",), "rotary", "layers.{l}", "self_attn.q_proj",
           "self_attn.k_proj", norms=("input_layernorm",), norm_kind="layer_norm",
           head_norm="per_head_ln"),
    Family("GPT-NeoX", ("gpt_neox",), "rotary", "layers.{l}",
           fused="attention.query_key_value", layout="per_head", norms=("input_layernorm",),
           norm_kind="layer_norm"),
    Family("GPT-J", ("gptj",), "rotary", "h.{l}", "attn.q_proj", "attn.k_proj", norms=("ln_1",),
           norm_kind="layer_norm"),
    Family("Falcon", ("falcon",), "rotary", "h.{l}", fused="self_attention.query_key_value",
           layout="rows", norms=("ln_attn", "input_layernorm"), norm_kind="layer_norm"),
)  # fmt: skip
_BY_TYPE = {t: f for f in FAMILIES for t in f.model_types}


def _gguf(name: str, arch: str, kind: str = "rotary", **where: object) -> Family:
    """A family as llama.cpp names its tensors (``blk.{l}.attn_q.weight``, …; gguf-py's
    tensor_mapping.py), for a GGUF of architecture `arch`."""
    names: dict = {"q": "attn_q", "k": "attn_k", "norms": ("attn_norm",), "q_norm": "attn_q_norm",
                   "k_norm": "attn_k_norm", **where}  # fmt: skip
    return Family(name, (arch,), kind, "blk.{l}", gguf=arch, **names)


#: Every GGUF architecture posviz reads heads of, as llama.cpp's converter
#: (convert_hf_to_gguf.py, conversion/*.py in ggml-org/llama.cpp) writes it: which q and k rows
#: it permutes (the architectures llama_model_rope_type() calls NORM and that transformers
#: rotates by halves: llama, olmo), what it fuses (GPT-2's Conv1D transposed to rows
#: q | k | v; GPT-NeoX's and Falcon's per-head or per-group rows reordered to q | k | v),
#: which norms it stores as 1 + w (Gemma), which it stacks (StableLM's per-head LayerNorms as
#: one [n_heads, d] tensor). A family whose q and k are separate also reads a fused
#: ``attn_qkv`` (rows q | k | v), as llama.cpp loads either.
GGUF_FAMILIES = {
    f.gguf: f
    for f in (
        _gguf("GPT-2", "gpt2", "learned", q="", k="", fused="attn_qkv", layout="rows",
              norm_kind="layer_norm", positions="position_embd.weight"),
        _gguf("BERT", "bert", "learned", norms=(), positions="position_embd.weight",
              token_type="token_types.weight", position_norm="token_embd_norm", causal=False),
        _gguf("Llama", "llama", norm_kind="rms_norm", permuted=True),
        _gguf("Qwen2", "qwen2", norm_kind="rms_norm"),
        *(_gguf("Gemma", arch, norm_kind="rms_norm", head_norm="gemma")
          for arch in ("gemma", "gemma2", "gemma3")),
        _gguf("Phi-3", "phi3", q="", k="", fused="attn_qkv", layout="rows", norm_kind="rms_norm"),
        _gguf("Phi", "phi2", norm_kind="layer_norm", head_norm="shared_ln"),
        _gguf("OLMo", "olmo", norms=(), norm_kind="layer_norm", permuted=True),
        _gguf("OLMo-2", "olmo2", norms=(), head_norm="projection"),
        _gguf("StableLM", "stablelm", norm_kind="layer_norm", head_norm="per_head_ln"),
        _gguf("GPT-NeoX", "gptneox", q="", k="", fused="attn_qkv", layout="rows",
              norm_kind="layer_norm"),
        _gguf("Falcon", "falcon", q="", k="", fused="attn_qkv", layout="rows",
              norm_kind="layer_norm"),
    )
}  # fmt: skip


@dataclass(frozen=True)
class Read:
    """One tensor to read: all of it, or rows [start, stop) of its first axis."""

    role: str
    name: str
    dtype: str
    shape: tuple[int, ...]
    rows: tuple[int, int] | None
    nbytes: int


@dataclass(frozen=True)
class LayerPlan:
    """What reading one layer takes, from config.json and the headers alone.

    Attributes
    ----------
    kind : {"learned", "rotary", "alibi", "relative_bias"}
    family : str
        The architecture's name (``"ALiBi"``, ``"T5"`` for those kinds).
    reads : tuple of Read
    notes : tuple of str
        What the screen and exports state about the reading (biases included, a layer above 0
        read with position alone, the model's own logit scale, ...).
    quantization : str or None
        A GGUF's quantized q/k types (``"Q8_0"``); None when they are floats.
    """

    kind: str
    family: str
    layer: int
    n_layers: int | None
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_size: int
    reads: tuple[Read, ...]
    notes: tuple[str, ...]
    rotary: RotarySpec | None = None
    layout: str = "separate"
    causal: bool = True
    logit_scale: float | None = None
    first_row: int = 0
    eps: float = 1e-5
    options: dict = field(default_factory=dict)
    n_positions: int | None = None
    """Learned tables: the positions the table holds (its rows from `first_row`), at most
    `posviz.heads.MAX_POSITIONS`: what the kernels span unless fewer are asked for."""
    quantization: str | None = None

    @property
    def nbytes(self) -> int:
        """Bytes that reading the layer fetches (before any cache)."""
        return sum(r.nbytes for r in self.reads)


@dataclass(frozen=True, eq=False)
class AttentionLayer:
    """One attention layer's position-relevant weights, read as the model computes with them.

    Attributes
    ----------
    model : str
        The model as named (``hf:REPO@REVISION`` or the checkpoint's label).
    plan : LayerPlan
    wq, wk : ndarray of shape (n_heads, d, hidden) and (n_kv_heads, d, hidden), or None
        Each head's query and key rows as stored (float32; BF16/F16 widened exactly).
    bq, bk : ndarray of shape (n_heads, d) and (n_kv_heads, d), or None
    norm : Norm
        The layer input's normalisation (learned kinds: what position rows go through).
    q_norm, k_norm : list of Norm per head, or None
        A norm of each head's query / key before the rotation.
    positions : ndarray of shape (n_positions, hidden) or None
        Learned kinds: row i is what position i adds to the input (token type row 0 included).
    position_norm : Norm
        BERT's embeddings LayerNorm, applied before `norm`.
    slopes : ndarray of shape (n_heads,) or None
        ALiBi.
    relative_bias : ndarray of shape (num_buckets, n_heads) or None
        T5.
    tensors : tuple of dict
        Each tensor read: name, dtype, shape, rows, sha256 of the values read.
    bytes_fetched : int
        Bytes that came over the network for it (0: all from the cache or a local file).
    read_from : ConfigFile or LocalCheckpoint, optional
        The model it was read from (a Hub model at the commit its config.json was read at):
        what its provenance names. None for a layer made in memory.
    """

    model: str
    plan: LayerPlan
    wq: np.ndarray | None = None
    wk: np.ndarray | None = None
    bq: np.ndarray | None = None
    bk: np.ndarray | None = None
    norm: Norm = field(default_factory=Norm)
    q_norm: tuple[Norm, ...] | None = None
    k_norm: tuple[Norm, ...] | None = None
    positions: np.ndarray | None = None
    position_norm: Norm = field(default_factory=Norm)
    slopes: np.ndarray | None = None
    relative_bias: np.ndarray | None = None
    tensors: tuple[dict, ...] = ()
    bytes_fetched: int = 0
    read_from: weights.Readable | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.plan.kind

    @cached_property
    def inputs(self) -> np.ndarray:
        """x_i: the layer's input for position i alone, through the model's normalisation."""
        return self.norm(self.position_norm(given(self.positions, "a learned table's rows")))

    @property
    def q_gain(self) -> np.ndarray | None:
        """Each query head's per-column gain from its q norm (n_heads, d), or None."""
        return _gains(self.q_norm)

    @property
    def k_gain(self) -> np.ndarray | None:
        return _gains(self.k_norm)

    @cached_property
    def sha256(self) -> str:
        """sha256 of what identifies the layer (its provenance: the config.json and its
        sha256, the layer, every tensor read and its sha256): the key its results are cached
        by, as a table's by its own sha256."""
        key = json.dumps([self.kind, self.provenance()], sort_keys=True, default=str)
        return hashlib.sha256(key.encode()).hexdigest()

    def provenance(self) -> dict[str, object]:
        """Where the layer came from, as exports carry it: the model's config.json (a path, or
        ``hf:REPO@COMMIT``) and its sha256, a checkpoint's weights file
        (:func:`posviz.models.weights.model_provenance`), the layer, and each tensor read
        with the sha256 of its values, which `posviz rerun` checks when it reads them again."""
        where = {"layer": self.plan.layer, "tensors": list(self.tensors)}
        if self.read_from is None:
            return {"model": self.model, **where}
        return weights.model_provenance(self.read_from, **where)


def _gains(norms: tuple[Norm, ...] | None) -> np.ndarray | None:
    if norms is None or norms[0].gain is None:
        return None
    return np.array([n.gain for n in norms])


# --- planning -------------------------------------------------------------------------------


def language_model(config: dict) -> dict:
    """A multimodal config.json's text model's keys (its ``text_config`` over the rest)."""
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def n_layers_of(config: dict) -> int | None:
    """The model's layers, as config.json counts them (None when it does not say)."""
    n_layers = _first(language_model(config), "num_hidden_layers", "n_layer", "num_layers")
    return n_layers if isinstance(n_layers, int) and n_layers > 0 else None


def _positive(config: dict, what: str, *keys: str, high: int | None = None) -> tuple[int, str]:
    """The first of `keys` config.json sets, a whole number from 1 to `high`, and its key."""
    key = next((k for k in keys if config.get(k) is not None), None)
    if key is None:
        msg = f"config.json names no {what} ({' / '.join(keys)})."
        raise LoadError(msg)
    return integer(config[key], key, high=high), key


def _whole(value: object, key: str) -> int:
    """config.json's `value` of `key`: a whole number, not negative."""
    found = number(value, key)
    if found % 1:
        msg = f"{key} in config.json is {shown(value)}; expected a whole number."
        raise LoadError(msg)
    return int(found)


class _Names:
    """Tensor names matched by suffix, one layer of one model (not a vision tower's)."""

    def __init__(self, tensors: Mapping[str, io.TensorInfo], label: str) -> None:
        self.tensors, self.label = tensors, label

    def find(self, suffix: str) -> str | None:
        found = [n for n in self.tensors if n == suffix or n.endswith("." + suffix)]
        if len(found) > 1:
            found = [n for n in found if not _OTHER_TOWERS.search(n)] or found
        if len(found) > 1:
            msg = f"{self.label}: several tensors end with {suffix!r} ({', '.join(found[:4])})."
            raise LoadError(msg)
        return found[0] if found else None

    def need(self, suffix: str, what: str) -> str:
        name = self.find(suffix)
        if name is None:
            packed = [n for n in self.tensors if n.endswith(suffix.rpartition(".")[0] + ".qweight")]
            why = (
                f" It holds {packed[0]}: the checkpoint is quantized (GPTQ/AWQ packs), which "
                "posviz does not unpack; open the unquantized model."
                if packed
                else ""
            )
            msg = f"{self.label} has no tensor ending with {suffix!r} ({what}).{why}"
            raise LoadError(msg)
        return name


#: The layers a model may have (`posviz.schemes.layers.MAX_LAYERS`, config.json's bound).
LAYERS = Bound(0, MAX_LAYERS - 1)


@bounded(layer=LAYERS)
def plan_layer(
    config: dict,
    tensors: Mapping[str, io.TensorInfo],
    *,
    layer: int = 0,
    label: str = "model",
    gguf: str = "",
) -> LayerPlan:
    """What reading layer `layer`'s queries and keys takes: the tensors and rows, their bytes.

    Parameters
    ----------
    config : dict
        The model's config.json (a GGUF's: the keys its metadata stands for).
    tensors : mapping of str to TensorInfo
        The checkpoint's tensors from its headers (name -> shape and dtype).
    layer : int
    label : str
        The model as messages name it.
    gguf : str
        A GGUF file's architecture: its tensors are llama.cpp's (`GGUF_FAMILIES`), of any
        type the `gguf` package dequantizes.

    Raises
    ------
    NoHeadsView
        The layer has no per-head position term to show (NoPE, MLA, sinusoidal, DeBERTa).
    LoadError
        An architecture not in `FAMILIES`, a quantized, missing or wrongly shaped tensor, a
        layer beyond the model's, or more than `MAX_LAYER_BYTES` to read; nothing is fetched.
    """
    config = language_model(config)
    if not gguf and isinstance(config.get("quantization_config"), dict):
        method = config["quantization_config"].get("quant_method", "unnamed")
        msg = (
            f"{label} is quantized ({method}, config.json's quantization_config): its q/k "
            "weights are packed integers posviz does not unpack. Open the unquantized model."
        )
        raise LoadError(msg)
    n_layers = n_layers_of(config)
    if n_layers is not None and layer >= n_layers:
        msg = f"{label} has {n_layers} layers (0 … {n_layers - 1}); there is no layer {layer}."
        raise LoadError(msg)
    if config.get("qk_rope_head_dim") is not None or config.get("kv_lora_rank") is not None:
        msg = (
            f"{label} uses multi-head latent attention (DeepSeek MLA): one rotary key of "
            f"{config.get('qk_rope_head_dim')} columns is shared by every head and each query's "
            "rotary part comes from a low-rank latent after an RMSNorm, so a per-head usage on "
            "the stored weights would misstate it; posviz does not draw it."
        )
        raise NoHeadsView(msg, kind="mla")
    scheme = position_scheme(config)
    if scheme.kind == "rotary" and layer < len(scheme.layers) and not scheme.layers[layer].rope:
        msg = (
            f"Layer {layer} of {label} uses no position encoding (NoPE, as config.json's "
            "per-layer map says): its heads see order only through the causal mask. Pick a "
            "rotary layer."
        )
        raise NoHeadsView(msg, kind="nope")
    names = _Names(tensors, label)
    if scheme.kind == "alibi":
        return _plan_alibi(config, given(scheme.alibi, "ALiBi's heads"), layer, n_layers)
    if scheme.kind == "relative_bias":
        spec = given(scheme.relative_bias, "T5's relative attention bias")
        return _plan_t5(config, spec, names, layer, n_layers, label)
    if scheme.kind in ("none", "sinusoidal", "relative_table"):
        what = {
            "none": "no position encoding: order comes only from the causal mask or recurrence",
            "sinusoidal": "a fixed sinusoidal table added to the input (the Schemes page draws it)",
            "relative_table": "DeBERTa's disentangled attention, whose position terms pair a "
            "shared relative table with content (the Schemes page opens the table)",
        }[scheme.kind]
        msg = f"{label} uses {what}; it has no per-head position weights to show here."
        raise NoHeadsView(msg, kind=scheme.kind)
    model_type = str(config.get("model_type", ""))
    if gguf:
        family = GGUF_FAMILIES.get(gguf)
        if family is None or family.kind != ("rotary" if scheme.kind == "rotary" else "learned"):
            known = ", ".join(sorted(GGUF_FAMILIES))
            msg = (
                f"{label}: GGUF architecture {gguf!r} is not one whose attention tensors posviz "
                f"knows (which rows llama.cpp's converter stored where, and whether it "
                f"permuted them: known {known}; also ALiBi models). Nothing was fetched "
                "beyond the header."
            )
            raise LoadError(msg)
        return _plan_family(config, family, scheme, names, layer, n_layers, label)
    family = _BY_TYPE.get(model_type)
    if family is None or family.kind != ("rotary" if scheme.kind == "rotary" else "learned"):
        known = ", ".join(sorted(_BY_TYPE))
        msg = (
            f"{label}: model_type {model_type or '(none)'!r} with {scheme.kind.replace('_', ' ')} "
            f"positions is not an architecture posviz reads heads of (known: {known}; also any "
            "ALiBi or T5 model). Nothing was fetched."
        )
        raise LoadError(msg)
    return _plan_family(config, family, scheme, names, layer, n_layers, label)


def _dims(config: dict, family: Family) -> tuple[int, int, int, int]:
    """(n_heads, n_kv_heads, head_dim, hidden) as the family's code reads them, each checked
    (a whole number, heads within `HEADS`, the hidden size split evenly among them)."""
    hidden, hidden_key = _positive(config, "hidden size", "hidden_size", "n_embd", "d_model")
    n_heads, heads_key = _positive(
        config, "number of heads", "num_attention_heads", "n_head", "num_heads"
    )
    HEADS.check(f"{heads_key} in config.json", n_heads, error=LoadError)
    if family.name == "Falcon" and not family.gguf:  # a GGUF states its kv heads
        if config.get("new_decoder_architecture"):
            n_kv = _positive(config, "num_kv_heads", "num_kv_heads", high=n_heads)[0]
        else:
            n_kv = 1 if config.get("multi_query", True) else n_heads
    elif config.get("num_key_value_heads") is None:
        n_kv = n_heads
    else:
        n_kv = integer(config["num_key_value_heads"], "num_key_value_heads", high=n_heads)
    head_dim = config.get("head_dim") if family.name not in ("Falcon", "GPT-NeoX") else None
    if isinstance(head_dim, int) and head_dim > 0:
        head_dim = int(head_dim)
    elif hidden % n_heads:
        msg = (
            f"config.json: {hidden_key} {hidden} is not a multiple of {heads_key} {n_heads}: "
            "the hidden size does not split into heads."
        )
        raise LoadError(msg)
    else:
        head_dim = hidden // n_heads
    if n_heads % n_kv:
        msg = f"config.json: {n_heads} query heads cannot share {n_kv} key/value heads."
        raise LoadError(msg)
    return n_heads, n_kv, head_dim, hidden


def _plan_family(
    config: dict,
    family: Family,
    scheme: Scheme,
    names: _Names,
    layer: int,
    n_layers: int | None,
    label: str,
) -> LayerPlan:
    n_heads, n_kv, d, hidden = _dims(config, family)
    prefix = family.layer.format(l=layer)
    reads: list[Read] = []
    notes: list[str] = []

    def add(role: str, suffix: str, what: str, shape: tuple[int, ...] | None, rows=None) -> Read:
        name = names.need(suffix, what)
        info = names.tensors[name]
        stored = tuple(info.shape)
        if family.gguf:  # any type the gguf package dequantizes (a row is whole blocks)
            part = [rows[1] - rows[0], *stored[1:]] if rows else list(stored)
            io.check_gguf_tensor(f"{label}: tensor '{name}'", {"dtype": info.dtype, "shape": part})
        elif info.dtype not in FLOAT_DTYPES:
            msg = (
                f"{label}: {name} is stored as {info.dtype}: quantized or not a weight "
                f"(posviz reads {', '.join(FLOAT_DTYPES)}). Open the unquantized model."
            )
            raise LoadError(msg)
        if shape is not None and stored != shape:
            msg = (
                f"{label}: {name} has shape {list(stored)}, but config.json ({n_heads} heads, "
                f"{n_kv} key/value heads, head_dim {d}, hidden {hidden}) gives {list(shape)}."
            )
            raise LoadError(msg)
        read = Read(role, name, info.dtype, stored, rows, _stored_bytes(info.dtype, stored, rows))
        reads.append(read)
        return read

    def optional(role: str, suffix: str, shape: tuple[int, ...]) -> bool:
        if names.find(suffix) is None:
            return False
        add(role, suffix, role, shape)
        return True

    at = f"{prefix}."
    if family.gguf and family.q and names.find(f"{at}{family.q}.weight") is None:
        family = replace(family, q="", k="", fused="attn_qkv", layout="rows")  # fused, as loaded
    if family.layout == "separate":
        add("q", at + family.q + ".weight", "the query projection", (n_heads * d, hidden))
        add("k", at + family.k + ".weight", "the key projection", (n_kv * d, hidden))
        biased = optional("q_bias", at + family.q + ".bias", (n_heads * d,))
        biased |= optional("k_bias", at + family.k + ".bias", (n_kv * d,))
    elif family.layout == "conv1d":  # GPT-2: [in, 3 out], q | k | v columns: read whole
        add(
            "qkv", at + family.fused + ".weight", "the fused q/k/v projection", (hidden, 3 * hidden)
        )
        biased = optional("qkv_bias", at + family.fused + ".bias", (3 * hidden,))
    else:
        layout = family.layout
        if family.name == "Falcon" and not family.gguf:  # a GGUF's are q | k | v rows
            layout = "groups" if config.get("new_decoder_architecture") else (
                "rows" if config.get("multi_query", True) else "per_head"
            )  # fmt: skip
        total = (n_heads + 2 * n_kv) * d
        # Only the q and k rows when they come first (Phi-3, Falcon multi-query): one range.
        rows = (0, (n_heads + n_kv) * d) if layout == "rows" else None
        add(
            "qkv",
            at + family.fused + ".weight",
            "the fused q/k/v projection",
            (total, hidden),
            rows,
        )
        biased = optional("qkv_bias", at + family.fused + ".bias", (total,))
        family = replace(family, layout=layout)
    if biased:
        notes.append("The query and key biases are included.")
    norm_kind = family.norm_kind
    if family.name == "OPT" and config.get("do_layer_norm_before") is False:
        norm_kind = "none"  # OPT-350m is post-LN: layer 0 reads the embeddings as they are
        notes.append("Post-LN (do_layer_norm_before: false): no norm before the attention.")
    if norm_kind != "none":
        found = [s for s in family.norms if names.find(f"{at}{s}.weight") is not None]
        if family.norms and not found:
            names.need(f"{at}{family.norms[0]}.weight", "the layer's input norm")
        if found:
            add("norm_weight", f"{at}{found[0]}.weight", "the input norm's gain", (hidden,))
            optional("norm_bias", f"{at}{found[0]}.bias", (hidden,))
    head_norm = family.head_norm
    qn = at + (family.q_norm or _HEAD_NORMS.get(head_norm, ("", ""))[0])
    kn = at + (family.k_norm or _HEAD_NORMS.get(head_norm, ("", ""))[1])
    stacked = False
    if head_norm == "gemma" and names.find(f"{qn}.weight") is None:
        head_norm = ""  # Gemma 1 and 2 have none
    if head_norm == "gemma":
        add("q_norm", f"{qn}.weight", "the per-head q norm", (d,))
        add("k_norm", f"{kn}.weight", "the per-head k norm", (d,))
    elif head_norm == "projection":
        add("q_norm", f"{qn}.weight", "the q norm", (n_heads * d,))
        add("k_norm", f"{kn}.weight", "the k norm", (n_kv * d,))
    elif head_norm == "shared_ln":
        if optional("q_norm", f"{qn}.weight", (d,)):
            add("k_norm", f"{kn}.weight", "the k layernorm", (d,))
            optional("q_norm_bias", f"{qn}.bias", (d,))
            optional("k_norm_bias", f"{kn}.bias", (d,))
        else:
            head_norm = ""
    elif head_norm == "per_head_ln" and family.gguf:  # stacked by the converter: [heads, d]
        stacked = optional("q_norm", f"{qn}.weight", (n_heads, d))
        if stacked:
            add("k_norm", f"{kn}.weight", "the k norms", (n_kv, d))
        else:
            head_norm = ""
    elif head_norm == "per_head_ln":
        if names.find(f"{qn}.norms.0.weight") is not None:
            for h in range(n_heads):
                add(f"q_norm.{h}", f"{qn}.norms.{h}.weight", "a q norm", (d,))
            for g in range(n_kv):
                add(f"k_norm.{g}", f"{kn}.norms.{g}.weight", "a k norm", (d,))
        else:
            head_norm = ""
    eps_key = next(
        (k for k in ("layer_norm_eps", "layer_norm_epsilon", "rms_norm_eps", "norm_eps")
         if config.get(k) is not None),
        None,
    )  # fmt: skip
    eps = 1e-5 if eps_key is None else number(config[eps_key], eps_key, high=1.0)
    if family.name == "OLMo":
        eps = 1e-5  # its non-parametric LayerNorm's own
        notes.append("OLMo's input LayerNorm has no gain or shift (non-parametric).")
    first_row = 0
    n_positions = None
    rotary = None
    logit_scale = None
    if family.kind == "learned":
        if family.first_row == "2":
            first_row = 2
        elif family.first_row == "padding":  # RoBERTa: padding_idx + 1
            first_row = _whole(config.get("pad_token_id", 1), "pad_token_id") + 1
        positions = names.need(family.positions, "the learned position table")
        shape = tuple(names.tensors[positions].shape)
        while len(shape) > 2 and shape[0] == 1:
            shape = shape[1:]
        if len(shape) != 2 or shape[1] != hidden or shape[0] <= first_row + 1:
            msg = (
                f"{label}: the position table {positions} has shape {list(shape)}; "
                f"expected [n, {hidden}]."
            )
            raise LoadError(msg)
        n_positions = min(shape[0] - first_row, MAX_POSITIONS)
        add("positions", family.positions, "the learned position table", None)
        if family.token_type:
            add("token_type", family.token_type, "the token type table", None, (0, 1))
        if family.position_norm:
            add(
                "position_norm_weight",
                family.position_norm + ".weight",
                "the embeddings' norm",
                (hidden,),
            )
            add(
                "position_norm_bias",
                family.position_norm + ".bias",
                "the embeddings' norm",
                (hidden,),
            )
        if family.name == "GPT-Neo":
            logit_scale = 1.0
            notes.append(
                "GPT-Neo does not scale its logits by 1/√d: the kernel is q·k as the model uses it."
            )
            if _neo_layer_type(config, layer) == "local":
                notes.append(
                    f"Layer {layer} is a local layer: the model masks keys beyond window_size "
                    f"{config.get('window_size')}."
                )
        if first_row:
            notes.append(f"Position i reads row i + {first_row} of the table, as the model does.")
        if family.token_type:
            notes.append(
                "Every position's input adds token type row 0, as a single-segment input does."
            )
        if layer > 0:
            notes.append(
                "A layer above 0 is read with the position rows alone as its input: this is "
                "position alone, not the residual stream the layer sees."
            )
    else:
        # The layer's own rule (Gemma-3's local layers rotate at their own base).
        in_map = layer < len(scheme.layers)
        rotary = (
            given(scheme.layers[layer].rotary, f"layer {layer}'s rotary rule")
            if in_map
            else _rotary_spec(scheme.rotary, config, layer)
        )
        if rotary.rotary_dim > d:
            msg = f"{label}: config.json's rotary width {rotary.rotary_dim} exceeds head_dim {d}."
            raise LoadError(msg)
        if family.name == "Gemma" and config.get("query_pre_attn_scalar"):
            scalar = number(config["query_pre_attn_scalar"], "query_pre_attn_scalar", low=1.0)
            logit_scale = scalar**-0.5
    quantization = None
    if family.gguf:
        stored = sorted({r.dtype for r in reads if r.role in ("q", "k", "qkv")})
        notes.append(
            f"Read from a GGUF file (llama.cpp's {family.gguf}): the q and k rows are stored as "
            f"{', '.join(stored)}"
            + (" and dequantized by the gguf package, only those rows: the numbers are those "
               "of the quantized weights, not the original model's." if set(stored) -
               set(FLOAT_DTYPES) else ".")
        )  # fmt: skip
        quantization = ", ".join(t for t in stored if t not in FLOAT_DTYPES) or None
        if family.permuted:
            notes.append(
                "llama.cpp's converter stored each head's q and k rows pair by pair (rows i and "
                "i + d/2 as rows 2i and 2i + 1, for its NORM rope); they are read back in "
                "transformers' order, so pair k is the same pair as in the safetensors."
            )
        if family.name == "Gemma":
            notes.append("The norms' gains are stored as 1 + w by the converter: read as they are.")
    plan = LayerPlan(
        kind=family.kind,
        family=family.name,
        layer=layer,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=d,
        hidden_size=hidden,
        reads=tuple(reads),
        notes=tuple(notes),
        rotary=rotary,
        layout=family.layout,
        causal=family.causal,
        logit_scale=logit_scale,
        first_row=first_row,
        n_positions=n_positions,
        eps=eps,
        options={
            "norm_kind": norm_kind,
            "gain_offset": family.gain_offset,
            "head_norm": head_norm,
            "permuted": family.permuted,
            "stacked": stacked,
        },
        quantization=quantization,
    )
    _check_budget(plan, label)
    return plan


def _neo_layer_type(config: dict, layer: int) -> str | None:
    """GPT-Neo's attention type of `layer`, from ``attention_types`` [[[types], repeat], ...],
    each entry checked and the layers counted without listing them (a repeat of 10**8)."""
    entries = config.get("attention_types") or []
    if not isinstance(entries, list):
        entries = [entries]
    start = 0
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], list)):
            msg = (
                f"attention_types in config.json holds {shown(entry)}; expected "
                '[[types], repeat] pairs such as [["global", "local"], 6].'
            )
            raise LoadError(msg)
        kinds, repeat = entry[0], _whole(entry[1], "attention_types' repeat count")
        start_of_next = start + len(kinds) * repeat
        if start_of_next > MAX_LAYERS:
            msg = (
                f"attention_types in config.json repeats {len(kinds)} types {repeat:,} times: "
                f"more than the {MAX_LAYERS:,} layers posviz reads."
            )
            raise LoadError(msg)
        if start <= layer < start_of_next:
            return str(kinds[(layer - start) % len(kinds)])
        start = start_of_next
    return None


def _rotary_spec(specs: tuple[RotarySpec, ...], config: dict, layer: int) -> RotarySpec:
    """The rotary rule of layer `layer`: its layer type's (Gemma-3: local layers rotate at
    their own base), else the only one."""
    if len(specs) == 1:
        return specs[0]
    by_type = {s.layer_type: s for s in specs}
    types = config.get("layer_types")
    if isinstance(types, list) and layer < len(types) and types[layer] in by_type:
        return by_type[types[layer]]
    pattern = _first(config, "sliding_window_pattern", "_sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 0 and "sliding_attention" in by_type:
        sliding = (layer + 1) % pattern != 0
        return by_type["sliding_attention" if sliding else "full_attention"]
    return specs[0]


#: transformers' names of each kind of q/k norm under a layer (q, k).
_HEAD_NORMS = {
    "gemma": ("self_attn.q_norm", "self_attn.k_norm"),
    "projection": ("self_attn.q_norm", "self_attn.k_norm"),
    "shared_ln": ("self_attn.q_layernorm", "self_attn.k_layernorm"),
    "per_head_ln": ("self_attn.q_layernorm", "self_attn.k_layernorm"),
}


def _stored_bytes(dtype: str, shape: tuple[int, ...], rows: tuple[int, int] | None) -> int:
    """Bytes of a tensor (rows [start, stop) of its first axis) as stored: floats by their
    width, a GGUF's quantized types in whole blocks (gguf's GGML_QUANT_SIZES)."""
    count = math.prod(shape) if rows is None else (rows[1] - rows[0]) * math.prod(shape[1:])
    if dtype in _ITEM_BYTES:
        return count * _ITEM_BYTES[dtype]
    return io.gguf_row_bytes({"dtype": dtype, "shape": [1, count]})


def _check_budget(plan: LayerPlan, label: str) -> None:
    if plan.nbytes > MAX_LAYER_BYTES:
        msg = (
            f"Reading layer {plan.layer} of {label} takes {plan.nbytes / 2**20:,.1f} MiB "
            f"({', '.join(r.name for r in plan.reads[:3])}, ...), above the limit of "
            f"{MAX_LAYER_BYTES // 2**20} MiB; nothing was fetched."
        )
        raise LoadError(msg)


def _plan_alibi(config: dict, spec: AlibiSpec, layer: int, n_layers: int | None) -> LayerPlan:
    hidden = int(_first(config, "hidden_size", "n_embd", "d_model") or 0)
    n_heads = spec.n_heads
    context = _first(config, "max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
    note = (
        "ALiBi's slopes are set by formula (the ALiBi paper's recursion): every layer has the same."
    )
    return LayerPlan(
        kind="alibi",
        family="ALiBi",
        layer=layer,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_heads,
        head_dim=hidden // n_heads if hidden else 0,
        hidden_size=hidden,
        reads=(),
        notes=(note,),
        options={"alibi_bias_max": spec.alibi_bias_max, "context": context},
    )


def _plan_t5(
    config: dict,
    spec: RelativeBiasSpec,
    names: _Names,
    layer: int,
    n_layers: int | None,
    label: str,
) -> LayerPlan:
    block = layer if spec.per_layer else 0
    suffix = f"encoder.block.{block}.layer.0.SelfAttention.relative_attention_bias.weight"
    name = names.need(suffix, "the encoder's relative attention bias")
    info = names.tensors[name]
    if info.dtype not in FLOAT_DTYPES or tuple(info.shape) != (spec.num_buckets, spec.n_heads):
        msg = (
            f"{label}: {name} is {info.dtype} of shape {list(info.shape)}; config.json gives "
            f"[{spec.num_buckets}, {spec.n_heads}] of floats."
        )
        raise LoadError(msg)
    nbytes = math.prod(info.shape) * _ITEM_BYTES[info.dtype]
    notes = ["The encoder's bias (bidirectional buckets)."]
    if not spec.per_layer:
        notes.append("T5 learns one bias in block 0 that every layer adds.")
    return LayerPlan(
        kind="relative_bias",
        family="T5",
        layer=layer,
        n_layers=n_layers,
        n_heads=spec.n_heads,
        n_kv_heads=spec.n_heads,
        head_dim=int(config.get("d_kv") or 0),
        hidden_size=int(config.get("d_model") or 0),
        reads=(Read("relative_bias", name, info.dtype, tuple(info.shape), None, nbytes),),
        notes=tuple(notes),
        causal=False,
        options={"num_buckets": spec.num_buckets, "max_distance": spec.max_distance},
    )


# --- reading --------------------------------------------------------------------------------

#: How a plan's reads are done: (name, rows or None) -> the array as stored (float32).
Reader = Callable[[str, tuple[int, int] | None], np.ndarray]


def read_layer(
    plan: LayerPlan,
    read: Reader,
    *,
    model: str,
    read_from: weights.Readable | None = None,
    bytes_fetched: int = 0,
) -> AttentionLayer:
    """Read what `plan` names through `read` and cut it into heads as the model does;
    `read_from` is the model its provenance names."""
    arrays: dict[str, np.ndarray] = {}
    tensors = []
    for r in plan.reads:
        array = read(r.name, r.rows)
        if not np.isfinite(array).all():  # every number of the heads would be NaN
            what = "NaN" if np.isnan(array).any() else "infinite"
            msg = f"{model}: tensor {r.name} holds {what} values; its heads cannot be computed."
            raise LoadError(msg)
        arrays[r.role] = array
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        tensors.append(
            {"name": r.name, "dtype": r.dtype, "shape": list(r.shape),
             "rows": list(r.rows) if r.rows else None, "sha256": digest}
        )  # fmt: skip
    made = partial(
        AttentionLayer,
        model=model,
        plan=plan,
        tensors=tuple(tensors),
        bytes_fetched=bytes_fetched,
        read_from=read_from,
    )
    if plan.kind == "alibi":
        slopes = alibi_slopes(plan.n_heads, alibi_bias_max=plan.options["alibi_bias_max"])
        return made(slopes=slopes)
    if plan.kind == "relative_bias":
        return made(relative_bias=arrays["relative_bias"])
    nh, nkv, d, hidden = plan.n_heads, plan.n_kv_heads, plan.head_dim, plan.hidden_size
    wq, wk, bq, bk = _split(plan, arrays)
    o = plan.options
    if o.get("permuted"):  # llama.cpp's pair-by-pair rows, back in transformers' order
        wq, wk = unpermute(wq), unpermute(wk)
        bq = None if bq is None else unpermute(bq)
        bk = None if bk is None else unpermute(bk)
    norm_name = next((r.name for r in plan.reads if r.role == "norm_weight"), "")
    norm = Norm(
        o["norm_kind"], arrays.get("norm_weight"), arrays.get("norm_bias"), plan.eps,
        o["gain_offset"], norm_name,
    )  # fmt: skip
    q_norm = k_norm = None
    if o["head_norm"] == "gemma":  # 1 + w, as the input norm (a GGUF stores 1 + w: offset 0)
        q_norm = (Norm("rms_norm", arrays["q_norm"], None, plan.eps, o["gain_offset"]),) * nh
        k_norm = (Norm("rms_norm", arrays["k_norm"], None, plan.eps, o["gain_offset"]),) * nkv
    elif o["head_norm"] == "projection":  # one RMSNorm over the whole projection: see _states
        q_norm = tuple(Norm("rms_norm", w, None, plan.eps) for w in arrays["q_norm"].reshape(nh, d))
        k_norm = tuple(
            Norm("rms_norm", w, None, plan.eps) for w in arrays["k_norm"].reshape(nkv, d)
        )
    elif o["head_norm"] == "shared_ln":
        q_norm = (Norm("layer_norm", arrays["q_norm"], arrays.get("q_norm_bias"), plan.eps),) * nh
        k_norm = (Norm("layer_norm", arrays["k_norm"], arrays.get("k_norm_bias"), plan.eps),) * nkv
    elif o["head_norm"] == "per_head_ln" and o.get("stacked"):  # a GGUF's [heads, d]
        q_norm = tuple(Norm("layer_norm", w, None, plan.eps) for w in arrays["q_norm"])
        k_norm = tuple(Norm("layer_norm", w, None, plan.eps) for w in arrays["k_norm"])
    elif o["head_norm"] == "per_head_ln":
        q_norm = tuple(Norm("layer_norm", arrays[f"q_norm.{h}"], None, plan.eps) for h in range(nh))
        k_norm = tuple(
            Norm("layer_norm", arrays[f"k_norm.{g}"], None, plan.eps) for g in range(nkv)
        )
    positions = position_norm = None
    if plan.kind == "learned":
        table = arrays["positions"]
        table = table.reshape(-1, hidden)  # ViT's [1, 1 + N, H]
        positions = table[plan.first_row :].astype(np.float64)
        if "token_type" in arrays:
            positions = positions + arrays["token_type"].reshape(hidden)
        if "position_norm_weight" in arrays:
            position_norm = Norm("layer_norm", arrays["position_norm_weight"],
                                 arrays["position_norm_bias"], plan.eps)  # fmt: skip
    return made(
        wq=wq,
        wk=wk,
        bq=bq,
        bk=bk,
        norm=norm,
        q_norm=q_norm,
        k_norm=k_norm,
        positions=positions,
        position_norm=position_norm or Norm(),
    )


def unpermute(rows: np.ndarray) -> np.ndarray:
    """Each head's rows (heads, d, …) as transformers orders them, from llama.cpp's order
    (`LlamaModel.permute` in its converter stores row i + j·d/2 of a head as row 2i + j).

    >>> unpermute(np.array([[0, 4, 1, 5, 2, 6, 3, 7]])).tolist()
    [[0, 1, 2, 3, 4, 5, 6, 7]]
    """
    n, d = rows.shape[:2]
    paired = rows.reshape(n, d // 2, 2, *rows.shape[2:])
    return np.ascontiguousarray(paired.swapaxes(1, 2).reshape(rows.shape))


def _split(plan: LayerPlan, arrays: dict[str, np.ndarray]) -> tuple:
    """(wq, wk, bq, bk) per head out of the stored projections, as the family's code splits
    them (HEADS.md §0-3)."""
    nh, nkv, d, hidden = plan.n_heads, plan.n_kv_heads, plan.head_dim, plan.hidden_size
    layout = plan.layout
    bq = bk = None
    if layout == "separate":
        wq, wk = arrays["q"].reshape(nh, d, hidden), arrays["k"].reshape(nkv, d, hidden)
        if "q_bias" in arrays:
            bq = arrays["q_bias"].reshape(nh, d)
        if "k_bias" in arrays:
            bk = arrays["k_bias"].reshape(nkv, d)
        return wq, wk, bq, bk
    w, b = arrays["qkv"], arrays.get("qkv_bias")
    if layout == "conv1d":  # [in, 3 out]: columns q | k | v
        wq = w[:, :hidden].T.reshape(nh, d, hidden)
        wk = w[:, hidden : 2 * hidden].T.reshape(nkv, d, hidden)
        if b is not None:
            bq, bk = b[:hidden].reshape(nh, d), b[hidden : 2 * hidden].reshape(nkv, d)
    elif layout == "rows":  # rows q (nh·d) | k (nkv·d) | v
        wq = w[: nh * d].reshape(nh, d, hidden)
        wk = w[nh * d : (nh + nkv) * d].reshape(nkv, d, hidden)
        if b is not None:
            bq, bk = b[: nh * d].reshape(nh, d), b[nh * d : (nh + nkv) * d].reshape(nkv, d)
    elif layout == "per_head":  # [nh, 3, d, H]: per head q_h; k_h; v_h
        view = w.reshape(nh, 3, d, hidden)
        wq, wk = view[:, 0], view[:, 1]
        if b is not None:
            bview = b.reshape(nh, 3, d)
            bq, bk = bview[:, 0], bview[:, 1]
    elif layout == "groups":  # [nkv, r + 2, d, H]: per group its r query heads, k, v
        r = nh // nkv
        view = w.reshape(nkv, r + 2, d, hidden)
        wq, wk = view[:, :r].reshape(nh, d, hidden), view[:, r]
        if b is not None:
            bview = b.reshape(nkv, r + 2, d)
            bq, bk = bview[:, :r].reshape(nh, d), bview[:, r]
    else:
        msg = f"Unknown fused layout {layout!r}."
        raise ValueError(msg)
    return np.ascontiguousarray(wq), np.ascontiguousarray(wk), bq, bk


# --- opening a model ------------------------------------------------------------------------


@dataclass(frozen=True)
class Opened:
    """A model whose layer is to be read: its config, headers, and how to read rows."""

    label: str
    model: weights.Readable
    config: dict
    tensors: dict[str, io.TensorInfo]
    read: Reader
    cached: Callable[[Read], bool]
    remote: bool
    gguf: str = ""

    def plan(self, layer: int) -> LayerPlan:
        """Layer `layer`'s plan, from the config and headers (:func:`plan_layer`)."""
        return plan_layer(self.config, self.tensors, layer=layer, label=self.label, gguf=self.gguf)


def _architecture(keys: tuple) -> str:
    """A GGUF's ``general.architecture``, from the keys its metadata was read with."""
    return next((str(k.value) for k in keys if k.gguf == "general.architecture"), "")


def _open_gguf(model: weights.LocalGGUF) -> Opened:
    """A GGUF file on disk or uploaded: its header (the tensors' types and shapes) read once;
    each read then takes only its rows' bytes, dequantized."""
    with io.opened(model.path, model.label) as (read, size, label):
        header, _ = io.read_gguf_header(read, size, label)
    infos = {t.name: io.TensorInfo(t.name, t.shape, t.type) for t in header.tensors.values()}

    def read_gguf(name: str, rows: tuple[int, int] | None) -> np.ndarray:
        with io.opened(model.path, model.label) as (read, _, label):
            if rows is None:
                return io.read_gguf_tensor(read, header, name, label)
            return io.read_gguf_rows(read, header, name, *rows, label)

    return Opened(model.label, model, model.config, infos, read_gguf, lambda read: True,
                  remote=False, gguf=_architecture(model.keys))  # fmt: skip


def open_model(model: weights.Readable) -> Opened:
    """config.json and the headers of a Hub model (at the commit its config.json was read
    at) or of a local checkpoint (one file, or every shard of a sharded one), or a GGUF file
    (on disk, uploaded, or one file of a Hub repo); no weights yet."""
    if isinstance(model, weights.LocalGGUF):
        return _open_gguf(model)
    if isinstance(model, weights.LocalCheckpoint):

        def read_local(name: str, rows: tuple[int, int] | None) -> np.ndarray:
            return model.read(name) if rows is None else model.read_rows(name, *rows)

        return Opened(model.label, model, model.config, model.infos, read_local,
                      lambda read: True, remote=False)  # fmt: skip
    listed = hub.list_model_at(model)
    infos = {i.name: i for i in listed.infos}

    def read_hub(name: str, rows: tuple[int, int] | None) -> np.ndarray:
        if rows is None:
            return hub.read_tensor(listed, name)
        return hub.read_rows(listed, name, *rows)

    def cached(read: Read) -> bool:
        if read.rows is None:
            return hub.is_cached(listed, read.name)
        return hub.rows_cached(listed, read.name, *read.rows)

    gguf = _architecture(model.keys) if model.gguf else ""
    return Opened(listed.label, model, model.config, infos, read_hub, cached, True, gguf)


def open_source(source: Source | str, *, label: str | None = None) -> weights.Readable:
    """The model `source` names, its config.json read (no weights): ``hf:REPO[@REV][:FILE]``
    on the Hub (a GGUF repo's file or quantization: only that file), a model shipped with
    posviz (``example:NAME``), a file or folder of the server's shared folder (``shared:PATH``),
    a GGUF file (its metadata stands for config.json), or a checkpoint with its config.json
    beside it: a .safetensors file, a sharded checkpoint's index
    (``model.safetensors.index.json``), or the folder that holds either (named in the
    provenance by the file found in it)."""
    source = as_source(source)
    if isinstance(source, HubRef):
        return remote.open_config(source)
    if isinstance(source, Shipped):
        path, name = weights.shipped(source)
        return weights.open_checkpoint(path, label=label or name)
    if isinstance(source, SharedFile):
        return _shared(source.relative)
    if not isinstance(source, LocalPath):
        msg = f"{source} is no model's weights: a layer's heads are read from a model's weights."
        raise LoadError(msg)
    path = Path(source.path)
    if path.suffix.lower() == ".gguf":
        return weights.open_gguf(path, label=label or source.path)
    if path.is_dir():
        found = weights.weights_in(path)
        return weights.open_checkpoint(found, label=str(Path(label or path) / found.name))
    if not weights.is_weights(path):
        what = "a config.json" if path.suffix.lower() == ".json" else "not a model's weights"
        msg = (
            f"{source} is {what}: give the weights beside it (model.safetensors, or a sharded "
            "checkpoint's model.safetensors.index.json), their folder, or the model's hf: "
            "name; a layer's heads are read from its weights."
        )
        raise LoadError(msg)
    return weights.open_checkpoint(path, label=label or source.path)


def _shared(relative: str) -> weights.Readable:
    """A model of the shared folder, named `relative` (never the server's own path): a GGUF
    file, or a checkpoint whose config.json is beside it inside the folder."""
    root = weights.shared_root()
    path = datadir.resolve(root, relative)
    if relative.lower().endswith(".gguf"):
        return weights.open_gguf(path, label=relative)
    model = weights.folder_checkpoint(root, path, relative)
    if model is None:
        msg = f"{relative}: its config.json is not beside it inside the shared folder."
        raise LoadError(msg)
    return model


def open_layer(model: weights.Readable, *, layer: int = 0) -> AttentionLayer:
    """Layer `layer`'s position-relevant weights of a Hub model or local checkpoint: plan
    from its headers, then read only the planned rows."""
    opened = open_model(model)
    return read_planned(opened, opened.plan(layer))


def read_planned(opened: Opened, plan: LayerPlan) -> AttentionLayer:
    """Read a planned layer of an opened model; `bytes_fetched` counts what was not cached."""
    fetched = sum(r.nbytes for r in plan.reads if opened.remote and not opened.cached(r))
    return read_layer(
        plan, opened.read, model=opened.label, read_from=opened.model, bytes_fetched=fetched
    )
