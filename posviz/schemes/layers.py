"""How each layer of a rotary model encodes position, as transformers 5 builds it from
config.json: RoPE or NoPE, its rule and width, sliding window, layer type, mrope sections,
attention temperature.

config.json comes in two layouts: transformers v4's (``rope_scaling``, a top-level
``rope_theta`` and ``partial_rotary_factor``) and v5's (``rope_parameters`` holding them, one
dict per layer type for hybrid models, ``layer_types`` and ``per_layer_config`` written out).
:func:`rope_parameters` reads both into v5's standardized form (``standardize_rope_params``),
so both give the same scheme; :func:`layer_map` reads the rest per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from posviz._params import MAX_RESULT_BYTES, bounded, records_params
from posviz.embedding import LoadError
from posviz.schemes._values import first, given, integer, number, shown
from posviz.schemes.rope import CONTEXTS, MAX_CONTEXT, RotarySpec, rotary_spec
from posviz.schemes.rotary import rotary_frequencies

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_LAYERS",
    "MROPE_AXES",
    "AttentionTemperature",
    "LayerScheme",
    "LayerTable",
    "Mrope",
    "layer_map",
    "layer_table",
    "rope_parameters",
    "spans",
]

#: JSON bytes one layer of the map may take (its inv_freq where it differs included, generously).
LAYER_BYTES = 4096
#: Most layers mapped: the map within the memory one result may take.
MAX_LAYERS = MAX_RESULT_BYTES // LAYER_BYTES
#: The axes multimodal rope (Qwen-VL) rotates pairs by, in mrope_section's order.
MROPE_AXES = ("time", "height", "width")

#: Pairs rotated by adjacent columns (2i, 2i+1) rather than (j, j + d/2), by model_type.
_INTERLEAVED = {"gptj", "codegen", "llama4", "llama4_text"}
#: Layer types of configs that predate ``layer_types`` (transformers 5's defaults), by model_type.
_PATTERNS = {"gemma2": 2, "gemma3": 6, "gemma4": 6}
#: Models whose attention applies config.json's sliding_window in every layer.
_SLIDING_EVERYWHERE = {"mistral", "mixtral", "starcoder2", "phi3", "olmoe", "minimax", "ministral3"}
#: Models with NoPE layers (``no_rope_layers``, default every ``no_rope_layer_interval``-th).
_NOPE_MODELS = {"smollm3", "llama4", "llama4_text"}
#: Default mrope sections when config.json names none (transformers' rotary classes).
_MROPE_DEFAULTS = {"qwen2_vl": (16, 24, 24), "qwen2_5_vl": (16, 24, 24), "qwen3_vl": (24, 20, 20)}
#: Default rope parameters per layer type, for models whose config may omit them.
_GEMMA_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "gemma3": {"full_attention": {"rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}},
    "gemma4": {
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                           "rope_theta": 1e6},
        "sliding_attention": {"rope_theta": 1e4},
    },
}  # fmt: skip
#: Keys of a flat rope_parameters dict: one that has none of them is nested by layer type.
_RULE_KEYS = {"rope_type", "type", "rope_theta", "factor", "partial_rotary_factor"}


@dataclass(frozen=True)
class AttentionTemperature:
    """Llama-4's query scaling on NoPE layers (``attn_temperature_tuning``):
    ``log1p(floor((position + 1) / floor_scale)) · attn_scale + 1``.

    Examples
    --------
    >>> AttentionTemperature(8192.0, 0.1).at(np.array([0, 8190, 8191, 10**6])).round(6).tolist()
    [1.0, 1.0, 1.069315, 1.481218]
    """

    floor_scale: float
    attn_scale: float

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The factor on the queries at each position (0-based)."""
        positions = np.asarray(positions, dtype=np.float64)
        return np.log1p(np.floor((positions + 1) / self.floor_scale)) * self.attn_scale + 1

    def record(self) -> dict[str, Any]:
        return {
            "formula": "log1p(floor((position + 1) / floor_scale)) * attn_scale + 1",
            "applies_to": "queries",
            "floor_scale": self.floor_scale,
            "attn_scale": self.attn_scale,
        }


@dataclass(frozen=True)
class Mrope:
    """Multimodal rope (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): the pairs split among time, height and
    width, each rotated by its own position id.

    Attributes
    ----------
    section : tuple of int
        Pairs per axis (``mrope_section``), summing to the pairs of the head.
    interleaved : bool
        Qwen3-VL: height and width take every third pair (1, 4, … and 2, 5, …) within
        3 · section; Qwen2-VL: contiguous blocks.
    """

    section: tuple[int, int, int]
    interleaved: bool = False

    def axes(self) -> np.ndarray:
        """The axis ("time", "height", "width") that rotates each pair.

        >>> Mrope((2, 1, 1)).axes().tolist()
        ['time', 'time', 'height', 'width']
        >>> Mrope((2, 1, 1), interleaved=True).axes().tolist()
        ['time', 'height', 'width', 'time']
        """
        n = sum(self.section)
        if not self.interleaved:
            return np.repeat(np.array(MROPE_AXES), self.section)
        axes = np.full(n, "time", dtype="<U6")
        for axis, offset in ((1, 1), (2, 2)):  # transformers: slice(offset, 3 · section, 3)
            axes[offset : 3 * self.section[axis] : 3] = MROPE_AXES[axis]
        return axes

    def record(self) -> dict[str, Any]:
        axes = self.axes()
        return {
            "section": list(self.section),
            "interleaved": self.interleaved,
            "pairs": {a: np.flatnonzero(axes == a).tolist() for a in MROPE_AXES},
        }


@dataclass(frozen=True)
class LayerScheme:
    """How one layer encodes position.

    Attributes
    ----------
    layer : int
    layer_type : str
        config.json's ``layer_types`` entry (or transformers' default for the model).
    rotary : RotarySpec or None
        Its rotary rule; None: a NoPE layer (no position encoding in its attention).
    sliding_window : int or None
        Keys within this many positions are attended (None: all).
    mrope : Mrope or None
    attention_temperature : AttentionTemperature or None
    """

    layer: int
    layer_type: str
    rotary: RotarySpec | None
    sliding_window: int | None = None
    mrope: Mrope | None = None
    attention_temperature: AttentionTemperature | None = None

    @property
    def rope(self) -> bool:
        return self.rotary is not None


def spans(indices: Any) -> str:
    """Sorted whole numbers in words, evenly spaced runs written as one span.

    Examples
    --------
    >>> spans(range(16)), spans([3, 7, 11, 15, 19]), spans([0, 3, 6, 9, 60, 61, 62, 63])
    ('0-15', '3-19, every 4th', '0-9, every 3rd; 60-63')
    >>> spans([2]), spans([1, 5]), spans([])
    ('2', '1, 5', '')
    """
    values = [int(i) for i in indices]
    parts, i = [], 0
    while i < len(values):
        j = i + 1
        step = values[j] - values[i] if j < len(values) else 0
        while j + 1 < len(values) and values[j + 1] - values[j] == step:
            j += 1
        if j - i >= 2 or (j - i == 1 and step == 1):  # three or more, or two neighbours
            every = "" if step == 1 else f", every {_ordinal(step)}"
            parts.append(f"{values[i]}-{values[j]}{every}")
            i = j + 1
        else:
            parts.append(str(values[i]))
            i += 1
    separator = "; " if any("every" in part for part in parts) else ", "
    return separator.join(parts)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class LayerTable:
    """Each layer's position encoding at one sequence length: the per-layer map as a table.

    Attributes
    ----------
    layers : tuple of LayerScheme
    context : int or None
        The sequence length L the values below are at (None: the model names none).
    base_applied : ndarray of shape (n_layers,)
        Each layer's θ as its rule applies it at L (dynamic NTK raises it; NaN: NoPE).
    temperature : ndarray of shape (n_layers,)
        The attention temperature on the queries at the last position, L − 1 (NaN: the layer
        applies none).
    """

    layers: tuple[LayerScheme, ...]
    context: int | None
    base_applied: np.ndarray
    temperature: np.ndarray
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per layer: layer type, RoPE or NoPE, rule, θ (as given and as applied at
        L), rotary width and rotating pairs, sliding window; which pairs carry time, height
        and width (mrope models) and the attention temperature at L − 1 (models that have
        one). What a layer lacks (a NoPE layer's rule, a window) is None, NaN for a number."""
        import pandas as pd  # on first use, as every result's frame

        columns: dict[str, list] = {}
        for layer, applied, temperature in zip(
            self.layers, self.base_applied, self.temperature, strict=True
        ):
            spec = layer.rotary
            row = {
                "layer": layer.layer,
                "layer_type": layer.layer_type,
                "rope": layer.rope,
                "rope_type": None if spec is None else spec.rope_type,
                "base": np.nan if spec is None else spec.base,
                "base_applied": float(applied),
                "rotary_dim": None if spec is None else spec.rotary_dim,
                "rotating_pairs": _rotating(spec),
                "sliding_window": layer.sliding_window,
            }
            if self.mrope is not None:
                axes = None if layer.mrope is None else layer.mrope.axes()
                for axis in MROPE_AXES:
                    pairs = None if axes is None else spans(np.flatnonzero(axes == axis))
                    row[f"{axis}_pairs"] = pairs
            if self.temperature_column:
                row[self.temperature_column] = float(temperature)
            for key, value in row.items():
                columns.setdefault(key, []).append(value)
        return pd.DataFrame(
            {
                key: pd.Series(values, dtype=object if key in _GAPPED else None)
                for key, values in columns.items()
            }
        )

    @property
    def mrope(self) -> Mrope | None:
        """The model's multimodal rope (every rotary layer's), or None."""
        return next((layer.mrope for layer in self.layers if layer.mrope is not None), None)

    @property
    def has_temperature(self) -> bool:
        return self.temperature_column is not None

    @property
    def temperature_column(self) -> str | None:
        """The table's column of the attention temperature at L − 1 (None: no layer has one)."""
        if not self.context or not np.isfinite(self.temperature).any():
            return None
        return f"attention_temperature_at_{self.context - 1}"

    def _specs(self) -> list[RotarySpec | None]:
        return [layer.rotary for layer in self.layers]

    def describe(self) -> str:
        """The map in one sentence: how many layers, which are NoPE, their types and windows.

        >>> from posviz.schemes.config import position_scheme
        >>> from posviz.schemes.presets import PRESETS
        >>> layers = position_scheme(PRESETS["HuggingFaceTB/SmolLM3-3B"]).layers
        >>> layer_table(layers).describe()
        '36 layers: 27 RoPE, 9 NoPE (layers 3-35, every 4th); full_attention: 36.'
        """
        nope = [layer.layer for layer in self.layers if not layer.rope]
        text = f"{len(self.layers)} layers: {len(self.layers) - len(nope)} RoPE"
        if nope:
            text += f", {len(nope)} NoPE (layers {spans(nope)})"
        types: dict[str, int] = {}
        for layer in self.layers:
            types[layer.layer_type] = types.get(layer.layer_type, 0) + 1
        text += "; " + ", ".join(f"{name}: {n}" for name, n in types.items())
        windows = sorted({w for layer in self.layers if (w := layer.sliding_window) is not None})
        if windows:
            sliding = sum(layer.sliding_window is not None for layer in self.layers)
            text += (
                f"; a sliding window of {', '.join(f'{w:,}' for w in windows)} keys in {sliding}"
            )
        return text + "."


#: Columns of the table with gaps that stay objects: None is blank, not NaN, and a whole
#: number stays whole (not 128.0).
_GAPPED = {"rope_type", "rotary_dim", "rotating_pairs", "sliding_window",
           *(f"{axis}_pairs" for axis in MROPE_AXES)}  # fmt: skip


def _rotating(spec: RotarySpec | None) -> int | None:
    """Pairs that rotate (proportional leaves some at θ = 0); None on a NoPE layer."""
    if spec is None:
        return None
    return spec.n_pairs if spec.rotating_pairs is None else spec.rotating_pairs


@records_params
@bounded(context=CONTEXTS)
def layer_table(layers: tuple[LayerScheme, ...], *, context: int | None = None) -> LayerTable:
    """The per-layer map (:func:`layer_map`) as a table at sequence length `context`.

    Parameters
    ----------
    layers : tuple of LayerScheme
        A model's layers (`posviz.schemes.config.Scheme.layers`).
    context : int, optional
        The length each rule is applied at and the attention temperature is given at (its
        last position, ``context − 1``); default each rule's own (the model's context).

    Examples
    --------
    >>> from posviz.schemes.config import position_scheme
    >>> from posviz.schemes.presets import PRESETS
    >>> layers = position_scheme(PRESETS["meta-llama/Llama-4-Scout-17B-16E"]).layers
    >>> t = layer_table(layers, context=8193)
    >>> t.to_frame().iloc[2:4, [0, 1, 2, 3, 9]].to_dict("list")  # doctest: +NORMALIZE_WHITESPACE
    {'layer': [2, 3], 'layer_type': ['chunked_attention', 'full_attention'],
     'rope': [True, False], 'rope_type': ['llama3', None],
     'attention_temperature_at_8192': [nan, 1.0693147180559945]}
    """
    applied = {
        spec: rotary_frequencies(spec, context=context).base_applied
        for spec in {layer.rotary for layer in layers if layer.rotary is not None}
    }
    base = np.array([np.nan if layer.rotary is None else applied[layer.rotary] for layer in layers])
    model_context = context or next((s.context for s in applied if s.context), None)
    temperature = np.full(len(layers), np.nan)
    if model_context:
        last = np.array([model_context - 1])
        for i, layer in enumerate(layers):
            if layer.attention_temperature is not None:
                temperature[i] = layer.attention_temperature.at(last)[0]
    return LayerTable(tuple(layers), model_context, base, temperature)


def rope_parameters(config: dict) -> dict[str, dict | None]:
    """config.json's rope parameters per layer type, standardized as transformers 5 does:
    ``{"all": {...}}`` for one rule, ``{"full_attention": {...}, "sliding_attention": {...}}``
    for hybrid models (None: a NoPE layer type). Each dict carries ``rope_type``,
    ``rope_theta`` and ``partial_rotary_factor`` (the nested value wins over the top-level one)
    and, for llama3/yarn/longrope, ``original_max_position_embeddings``.

    Examples
    --------
    >>> v4 = {"rotary_pct": 0.25, "rotary_emb_base": 10000}
    >>> v5 = {"rope_parameters": {"partial_rotary_factor": 0.25, "rope_theta": 10000,
    ...                           "rope_type": "default"}}
    >>> rope_parameters(v4) == rope_parameters(v5)
    True
    """  # fmt: skip
    family = _family(config)
    scaling = config.get("rope_scaling")
    parameters = config.get("rope_parameters")
    for key, value in (("rope_scaling", scaling), ("rope_parameters", parameters)):
        if value is not None and not isinstance(value, dict):
            msg = f"{key} is {shown(value)}; expected an object such as {{'rope_type': ...}}."
            raise LoadError(msg)
    raw = scaling or parameters or {}  # transformers: rope_scaling or rope_parameters
    nested = (
        bool(raw)
        and not (_RULE_KEYS & set(raw))
        and all(v is None or isinstance(v, dict) for v in raw.values())
    )
    theta = first(config, "rope_theta", "rotary_emb_base")
    share = first(config, "partial_rotary_factor", "rotary_pct")
    rules: dict[str, dict | None]
    if family in _GEMMA_DEFAULTS and not nested:
        # v4 Gemma: rope_scaling is the full-attention layers' rule; sliding layers run default
        # rope at rope_local_base_freq.
        defaults = _GEMMA_DEFAULTS[family]
        full, sliding = {**defaults["full_attention"]}, {**defaults["sliding_attention"]}
        if raw:
            full.update(raw)
        if theta is not None:
            full["rope_theta"] = theta
        local = config.get("rope_local_base_freq")
        if local is not None:
            sliding["rope_theta"] = local
        rules = {"full_attention": full, "sliding_attention": sliding}
        theta = None
    elif nested:
        rules = {t: (None if d is None else {**d}) for t, d in raw.items()}
    else:
        rules = {"all": {**raw}}
    flat = not nested and family not in _GEMMA_DEFAULTS
    for rule in rules.values():
        if rule is None:
            continue
        rule.setdefault("rope_type", rule.get("type", "default"))
        if theta is not None:
            rule.setdefault("rope_theta", theta)
        rule.setdefault("rope_theta", 10000.0)
        if share is not None:
            rule.setdefault("partial_rotary_factor", share)
        if rule["rope_type"] in ("llama3", "yarn", "longrope"):
            context = first(config, "max_position_embeddings")
            top = config.get("original_max_position_embeddings")
            if flat and top is not None:  # Phi-3: the top-level value has priority
                rule["original_max_position_embeddings"] = top
            elif context is not None:
                rule.setdefault("original_max_position_embeddings", context)
    return rules


def layer_map(config: dict, *, context: int | None) -> tuple[LayerScheme, ...]:
    """Each layer's position encoding (`config` a rotary model's language-model settings).

    An empty tuple when config.json states no number of layers.

    Raises
    ------
    LoadError
        A bad rope rule (:func:`posviz.schemes.rope.rotary_spec`), more than `MAX_LAYERS`
        layers, or per-layer lists (``layer_types``, ``no_rope_layers``) of the wrong length.
    """
    family = _family(config)
    model_type = str(config.get("model_type") or "")
    rules = rope_parameters(config)
    n_layers = first(config, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if n_layers is None:
        return ()
    n_layers = integer(n_layers, "num_hidden_layers", high=MAX_LAYERS)
    types = _layer_types(config, n_layers, family)
    uses_rope = _uses_rope(config, n_layers, family)
    widths = _head_dims(config, n_layers, types, family)
    interleaved = _interleaved(config, model_type)
    window = config.get("sliding_window")
    window = None if window is None else integer(window, "sliding_window", high=MAX_CONTEXT)
    mrope = _mrope(config, rules, family)
    temperature = _temperature(config, family)
    specs: dict[tuple[str, int], RotarySpec | None] = {}
    layers = []
    for layer, (layer_type, rope, head_dim) in enumerate(
        zip(types, uses_rope, widths, strict=True)
    ):
        rule_type = layer_type if layer_type in rules else "all"
        rule = rules.get(rule_type, rules.get("all"))
        if rule_type == "all" and "all" not in rules:
            msg = (
                f"Layer {layer} is of type {shown(layer_type)}, which rope_parameters gives no "
                f"rule for (it names {', '.join(map(str, rules))})."
            )
            raise LoadError(msg)
        key = (rule_type, head_dim)
        if key not in specs:
            specs[key] = None if rule is None else rotary_spec(
                rule, head_dim=head_dim, interleaved=interleaved, context=context,
                layer_type=rule_type, model_type=model_type,
            )  # fmt: skip
        spec = specs[key] if rope else None
        sliding = window if layer_type == "sliding_attention" or (
            family in _SLIDING_EVERYWHERE and layer_type == "full_attention"
        ) else None  # fmt: skip
        layers.append(
            LayerScheme(
                layer=layer,
                layer_type=layer_type,
                rotary=spec,
                sliding_window=sliding,
                mrope=mrope if spec is not None else None,
                attention_temperature=temperature if spec is None else None,
            )
        )
    check_mrope(layers)
    return tuple(layers)


def type_specs(config: dict, *, context: int | None) -> tuple[RotarySpec, ...]:
    """One rotary spec per layer type, when config.json states no number of layers."""
    family = _family(config)
    model_type = str(config.get("model_type") or "")
    specs = []
    for layer_type, rule in rope_parameters(config).items():
        if rule is None:
            continue
        head_dim = _head_dim(config)
        if family == "gemma4" and layer_type == "full_attention":
            head_dim = integer(config.get("global_head_dim", 512), "global_head_dim")
        specs.append(
            rotary_spec(rule, head_dim=head_dim, interleaved=_interleaved(config, model_type),
                        context=context, layer_type=layer_type, model_type=model_type)
        )  # fmt: skip
    return tuple(specs)


# --- per-layer lists ---------------------------------------------------------------------


def _family(config: dict) -> str:
    """model_type without the multimodal wrapper's suffix (gemma3_text -> gemma3)."""
    model_type = str(config.get("model_type") or "")
    return model_type.removesuffix("_text")


def _list(config: dict, key: str, n_layers: int) -> list | None:
    values = config.get(key)
    if values is None or values == []:  # transformers 5 writes [] for "the default"
        return None
    if not isinstance(values, list) or len(values) != n_layers:
        size = len(values) if isinstance(values, list) else shown(values)
        msg = f"{key} in config.json has {size} entries; num_hidden_layers is {n_layers}."
        raise LoadError(msg)
    return values


def _layer_types(config: dict, n_layers: int, family: str) -> list[str]:
    given = _list(config, "layer_types", n_layers)
    if given is not None:
        if not all(isinstance(t, str) for t in given):
            msg = "layer_types in config.json holds something other than names."
            raise LoadError(msg)
        return given
    if family in _PATTERNS:
        pattern = config.get("sliding_window_pattern", _PATTERNS[family])
        # A pattern beyond the layers makes every layer local (llama.cpp's default 6 for a
        # GGUF's gemma3 of fewer layers): bounded by the most layers, not by these.
        pattern = integer(pattern, "sliding_window_pattern", high=MAX_LAYERS + 1)
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                 for i in range(n_layers)]  # fmt: skip
        if family == "gemma4":
            types[-1] = "full_attention"  # transformers forces the last layer to full
        return types
    if family.startswith(("qwen2", "qwen3")) and config.get("use_sliding_window"):
        start = integer(config.get("max_window_layers", 28), "max_window_layers", high=MAX_LAYERS)
        return ["sliding_attention" if i >= start else "full_attention" for i in range(n_layers)]
    if family == "llama4" and config.get("attention_chunk_size") is not None:
        rope = _uses_rope(config, n_layers, family)
        return ["chunked_attention" if r else "full_attention" for r in rope]
    if family == "smollm3" and config.get("use_sliding_window") and config.get("sliding_window"):
        rope = _uses_rope(config, n_layers, family)
        return ["full_attention" if r else "sliding_attention" for r in rope]
    return ["full_attention"] * n_layers


def _uses_rope(config: dict, n_layers: int, family: str) -> list[bool]:
    """RoPE (True) or NoPE per layer: ``no_rope_layers`` (1 = RoPE), by default every
    ``no_rope_layer_interval``-th layer NoPE (SmolLM3, Llama-4)."""
    if family not in _NOPE_MODELS:
        return [True] * n_layers
    given = _list(config, "no_rope_layers", n_layers)
    if given is not None:
        if any(v not in (0, 1) or isinstance(v, float) for v in given):
            msg = "no_rope_layers in config.json must hold 0 (NoPE) or 1 (RoPE) per layer."
            raise LoadError(msg)
        return [bool(v) for v in given]
    interval = integer(config.get("no_rope_layer_interval", 4), "no_rope_layer_interval")
    return [(i + 1) % interval != 0 for i in range(n_layers)]


def _head_dim(config: dict) -> int:
    """The attention head's width: ``head_dim``, else hidden_size / heads; GPT-J's
    ``rotary_dim`` and DeepSeek's ``qk_rope_head_dim`` are the rotating columns themselves."""
    for key in ("qk_rope_head_dim", "rotary_dim"):
        if config.get(key) is not None:
            return integer(config[key], key)
    if config.get("head_dim") is not None:
        return integer(config["head_dim"], "head_dim")
    hidden = integer(first(config, "hidden_size", "n_embd", "d_model"), "hidden_size")
    heads = first(config, "num_attention_heads", "n_head", "num_heads", "n_heads")
    if heads is None:
        msg = "config.json names no number of attention heads (num_attention_heads)."
        raise LoadError(msg)
    return hidden // integer(heads, "num_attention_heads")


def _head_dims(config: dict, n_layers: int, types: list[str], family: str) -> list[int]:
    """Each layer's head width: Gemma-4's full-attention layers are wider (``per_layer_config``
    as transformers 5 writes it, else ``global_head_dim``, default 512)."""
    widths = [_head_dim(config)] * n_layers
    overrides = config.get("per_layer_config")
    if isinstance(overrides, dict):
        for key, values in overrides.items():
            if isinstance(values, dict) and values.get("head_dim") is not None:
                if not str(key).isdigit():
                    msg = f"per_layer_config in config.json names layer {shown(key)}, not a number."
                    raise LoadError(msg)
                layer = int(key)
                if layer < n_layers:
                    widths[layer] = integer(values["head_dim"], f"per_layer_config.{key}.head_dim")
    elif family == "gemma4":
        wide = integer(config.get("global_head_dim", 512), "global_head_dim")
        widths = [wide if t == "full_attention" else w for t, w in zip(types, widths, strict=True)]
    return widths


def _interleaved(config: dict, model_type: str) -> bool:
    if config.get("qk_rope_head_dim") is not None:  # DeepSeek MLA
        return bool(config.get("rope_interleave", model_type.startswith("deepseek_v3")))
    return config.get("rotary_dim") is not None or model_type in _INTERLEAVED


def _mrope(config: dict, rules: dict[str, dict | None], family: str) -> Mrope | None:
    rule = rules.get("all") or {}
    section = rule.get("mrope_section")
    default = next((v for k, v in _MROPE_DEFAULTS.items() if family.startswith(k)), None)
    if section is None and default is None:
        return None
    section = default if section is None else section
    if not isinstance(section, list | tuple) or len(section) != 3:
        msg = f"mrope_section in config.json is {shown(section)}; expected 3 pair counts."
        raise LoadError(msg)
    section = tuple(integer(v, "mrope_section") for v in section)
    interleaved = bool(rule.get("mrope_interleaved")) or family.startswith("qwen3_vl")
    return Mrope(section, interleaved)


def _temperature(config: dict, family: str) -> AttentionTemperature | None:
    if family != "llama4" or config.get("attn_temperature_tuning", True) in (False, 0, None):
        return None
    return AttentionTemperature(
        number(config.get("floor_scale", 8192), "floor_scale", low=1, high=MAX_CONTEXT),
        number(config.get("attn_scale", 0.1), "attn_scale", high=100.0),
    )


def check_mrope(layers: list[LayerScheme]) -> None:
    """mrope sections must cover the rotary pairs exactly (transformers splits inv_freq by them)."""
    for layer in layers:
        if layer.mrope is None:
            continue
        rotary = given(layer.rotary, f"layer {layer.layer}'s rotary rule (mrope splits it)")
        if sum(layer.mrope.section) != rotary.n_pairs:
            msg = (
                f"mrope_section {list(layer.mrope.section)} sums to {sum(layer.mrope.section)} "
                f"pairs; the rotary width {rotary.rotary_dim} has {rotary.n_pairs}."
            )
            raise LoadError(msg)
