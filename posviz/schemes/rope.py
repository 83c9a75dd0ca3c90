"""The rope rules, one entry per ``rope_type``: the keys each reads, its checks, its frequencies
and attention factor, as transformers 5's ``ROPE_INIT_FUNCTIONS`` and the validation table
beside it (``RotaryEmbeddingConfigMixin._validate_*_rope_parameters``) define them.

A rule is a `RopeRule` in `ROPE_RULES`; :func:`rotary_spec` reads one ``rope_parameters`` dict
(transformers' standardized layout) into a checked `RotarySpec` through its rule, and
:func:`posviz.schemes.rotary.rotary_frequencies` computes through it. Adding a rule is one entry.
Formulas in float64 (transformers: float32); docs/schemes.md names each and its source.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from posviz._params import MAX_RESULT_BYTES, Bound
from posviz.embedding import LoadError
from posviz.schemes._values import given, integer, number, shown

__all__ = [
    "ATTENTION_MSCALE",
    "CONTEXTS",
    "LEGACY_NAMES",
    "MAX_CONTEXT",
    "MAX_FACTOR",
    "MAX_ROTARY_DIM",
    "MAX_TABLE_POSITIONS",
    "MAX_THETA",
    "ROPE_RULES",
    "ROPE_TYPES",
    "RopeRule",
    "RotarySpec",
    "contradictions",
    "dynamic_base",
    "rotary_spec",
    "unscaled_inv_freq",
    "yarn_mscale",
]

#: Most rows of a rotary position table (the app's and the CLI's limit).
MAX_TABLE_POSITIONS = 8192
#: Widest rotary scheme: its position table at `MAX_TABLE_POSITIONS` rows of float64 fits the
#: memory one result may take (4096 columns; real heads are 64 to 512 wide).
MAX_ROTARY_DIM = MAX_RESULT_BYTES // (MAX_TABLE_POSITIONS * 8)
#: Largest context read: position ids beyond 2**31 are not a model's (Llama-4 Scout: 10,485,760).
MAX_CONTEXT = 2**31
#: A sequence length a rule is applied at (None: the model's own): what the functions taking
#: one declare (`posviz._params.bounded`), and the Schemes page's widget reads.
CONTEXTS = Bound(1, MAX_CONTEXT, optional=True)
#: Largest scaling factor (and LongRoPE per-pair factor) read: real ones are 2 to 64; beyond
#: 2**16 a slow pair's wavelength leaves any context by orders of magnitude.
MAX_FACTOR = 2.0**16
#: Largest base θ read (real ones: 10^4 to 10^8).
MAX_THETA = 1e12
#: Names older configs give a rule, and the rule transformers 5's model configs read them as
#: (Phi3Config: "su" -> longrope; Qwen2VLConfig: "mrope" -> default, its sections aside).
LEGACY_NAMES = {"su": "longrope", "mrope": "default"}
#: Attention classes whose softmax scale carries YaRN's mscale(factor, mscale_all_dim)² when the
#: config sets mscale_all_dim (``yarn_apply_mscale`` in transformers 5.24), by model_type.
ATTENTION_MSCALE = {
    "deepseek_v2": "DeepseekV2Attention",
    "deepseek_v3": "DeepseekV3Attention",
    "deepseek_v32": "DeepseekV32Attention",
    "glm4_moe_lite": "Glm4MoeLiteAttention",
    "glm_moe_dsa": "GlmMoeDsaAttention",
    "minicpm3": "MiniCPM3Attention",
    "mistral4": "Mistral4Attention",
    "mistral_large4_text": "MistralLarge4TextAttention",
    "longcat_flash": "LongcatFlashMLA",
    "youtu": "YoutuAttention",
    "hy_v4": "HYV4Attention",
    "hy_v4_vl_text": "HYV4VLAttention",
    "axk1": "AXK1Attention",
    "axk2": "AXK2Attention",
    "bailing_hybrid": "BailingHybridAttention",
}


@dataclass(frozen=True)
class RotarySpec:
    """A rotary scheme as config.json states it, checked (:func:`rotary_spec`).

    Attributes
    ----------
    rope_type : str
        One of `ROPE_TYPES`.
    rotary_dim : int
        Columns of q and k in the rotary layout (even): ``rotary_dim / 2`` pairs.
    base : float
        ``rope_theta`` (> 1).
    interleaved : bool
        Pairs are adjacent columns (2i, 2i+1: GPT-J, CodeGen, DeepSeek, Llama-4) rather than
        (j, j + dim/2) (transformers' ``rotate_half``). The frequencies are the same.
    context : int or None
        ``max_position_embeddings``: the context the model is configured for.
    original_context : int or None
        The pre-training context the scaling rule extends (None without scaling).
    factor : float
        The scaling factor s (1 without scaling).
    attention_factor : float or None
        The explicit ``attention_factor``, else None (computed by the rule).
    beta_fast, beta_slow, mscale, mscale_all_dim : float or None
        YaRN's options as given (None: absent).
    truncate : bool
        YaRN: round the correction range to whole pairs.
    low_freq_factor, high_freq_factor : float or None
        llama3's band edges.
    short_factor, long_factor : tuple of float or None
        LongRoPE's per-pair factors (``rotary_dim / 2`` each).
    layer_type : str
        The layer type this rule applies to ("all" unless the config has several).
    rotating_pairs : int or None
        proportional: the pairs that rotate (``int(partial_rotary_factor · head_dim // 2)``);
        the head's other pairs have θ = 0. None: every pair rotates.
    softmax_scale : float
        What the attention class multiplies its softmax scale ``head_dim^-½`` by (DeepSeek-V3
        with YaRN: mscale(factor, mscale_all_dim)²; 1 for most models).
    attention_class : str or None
        The attention class applying `softmax_scale` (None when it is 1).
    """

    rope_type: str
    rotary_dim: int
    base: float
    interleaved: bool = False
    context: int | None = None
    original_context: int | None = None
    factor: float = 1.0
    attention_factor: float | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    layer_type: str = "all"
    rotating_pairs: int | None = None
    softmax_scale: float = 1.0
    attention_class: str | None = None

    @property
    def n_pairs(self) -> int:
        return self.rotary_dim // 2

    @property
    def pretraining_context(self) -> int | None:
        """The context the unscaled frequencies were trained at."""
        return self.original_context or self.context

    @property
    def rule(self) -> RopeRule:
        return ROPE_RULES[self.rope_type]


# --- the rules' formulas -------------------------------------------------------------------
# Each takes the spec, the unscaled inv_freq and the sequence length L the rule is applied at,
# and returns (inv_freq as applied, base as applied).

Frequencies = Callable[[RotarySpec, np.ndarray, "int | None"], tuple[np.ndarray, float]]


def unscaled_inv_freq(spec: RotarySpec) -> np.ndarray:
    """``base ** (-2i / rotary_dim)`` for each pair; 0 beyond `spec.rotating_pairs`.

    >>> unscaled_inv_freq(RotarySpec("default", 4, 100.0)).tolist()
    [1.0, 0.1]
    >>> unscaled_inv_freq(RotarySpec("proportional", 8, 10000.0, rotating_pairs=2)).tolist()
    [1.0, 0.1, 0.0, 0.0]
    """
    exponent = np.arange(0, spec.rotary_dim, 2, dtype=np.float64) / spec.rotary_dim
    inv_freq = spec.base**-exponent
    if spec.rotating_pairs is not None:
        inv_freq[spec.rotating_pairs :] = 0.0
    return inv_freq


def _unchanged(spec: RotarySpec, unscaled: np.ndarray, length: int | None) -> tuple:
    return unscaled, spec.base


def _divided(spec: RotarySpec, unscaled: np.ndarray, length: int | None) -> tuple:
    """linear, proportional: every pair divided by the factor."""
    return unscaled / spec.factor, spec.base


def dynamic_base(spec: RotarySpec, lengths: np.ndarray) -> np.ndarray:
    """Dynamic NTK's base at each sequence length (`spec.base` up to ``spec.context``).

    ``base · (s · L / max_pos − (s − 1)) ** (dim / (dim − 2))`` for L > max_pos, with max_pos =
    ``max_position_embeddings`` (transformers' ``_compute_dynamic_ntk_parameters``).
    """
    context = given(spec.context, "max_position_embeddings")
    lengths = np.maximum(np.asarray(lengths, dtype=np.float64), context)
    s, dim = spec.factor, spec.rotary_dim
    return spec.base * (s * lengths / context - (s - 1)) ** (dim / (dim - 2))


def _dynamic(spec: RotarySpec, unscaled: np.ndarray, length: int | None) -> tuple:
    if length is None or length <= given(spec.context, "max_position_embeddings"):
        return unscaled, spec.base
    base = float(dynamic_base(spec, np.array([length]))[0])
    exponent = np.arange(0, spec.rotary_dim, 2, dtype=np.float64) / spec.rotary_dim
    return base**-exponent, base


def _yarn(spec: RotarySpec, unscaled: np.ndarray, length: int | None) -> tuple:
    """Fast pairs (more than beta_fast turns in the original context) kept, slow ones (fewer
    than beta_slow) divided by s, a linear ramp between.

    transformers computes the correction range in units of rotary columns and applies it to
    pair indices (``linear_ramp_factor(low, high, dim // 2)``); kept as is, since models were
    trained with it.
    """
    dim, base = spec.rotary_dim, spec.base
    pretraining = given(spec.pretraining_context, "original_max_position_embeddings")

    def correction(turns: float) -> float:
        return dim * math.log(pretraining / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = correction(spec.beta_fast or 32)
    high = correction(spec.beta_slow or 1)
    if spec.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    # transformers' blend: (1 - ramp) · inv + ramp · inv / s.
    return unscaled * (1 - ramp) + unscaled / spec.factor * ramp, base


def _longrope(spec: RotarySpec, unscaled: np.ndarray, length: int | None) -> tuple:
    """Each pair divided by its own factor: the long ones beyond the original context."""
    pretraining = given(spec.pretraining_context, "original_max_position_embeddings")
    beyond = length is not None and length > pretraining
    factors = np.asarray(spec.long_factor if beyond else spec.short_factor, dtype=np.float64)
    return unscaled / factors, spec.base


def _llama3(spec: RotarySpec, unscaled: np.ndarray, length: int | None) -> tuple:
    """Wavelengths below L0 / high_freq_factor kept, above L0 / low_freq_factor divided by s,
    between: ``(1 − smooth) · inv / s + smooth · inv``, smooth = (L0 / λ − low) / (high − low)
    (empty when low = high, as Llama-4's)."""
    original = given(spec.original_context, "original_max_position_embeddings")
    low = given(spec.low_freq_factor, "low_freq_factor")
    high = given(spec.high_freq_factor, "high_freq_factor")
    wavelength = 2 * np.pi / unscaled
    inv_freq = np.where(wavelength > original / low, unscaled / spec.factor, unscaled)
    medium = (wavelength >= original / high) & (wavelength <= original / low)
    if high > low:
        smooth = (original / wavelength[medium] - low) / (high - low)
        inv_freq[medium] = (1 - smooth) * unscaled[medium] / spec.factor + smooth * unscaled[medium]
    return inv_freq, spec.base


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature: 1 for factor <= 1, else ``0.1 · mscale · ln(factor) + 1``.

    >>> round(yarn_mscale(4.0), 6) == round(0.1 * math.log(4) + 1, 6)
    True
    """
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _one(spec: RotarySpec) -> float:
    return 1.0


def _yarn_attention_factor(spec: RotarySpec) -> float:
    if spec.attention_factor is not None:
        return spec.attention_factor
    if spec.mscale and spec.mscale_all_dim:
        return yarn_mscale(spec.factor, spec.mscale) / yarn_mscale(spec.factor, spec.mscale_all_dim)
    return yarn_mscale(spec.factor)


def _longrope_attention_factor(spec: RotarySpec) -> float:
    if spec.attention_factor is not None:
        return spec.attention_factor
    if spec.factor <= 1:
        return 1.0
    pretraining = given(spec.pretraining_context, "original_max_position_embeddings")
    return math.sqrt(1 + math.log(spec.factor) / math.log(pretraining))


# --- the rules' checks beyond the keys ------------------------------------------------------


def _no_check(spec: RotarySpec) -> None:
    return None


def _check_dynamic(spec: RotarySpec) -> None:
    if spec.context is None:
        msg = "dynamic rope scaling needs max_position_embeddings in config.json."
        raise LoadError(msg)
    if spec.rotary_dim < 4:
        msg = "dynamic rope scaling needs a rotary width of at least 4 (its exponent d/(d − 2))."
        raise LoadError(msg)


def _check_yarn(spec: RotarySpec) -> None:
    fast, slow = spec.beta_fast or 32, spec.beta_slow or 1
    if fast <= slow:
        msg = (
            f"YaRN's beta_fast ({fast:g}) must be above beta_slow ({slow:g}): pairs turning more "
            "than beta_fast times in the original context are kept, fewer than beta_slow divided."
        )
        raise LoadError(msg)


def _check_longrope(spec: RotarySpec) -> None:
    if given(spec.pretraining_context, "original_max_position_embeddings") < 2:
        msg = "LongRoPE needs an original context of at least 2 positions."
        raise LoadError(msg)


def _check_llama3(spec: RotarySpec) -> None:
    low = given(spec.low_freq_factor, "low_freq_factor")
    high = given(spec.high_freq_factor, "high_freq_factor")
    if not 0 < low <= high:
        msg = (
            "llama3 rope scaling needs 0 < low_freq_factor <= high_freq_factor; got "
            f"{low} and {high}."
        )
        raise LoadError(msg)


@dataclass(frozen=True)
class RopeRule:
    """One rope type: the keys transformers 5 reads for it, and what it computes.

    Attributes
    ----------
    source : str
        transformers' function (``modeling_rope_utils``; default: each model's
        ``compute_default_rope_parameters``).
    required : tuple of str
        Keys of ``rope_parameters`` transformers 5 requires (``_check_received_keys`` raises
        KeyError without them) besides ``rope_type`` and ``rope_theta``, which it fills in.
    optional : tuple of str
        The other keys it reads.
    frequencies : callable
        (spec, unscaled inv_freq, length) -> (inv_freq as applied at the length, base as applied).
    attention_factor : callable
        spec -> the factor on cos and sin.
    check : callable
        spec -> None, or LoadError for values the formula cannot take.
    scaled : bool
        Whether the rule reads a factor (default has none).
    """

    source: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    frequencies: Frequencies
    attention_factor: Callable[[RotarySpec], float] = _one
    check: Callable[[RotarySpec], None] = _no_check
    scaled: bool = True


#: Every rule of transformers 5.24's ``ROPE_INIT_FUNCTIONS``, and default.
ROPE_RULES: dict[str, RopeRule] = {
    "default": RopeRule(
        "compute_default_rope_parameters (each model's rotary embedding class)",
        (), (), _unchanged, scaled=False,
    ),
    "linear": RopeRule("_compute_linear_scaling_rope_parameters", ("factor",), (), _divided),
    "dynamic": RopeRule(
        "_compute_dynamic_ntk_parameters", ("factor",), (), _dynamic, check=_check_dynamic
    ),
    "yarn": RopeRule(
        "_compute_yarn_parameters",
        ("factor", "original_max_position_embeddings"),
        ("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"),
        _yarn, _yarn_attention_factor, _check_yarn,
    ),
    "longrope": RopeRule(
        "_compute_longrope_parameters",
        ("short_factor", "long_factor", "original_max_position_embeddings"),
        ("attention_factor", "factor"),
        _longrope, _longrope_attention_factor, _check_longrope,
    ),
    "llama3": RopeRule(
        "_compute_llama3_parameters",
        ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
        (), _llama3, check=_check_llama3,
    ),
    "proportional": RopeRule(
        "_compute_proportional_rope_parameters", (), ("factor",), _divided
    ),
}  # fmt: skip
#: The rules computed (transformers' ``ROPE_INIT_FUNCTIONS`` keys, and default).
ROPE_TYPES = tuple(ROPE_RULES)


def rotary_spec(
    parameters: dict[str, Any],
    *,
    head_dim: int,
    interleaved: bool = False,
    context: int | None = None,
    layer_type: str = "all",
    model_type: str = "",
) -> RotarySpec:
    """One ``rope_parameters`` dict, as transformers 5 standardizes it (``rope_type``,
    ``rope_theta``, ``partial_rotary_factor`` and, for llama3/yarn/longrope,
    ``original_max_position_embeddings`` filled in), read through its rule and checked.

    Parameters
    ----------
    parameters : dict
        The rule's keys.
    head_dim : int
        The attention head's width (the rotary width is ``int(head_dim · partial_rotary_factor)``;
        proportional rotates part of the whole head).
    interleaved : bool
        Adjacent pairs (GPT-J, DeepSeek, Llama-4).
    context : int, optional
        ``max_position_embeddings``.
    layer_type : str
        The layer type the rule applies to.
    model_type : str
        For the attention class's softmax-scale correction (`ATTENTION_MSCALE`).

    Raises
    ------
    LoadError
        A key the rule requires is missing (transformers 5 refuses the config: KeyError), an
        unknown rope type, a value out of range; the message names the key, the value and the
        limit.

    Examples
    --------
    >>> s = rotary_spec({"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}, head_dim=256)
    >>> s.rope_type, s.rotary_dim, s.factor, s.base
    ('linear', 256, 8.0, 1000000.0)
    >>> rotary_spec({"rope_type": "yarn", "rope_theta": 1e4,
    ...              "original_max_position_embeddings": 4096}, head_dim=128)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    posviz.source.LoadError: rope_parameters for rope_type 'yarn' lacks 'factor': ...
    """  # fmt: skip
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    if not isinstance(kind, str):
        msg = f"rope_type in config.json is {shown(kind)}; expected a name such as 'linear'."
        raise LoadError(msg)
    kind = LEGACY_NAMES.get(kind, kind)
    if kind not in ROPE_RULES:
        msg = (
            f"rope_type {shown(kind)} is not one transformers 5 computes; known: "
            f"{', '.join(ROPE_TYPES)}."
        )
        raise LoadError(msg)
    rule = ROPE_RULES[kind]
    missing = [key for key in rule.required if parameters.get(key) is None]
    if missing:
        keys = "', '".join(missing)
        msg = (
            f"rope_parameters for rope_type '{kind}' lacks '{keys}': transformers 5 refuses this "
            f"config (KeyError: Missing required keys in `rope_parameters` for "
            f"'rope_type'='{kind}': {set(missing)}). Add it to rope_scaling / rope_parameters."
        )
        raise LoadError(msg)

    def optional(key: str, *, low: float = 0.0, high: float = MAX_FACTOR) -> float | None:
        value = parameters.get(key)
        return None if value is None else number(value, key, low=low, high=high)

    base = number(parameters.get("rope_theta", 10000.0), "rope_theta", high=MAX_THETA)
    if base <= 1:
        msg = f"rope_theta is {base:g}; the rotary base must be above 1 (10000 is the default)."
        raise LoadError(msg)
    share = number(parameters.get("partial_rotary_factor", 1.0), "partial_rotary_factor", high=1)
    if share <= 0:
        msg = f"partial_rotary_factor is {share:g}; it must be in (0, 1]."
        raise LoadError(msg)
    if kind == "proportional":  # part of the whole head rotates, against the head's width
        dim, rotating = head_dim, int(share * head_dim // 2)
    else:
        dim, rotating = int(head_dim * share), None
    _check_width(dim, head_dim, share)
    original = optional("original_max_position_embeddings", high=MAX_CONTEXT)
    original = None if original is None else integer(original, "original_max_position_embeddings")
    factor = optional("factor") if rule.scaled else None
    if kind == "longrope" and factor is None and original and context:
        factor = context / original
    factor = 1.0 if factor is None else factor
    if factor <= 0:
        msg = f"rope_scaling factor is {factor:g}; it must be positive."
        raise LoadError(msg)
    lists = {key: _factors(parameters, key, dim) for key in ("short_factor", "long_factor")
             if kind == "longrope"}  # fmt: skip
    spec = RotarySpec(
        rope_type=kind,
        rotary_dim=dim,
        base=base,
        interleaved=interleaved,
        context=context,
        original_context=int(original) if original else None,
        factor=factor,
        attention_factor=optional("attention_factor", high=100.0),
        beta_fast=optional("beta_fast", high=MAX_FACTOR) if kind == "yarn" else None,
        beta_slow=optional("beta_slow", high=MAX_FACTOR) if kind == "yarn" else None,
        mscale=optional("mscale", high=100.0),
        mscale_all_dim=optional("mscale_all_dim", high=100.0),
        truncate=parameters.get("truncate", True) is not False,
        low_freq_factor=optional("low_freq_factor"),
        high_freq_factor=optional("high_freq_factor"),
        short_factor=lists.get("short_factor"),
        long_factor=lists.get("long_factor"),
        layer_type=layer_type,
        rotating_pairs=rotating,
    )
    if spec.attention_factor is not None and spec.attention_factor <= 0:
        msg = f"rope_scaling attention_factor is {spec.attention_factor}; it must be positive."
        raise LoadError(msg)
    for key in ("beta_fast", "beta_slow"):
        value = getattr(spec, key)
        if value is not None and value <= 0:
            msg = f"rope_scaling {key} is {value}; it must be positive."
            raise LoadError(msg)
    rule.check(spec)
    return _with_softmax_scale(spec, model_type)


def _check_width(dim: int, head_dim: int, share: float) -> None:
    """Even, at least one pair, and a position table of it within the result budget."""
    if dim < 2 or dim % 2:
        msg = (
            f"The rotary width from config.json is {dim} columns (head_dim {head_dim} times "
            f"partial_rotary_factor {share:g}); rotary embeddings rotate pairs, so it must be "
            "even and at least 2. Check head_dim / rotary_dim / partial_rotary_factor."
        )
        raise LoadError(msg)
    if dim > MAX_ROTARY_DIM:
        gib = MAX_TABLE_POSITIONS * dim * 8 / 2**30
        msg = (
            f"The rotary width from config.json is {dim:,} columns (head_dim / rotary_dim / "
            f"qk_rope_head_dim): its table of {MAX_TABLE_POSITIONS:,} positions would take "
            f"{gib:,.1f} GiB, above the {MAX_RESULT_BYTES // 2**20} MiB a result may take "
            f"(at most {MAX_ROTARY_DIM:,} columns; real heads are 64 to 512)."
        )
        raise LoadError(msg)


def _factors(parameters: dict, key: str, dim: int) -> tuple[float, ...]:
    """LongRoPE's per-pair factors: one per pair, each in (0, `MAX_FACTOR`]."""
    values = parameters.get(key)
    n_pairs = dim // 2
    if not isinstance(values, list) or len(values) != n_pairs:
        size = len(values) if isinstance(values, list) else "no"
        msg = (
            f"LongRoPE's {key} has {size} values; the rotary width {dim} needs {n_pairs} "
            "(one per pair)."
        )
        raise LoadError(msg)
    factors = tuple(number(v, key, high=MAX_FACTOR) for v in values)
    if min(factors) <= 0:
        msg = f"LongRoPE's {key} holds a factor <= 0; every factor must be positive."
        raise LoadError(msg)
    return factors


def _with_softmax_scale(spec: RotarySpec, model_type: str) -> RotarySpec:
    """`spec` with its attention class's softmax-scale correction: ``yarn_apply_mscale`` (every
    rope type but default, when mscale_all_dim is set) multiplies head_dim^-½ by
    mscale(factor, mscale_all_dim)²."""
    attention_class = ATTENTION_MSCALE.get(model_type)
    if attention_class is None or spec.rope_type == "default" or not spec.mscale_all_dim:
        return spec
    scale = yarn_mscale(spec.factor, spec.mscale_all_dim) ** 2
    return RotarySpec(**{**spec.__dict__, "softmax_scale": scale,
                         "attention_class": attention_class})  # fmt: skip


def contradictions(spec: RotarySpec) -> list[str]:
    """Where the config contradicts itself (computed anyway, as transformers 5 does)."""
    warnings = []
    context, original = spec.context, spec.original_context
    if context and original and original > context:
        warnings.append(
            f"original_max_position_embeddings ({original}) is above max_position_embeddings "
            f"({context}): the extended context is shorter than the original one."
        )
    if spec.rope_type in ("yarn", "longrope") and context and original:
        implied = context / original
        if not math.isclose(spec.factor, implied, rel_tol=1e-6):
            warnings.append(
                f"{spec.rope_type} factor {spec.factor:g} differs from max_position_embeddings / "
                f"original_max_position_embeddings = {context} / {original} = {implied:g}; "
                "the explicit factor is used (transformers v5; some older code used the ratio)."
            )
    return warnings
