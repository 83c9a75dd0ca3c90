"""Where two sources of one model's rotary positions part: config.json against a GGUF, against
another config, or against what a runtime computed (an ``inv_freq`` vector or a cos/sin table).

Each source is a :class:`RotarySource`: its fields (θ, rotary width, layout, rule and its
parameters, attention factor, context, NoPE layers, windows) and its frequencies as applied at
one sequence length; a cos/sin table dump also keeps its rows, and its frequencies are
recovered from them (the slope of each pair's unwrapped angle over the positions). Two
sources are compared field by field, pair by pair (``inv_freq``) and position by position (the
cos/sin table, attention factor included). Positions are exact: a computed source's angle at
position m is ``m · inv_freq`` in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from posviz._params import Bound, bounded, records_params
from posviz.embedding import LoadError
from posviz.export import header
from posviz.schemes.layers import LayerScheme
from posviz.schemes.rope import MAX_CONTEXT, ROPE_RULES
from posviz.schemes.rotary import RotaryFrequencies, RotarySpec, rotary_frequencies

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ANGLE_LIMIT",
    "FIELDS",
    "FIRST_POSITIONS",
    "LAYOUTS",
    "MAX_POSITIONS",
    "NUMBERS",
    "RotarySource",
    "SchemeDiff",
    "cell",
    "from_inv_freq",
    "from_spec",
    "from_table",
    "scheme_diff",
    "split_pair",
    "split_table",
]

#: The fields compared, in order, and what each is.
FIELDS = {
    "theta": "rope_theta: the base of the frequencies",
    "rotary_dim": "columns of q and k that rotate (twice the pairs)",
    "layout": "which columns pair up: half-split (j, j + d/2) or interleaved (2i, 2i + 1); a "
    "dump's is its file's column order, shown and not compared",
    "rope_type": "the scaling rule",
    "factor": "the rule's scaling factor",
    "original_context": "the pre-training context the rule extends",
    "low_freq_factor": "llama3: wavelengths beyond L0 / low_freq_factor are divided",
    "high_freq_factor": "llama3: wavelengths below L0 / high_freq_factor are kept",
    "beta_fast": "YaRN: turns in L0 above which a pair is kept (default 32)",
    "beta_slow": "YaRN: turns in L0 below which a pair is divided (default 1)",
    "mscale": "YaRN's mscale",
    "mscale_all_dim": "YaRN's mscale_all_dim",
    "short_factor": "LongRoPE: each pair's divisor within the original context",
    "long_factor": "LongRoPE: each pair's divisor beyond it",
    "rotating_pairs": "proportional: the pairs that rotate (the others have θ = 0)",
    "attention_factor": "multiplies cos and sin, as applied",
    "context": "max_position_embeddings",
    "other_layer_types": "the other layer types' θ and rule (Gemma-3's sliding layers)",
    "nope_layers": "layers without rotary embeddings (SmolLM3, Llama-4)",
    "sliding_window": "the attention windows of sliding layers",
}
#: What the first difference names when no field differs, only the numbers.
NUMBERS = {
    "inv_freq": "each pair's frequency, as applied",
    "table": "the cos/sin values over the positions compared",
}
#: rope_parameters' keys by the RotarySpec field that holds them (the rest have its name).
_SPEC_FIELDS = {"original_max_position_embeddings": "original_context"}


def _rule_fields(rope_type: str) -> tuple[str, ...]:
    """The parameters of a rule compared (those transformers reads for it, `ROPE_RULES`)."""
    rule = ROPE_RULES[rope_type]
    keys = (_SPEC_FIELDS.get(k, k) for k in (*rule.required, *rule.optional))
    return tuple(k for k in keys if k in FIELDS and k != "attention_factor")


#: Column orders of a cos/sin dump.
LAYOUTS = {
    "half-split": "pair j in columns j and j + d/2 (transformers' rotate_half, llama.cpp NEOX); "
    "a single table is [cos θ₀ … cos θₙ₋₁ | sin θ₀ … sin θₙ₋₁]",
    "interleaved": "pair j in columns 2j and 2j + 1 (GPT-J, llama.cpp NORM); a single table is "
    "[cos θ₀, sin θ₀, cos θ₁, sin θ₁, …]",
}
#: The angle error the report names the first position to exceed (radians).
ANGLE_LIMIT = 0.01
#: Most positions compared (the table is evaluated in blocks; its size bounds the time).
MAX_POSITIONS = 2**20
#: The position a dump's first row may stand for (a rule's context goes to `MAX_CONTEXT`).
FIRST_POSITIONS = Bound(0, MAX_CONTEXT)
_BLOCK = 4096


@dataclass(frozen=True)
class RotarySource:
    """One source of a model's rotary positions.

    Attributes
    ----------
    label : str
        How the source is named on screen (a path, ``hf:REPO@COMMIT``, ``preset:NAME``).
    kind : str
        ``"config"`` (a config.json or GGUF: frequencies computed), ``"inv_freq"`` (a dump of
        the frequencies) or ``"table"`` (a dump of cos and sin).
    fields : dict of str to value
        Each `FIELDS` key the source states (None: it does not say).
    inv_freq : ndarray of shape (n_pairs,)
        As applied at the comparison's sequence length (a table's: recovered from its rows).
    attention_factor : float or None
        What cos and sin are multiplied by (None: not stated, taken as 1 in the table).
    cos, sin : ndarray of shape (n_positions, n_pairs) or None
        A table dump's values, one column per pair, at `positions`.
    positions : ndarray of int or None
        The positions a table dump's rows stand for.
    provenance : dict
        Where the source was read (config provenance, or the dump's file and sha256).
    """

    label: str
    kind: str
    fields: dict[str, Any]
    inv_freq: np.ndarray
    attention_factor: float | None
    provenance: dict[str, Any]
    cos: np.ndarray | None = None
    sin: np.ndarray | None = None
    positions: np.ndarray | None = None
    fit_residual: float | None = None
    """A table dump's largest angle off the straight line its recovered frequencies draw
    (radians): near 0 for a rotary table read in its own layout."""

    @property
    def n_pairs(self) -> int:
        return len(self.inv_freq)

    def values_at(
        self, positions: np.ndarray, *, scaled: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(angles, cos, sin) at `positions` (n_positions, n_pairs), the attention factor in
        cos and sin unless not `scaled`; a table's as stored (its angles from atan2)."""
        if self.cos is not None and self.sin is not None and self.positions is not None:
            rows = np.searchsorted(self.positions, positions)
            cos, sin = self.cos[rows], self.sin[rows]
            if not scaled and self.attention_factor:
                cos, sin = cos / self.attention_factor, sin / self.attention_factor
            return np.arctan2(sin, cos), cos, sin
        angles = np.outer(positions.astype(np.float64), self.inv_freq)
        scale = self.attention_factor if scaled and self.attention_factor is not None else 1.0
        return angles, scale * np.cos(angles), scale * np.sin(angles)


def from_spec(
    spec: RotarySpec,
    *,
    label: str,
    provenance: dict[str, Any],
    context: int | None = None,
    others: tuple[RotarySpec, ...] = (),
    config: dict[str, Any] | None = None,
    layers: tuple[LayerScheme, ...] = (),
) -> RotarySource:
    """A config.json's (or GGUF's) rotary scheme as applied at `context` (default its own);
    its NoPE layers and windows from its per-layer map `layers` (else from `config`'s keys)."""
    f: RotaryFrequencies = rotary_frequencies(spec, context=context)
    fields: dict[str, Any] = {
        "theta": spec.base,
        "rotary_dim": spec.rotary_dim,
        "layout": "interleaved" if spec.interleaved else "half-split",
        "rope_type": spec.rope_type,
    }
    stated = {
        "factor": spec.factor,
        "original_context": spec.original_context,
        "low_freq_factor": spec.low_freq_factor,
        "high_freq_factor": spec.high_freq_factor,
        "beta_fast": spec.beta_fast or 32.0,  # transformers' defaults, as the rule uses them
        "beta_slow": spec.beta_slow or 1.0,
        "mscale": spec.mscale,
        "mscale_all_dim": spec.mscale_all_dim,
        "short_factor": list(spec.short_factor) if spec.short_factor else None,
        "long_factor": list(spec.long_factor) if spec.long_factor else None,
        "rotating_pairs": spec.rotating_pairs,
    }
    for key in _rule_fields(spec.rope_type):
        fields[key] = stated[key]
    if spec.rotating_pairs is not None:
        fields["rotating_pairs"] = spec.rotating_pairs
    fields["attention_factor"] = f.attention_factor
    fields["context"] = spec.context
    fields["other_layer_types"] = {
        s.layer_type: {"theta": s.base, "rope_type": s.rope_type} for s in others
    } or None
    if layers:
        # No NoPE layer and no config key about them read alike: None.
        fields["nope_layers"] = [layer.layer for layer in layers if not layer.rope] or None
        windows = sorted({layer.sliding_window for layer in layers if layer.sliding_window})
        fields["sliding_window"] = windows or None
    else:
        nope, window = _layers(config or {})
        fields["nope_layers"] = nope or None
        fields["sliding_window"] = [window] if window else None
    return RotarySource(label, "config", fields, f.inv_freq, f.attention_factor, provenance)


def _layers(config: dict[str, Any]) -> tuple[list[int] | None, int | None]:
    """(NoPE layers, sliding window) config.json states, as transformers reads them, for a
    config without the number of layers (no per-layer map)."""
    nope = None
    layers = config.get("no_rope_layers")
    if isinstance(layers, list) and all(v in (0, 1) for v in layers):
        nope = [i for i, v in enumerate(layers) if v == 0]
    elif isinstance(interval := config.get("no_rope_layer_interval"), int) and interval > 0:
        n = config.get("num_hidden_layers")
        if isinstance(n, int):
            nope = [i for i in range(n) if (i + 1) % interval == 0]
    window = config.get("sliding_window")
    if config.get("use_sliding_window") is False or not isinstance(window, int):
        window = None
    return nope, window


def from_inv_freq(values: np.ndarray, *, label: str, provenance: dict[str, Any]) -> RotarySource:
    """A runtime's ``inv_freq`` dump: one frequency per pair (radians per position)."""
    inv = np.asarray(values, dtype=np.float64).ravel()
    if inv.size == 0 or not np.all(np.isfinite(inv)) or inv.min() <= 0:
        msg = f"{label}: an inv_freq dump holds positive, finite frequencies; this one does not."
        raise LoadError(msg)
    fields = {"rotary_dim": 2 * inv.size}
    return RotarySource(label, "inv_freq", fields, inv, None, provenance)


def split_table(values: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin), one column per pair, of a single cos/sin table in `layout`.

    >>> split_table(np.array([[1.0, 2.0, 3.0, 4.0]]), "half-split")
    (array([[1., 2.]]), array([[3., 4.]]))
    >>> split_table(np.array([[1.0, 2.0, 3.0, 4.0]]), "interleaved")
    (array([[1., 3.]]), array([[2., 4.]]))
    """
    _check_layout(layout)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] % 2:
        msg = f"A cos/sin table has an even number of columns; this one has shape {values.shape}."
        raise LoadError(msg)
    n = values.shape[1] // 2
    if layout == "half-split":
        return values[:, :n], values[:, n:]
    return values[:, 0::2], values[:, 1::2]


def split_pair(cos: np.ndarray, sin: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin), one column per pair, of a runtime's cos and sin tensors: (P, d/2) as they
    are, or (P, d) with each pair's value twice, where `layout` puts it (transformers'
    ``cat(freqs, freqs)``: half-split; ``repeat_interleave``: interleaved)."""
    _check_layout(layout)
    cos, sin = np.asarray(cos, dtype=np.float64), np.asarray(sin, dtype=np.float64)
    while cos.ndim > 2 and cos.shape[0] == 1:  # (1, P, d) or (1, 1, P, d) as a model returns it
        cos, sin = cos[0], sin[0]
    if cos.shape != sin.shape or cos.ndim != 2:
        msg = f"cos and sin must be 2-D of one shape; they are {cos.shape} and {sin.shape}."
        raise LoadError(msg)
    return _half(cos, layout), _half(sin, layout)


def _half(values: np.ndarray, layout: str) -> np.ndarray:
    """The (P, d) tensor with each pair twice, as (P, d/2): the first copy of each pair."""
    if values.shape[1] % 2:
        msg = f"A cos or sin tensor of {values.shape[1]} columns cannot hold pairs twice."
        raise LoadError(msg)
    n = values.shape[1] // 2
    return values[:, :n] if layout == "half-split" else values[:, 0::2]


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        msg = f"layout {layout!r} is not one of {', '.join(LAYOUTS)}."
        raise LoadError(msg)


def from_table(
    cos: np.ndarray,
    sin: np.ndarray,
    *,
    label: str,
    provenance: dict[str, Any],
    layout: str,
    first_position: int = 0,
) -> RotarySource:
    """A runtime's cos/sin dump (one column per pair, see :func:`split_table`), its rows the
    positions ``first_position, first_position + 1, …``.

    Its attention factor is the median length of (cos, sin); its frequencies are recovered as
    the least-squares slope of each pair's unwrapped angle against position (exact for an
    exact table; a pair turning by more than π per position cannot be recovered)."""
    FIRST_POSITIONS.check("first_position", first_position, error=LoadError)
    cos, sin = np.asarray(cos, dtype=np.float64), np.asarray(sin, dtype=np.float64)
    if cos.shape != sin.shape or cos.ndim != 2 or cos.shape[0] < 2 or cos.shape[1] < 1:
        msg = f"{label}: a cos/sin table needs at least 2 positions; its shape is {cos.shape}."
        raise LoadError(msg)
    if not (np.all(np.isfinite(cos)) and np.all(np.isfinite(sin))):
        msg = f"{label}: the cos/sin table holds NaN or infinite values."
        raise LoadError(msg)
    positions = first_position + np.arange(cos.shape[0])
    angles = np.unwrap(np.arctan2(sin, cos), axis=0)
    centred = positions - positions.mean()
    inv = centred @ (angles - angles.mean(axis=0)) / (centred @ centred)
    fitted = angles.mean(axis=0) + np.outer(centred, inv)
    residual = float(np.abs(angles - fitted).max())
    magnitude = float(np.median(np.hypot(cos, sin)))
    fields = {"rotary_dim": 2 * cos.shape[1], "layout": layout, "attention_factor": magnitude}
    return RotarySource(
        label,
        "table",
        fields,
        inv,
        magnitude,
        provenance,
        cos=cos,
        sin=sin,
        positions=positions,
        fit_residual=residual,
    )


@dataclass(frozen=True)
class SchemeDiff:
    """Where two sources of a model's rotary positions part.

    Attributes
    ----------
    a, b : RotarySource
    fields : list of dict
        Each field either states: ``{"field", "a", "b", "same"}`` (same is None when one
        side does not state it).
    first_difference : str or None
        The first field that differs; else ``"inv_freq"`` when only the frequencies do (or
        ``"table"`` when a side is a cos/sin table: its values are what is judged); None when
        they agree.
    relative_difference : ndarray of shape (n_pairs,) or None
        Per pair, ``|a − b| / max(|a|, |b|)`` of inv_freq (None: the widths differ).
    positions : ndarray of int
        The positions compared.
    angle_error : ndarray of shape (n_positions,)
        The largest angle error over pairs at each position (radians, wrapped to [0, π]).
    table_max_abs_difference : float or None
        Largest |cos_a − cos_b| or |sin_a − sin_b| over the positions: attention factors in
        when both sides state one, else both compared as unit rotations.
    first_position_over_0_01_rad : int or None
    pairs_differing : list of int
        Pairs whose inv_freq differs by more than the tolerance; with a table dump, pairs
        whose angle at some position does (its recovered frequencies are shown, not judged).
    agree : bool
    hints : tuple of str
        What the difference looks like, when it looks like a known mistake (LongRoPE's other
        factors, θ off by a factor, a table read in the other layout).
    """

    a: RotarySource
    b: RotarySource
    fields: list[dict[str, Any]]
    first_difference: str | None
    relative_difference: np.ndarray | None
    positions: np.ndarray
    angle_error: np.ndarray
    table_max_abs_difference: float | None
    first_position_over_0_01_rad: int | None
    pairs_differing: list[int]
    agree: bool
    hints: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)

    @property
    def inv_freq_max_relative_difference(self) -> float | None:
        d = self.relative_difference
        return None if d is None or d.size == 0 else float(d.max())

    def record(self) -> dict[str, Any]:
        """What `posviz diff --json` prints and the app exports: the numbers under an export's
        header (the step, its params, both sources' provenance, A's first), so `posviz rerun`
        reads both sources again and recomputes them."""
        made = header(self, self.a.provenance, self.b.provenance)
        return {
            "analysis": made["analysis"],
            "agree": self.agree,
            "first_difference": self.first_difference,
            "fields": [_jsonable(f) for f in self.fields],
            "inv_freq_max_relative_difference": self.inv_freq_max_relative_difference,
            "table_max_abs_difference": self.table_max_abs_difference,
            "first_position_over_0_01_rad": self.first_position_over_0_01_rad,
            "pairs_differing": self.pairs_differing,
            "hints": list(self.hints),
            "params": made["params"],
            "provenance": made["provenance"],
        }

    def pair_table(self) -> pd.DataFrame:
        """One row per pair: both frequencies and their relative difference."""
        import pandas as pd

        n = min(self.a.n_pairs, self.b.n_pairs)
        difference = self.relative_difference
        return pd.DataFrame(
            {
                "pair": np.arange(n),
                "inv_freq_a": self.a.inv_freq[:n],
                "inv_freq_b": self.b.inv_freq[:n],
                "relative_difference": difference if difference is not None else np.nan,
            }
        )

    def field_frame(self) -> pd.DataFrame:
        import pandas as pd

        rows = [{k: cell(v) if k in ("a", "b") else v for k, v in f.items()} for f in self.fields]
        return pd.DataFrame(rows, columns=["field", "a", "b", "same"])


@records_params
@bounded(tolerance=Bound(0.0, 1.0, whole=False), positions=Bound(1, MAX_POSITIONS, optional=True))
def scheme_diff(
    a: RotarySource,
    b: RotarySource,
    *,
    tolerance: float = 1e-6,
    positions: int | None = None,
) -> SchemeDiff:
    """Compare two sources of one model's rotary positions.

    Parameters
    ----------
    a, b : RotarySource
    tolerance : float
        Largest relative difference that agrees (numbers, inv_freq per pair; a table's angle at
        position m within ``tolerance · max(m θ, 1)``). Default: float32's rounding of the
        frequencies is about 1e-7, so 1e-6 passes a float32 runtime and catches any rule
        applied differently.
    positions : int, optional
        Positions 0 … positions − 1 compared (default: a table dump's own positions, both
        tables' common ones; else the shorter context of the two, at most 32,768).

    Returns
    -------
    SchemeDiff

    Examples
    --------
    >>> spec = RotarySpec("default", 8, 10000.0, context=64)
    >>> a = from_spec(spec, label="a", provenance={})
    >>> b = from_inv_freq(10000.0 ** -(np.arange(0, 8, 2) / 8), label="b", provenance={})
    >>> d = scheme_diff(a, b)
    >>> d.agree, d.first_difference, d.first_position_over_0_01_rad
    (True, None, None)
    """
    if not 0 < tolerance < 1:
        msg = f"tolerance is {tolerance}; give a relative tolerance between 0 and 1."
        raise LoadError(msg)
    fields = _fields(a, b, tolerance)
    first = next((f["field"] for f in fields if f["same"] is False), None)
    relative = None
    if a.n_pairs == b.n_pairs:
        relative = np.abs(a.inv_freq - b.inv_freq) / np.maximum(
            np.abs(a.inv_freq), np.abs(b.inv_freq)
        )
    compared = _positions(a, b, positions)
    _check_precision(a, b, compared, tolerance)
    errors, table_difference, within, pair_angles = _table(a, b, compared, tolerance)
    if relative is None:
        pairs: list[int] = []
    elif "table" in (a.kind, b.kind):
        # A table's frequencies are recovered from its rows, no closer than its float32 angles
        # over its span allow (64 rows at position 131,000: ~1e-4): its pairs are judged by
        # their angles, each within the tolerance of m θ (or of 1 rad) at every position.
        pairs = np.flatnonzero(pair_angles).tolist()
    else:
        pairs = np.flatnonzero(relative > tolerance).tolist()
    over = np.flatnonzero(errors > ANGLE_LIMIT)
    first_over = int(compared[over[0]]) if over.size else None
    if first is None and (relative is None or pairs):
        first = "table" if "table" in (a.kind, b.kind) else "inv_freq"
    if first is None and not within:
        first = "table"
    return SchemeDiff(
        a=a,
        b=b,
        fields=fields,
        first_difference=first,
        relative_difference=relative,
        positions=compared,
        angle_error=errors,
        table_max_abs_difference=table_difference,
        first_position_over_0_01_rad=first_over,
        pairs_differing=pairs,
        agree=first is None,
    )


def _fields(a: RotarySource, b: RotarySource, tolerance: float) -> list[dict[str, Any]]:
    rows = []
    dump = "config" not in (a.kind, b.kind) or a.kind != b.kind
    for key in FIELDS:
        if key not in a.fields and key not in b.fields:
            continue
        va, vb = a.fields.get(key), b.fields.get(key)
        if key == "layout" and dump:
            # A dump's layout is its file's column order, not the model's pairing (a runtime
            # may pair adjacent columns of q and k permuted to match): shown, not compared; a
            # layout read wrongly shows in the frequencies recovered from the table.
            same: bool | None = None
        elif va is None and vb is None:
            same = True  # neither says: nothing parts them
        elif va is None or vb is None:
            same = None
        else:
            same = _same(va, vb, tolerance)
        rows.append({"field": key, "a": va, "b": vb, "same": same})
    return rows


def _same(a: Any, b: Any, tolerance: float) -> bool:
    """Equal, numbers within `tolerance` relative (lists and dicts element by element)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], tolerance) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y, tolerance) for x, y in zip(a, b, strict=True))
    numbers = (int, float, np.integer, np.floating)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=tolerance, abs_tol=0.0)
    return a == b


def _positions(a: RotarySource, b: RotarySource, positions: int | None) -> np.ndarray:
    tables = [s.positions for s in (a, b) if s.positions is not None]
    if positions is not None:  # within its bound (scheme_diff's)
        compared = np.arange(positions)
    elif tables:
        compared = tables[0]
    else:
        contexts = [s.fields.get("context") for s in (a, b)]
        known = [c for c in contexts if isinstance(c, int) and c > 0]
        compared = np.arange(min([*known, 32768]))
    for table in tables:
        compared = np.intersect1d(compared, table)
    if compared.size == 0:
        msg = "The two tables share no position; give dumps of overlapping positions."
        raise LoadError(msg)
    return compared


def _check_precision(
    a: RotarySource, b: RotarySource, positions: np.ndarray, tolerance: float
) -> None:
    """Refuse positions where the angles m·θ are compared within π or more: an angle is judged
    within `tolerance` of m·θ (a float32 runtime's error grows with it), so there any two
    rotations would agree."""
    fastest = float(np.max(np.concatenate([a.inv_freq, b.inv_freq])))
    last = int(np.abs(positions).max())
    if tolerance * last * fastest < math.pi:
        return
    fit = math.ceil(math.pi / (tolerance * fastest))
    msg = (
        f"At position {last:,} the fastest pair's angle m·θ is {last * fastest:.3g} rad, where a "
        f"relative tolerance of {tolerance:g} lets angles differ by π or more: no two rotations "
        f"could be told apart there. Compare positions below {fit:,} (or give a smaller "
        "tolerance)."
    )
    raise LoadError(msg)


def _table(
    a: RotarySource, b: RotarySource, positions: np.ndarray, tolerance: float
) -> tuple[np.ndarray, float | None, bool, np.ndarray]:
    """Largest angle error per position, largest cos/sin difference, whether the angles
    (within `tolerance` of the unwrapped angle m θ, or of 1 rad) and the magnitudes (when both
    state an attention factor) agree, and which pairs' angles do not; in blocks of positions."""
    n = min(a.n_pairs, b.n_pairs)
    errors = np.empty(len(positions))
    pairs_off = np.zeros(n, dtype=bool)
    largest = 0.0
    within = a.n_pairs == b.n_pairs
    both_scaled = a.attention_factor is not None and b.attention_factor is not None
    fastest = np.maximum(a.inv_freq[:n], b.inv_freq[:n])
    for start in range(0, len(positions), _BLOCK):
        block = positions[start : start + _BLOCK]
        angle_a, cos_a, sin_a = a.values_at(block, scaled=both_scaled)
        angle_b, cos_b, sin_b = b.values_at(block, scaled=both_scaled)
        delta = np.abs(np.angle(np.exp(1j * (angle_a[:, :n] - angle_b[:, :n]))))
        errors[start : start + len(block)] = delta.max(axis=1)
        largest = max(
            largest,
            float(np.abs(cos_a[:, :n] - cos_b[:, :n]).max()),
            float(np.abs(sin_a[:, :n] - sin_b[:, :n]).max()),
        )
        scale = np.maximum(np.outer(np.abs(block), fastest), 1.0)
        off = delta > tolerance * scale
        pairs_off |= off.any(axis=0)
        within = within and not off.any()
        if both_scaled:
            within = within and bool(
                np.allclose(
                    np.hypot(cos_a[:, :n], sin_a[:, :n]),
                    np.hypot(cos_b[:, :n], sin_b[:, :n]),
                    rtol=tolerance,
                    atol=tolerance,
                )
            )
    return errors, largest, within, pairs_off


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def cell(value: Any) -> str:
    """A field's value for a table cell (the page's, the CLI's): lists and dicts briefly."""
    if value is None:
        return "not stated"
    if isinstance(value, list) and len(value) > 4:
        return f"[{', '.join(f'{v:.4g}' for v in value[:3])}, … {len(value)}]"
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, dict):  # other layer types: {type: {"theta", "rope_type"}}
        return "; ".join(
            f"{k}: " + ", ".join(f"{cell(v)}" for v in inner.values())
            if isinstance(inner, dict)
            else f"{k}: {cell(inner)}"
            for k, inner in value.items()
        )
    return str(value)
