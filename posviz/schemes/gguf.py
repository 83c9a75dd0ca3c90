"""Which position scheme a GGUF file's metadata describes, as the config.json keys transformers
would have, with every GGUF key and tensor read named and the config key it fed.

llama.cpp keeps a model's positions in ``{arch}.*`` keys (``context_length``,
``rope.freq_base``, ``rope.dimension_count``, ``rope.scaling.*``, ``attention.head_count``,
``attention.key_length``, sliding windows) and in three small tensors: ``rope_freqs.weight`` (a
divisor of each pair's frequency: how convert_hf_to_gguf.py stores Llama-3's llama3 rule, and
some YaRN ramps) and ``rope_factors_long/short.weight`` (LongRoPE's factors, Phi-3). Turned into
config.json keys, they go through the same checks and formulas as any config.json
(:func:`posviz.schemes.config.position_scheme`), so a GGUF and its config.json can be compared
key by key. Where a GGUF holds what no config.json key says (a ``rope_freqs`` that matches no
llama3 rule), the frequencies are kept exact and the record says how they were read.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from posviz.embedding import LoadError
from posviz.io import GGUFHeader, LongArray
from posviz.schemes.alibi import HEADS

__all__ = [
    "LLAMA_CPP_ADJACENT_PAIRS",
    "MODEL_TYPES",
    "ROPE_TENSORS",
    "GGUFConfig",
    "KeyRead",
    "gguf_config",
    "keys_record",
    "llama3_parameters",
]

#: The tensors a GGUF's position scheme may need (each n_pairs float32 values).
ROPE_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")

#: GGUF architecture -> transformers' model_type, where they differ (the rest are the same).
MODEL_TYPES = {
    "gptneox": "gpt_neox",
    "starcoder": "gpt_bigcode",
    "phi2": "phi",
    "gemma3": "gemma3_text",
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "deepseek2": "deepseek_v3",
    "command-r": "cohere",
    "nomic-bert": "nomic_bert",
    "jina-bert-v2": "jina_bert_v2",
    "t5encoder": "t5",
    "rwkv6": "rwkv",
    "rwkv7": "rwkv",
    "granitemoe": "granitemoe",
}
#: Architectures whose rotation llama.cpp applies to adjacent columns (2i, 2i + 1: its "NORM"
#: mode, llama_model_rope_type); the others it rotates j with j + d/2 ("NEOX"). For Llama and
#: its kin convert_hf_to_gguf.py permutes q and k so that NORM equals transformers' rotate_half.
LLAMA_CPP_ADJACENT_PAIRS = frozenset(
    {
        "llama", "llama4", "llada", "deci", "baichuan", "starcoder", "internlm2", "minicpm",
        "xverse", "command-r", "cohere2", "olmo", "arctic", "deepseek", "deepseek2", "plm",
        "chatglm", "granite", "granitemoe", "granitehybrid", "chameleon", "bailingmoe",
        "neo-bert", "smollm3", "arcee", "ernie4_5", "ernie4_5-moe", "mistral3",
    }
)  # fmt: skip
#: Architectures that bias attention by ALiBi (llama.cpp's max_alibi_bias users).
_ALIBI = {"bloom", "mpt", "refact", "jina-bert-v2"}
#: llama3 band edges and original context convert_hf_to_gguf.py falls back to.
_LLAMA3_DEFAULTS = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original": 8192}
#: Largest count a GGUF key gives (heads, key length, rotary width): posviz's bound on a
#: model's heads (`posviz.schemes.alibi.HEADS`).
MAX_COUNT = HEADS.high
#: How closely stored factors must match a llama3 rule to be read as one: float32's rounding
#: of the converter's float32 frequencies, with room.
LLAMA3_TOLERANCE = 1e-5


@dataclass(frozen=True)
class KeyRead:
    """One GGUF key or tensor read for the position scheme.

    Attributes
    ----------
    gguf : str
        The key (``llama.rope.freq_base``) or tensor (``rope_freqs.weight``).
    config : str
        The config.json key it fed (``rope_theta``, ``rope_scaling.factor``), or "" when it is
        shown only (no config.json key says it, or the scheme does not use it).
    value : Any
        As read (a tensor: its values as a list).
    note : str
        How it was read, when not plainly.
    """

    gguf: str
    config: str
    value: Any
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"gguf": self.gguf, "config": self.config, "value": self.value, "note": self.note}


@dataclass(frozen=True)
class GGUFConfig:
    """A GGUF file's position metadata as config.json keys.

    Attributes
    ----------
    config : dict
        The keys transformers' config.json would have for it: pass to
        :func:`posviz.schemes.config.position_scheme`.
    keys : tuple of KeyRead
        Every position key and tensor read, in the order read.
    architecture : str
        ``general.architecture``.
    sha256 : str
        Of the header's bytes followed by those of the tensors read (in `ROPE_TENSORS` order):
        everything the scheme was read from.
    """

    config: dict[str, Any]
    keys: tuple[KeyRead, ...]
    architecture: str
    sha256: str


def keys_record(keys: Iterable[KeyRead]) -> list[dict[str, Any]]:
    """Keys read, for a provenance record (a tensor's values shortened to their count)."""
    out = []
    for read in keys:
        entry = read.to_dict()
        if isinstance(read.value, list) and len(read.value) > 8:
            entry["value"] = f"{len(read.value)} values"
        out.append(entry)
    return out


def llama3_parameters(
    factors: np.ndarray, *, base: float, dim: int, original: int | None = None
) -> tuple[dict[str, float], float] | None:
    """The llama3 rule (factor, band edges, original context) that gives `factors` as
    convert_hf_to_gguf.py stores them in ``rope_freqs.weight``, and the largest relative
    difference; None when no rule tried matches within `LLAMA3_TOLERANCE`.

    The factor is the largest stored factor; the band edges and original context tried are the
    converter's defaults (1, 4, 8192), and `original` (the file's
    ``rope.scaling.original_context_length``) when given. Only their ratios set the factors,
    so a match names the converter's conventional values.
    """
    factors = np.asarray(factors, dtype=np.float64)
    if factors.shape != (dim // 2,) or not np.all(np.isfinite(factors)) or factors.min() < 1:
        return None
    unscaled = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))  # as converted
    wavelength = 2 * np.pi / unscaled.astype(np.float64)
    factor = float(factors.max())
    low, high = _LLAMA3_DEFAULTS["low_freq_factor"], _LLAMA3_DEFAULTS["high_freq_factor"]
    for context in dict.fromkeys([original, _LLAMA3_DEFAULTS["original"]]):
        if context is None:
            continue
        smooth = (context / wavelength - low) / (high - low)
        expected = np.where(
            wavelength < context / high,
            1.0,
            np.where(wavelength > context / low, factor, 1 / ((1 - smooth) / factor + smooth)),
        )
        difference = float(np.max(np.abs(factors - expected) / expected))
        if difference <= LLAMA3_TOLERANCE:
            parameters = {
                "factor": factor,
                "low_freq_factor": low,
                "high_freq_factor": high,
                "original_max_position_embeddings": context,
            }
            return parameters, difference
    return None


def gguf_config(
    header: GGUFHeader,
    read: Callable[[str], np.ndarray],
    *,
    head: bytes | memoryview = b"",
) -> GGUFConfig:
    """The config.json keys a GGUF file's position metadata stands for.

    Parameters
    ----------
    header : GGUFHeader
        The file's checked header.
    read : callable
        Reads one tensor by name (only those of `ROPE_TENSORS` the file holds are asked for).
    head : bytes
        The header's bytes, for the sha256 of what the scheme was read from.

    Raises
    ------
    LoadError
        If ``general.architecture`` is missing, a key the scheme needs has the wrong type, or a
        rope tensor is not a vector of finite, positive factors.
    """
    meta = header.metadata
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        msg = "The GGUF file names no general.architecture; its keys cannot be read."
        raise LoadError(msg)
    reads: list[KeyRead] = []
    config: dict[str, Any] = {}

    def take(
        suffix: str, into: str, *, kind: type = float, note: str = "", low: int | None = None
    ) -> Any:
        """The value of ``{arch}.{suffix}``, if present, recorded as feeding `into` (a whole
        number from `low` to `MAX_COUNT`, when `low` is given)."""
        key = f"{arch}.{suffix}"
        if key not in meta:
            return None
        value = _checked(meta[key], key, kind)
        if low is not None and not low <= value <= MAX_COUNT:
            msg = (
                f"The GGUF key {key} is {value:,}; posviz reads {low:,} to {MAX_COUNT:,} "
                "(a model's heads, widths and lengths)."
            )
            raise LoadError(msg)
        reads.append(KeyRead(key, into, _plain(value), note))
        return value

    config["model_type"] = MODEL_TYPES.get(arch, arch)
    reads.append(KeyRead("general.architecture", "model_type", arch))
    for key, what in (("general.name", "model name"), ("general.file_type", "file type")):
        if key in meta:
            value = meta[key]
            note = what
            if key == "general.file_type" and isinstance(value, int):
                note = f"file type ({_file_type(value)})"
            reads.append(KeyRead(key, "", _plain(value), note))

    for suffix, into in (
        ("context_length", "max_position_embeddings"),
        ("embedding_length", "hidden_size"),
        ("block_count", "num_hidden_layers"),
    ):
        value = take(suffix, into, kind=int)
        if value is not None:
            config[into] = value
    for suffix, into in (
        ("attention.layer_norm_epsilon", "layer_norm_eps"),
        ("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
    ):
        value = take(suffix, into)
        if value is not None:
            config[into] = value
    # Recurrent models (Mamba, RWKV) write 0 heads: llama.cpp reads them so.
    heads = take("attention.head_count", "num_attention_heads", kind=int, low=0)
    if heads is not None:
        config["num_attention_heads"] = heads
    kv_heads = take("attention.head_count_kv", "num_key_value_heads", kind=int, low=0)
    if kv_heads is not None:
        config["num_key_value_heads"] = kv_heads
    key_length = take("attention.key_length", "head_dim", kind=int, low=1)
    n_rot = take("rope.dimension_count", "", kind=int, low=0)
    width = _rotary_width(config, arch, key_length, n_rot, reads)

    base = take("rope.freq_base", "rope_theta")
    if base is not None:
        config["rope_theta"] = base
    local = take("rope.freq_base_swa", "rope_local_base_freq")
    if local is None and arch == "gemma3":
        # llama.cpp gives Gemma-3's sliding layers base 10000 when the file names none.
        local = 10000.0
        note = "not in the file: llama.cpp's value for gemma3's sliding layers"
        reads.append(KeyRead(f"{arch}.rope.freq_base_swa", "rope_local_base_freq", local, note))
    if local is not None:
        config["rope_local_base_freq"] = local
    window = take("attention.sliding_window", "sliding_window", kind=int)
    if window is not None:
        config["sliding_window"] = window
    pattern_key = f"{arch}.attention.sliding_window_pattern"
    if pattern_key in meta:
        reads.append(KeyRead(pattern_key, "", _plain(meta[pattern_key]), "shown only"))
    sections = take("rope.dimension_sections", "rope_scaling.mrope_section", kind=tuple)
    take("rope.scaling.finetuned", "", kind=bool, note="shown only")

    scaling = _scaling(take, arch, meta)
    for name in ROPE_TENSORS:  # their length from the header, before a byte is read
        if name in header.tensors:
            _check_length(header.tensors[name].shape, name, width, arch)
    tensors = {name: read(name) for name in ROPE_TENSORS if name in header.tensors}
    scaling = _rope_tensors(tensors, scaling, config, reads)
    if sections is not None:
        scaling = {"rope_type": "default", **scaling, "mrope_section": list(sections)}
    if scaling:
        config["rope_scaling"] = scaling
        if "original_max_position_embeddings" in scaling:  # Phi-3 keeps it at the top as well
            config["original_max_position_embeddings"] = scaling["original_max_position_embeddings"]
    alibi = take("attention.max_alibi_bias", "attn_config.alibi_bias_max")
    if arch in _ALIBI:
        config["alibi"] = True
        config["attn_config"] = {"alibi": True, "alibi_bias_max": alibi or 8.0}
    buckets = take("attention.relative_buckets_count", "relative_attention_num_buckets", kind=int)
    if buckets is not None:
        config["relative_attention_num_buckets"] = buckets

    digest = hashlib.sha256(head)
    for name in ROPE_TENSORS:
        if name in tensors:
            digest.update(np.ascontiguousarray(tensors[name]).tobytes())
    return GGUFConfig(config, tuple(reads), arch, digest.hexdigest())


def _rotary_width(
    config: dict[str, Any],
    arch: str,
    key_length: int | None,
    n_rot: int | None,
    reads: list[KeyRead],
) -> int | None:
    """``rope.dimension_count`` as the config keys that give transformers' rotary width; the
    rotary width (None when no key gives it)."""
    if n_rot is None:
        if key_length is not None:
            config["head_dim"] = key_length
        return key_length
    key = f"{arch}.rope.dimension_count"
    if arch == "deepseek2":  # MLA: rotary on the last columns of each head only
        config["qk_rope_head_dim"] = n_rot
        config["rope_interleave"] = True
        reads[-1] = KeyRead(key, "qk_rope_head_dim", n_rot)
        return n_rot
    head = key_length
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if head is None and hidden and heads:
        if hidden < heads:
            msg = (
                f"The GGUF key {arch}.embedding_length {hidden:,} is below "
                f"{arch}.attention.head_count {heads:,}: a head would have no column."
            )
            raise LoadError(msg)
        head = hidden // heads
    if head is None or head == n_rot:
        config["head_dim"] = n_rot
        reads[-1] = KeyRead(key, "head_dim", n_rot)
        return n_rot
    config["head_dim"] = head
    share = n_rot / head
    if int(head * share) != n_rot:  # float rounding must not cost a pair
        share = math.nextafter(share, 1.0)
    config["partial_rotary_factor"] = share
    reads[-1] = KeyRead(key, "partial_rotary_factor", n_rot, f"{n_rot} of {head} head columns")
    return n_rot


def _check_length(shape: tuple[int, ...], name: str, width: int | None, arch: str) -> None:
    """Refuse rope tensor `name` of `shape` unless it holds one factor per rotary pair (llama.cpp
    reads rope_freqs and LongRoPE's factors as n_rot / 2 values)."""
    count = math.prod(shape)
    if width is None:
        msg = (
            f"The GGUF file holds {name} ({count:,} values) but no key gives its rotary width "
            f"({arch}.rope.dimension_count, attention.key_length, or embedding_length and "
            "attention.head_count)."
        )
        raise LoadError(msg)
    if count != width // 2 or len(shape) != 1:
        msg = (
            f"The GGUF tensor {name} holds {count:,} value{'s' * (count != 1)}"
            + (f" in shape {list(shape)}" if len(shape) != 1 else "")
            + f"; the rotary width {width} gives {width // 2} pairs, one factor each."
        )
        raise LoadError(msg)


def _scaling(take: Callable[..., Any], arch: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The ``rope.scaling.*`` keys as config.json's rope_scaling."""
    scaling: dict[str, Any] = {}
    kind = take("rope.scaling.type", "rope_scaling.rope_type", kind=str)
    if kind is not None and kind not in ("none", "linear", "yarn", "longrope"):
        msg = f"{arch}.rope.scaling.type is {kind!r}; llama.cpp knows none, linear, yarn, longrope."
        raise LoadError(msg)
    factor = take("rope.scaling.factor", "rope_scaling.factor")
    legacy = take("rope.scale_linear", "rope_scaling.factor", note="older files' linear factor")
    if factor is None and legacy is not None:
        factor = legacy
    if factor == 0.0:  # llama.cpp reads 0 as "no factor"
        factor = None
    if kind in ("yarn", "longrope"):
        scaling["rope_type"] = kind
        if factor is not None:
            scaling["factor"] = factor
    elif kind in (None, "linear") and factor not in (None, 1.0):
        # llama.cpp's scaling type defaults to linear: a factor alone divides every frequency.
        scaling["rope_type"], scaling["factor"] = "linear", factor
    original = take(
        "rope.scaling.original_context_length", "original_max_position_embeddings", kind=int
    )
    if original is not None:
        scaling["original_max_position_embeddings"] = original
    attention = take("rope.scaling.attn_factor", "rope_scaling.attention_factor")
    if attention is not None:
        scaling["attention_factor"] = attention
    for suffix, into in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow")):
        value = take(f"rope.scaling.{suffix}", f"rope_scaling.{into}")
        if value is not None:
            scaling[into] = value
    log_mul = take(
        "rope.scaling.yarn_log_multiplier",
        "rope_scaling.mscale_all_dim",
        note="0.1 · mscale_all_dim, as convert_hf_to_gguf.py writes it; mscale set equal "
        "(a GGUF holds no mscale), so the cos/sin factor is 1 as in llama.cpp's deepseek2",
    )
    if log_mul is not None:
        scaling["mscale_all_dim"] = scaling["mscale"] = log_mul / 0.1
    if set(scaling) - {"rope_type"} and "rope_type" not in scaling:
        scaling["rope_type"] = "default"  # keys such as an attention factor without a rule
    return scaling


def _rope_tensors(
    tensors: dict[str, np.ndarray],
    scaling: dict[str, Any],
    config: dict[str, Any],
    reads: list[KeyRead],
) -> dict[str, Any]:
    """rope_freqs and LongRoPE's factors as rope_scaling keys."""
    for name, values in tensors.items():
        values = np.asarray(values, dtype=np.float64).ravel()
        if not np.all(np.isfinite(values)) or values.size == 0 or values.min() <= 0:
            msg = f"The GGUF tensor {name} holds factors that are not all finite and positive."
            raise LoadError(msg)
        tensors[name] = values
    long, short = tensors.get("rope_factors_long.weight"), tensors.get("rope_factors_short.weight")
    if long is not None or short is not None:
        if long is None or short is None:
            msg = "The GGUF file holds one of rope_factors_long/short.weight without the other."
            raise LoadError(msg)
        scaling = {**scaling, "rope_type": "longrope"}
        scaling["long_factor"], scaling["short_factor"] = long.tolist(), short.tolist()
        reads.append(KeyRead("rope_factors_long.weight", "rope_scaling.long_factor", long.tolist()))
        reads.append(
            KeyRead("rope_factors_short.weight", "rope_scaling.short_factor", short.tolist())
        )
    freqs = tensors.get("rope_freqs.weight")
    if freqs is None:
        return scaling
    dim = 2 * freqs.size
    base = float(config.get("rope_theta", 10000.0))
    linear = float(scaling.get("factor", 1.0)) if scaling.get("rope_type") == "linear" else 1.0
    found = None
    if linear == 1.0 and scaling.get("rope_type") in (None, "default"):
        original = scaling.get("original_max_position_embeddings")
        found = llama3_parameters(freqs, base=base, dim=dim, original=original)
    if found is not None:
        parameters, difference = found
        note = (
            f"llama3 rule recognised: factor {parameters['factor']:g}, low_freq_factor "
            f"{parameters['low_freq_factor']:g}, high_freq_factor "
            f"{parameters['high_freq_factor']:g}, original context "
            f"{parameters['original_max_position_embeddings']} (largest relative difference "
            f"{difference:.1e})"
        )
        reads.append(KeyRead("rope_freqs.weight", "rope_scaling (llama3)", freqs.tolist(), note))
        return {**scaling, "rope_type": "llama3", **parameters}
    # llama.cpp divides pair i's angle by factors[i] (and by a linear factor as well): exact as
    # LongRoPE's form with the same factors short and long.
    note = (
        "divides each pair's frequency (llama.cpp's freq_factors); no llama3 rule gives these, "
        "so they are read as per-pair factors in LongRoPE's form (the frequencies are exact)"
    )
    if linear != 1.0:
        note += f", each times the linear factor {linear:g}"
    reads.append(
        KeyRead("rope_freqs.weight", "rope_scaling.short_factor/long_factor", freqs.tolist(), note)
    )
    factors = (freqs * linear).tolist()
    kept = {k: scaling[k] for k in ("original_max_position_embeddings",) if k in scaling}
    return {
        "rope_type": "longrope",
        "factor": 1.0,
        "attention_factor": float(scaling.get("attention_factor", 1.0)),
        "short_factor": factors,
        "long_factor": factors,
        **kept,
    }


def _checked(value: Any, key: str, kind: type) -> Any:
    """`value` of GGUF key `key` as `kind` (a float key may hold any number)."""
    if isinstance(value, LongArray):
        msg = f"The GGUF key {key} is an array of {value.count:,} values; expected {kind.__name__}."
        raise LoadError(msg)
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, tuple) and value:  # per-layer values (OpenELM)
        layers = [v for v in value if isinstance(v, int) and v > 0]
        if layers:
            return max(layers)
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    msg = f"The GGUF key {key} is {value!r}; expected {kind.__name__}."
    raise LoadError(msg)


def _plain(value: Any) -> Any:
    """A metadata value as JSON writes it."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, LongArray):
        return repr(value)
    return value


def _file_type(code: int) -> str:
    """llama.cpp's name of a file type (MOSTLY_Q4_K_M), or the number."""
    from gguf.constants import LlamaFileType

    try:
        return LlamaFileType(code).name
    except ValueError:
        return str(code)
