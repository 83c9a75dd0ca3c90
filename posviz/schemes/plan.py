"""Planning a longer context: every rope scaling rule side by side for one rotary model and a
target length N, what each does to each frequency pair, and the settings each runtime takes.

Notation (docs/schemes.md, "Planning a longer context"): b = rope_theta, d = the rotary width,
θ_k = b^(−2k/d) (k = 0 the fastest pair), L = the context the positions were trained at
(``original_max_position_embeddings`` where config.json has it, else
``max_position_embeddings``), N = the target, s = N / L.

Each rule is written as the config.json fields transformers reads (`RulePlan.rope_parameters`,
v5; `RulePlan.rope_scaling` and `RulePlan.rope_theta`, v4; `RulePlan.max_position_embeddings`)
and its numbers are computed from the model's config.json with those fields written in
(:func:`planned_config`), read back by `posviz.schemes.config.position_scheme` and applied at
N by `posviz.schemes.rope`'s rule: the plan's numbers are the ones its config gives, by
construction. The plan computes what each rule does to the positions; it does not say which
rule gives the lowest perplexity (that is measured: YaRN's Table 1, LongRoPE's Table 1).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from posviz._params import Bound, Refused, bounded, records_params
from posviz.embedding import LoadError
from posviz.schemes.config import NAMES, Scheme, language_model, position_scheme
from posviz.schemes.layers import rope_parameters
from posviz.schemes.rope import ROPE_RULES, RotarySpec, unscaled_inv_freq
from posviz.schemes.rotary import RotaryFrequencies, rotary_frequencies

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BANDS",
    "CRITICAL_BASE_SOURCE",
    "CRITICAL_DIMENSION_SOURCE",
    "DEFAULT_FACTOR",
    "RULES",
    "TARGETS",
    "TOLERANCE",
    "ContextPlan",
    "RulePlan",
    "context_plan",
    "critical_base",
    "critical_dimension",
    "default_target",
    "ntk_aware_base",
    "planned_config",
    "usage_shares",
]

#: Every rule a plan lays side by side, what it does, and where the formula comes from.
RULES = {
    "none": "no rule: the unscaled frequencies θ_k = b^(−2k/d), run to N as they are",
    "linear": "position interpolation (Chen et al. 2023; transformers' "
    "_compute_linear_scaling_rope_parameters): every pair divided by s",
    "ntk_aware": "NTK-aware base change (bloc97 2023; YaRN paper §3.2): b' = b·s^(d/(d−2)): "
    "the fastest pair kept, the slowest divided by s, a geometric blend between",
    "dynamic": "dynamic NTK (transformers' _compute_dynamic_ntk_parameters) at length N: "
    "b' = b·(s·N/M − (s − 1))^(d/(d−2)), M = max_position_embeddings left at L",
    "yarn": "YaRN (Peng et al. 2023; transformers' _compute_yarn_parameters): pairs turning "
    "more than β_fast times within L kept, fewer than β_slow divided by s, a ramp linear in the "
    "pair index between (as every implementation does; the paper ramps in rotations); cos and "
    "sin times 0.1·ln s + 1",
    "llama3": "Meta's llama3 rule (transformers' _compute_llama3_parameters): wavelengths below "
    "L/high_freq_factor kept, above L/low_freq_factor divided by s, smoothed between",
    "longrope": "LongRoPE (Ding et al. 2024; transformers' _compute_longrope_parameters) with "
    "the model's own per-pair factors, the long ones beyond L; cos and sin times "
    "√(1 + ln s / ln L)",
    "critical_base": "Liu et al. 2024's critical base β₀ = b^(ln(N/2π) / ln(L/2π)) (eq. 16a): the "
    "base to fine-tune at, so that the critical dimension's pairs turn within N as they did "
    "within L; without fine-tuning it is a base change as NTK-aware's",
}
#: What θ'/θ (the pair's frequency under the rule over the unscaled one) puts a pair in.
BANDS = {
    "unchanged": "θ'/θ = 1: the pair rotates as in training",
    "blended": "θ'/θ neither 1 nor 1/s",
    "interpolated": "θ'/θ = 1/s: divided by the factor (position interpolation)",
}
#: Relative tolerance of θ'/θ = 1 and = 1/s, and of an angle beyond the trained one:
#: transformers computes inv_freq in float32 (relative rounding 6e-8, a few operations of it).
TOLERANCE = 1e-6
#: A target length: a whole number of positions up to 2**24 (16,777,216).
TARGETS = Bound(1, 2**24)
#: The target the page and the report plan at unless asked: this many times the trained context.
DEFAULT_FACTOR = 4
CRITICAL_DIMENSION_SOURCE = (
    "Liu et al. 2024, Scaling Laws of RoPE-based Extrapolation (arXiv:2310.05209), d_extra = "
    "2⌈(d/2)·log_b(L/2π)⌉, capped at d: the pairs k < d_extra/2 turn at least once within L "
    "(OpenLMLab/scaling-rope)"
)
CRITICAL_BASE_SOURCE = (
    "Liu et al. 2024, eq. 16a: β₀ = b^(ln(N/2π) / ln(L/2π)), the base at which the critical "
    "dimension's pairs turn within N as they did within L (koboldcpp's 'GradientAI' auto rope, "
    "PR #910)"
)
#: Keys of ``rope_parameters`` that belong to a rule (replaced by the plan's); the others
#: (partial_rotary_factor, mrope_section, ...) are the model's and kept.
_RULE_KEYS = {"rope_type", "type", "rope_theta"}.union(
    *(rule.required + rule.optional for rule in ROPE_RULES.values())
)
#: YaRN's options a model's own yarn rule keeps in its plan (an explicit attention_factor was
#: set for the model's own factor: not kept).
_YARN_OPTIONS = ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate")
#: Model types whose transformers 5 config refuses every rope type but these
#: (``Phi3Config.validate_rope``: "type field must be one of ['longrope']"; it reads a v4 "yarn"
#: as longrope).
_ROPE_TYPES_TAKEN = {"phi3": ("default", "longrope"), "phi4_multimodal": ("default", "longrope")}
#: Meta's llama3 band edges (Llama-3.1's config.json).
_LLAMA3_EDGES = {"low_freq_factor": 1.0, "high_freq_factor": 4.0}


def critical_dimension(base: float, rotary_dim: int, context: int) -> int:
    """Liu et al.'s critical dimension d_extra = 2⌈(d/2)·log_b(L/2π)⌉, within [0, d]: the
    rotary columns whose pairs turn at least once within the trained context L.

    >>> critical_dimension(10000.0, 128, 4096), critical_dimension(500000.0, 128, 8192)
    (92, 70)
    """
    half = rotary_dim / 2 * math.log(context / (2 * math.pi)) / math.log(base)
    return int(min(max(2 * math.ceil(half), 0), rotary_dim))


def critical_base(base: float, context: int, target: int) -> float:
    """Liu et al.'s critical base for a target N: β₀ = b^(ln(N/2π) / ln(L/2π)) (L > 2π).

    >>> [round(critical_base(10000.0, 4096, n)) for n in (8192, 12288, 16384)]
    [26784, 47661, 71738]
    """
    return float(base ** (math.log(target / (2 * math.pi)) / math.log(context / (2 * math.pi))))


def ntk_aware_base(base: float, rotary_dim: int, factor: float) -> float:
    """The NTK-aware base b·s^(d/(d−2)) (d > 2).

    >>> round(ntk_aware_base(10000.0, 128, 2.0))
    20221
    """
    return float(base * factor ** (rotary_dim / (rotary_dim - 2)))


@dataclass(frozen=True)
class RulePlan:
    """One rule of a plan: its settings for each runtime and what it does to each pair at N.

    Attributes
    ----------
    rule : str
        A `RULES` key.
    factor : float or None
        s, where the rule takes one (none and critical_base: None).
    rope_theta : float
        The base the rule runs at (ntk_aware and critical_base change it).
    rope_parameters : dict
        config.json's ``rope_parameters`` for transformers 5 (one dict per layer type where
        the model has several, the others as they are).
    rope_scaling : dict or None
        config.json's ``rope_scaling`` for transformers 4, beside a top-level ``rope_theta``
        (None: the key removed, no scaling).
    max_position_embeddings : int
        What config.json's max_position_embeddings is set to (N; dynamic: L, which its formula
        reads as the length it starts at).
    frequencies : RotaryFrequencies
        The rule at N, as `posviz.schemes.rope` computes it from the config with these fields.
    ratio : ndarray of shape (n_pairs,)
        θ'/θ: each pair's frequency under the rule over the model's unscaled one.
    band : ndarray of str, shape (n_pairs,)
        `BANDS` key of each pair.
    beyond_trained : ndarray of bool, shape (n_pairs,)
        Pairs that never completed a turn within L (L·θ_k < 2π) and whose angle at N goes
        beyond the largest they reached in training (N·θ'_k > L·θ_k).
    interpolation_wavelength : float or None
        The shortest unscaled wavelength 2π/θ_k among the pairs the rule changes: where it
        starts interpolating (None: it changes none).
    llama_cpp, vllm : str
        The runtimes' flags (a ``#`` comment where a rule has none).
    notes : tuple of str
        What the settings mean beyond themselves.
    """

    rule: str
    factor: float | None
    rope_theta: float
    rope_parameters: dict[str, Any]
    rope_scaling: dict[str, Any] | None
    max_position_embeddings: int
    frequencies: RotaryFrequencies
    ratio: np.ndarray
    band: np.ndarray
    beyond_trained: np.ndarray
    interpolation_wavelength: float | None
    llama_cpp: str
    vllm: str
    notes: tuple[str, ...] = ()

    @property
    def attention_factor(self) -> float:
        return self.frequencies.attention_factor

    @property
    def inv_freq(self) -> np.ndarray:
        return self.frequencies.inv_freq

    def pairs(self, band: str) -> list[int]:
        """The pairs in `band` (k = 0 the fastest)."""
        return np.flatnonzero(self.band == band).tolist()

    def record(self) -> dict[str, Any]:
        """The rule as `posviz plan --json` prints it."""
        return {
            "rule": self.rule,
            "factor": self.factor,
            "rope_theta": self.rope_theta,
            "rope_parameters": self.rope_parameters,
            "rope_scaling": self.rope_scaling,
            "max_position_embeddings": self.max_position_embeddings,
            "inv_freq": self.inv_freq.tolist(),
            "attention_factor": self.attention_factor,
            "pairs_unchanged": self.pairs("unchanged"),
            "pairs_blended": self.pairs("blended"),
            "pairs_interpolated": self.pairs("interpolated"),
            "pairs_beyond_trained": np.flatnonzero(self.beyond_trained).tolist(),
            "interpolation_wavelength": self.interpolation_wavelength,
            "llama_cpp": self.llama_cpp,
            "vllm": self.vllm,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class ContextPlan:
    """Every rule for one rotary model and a target N, and the model's own facts.

    Attributes
    ----------
    spec : RotarySpec
        The model's main rule as config.json states it (the full-attention one of a hybrid).
    original_context : int
        L; `original_context_key` says which key of config.json gave it.
    target : int
        N.
    critical_dimension : int
        `critical_dimension` of the model at L.
    critical_base : float or None
        `critical_base` for N (None when N ≤ L or L ≤ 2π).
    rules : tuple of RulePlan
        In `RULES` order; a rule the model cannot take is left out and `notes` says why.
    notes : tuple of str
    """

    spec: RotarySpec
    original_context: int
    original_context_key: str
    target: int
    critical_dimension: int
    critical_base: float | None
    rules: tuple[RulePlan, ...]
    notes: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)

    @property
    def factor(self) -> float:
        """s = N / L."""
        return self.target / self.original_context

    @property
    def trained_angles(self) -> np.ndarray:
        """L·θ_k: the largest angle each pair reached in training (radians)."""
        return self.original_context * unscaled_inv_freq(self.spec)

    def rule(self, name: str) -> RulePlan:
        """The plan of rule `name`."""
        for rule in self.rules:
            if rule.rule == name:
                return rule
        msg = f"The plan has no rule {name!r}; it has {', '.join(r.rule for r in self.rules)}."
        raise KeyError(msg)

    def record(self) -> dict[str, Any]:
        """The plan as `posviz plan --json` prints it (after the export header)."""
        return {
            "rope_type": self.spec.rope_type,
            "rotary_dim": self.spec.rotary_dim,
            "rope_theta": self.spec.base,
            "original_context": self.original_context,
            "original_context_key": self.original_context_key,
            "target": self.target,
            "factor": self.factor,
            "critical_dimension": self.critical_dimension,
            "critical_dimension_source": CRITICAL_DIMENSION_SOURCE,
            "critical_base": self.critical_base,
            "critical_base_source": CRITICAL_BASE_SOURCE,
            "notes": list(self.notes),
            "rules": [rule.record() for rule in self.rules],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per rule: its factor, base, attention factor, pairs per band, pairs beyond
        their trained angles, and the wavelength where it starts interpolating."""
        import pandas as pd  # on first use: `posviz plan` prints without loading pandas

        return pd.DataFrame(
            {
                "rule": [r.rule for r in self.rules],
                "factor": [r.factor for r in self.rules],
                "rope_theta": [r.rope_theta for r in self.rules],
                "attention_factor": [r.attention_factor for r in self.rules],
                "max_position_embeddings": [r.max_position_embeddings for r in self.rules],
                **{band: [len(r.pairs(band)) for r in self.rules] for band in BANDS},
                "beyond_trained": [int(r.beyond_trained.sum()) for r in self.rules],
                "interpolation_wavelength": [r.interpolation_wavelength for r in self.rules],
            }
        )

    def pairs_table(self) -> pd.DataFrame:
        """One row per rule and pair: θ' as applied at N, θ'/θ, band, the angle at N and the
        largest angle the pair reached in training."""
        import pandas as pd

        n = self.spec.n_pairs
        return pd.DataFrame(
            {
                "rule": np.repeat([r.rule for r in self.rules], n),
                "pair": np.tile(np.arange(n), len(self.rules)),
                "inv_freq": np.concatenate([r.inv_freq for r in self.rules]),
                "ratio": np.concatenate([r.ratio for r in self.rules]),
                "band": np.concatenate([r.band for r in self.rules]),
                "angle_at_target": np.concatenate([self.target * r.inv_freq for r in self.rules]),
                "angle_trained": np.tile(self.trained_angles, len(self.rules)),
            }
        )


def default_target(scheme: Scheme) -> int:
    """The target the page opens a plan of `scheme` at, and the report plans at:
    `DEFAULT_FACTOR` times the context its positions were trained at (4096 when config.json
    names none), at most 2**24."""
    spec = scheme.rotary[0] if scheme.rotary else None
    trained = (spec and (spec.original_context or spec.context)) or 4096
    return int(min(DEFAULT_FACTOR * trained, 2**24))


@records_params
@bounded(target=TARGETS)
def context_plan(scheme: Scheme, *, target: int) -> ContextPlan:
    """Every rule of `RULES` for `scheme`'s main rotary rule extended to `target` positions.

    Parameters
    ----------
    scheme : Scheme
        A rotary model's scheme, read from its config.json (its `Scheme.config`).
    target : int
        N, the context wanted (:func:`default_target` is the page's and the report's).

    Raises
    ------
    Refused
        The scheme is not rotary (the message says what it is), rotates part of a wider head
        (proportional), or config.json names no context.

    Examples
    --------
    >>> llama2 = position_scheme({"model_type": "llama", "hidden_size": 4096,
    ...     "num_attention_heads": 32, "max_position_embeddings": 4096})
    >>> plan = context_plan(llama2, target=16384)
    >>> [len(plan.rule("yarn").pairs(b)) for b in BANDS], plan.critical_dimension
    ([21, 25, 18], 92)
    """  # fmt: skip
    if scheme.kind != "rotary":
        msg = (
            f"The model has {NAMES[scheme.kind]} ({scheme.reason}), not rotary positions: "
            "a context plan scales rotary frequencies."
        )
        raise Refused(msg)
    spec = scheme.rotary[0]
    if spec.rotating_pairs is not None:
        msg = (
            f"The model's {spec.layer_type} layers use the proportional rule (part of a "
            f"{spec.rotary_dim}-column head rotates): the planned rules rotate a whole rotary "
            "width, so posviz does not plan this model."
        )
        raise Refused(msg)
    settings = language_model(scheme.config)
    own = rope_parameters(settings)
    main = spec.layer_type if spec.layer_type in own else "all"
    own_rule = own[main] or {}
    original, key = _original_context(settings, scheme.context, own_rule)
    notes = _model_notes(scheme, spec, original)
    base, dim = spec.base, spec.rotary_dim
    critical = critical_base(base, original, target) if target > original > 2 * math.pi else None
    if target <= original:
        names = ["none"]
        notes.append(
            f"N = {target:,} is within the context the positions were trained at (L = "
            f"{original:,}): no rule is needed, and a factor below 1 would compress the angles."
        )
    else:
        model_type = str(settings.get("model_type") or "")
        names = [name for name in RULES if _applies(name, spec, original, model_type, notes)]
    unscaled = unscaled_inv_freq(spec)
    rules = []
    for name in names:
        parameters, rule_factor, rule_notes = _parameters(name, spec, own_rule, target, original)
        parameters = {k: v for k, v in own_rule.items() if k not in _RULE_KEYS} | parameters
        rules.append(
            _rule_plan(name, rule_factor, parameters, own, main, scheme.config, target, original,
                       unscaled, rule_notes)
        )  # fmt: skip
    return ContextPlan(
        spec=spec,
        original_context=original,
        original_context_key=key,
        target=target,
        critical_dimension=critical_dimension(base, dim, original),
        critical_base=critical,
        rules=tuple(rules),
        notes=tuple(notes),
    )


def _original_context(
    settings: dict[str, Any], context: int | None, own_rule: dict[str, Any]
) -> tuple[int, str]:
    """L and the key that gave it: original_max_position_embeddings (the rule's, else
    config.json's top level), else max_position_embeddings (`context`)."""
    for value in (own_rule.get("original_max_position_embeddings"),
                  settings.get("original_max_position_embeddings")):  # fmt: skip
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 1:
            return int(value), "original_max_position_embeddings"
    if context is None:
        msg = (
            "config.json names no max_position_embeddings (nor original_max_position_embeddings): "
            "a plan needs the context the positions were trained at."
        )
        raise Refused(msg)
    return context, "max_position_embeddings"


def _model_notes(scheme: Scheme, spec: RotarySpec, original: int) -> list[str]:
    """What the model's config.json says that the plan's rows do not show."""
    notes = []
    if spec.rope_type != "default":
        notes.append(
            f"config.json already applies {spec.rope_type} (factor {spec.factor:g}); every row "
            f"starts from the unscaled frequencies b^(−2k/d) and L = {original:,}, and replaces "
            "that rule."
        )
        if spec.original_context is None and spec.rope_type != "longrope":
            notes.append(
                f"config.json names no original_max_position_embeddings: L is "
                f"max_position_embeddings ({original:,}), the context the scaled model runs at."
            )
    if spec.rope_type in ("llama3", "longrope"):
        tensor = "rope_freqs" if spec.rope_type == "llama3" else "rope_factors_long/short"
        notes.append(
            f"A GGUF converted from this config.json carries {spec.rope_type}'s factors in its "
            f"{tensor} tensor, which llama.cpp applies under every flag: the llama.cpp flags of "
            "the other rows hold for a GGUF converted from a config.json with that row's fields."
        )
    if len(scheme.rotary) > 1:
        others = ", ".join(s.layer_type for s in scheme.rotary[1:])
        notes.append(
            f"The plan is of the {spec.layer_type} layers' rule; the {others} layers keep theirs "
            "(rope_parameters keeps their entries as they are)."
        )
    if isinstance(scheme.config.get("text_config"), dict):
        notes.append("The config.json fields go inside text_config.")
    if "rotary_emb_base" in language_model(scheme.config):
        notes.append(
            "transformers 4 layout: this config names its base rotary_emb_base (GPT-NeoX), which "
            "its config class reads instead of rope_theta: set it to the row's rope_theta."
        )
    return notes


def _applies(name: str, spec: RotarySpec, original: int, model_type: str, notes: list[str]) -> bool:
    """Whether rule `name` can be planned for `spec`; when not, `notes` says why."""
    taken = _ROPE_TYPES_TAKEN.get(model_type)
    if taken and name in ROPE_RULES and name not in taken:
        notes.append(
            f"{name} is left out: transformers 5's {model_type} config refuses rope types other "
            f"than {' and '.join(taken)} (its validate_rope)."
        )
        return False
    if name == "longrope" and spec.rope_type != "longrope":
        notes.append("longrope is planned only with a model's own per-pair factors; this "
                     "model has none.")  # fmt: skip
        return False
    if name in ("ntk_aware", "dynamic") and spec.rotary_dim < 4:
        notes.append(f"{name} needs a rotary width of at least 4 (its exponent d/(d − 2)).")
        return False
    if name == "critical_base" and original <= 2 * math.pi:
        notes.append("critical_base needs L > 2π (its logarithm of L/2π).")
        return False
    return True


def _parameters(
    name: str, spec: RotarySpec, own: dict[str, Any], target: int, original: int
) -> tuple[dict[str, Any], float | None, list[str]]:
    """The rule's own keys of ``rope_parameters`` (v5), the factor it reports, its notes."""
    base, dim, factor = own.get("rope_theta", spec.base), spec.rotary_dim, target / original
    if name == "none":
        return {"rope_type": "default", "rope_theta": base}, None, []
    if name == "ntk_aware":
        theta = ntk_aware_base(spec.base, dim, factor)
        return {"rope_type": "default", "rope_theta": theta}, factor, []
    if name == "critical_base":
        theta = critical_base(spec.base, original, target)
        return {"rope_type": "default", "rope_theta": theta}, None, []
    parameters: dict[str, Any] = {"rope_type": name, "rope_theta": base, "factor": factor}
    notes = []
    if name in ("yarn", "llama3", "longrope"):
        parameters["original_max_position_embeddings"] = original
    if name == "yarn":
        if spec.rope_type == "yarn":
            parameters |= {k: own[k] for k in _YARN_OPTIONS if own.get(k) is not None}
            if own.get("attention_factor") is not None:
                notes.append("config.json's explicit attention_factor was set for its own "
                             "factor; the plan leaves it out (computed from s).")  # fmt: skip
    elif name == "llama3":
        parameters |= (
            {k: own[k] for k in _LLAMA3_EDGES} if spec.rope_type == "llama3" else _LLAMA3_EDGES
        )
    elif name == "longrope":
        parameters |= {"short_factor": own["short_factor"], "long_factor": own["long_factor"]}
    return parameters, factor, notes


def _rule_plan(
    name: str,
    factor: float | None,
    parameters: dict[str, Any],
    own: dict[str, dict | None],
    main: str,
    config: dict[str, Any],
    target: int,
    original: int,
    unscaled: np.ndarray,
    notes: list[str],
) -> RulePlan:
    """`parameters` written into the model's config.json, read back and applied at `target`;
    each pair's θ'/θ against the model's `unscaled` frequencies."""
    v5 = {**own, main: parameters} if main != "all" else parameters
    v4 = {k: v for k, v in parameters.items() if k not in ("rope_theta", "partial_rotary_factor")}
    context = original if name == "dynamic" else target
    frequencies = _frequencies(config, v5, context, target, main)
    ratio = frequencies.inv_freq / unscaled
    kept = np.isclose(ratio, 1.0, rtol=TOLERANCE, atol=0)
    divided = np.isclose(ratio, original / target, rtol=TOLERANCE, atol=0)
    band = np.where(kept, "unchanged", np.where(divided, "interpolated", "blended"))
    trained = original * unscaled
    beyond = (trained < 2 * np.pi) & (target * frequencies.inv_freq > trained * (1 + TOLERANCE))
    wavelength = float(np.min(2 * np.pi / unscaled[~kept])) if (~kept).any() else None
    theta = float(parameters["rope_theta"])
    llama_cpp = _llama_cpp(name, factor, parameters, frequencies, target, original, notes)
    return RulePlan(
        rule=name,
        factor=factor,
        rope_theta=theta,
        rope_parameters=v5,
        rope_scaling=None if v4 == {"rope_type": "default"} else v4,
        max_position_embeddings=context,
        frequencies=frequencies,
        ratio=ratio,
        band=band,
        beyond_trained=beyond,
        interpolation_wavelength=wavelength,
        llama_cpp=llama_cpp,
        vllm=_vllm(theta, v5, context, target),
        notes=tuple(notes),
    )


def _frequencies(
    config: dict[str, Any], v5: dict[str, Any], context: int, target: int, main: str
) -> RotaryFrequencies:
    """The rule `v5` as posviz reads it back from the planned config.json, at `target`."""
    planned = _written(config, {"rope_parameters": v5, "max_position_embeddings": context})
    try:
        specs = position_scheme(planned).rotary
    except LoadError as error:  # a value of the model's own the rule cannot take
        msg = f"The planned config.json is refused: {error}"
        raise Refused(msg) from error
    spec = next(s for s in specs if s.layer_type in (main, "all"))
    return rotary_frequencies(spec, context=target)


def planned_config(
    config: dict[str, Any], rule: RulePlan, *, layout: Literal["v5", "v4"] = "v5"
) -> dict[str, Any]:
    """`config` (a config.json) with `rule`'s fields written in: transformers 5's
    ``rope_parameters`` or transformers 4's ``rope_theta`` and ``rope_scaling``, and
    ``max_position_embeddings``; inside ``text_config`` where the model keeps its language
    model's settings there.

    The other layout's keys are removed (transformers reads ``rope_scaling`` before
    ``rope_parameters``); in the v4 layout a ``partial_rotary_factor`` that only
    ``rope_parameters`` held moves to the top level, and GPT-NeoX's ``rotary_emb_base`` (which
    its config reads instead of ``rope_theta``) is set too.
    """
    fields: dict[str, Any] = {"max_position_embeddings": rule.max_position_embeddings}
    if layout == "v5":
        return _written(config, fields | {"rope_parameters": rule.rope_parameters})
    settings = language_model(config)
    if "partial_rotary_factor" not in settings and "rotary_pct" not in settings:
        shares = [r.get("partial_rotary_factor") for r in rope_parameters(settings).values() if r]
        if shares and shares[0] is not None:
            fields["partial_rotary_factor"] = shares[0]
    fields["rope_theta"] = rule.rope_theta
    if "rotary_emb_base" in settings:  # GPT-NeoX's name, the one its config reads
        fields["rotary_emb_base"] = rule.rope_theta
    if rule.rope_scaling is not None:
        fields["rope_scaling"] = rule.rope_scaling
    return _written(config, fields)


def _written(config: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """`config` with `fields` in place of its rope keys (in text_config where it has one)."""
    text = config.get("text_config")
    if isinstance(text, dict):
        return {**config, "text_config": _written(text, fields)}
    replaced = ("rope_scaling", "rope_parameters", "rope_theta")
    return {k: v for k, v in config.items() if k not in replaced} | fields


def _number(value: float) -> str:
    """`value` for a command line: whole numbers without a point, others exactly (repr)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _llama_cpp(
    name: str,
    factor: float | None,
    parameters: dict[str, Any],
    frequencies: RotaryFrequencies,
    target: int,
    original: int,
    notes: list[str],
) -> str:
    """llama.cpp's flags for rule `name` (`notes` told what they cannot say), as its source
    defines them: common/arg.cpp (``--rope-scale N`` sets rope_freq_scale = 1/N;
    ``--rope-scaling {none,linear,yarn}``; ``--rope-freq-base``; ``--yarn-orig-ctx``; ``-c``)
    and src/llama-context.cpp (llama_context's constructor: scaling type none forces
    rope_freq_scale 1, so a GGUF's own linear or YaRN scaling is off; yarn sets
    yarn_ext_factor 1; n_ctx_orig_yarn from --yarn-orig-ctx). ggml's YaRN
    (ggml_rope_yarn_corr_dims, rope_yarn in ggml-cpu/ops.cpp) floors and ceils the same
    correction range as transformers, ramps by pair index, and multiplies cos and sin by
    0.1·ln(1/freq_scale) + 1 itself.
    """
    context = f"-c {target}"
    if name == "none":
        return f"--rope-scaling none {context}"
    if name == "linear":
        return f"--rope-scaling linear --rope-scale {_number(factor or 1)} {context}"
    if name in ("ntk_aware", "critical_base", "dynamic"):
        if name == "dynamic":
            notes.append(
                "llama.cpp has no dynamic rule: --rope-freq-base is dynamic's base at N, "
                "applied at every length (transformers raises it only beyond L)."
            )
        return f"--rope-scaling none --rope-freq-base {_number(frequencies.base_applied)} {context}"
    if name == "yarn":
        flags = (
            f"--rope-scaling yarn --rope-scale {_number(factor or 1)} --yarn-orig-ctx {original}"
        )
        for key, flag, default in (("beta_fast", "--yarn-beta-fast", 32),
                                   ("beta_slow", "--yarn-beta-slow", 1)):  # fmt: skip
            if parameters.get(key) not in (None, default):
                flags += f" {flag} {_number(parameters[key])}"
        if parameters.get("mscale_all_dim"):
            notes.append(
                "mscale and mscale_all_dim travel in the GGUF (convert_hf_to_gguf.py writes "
                "them for DeepSeek's architecture); no flag sets them."
            )
        return f"{flags} {context}"
    if name == "llama3":
        notes.append(
            "llama.cpp has no flag for llama3: its per-pair factors travel in the GGUF's "
            "rope_freqs tensor, which convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors) "
            "writes from config.json's rope_scaling, reading original_max_position_embeddings "
            f"from config.json's top level (default 8192: set it to {original} there too); "
            "llama.cpp applies it under every flag."
        )
        return f"{context} # llama3: no flags; convert from this config.json"
    notes.append(
        "llama.cpp has no flag for LongRoPE: its factors travel in the GGUF's "
        "rope_factors_long/short tensors and its attention factor in rope.scaling.attn_factor, "
        "which convert_hf_to_gguf.py (Phi3MiniModel) computes from max_position_embeddings / "
        "original_max_position_embeddings."
    )
    return f"{context} # longrope: no flags; convert from this config.json"


def _vllm(theta: float, parameters: dict[str, Any], context: int, target: int) -> str:
    """vLLM's flags: ``--max-model-len N`` and ``--hf-overrides`` with the rule.

    ``--hf-overrides`` updates the loaded config's attributes (``config.update``), then vLLM
    standardizes them (vllm/transformers_utils/config.py: get_config, patch_rope_parameters):
    under transformers 4 it reads ``rope_scaling`` into ``rope_parameters`` and then writes a
    top-level ``rope_theta`` over the dict's; under transformers 5 ``rope_scaling`` sets
    ``rope_parameters`` and only fills a missing ``rope_theta``. So the overrides carry the
    rule in both keys, with its rope_theta inside and beside them. ``--max-model-len`` must not
    exceed the length vLLM derives (vllm/config/model.py, _get_and_verify_max_len):
    max_position_embeddings times the factor (dynamic, linear), original_max_position_embeddings
    times the factor (yarn), max_position_embeddings (default, llama3, longrope); the
    overrides' max_position_embeddings makes it at least N (dynamic: L·s = N, as vLLM's
    DynamicNTKScalingRotaryEmbedding computes transformers' base at L·s).
    """
    overrides = {
        "rope_theta": theta,
        "rope_scaling": parameters,
        "rope_parameters": parameters,
        "max_position_embeddings": context,
    }
    return f"--max-model-len {target} --hf-overrides '{json.dumps(overrides)}'"


def usage_shares(plan: ContextPlan, usage: np.ndarray) -> dict[str, float]:
    """Per rule, the share of a layer's usage u(k) (summed over its heads: ``(n_heads,
    n_pairs)`` or ``(n_pairs,)``, `posviz.heads.RotaryHeads.usage`) that sits on the pairs the
    rule changes (θ'/θ ≠ 1).

    >>> llama2 = position_scheme({"model_type": "llama", "hidden_size": 256,
    ...     "num_attention_heads": 2, "max_position_embeddings": 4096})
    >>> usage_shares(context_plan(llama2, target=8192), np.ones(64))["linear"]
    1.0
    """  # fmt: skip
    per_pair = np.asarray(usage, dtype=np.float64)
    per_pair = per_pair.sum(axis=0) if per_pair.ndim == 2 else per_pair
    if per_pair.shape != (plan.spec.n_pairs,):
        msg = f"The usage has {per_pair.size} pairs; the plan's rule has {plan.spec.n_pairs}."
        raise Refused(msg)
    total = per_pair.sum()
    return {
        rule.rule: float(per_pair[rule.band != "unchanged"].sum() / total) for rule in plan.rules
    }
