"""Which position scheme a model's config.json describes, with the numbers that define it.

Kinds: ``learned_absolute`` (a stored table, read as any other), ``rotary``, ``alibi``,
``relative_bias`` (T5's bucketed bias), ``relative_table`` (DeBERTa's relative embeddings),
``sinusoidal`` (a fixed table from a formula) and ``none`` (no position encoding). Every value
a formula takes is checked here, so a bad config.json is refused with a message before any
computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from posviz import _moved
from posviz.embedding import LoadError
from posviz.rows import table_span
from posviz.schemes import alibi
from posviz.schemes._values import first as _first
from posviz.schemes._values import integer as _integer
from posviz.schemes._values import number as _number
from posviz.schemes.layers import LayerScheme, layer_map, type_specs
from posviz.schemes.rope import MAX_CONTEXT, RotarySpec, contradictions

__all__ = [
    "KINDS",
    "NAMES",
    "AlibiSpec",
    "RelativeBiasSpec",
    "RelativeTableSpec",
    "Scheme",
    "language_model",
    "position_scheme",
    "scheme_kind",
]

#: Each kind of scheme, in words.
KINDS = {
    "learned_absolute": "a learned table of absolute positions, stored with the weights",
    "rotary": "rotary embeddings: q and k rotated by angles proportional to position",
    "alibi": "ALiBi: a bias on the attention logits, linear in distance, one slope per head",
    "relative_bias": "T5 relative buckets: a learned bias per head and bucket of distance",
    "relative_table": "DeBERTa relative embeddings: a learned table whose rows are buckets of "
    "relative offsets (one offset each near 0, log-spaced ranges beyond), used by disentangled "
    "attention",
    "sinusoidal": "fixed sinusoidal table (Vaswani et al. 2017), computed from its formula, "
    "not learned",
    "none": "no position encoding: order comes only from the causal mask or the recurrence "
    "(NoPE, state-space models)",
}
#: Each kind of scheme by name, for messages.
NAMES = {
    "learned_absolute": "a learned absolute position table",
    "rotary": "rotary embeddings",
    "alibi": "ALiBi attention biases",
    "relative_bias": "relative position buckets",
    "relative_table": "relative attention",
    "sinusoidal": "fixed sinusoidal positions",
    "none": "no position encoding",
}
#: Rotary models whose config.json may name no rotary key (the default base 10000 applies).
_ROTARY_MODELS = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
    "gemma2", "gemma3", "gemma3_text", "phi", "phi3", "gpt_neox", "gptj", "codegen", "falcon",
    "deepseek_v2", "deepseek_v3", "olmo", "olmo2", "stablelm", "starcoder2", "cohere",
    "persimmon", "granite", "internlm2", "baichuan", "chatglm", "mpt-rope", "smollm3",
    "llama4", "llama4_text", "gemma4", "gemma4_text", "qwen2_vl", "qwen2_5_vl", "qwen3_vl",
}  # fmt: skip
_SINUSOIDAL_MODELS = {"marian", "fsmt", "pegasus", "speech_to_text", "m2m_100", "nllb"}
_NO_POSITION_MODELS = {"mamba", "mamba2", "rwkv", "falcon_mamba"}
_RELATIVE_BIAS_MODELS = {"t5", "mt5", "umt5", "longt5", "switch_transformers"}


@dataclass(frozen=True)
class AlibiSpec:
    n_heads: int
    alibi_bias_max: float = 8.0


@dataclass(frozen=True)
class RelativeBiasSpec:
    """T5: ``relative_attention_bias`` [num_buckets, n_heads], in block 0 of each stack (UMT5:
    every layer)."""

    num_buckets: int
    max_distance: int
    n_heads: int
    per_layer: bool = False


@dataclass(frozen=True)
class RelativeTableSpec:
    """DeBERTa-v2/v3: ``rel_embeddings`` [2 · span, hidden], span = position_buckets (else
    max_relative_positions, else max_position_embeddings).

    `position_buckets` is config.json's (−1: no log buckets); `max_relative_positions` is the
    one the model uses (``max_position_embeddings`` when config.json says −1). Together they say
    which offsets each row covers (:func:`posviz.rows.row_offsets`).
    """

    span: int
    hidden_size: int
    absolute_too: bool
    position_buckets: int = -1
    max_relative_positions: int = 0


@dataclass(frozen=True)
class Scheme:
    """A model's position scheme as its config.json states it.

    Attributes
    ----------
    kind : str
        A `KINDS` key.
    reason : str
        Which config keys say so.
    rotary : tuple of RotarySpec
        Each distinct rule of the model's layers (the full-attention one first: Gemma-3's
        sliding layers second); empty unless rotary.
    alibi, relative_bias, relative_table : spec or None
    context : int or None
        ``max_position_embeddings`` (or its alias), when given.
    width : int or None
        The model width (``hidden_size`` / ``d_model``), when given: a sinusoidal table's.
    warnings : tuple of str
        Where the config contradicts itself.
    layers : tuple of LayerScheme
        How each layer encodes position (rotary models whose config.json states the number of
        layers; `posviz.schemes.layers`).
    config : dict
        A rotary model's config.json as read (empty for other kinds; its language model's
        settings: :func:`language_model`), for what needs it whole: the context planner writes
        its rules into it (`posviz.schemes.plan`). Not compared, not hashed; not to be changed.
    """

    kind: str
    reason: str
    rotary: tuple[RotarySpec, ...] = ()
    alibi: AlibiSpec | None = None
    relative_bias: RelativeBiasSpec | None = None
    relative_table: RelativeTableSpec | None = None
    context: int | None = None
    width: int | None = None
    warnings: tuple[str, ...] = field(default=())
    layers: tuple[LayerScheme, ...] = ()
    config: dict = field(default_factory=dict, compare=False, repr=False)


def position_scheme(config: dict) -> Scheme:
    """The position scheme `config` (a parsed config.json) describes, checked.

    Raises
    ------
    LoadError
        If a number the scheme needs is missing, not finite, or out of range (θ ≤ 1, a factor
        ≤ 0, an odd rotary width, no heads, LongRoPE factor lists of the wrong length, an
        unknown rope type); the message names the key.

    Examples
    --------
    >>> s = position_scheme({"model_type": "llama", "hidden_size": 4096,
    ...     "num_attention_heads": 32, "rope_theta": 500000.0})
    >>> s.kind, s.rotary[0].rotary_dim, s.rotary[0].base
    ('rotary', 128, 500000.0)
    >>> position_scheme({"model_type": "gpt2", "n_positions": 1024}).kind
    'learned_absolute'
    """
    raw, config = config, language_model(config)
    kind, reason = scheme_kind(config)
    # A scheme computed from config.json needs a valid context; a learned table does not.
    context = _context(config, strict=kind not in ("learned_absolute", "none"))
    model_type = config.get("model_type")
    if kind == "alibi":
        attn = config.get("attn_config")
        bias_max = attn.get("alibi_bias_max", 8.0) if isinstance(attn, dict) else 8.0
        slopes = AlibiSpec(_heads(config), _number(bias_max, "attn_config.alibi_bias_max"))
        # Heads size every array ALiBi makes: refused here, by the key that says so.
        alibi.HEADS.check(f"{_heads_key(config)} in config.json", slopes.n_heads, error=LoadError)
        alibi.BIAS_MAX.check(
            "attn_config.alibi_bias_max in config.json", slopes.alibi_bias_max, error=LoadError
        )
        return Scheme(kind, reason, alibi=slopes, context=context)
    if kind == "rotary":
        layers = layer_map(config, context=context)
        specs = _distinct(layers) if layers else type_specs(config, context=context)
        if not specs:
            msg = "config.json makes every layer NoPE: no layer rotates q and k."
            raise LoadError(msg)
        warnings = [w for spec in specs for w in contradictions(spec)]
        return Scheme(
            kind, reason, rotary=specs, context=context, warnings=tuple(dict.fromkeys(warnings)),
            layers=layers, config=raw,
        )  # fmt: skip
    if kind == "relative_bias":
        spec = RelativeBiasSpec(
            num_buckets=_integer(config.get("relative_attention_num_buckets", 32), "num_buckets"),
            max_distance=_integer(
                config.get("relative_attention_max_distance", 128),
                "relative_attention_max_distance",
            ),
            n_heads=_heads(config),
            per_layer=model_type == "umt5",
        )
        if spec.num_buckets < 4:
            msg = f"relative_attention_num_buckets is {spec.num_buckets}; T5 needs at least 4."
            raise LoadError(msg)
        return Scheme(kind, reason, relative_bias=spec, context=context)
    if kind == "relative_table":
        table = _relative_table(config, context)
        return Scheme(kind, reason, relative_table=table, context=context)
    width = _first(config, "d_model", "hidden_size", "n_embd") if kind == "sinusoidal" else None
    width = None if width is None else _integer(width, "d_model")
    return Scheme(kind, reason, context=context, width=width)


def _relative_table(config: dict, context: int | None) -> RelativeTableSpec:
    """DeBERTa's relative table as transformers' ``DebertaV2Encoder`` sizes it: span =
    position_buckets when > 0, else max_relative_positions when ≥ 1, else
    max_position_embeddings."""
    buckets = config.get("position_buckets", -1)
    buckets = buckets if isinstance(buckets, int) and buckets > 0 else -1
    longest = config.get("max_relative_positions", -1)
    longest = longest if isinstance(longest, int) and longest >= 1 else context
    if longest is None:
        msg = (
            "relative_attention is true but config.json gives neither max_relative_positions "
            "nor max_position_embeddings: the relative table's span is unknown."
        )
        raise LoadError(msg)
    longest = _integer(longest, "max_relative_positions")
    try:  # the offsets each row covers are defined for these settings
        span = table_span(buckets, longest)
    except ValueError as exc:
        msg = f"config.json: {exc}"
        raise LoadError(msg) from exc
    return RelativeTableSpec(
        span=span,
        hidden_size=_integer(_first(config, "hidden_size", "d_model"), "hidden_size"),
        absolute_too=config.get("position_biased_input", True) is not False,
        position_buckets=buckets,
        max_relative_positions=longest,
    )


def scheme_kind(config: dict) -> tuple[str, str]:
    """(kind, the config keys that say so), without checking any number.

    Examples
    --------
    >>> scheme_kind({"model_type": "llama", "rope_theta": 10000.0})
    ('rotary', 'rope_theta')
    >>> scheme_kind({"model_type": "mpt", "attn_config": {"alibi": True}})
    ('alibi', 'attn_config.alibi: true')
    """
    config = language_model(config)
    model_type = str(config.get("model_type", ""))
    attn = config.get("attn_config")
    if isinstance(attn, dict) and attn.get("alibi") is True:
        return "alibi", "attn_config.alibi: true"
    if config.get("alibi") is True:
        return "alibi", "alibi: true"
    if model_type == "bloom":
        return "alibi", "model_type: bloom"
    rotary = _rotary_reason(config)
    if rotary:
        return "rotary", rotary
    if "relative_attention_num_buckets" in config:
        return "relative_bias", "relative_attention_num_buckets"
    if model_type in _RELATIVE_BIAS_MODELS:
        return "relative_bias", f"model_type: {model_type}"
    if config.get("relative_attention") is True:
        return "relative_table", "relative_attention: true"
    if config.get("sinusoidal_pos_embds") is True:
        return "sinusoidal", "sinusoidal_pos_embds: true"
    if model_type in _SINUSOIDAL_MODELS:
        return "sinusoidal", f"model_type: {model_type}"
    if model_type in _NO_POSITION_MODELS:
        return "none", f"model_type: {model_type}"
    if config.get("position_embedding_type") == "none":
        return "none", "position_embedding_type: none"
    return "learned_absolute", "no other scheme named in config.json"


def language_model(config: dict) -> dict:
    """The language model's settings: multimodal configs (Gemma-3, Llama-4) nest them."""
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


# --- rotary --------------------------------------------------------------------------------


def _rotary_reason(config: dict) -> str:
    keys: tuple[str, ...] = (
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "rotary_dim",
        "rotary_pct",
    )
    keys += ("rotary_emb_base", "partial_rotary_factor", "qk_rope_head_dim")
    for key in keys:
        if config.get(key) is not None:
            return key
    if config.get("position_embedding_type") == "rotary":
        return "position_embedding_type: rotary"
    if config.get("model_type") in _ROTARY_MODELS and config.get("alibi") is not True:
        return f"model_type: {config['model_type']}"
    return ""


def _distinct(layers: tuple[LayerScheme, ...]) -> tuple[RotarySpec, ...]:
    """The layers' distinct rotary rules, the full-attention (or only) one first."""
    specs = list(dict.fromkeys(layer.rotary for layer in layers if layer.rotary is not None))
    return tuple(sorted(specs, key=lambda spec: spec.layer_type not in ("full_attention", "all")))


# --- checked values ------------------------------------------------------------------------


def _context(config: dict, *, strict: bool) -> int | None:
    """``max_position_embeddings`` (or an alias); a bad value is refused when `strict`, else
    ignored."""
    value = _first(config, "max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
    if value is None:
        return None
    try:
        return _integer(value, "max_position_embeddings", high=MAX_CONTEXT)
    except LoadError:
        if strict:
            raise
        return None


_HEADS_KEYS = ("num_attention_heads", "n_head", "num_heads", "n_heads")


def _heads_key(config: dict) -> str:
    """The key config.json gives its number of heads under."""
    return next((k for k in _HEADS_KEYS if config.get(k) is not None), _HEADS_KEYS[0])


def _heads(config: dict) -> int:
    value = _first(config, *_HEADS_KEYS)
    if value is None:
        msg = "config.json names no number of attention heads (num_attention_heads)."
        raise LoadError(msg)
    return _integer(value, _heads_key(config))


def __getattr__(name: str) -> object:
    return _moved.attribute(__name__, name)  # config.json's reading moved to posviz.io
