"""Which frequencies a rotary model rotates at, what its scaling rule does to each pair, how
fast its content-free similarity decays, and its position table.

The rules themselves (keys, checks, inv_freq, attention factor) are one table,
`posviz.schemes.rope.ROPE_RULES`; this module applies them. Pair ``i`` of ``rotary_dim / 2``
rotates by ``inv_freq[i]`` radians per position; its wavelength is ``2π / inv_freq[i]``
positions. Computed in float64: transformers' float32 ``inv_freq`` differs from these exact
values by up to 3.2e-7 relative, its cos/sin tables by up to 1.4e-4 (docs/schemes.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from posviz._params import MAX_RESULT_BYTES, Bound, bounded, check_budget, records_params
from posviz.embedding import Embedding, LoadError
from posviz.schemes._values import given
from posviz.schemes.rope import (
    CONTEXTS,
    MAX_CONTEXT,
    MAX_TABLE_POSITIONS,
    ROPE_RULES,
    ROPE_TYPES,
    RotarySpec,
    dynamic_base,
    unscaled_inv_freq,
    yarn_mscale,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BANDS",
    "CONTEXTS",
    "DECAY_DISTANCES",
    "DECAY_SAMPLES",
    "FALLBACK_CONTEXT",
    "MAX_TABLE_POSITIONS",
    "ROPE_TYPES",
    "TABLE_POSITIONS",
    "RotaryDecay",
    "RotaryFrequencies",
    "RotaryOverlay",
    "RotarySpec",
    "bands",
    "default_context",
    "default_positions",
    "dynamic_base",
    "dynamic_base_curve",
    "inv_freq_difference",
    "rotary_decay",
    "rotary_frequencies",
    "rotary_overlay",
    "rotary_table",
    "yarn_mscale",
]

#: What a scaling rule does to a pair at a length, by its division θ/θ' (unscaled over applied).
BANDS = {
    "kept": "rotates as without scaling (division 1)",
    "blended": "divided by more than 1 and less than the factor",
    "divided": "divided by the factor or more",
    "unrotated": "θ = 0: the pair does not rotate (proportional's unrotated part of the head)",
}
#: Relative tolerance of "division 1" and "the factor or more": float64 rounding of the blends.
BAND_TOLERANCE = 1e-12
#: A decay's distances: log-spaced samples (a curve on screen needs about a thousand) and the
#: largest distance (any context posviz takes).
DECAY_SAMPLES = Bound(1, 100_000)
DECAY_DISTANCES = Bound(1, MAX_CONTEXT, optional=True)
#: Rows of a rotary position table: ten at least (a table of a few rows has no spectrum worth
#: the name), at most `MAX_TABLE_POSITIONS`.
TABLE_POSITIONS = Bound(10, MAX_TABLE_POSITIONS, optional=True)
#: The length a rule is shown at when config.json names no context (nor an original one).
FALLBACK_CONTEXT = 4096


def default_context(spec: RotarySpec) -> int:
    """The length `spec`'s rule is shown at unless asked otherwise: the model's context, else
    its original one, else `FALLBACK_CONTEXT`."""
    return spec.context or spec.original_context or FALLBACK_CONTEXT


def default_positions(spec: RotarySpec) -> int:
    """Rows of `spec`'s position table unless asked otherwise: its pre-training context, at
    most `MAX_TABLE_POSITIONS`."""
    return min(spec.pretraining_context or MAX_TABLE_POSITIONS, MAX_TABLE_POSITIONS)


@dataclass(frozen=True)
class RotaryFrequencies:
    """Each pair's frequency under a rotary scheme, as applied at one context length.

    Attributes
    ----------
    spec : RotarySpec
    context : int or None
        Sequence length the frequencies apply at (dynamic NTK and LongRoPE depend on it).
    inv_freq_unscaled : ndarray of shape (n_pairs,)
        ``base ** (-2i / rotary_dim)`` (0 for proportional's unrotated pairs).
    inv_freq : ndarray of shape (n_pairs,)
        θᵢ as the scaling rule applies it at `context`.
    attention_factor : float
        Multiplies cos and sin, so q·k logits scale by its square.
    division : ndarray of shape (n_pairs,)
        θ/θ' of each pair: unscaled over applied (NaN for a pair that does not rotate).
    band : ndarray of str, shape (n_pairs,)
        `BANDS` key of each pair, from its division and the factor.
    base_applied : float
        The base at `context` (dynamic NTK raises it; else ``spec.base``).
    """

    spec: RotarySpec
    context: int | None
    inv_freq_unscaled: np.ndarray
    inv_freq: np.ndarray
    attention_factor: float
    division: np.ndarray
    band: np.ndarray
    base_applied: float
    params: dict = field(default_factory=dict)

    @property
    def logit_multiplier(self) -> float:
        """What the scheme multiplies q·k logits by: attention_factor² (cos and sin of q and k)
        times the attention class's softmax-scale correction (``spec.softmax_scale``)."""
        return self.attention_factor**2 * self.spec.softmax_scale

    @property
    def logit_multiplier_source(self) -> str:
        """Where `logit_multiplier` comes from, the attention class named."""
        spec = self.spec
        rotary = f"attention_factor² = {self.attention_factor:.6g}² (cos and sin of q and k)"
        if spec.attention_class is None:
            return f"{rotary}; the attention class scales by head_dim^-½ only"
        return (
            f"{rotary}, times {spec.attention_class}.scaling = head_dim^-½ · "
            f"mscale({spec.factor:g}, mscale_all_dim={spec.mscale_all_dim:g})², "
            f"{spec.softmax_scale:.6f} (yarn_apply_mscale)"
        )

    @property
    def wavelengths(self) -> np.ndarray:
        """Positions per full turn of each pair, as applied: ``2π / inv_freq`` (inf: θ = 0)."""
        with np.errstate(divide="ignore"):
            return 2 * np.pi / self.inv_freq

    @property
    def wavelengths_unscaled(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return 2 * np.pi / self.inv_freq_unscaled

    @property
    def pairs_beyond_original_context(self) -> int:
        """Rotating pairs whose unscaled wavelength exceeds the pre-training context: they never
        made a full turn in training (what a scaling rule has to stretch, or leaves alone)."""
        context = self.spec.pretraining_context
        wavelengths = self.wavelengths_unscaled
        beyond = np.isfinite(wavelengths) & (wavelengths > (context or np.inf))
        return int(np.sum(beyond))

    def band_counts(self) -> dict[str, int]:
        """How many pairs fall in each band (bands with none left out), in `BANDS` order."""
        return {b: int(n) for b in BANDS if (n := np.sum(self.band == b))}

    def bands(self) -> dict[str, dict[str, list]]:
        """Each band's pairs and their actual division θ/θ', in `BANDS` order (JSON-ready)."""
        return {
            b: {
                "pairs": np.flatnonzero(chosen).tolist(),
                "division": self.division[chosen].tolist(),
            }
            for b in BANDS
            if (chosen := self.band == b).any()
        }

    def turns(self, length: int) -> np.ndarray:
        """Full turns each pair makes over `length` positions, as applied."""
        return length * self.inv_freq / (2 * np.pi)

    def to_frame(self) -> pd.DataFrame:
        """One row per pair: frequencies, wavelength, division, band, turns within the context."""
        import pandas as pd  # on first use: `posviz summary` prints without loading pandas

        frame = pd.DataFrame(
            {
                "pair": np.arange(self.spec.n_pairs),
                "inv_freq_unscaled": self.inv_freq_unscaled,
                "inv_freq": self.inv_freq,
                "wavelength": self.wavelengths,
                "division": self.division,
                "band": self.band,
            }
        )
        if self.context:
            frame[f"turns in {self.context:,}"] = self.turns(self.context)
        return frame


def dynamic_base_curve(spec: RotarySpec, *, n_lengths: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, base at each): log-spaced lengths from 1 to 16 times ``spec.context``."""
    context = given(spec.context, "max_position_embeddings")
    lengths = np.unique(np.geomspace(1, 16 * context, n_lengths).round())
    return lengths, dynamic_base(spec, lengths)


@records_params
@bounded(context=CONTEXTS)
def rotary_frequencies(spec: RotarySpec, *, context: int | None = None) -> RotaryFrequencies:
    """Each pair's frequency, unscaled and as `spec`'s rule (`ROPE_RULES`) applies it at
    `context`, with its division θ/θ' and band.

    Parameters
    ----------
    spec : RotarySpec
    context : int, optional
        Sequence length (default ``spec.context``, else the original context): dynamic NTK
        raises its base beyond ``spec.context``; LongRoPE uses its long factors beyond the
        original context, its short ones within.

    Returns
    -------
    RotaryFrequencies

    Examples
    --------
    >>> f = rotary_frequencies(RotarySpec("linear", 4, 10000.0, factor=2.0))
    >>> f.inv_freq_unscaled.tolist(), f.inv_freq.tolist(), f.band.tolist()
    ([1.0, 0.01], [0.5, 0.005], ['divided', 'divided'])
    """
    if context is None:
        context = spec.context or spec.original_context
    rule = ROPE_RULES[spec.rope_type]
    unscaled = unscaled_inv_freq(spec)
    inv_freq, base_applied = rule.frequencies(spec, unscaled, context)
    with np.errstate(invalid="ignore", divide="ignore"):
        division = np.where(unscaled > 0, unscaled / inv_freq, np.nan)
    return RotaryFrequencies(
        spec=spec,
        context=context,
        inv_freq_unscaled=unscaled,
        inv_freq=inv_freq,
        attention_factor=float(rule.attention_factor(spec)),
        division=division,
        band=bands(division, spec.factor),
        base_applied=float(base_applied),
    )


def bands(division: np.ndarray, factor: float) -> np.ndarray:
    """`BANDS` key of each pair from its division θ/θ': 1 kept, the factor or more divided,
    between blended; NaN (θ = 0) unrotated.

    >>> bands(np.array([1.0, 1.5, 2.0, 47.8, np.nan]), 2.0).tolist()
    ['kept', 'blended', 'divided', 'divided', 'unrotated']
    """
    kept = np.isclose(division, 1.0, rtol=BAND_TOLERANCE, atol=0)
    with np.errstate(invalid="ignore"):
        divided = division >= factor * (1 - BAND_TOLERANCE)
    band = np.where(kept, "kept", np.where(divided, "divided", "blended")).astype("<U9")
    band[np.isnan(division)] = "unrotated"
    return band


@dataclass(frozen=True)
class RotaryDecay:
    """How much a rotary scheme alone lets a query favour nearby keys, against distance.

    Attributes
    ----------
    distances : ndarray of int64, shape (n_distances,)
        Relative distances Δ (0 first).
    similarity, similarity_unscaled : ndarray of shape (n_distances,)
        Content-free similarity ``B(Δ) = meanᵢ cos(Δ θᵢ)``, scaled and unscaled: the cosine
        of a vector with itself moved Δ positions, when its energy is spread evenly over
        pairs. B(0) = 1.
    bound, bound_unscaled : ndarray of shape (n_distances,)
        RoFormer's relative upper bound (§3.4.3) ``(2/d) Σⱼ |Sⱼ|``, ``Sⱼ = Σ_{k<j} e^{iΔθₖ}``
        for j = 1 … d/2 (at Δ = 0 it is (d/2 + 1) / 2).
    """

    distances: np.ndarray
    similarity: np.ndarray
    similarity_unscaled: np.ndarray
    bound: np.ndarray
    bound_unscaled: np.ndarray
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per distance: B(Δ) and RoFormer's bound, as applied and unscaled."""
        import pandas as pd

        return pd.DataFrame(
            {
                "distance": self.distances,
                "similarity": self.similarity,
                "similarity_unscaled": self.similarity_unscaled,
                "bound": self.bound,
                "bound_unscaled": self.bound_unscaled,
            }
        )


@records_params
@bounded(max_distance=DECAY_DISTANCES, n_distances=DECAY_SAMPLES)
def rotary_decay(
    frequencies: RotaryFrequencies, *, max_distance: int | None = None, n_distances: int = 1024
) -> RotaryDecay:
    """B(Δ) and RoFormer's bound against distance, before and after scaling.

    Parameters
    ----------
    frequencies : RotaryFrequencies
    max_distance : int, optional
        Largest Δ (default: the context the frequencies apply at, else `FALLBACK_CONTEXT`).
    n_distances : int
        Log-spaced distances evaluated beyond the first 64, which are all evaluated (a decay
        is read on a log axis; evenly spaced samples of these oscillations alias).

    Examples
    --------
    >>> d = rotary_decay(rotary_frequencies(RotarySpec("default", 8, 10000.0)), max_distance=10)
    >>> float(d.similarity[0]), float(d.bound[0]), d.distances.tolist()[:3]
    (1.0, 2.5, [0, 1, 2])
    """
    stop = max_distance or frequencies.context or FALLBACK_CONTEXT
    # The partial sums are complex: 16 bytes per distance and pair, a few arrays of them.
    needed = (65 + n_distances) * frequencies.spec.n_pairs * 16 * 4
    if not 1 <= stop <= MAX_CONTEXT or n_distances < 1 or needed > MAX_RESULT_BYTES:
        msg = (
            f"A decay to distance {stop:,} at {n_distances:,} distances over "
            f"{frequencies.spec.n_pairs:,} pairs was asked for; distances 1 to {MAX_CONTEXT:,} "
            f"and at most {MAX_RESULT_BYTES // 2**20} MiB of partial sums."
        )
        raise LoadError(msg)
    dense = np.arange(min(stop, 64) + 1)
    sparse = np.geomspace(64, stop, n_distances) if stop > 64 else np.empty(0)
    distances = np.unique(np.concatenate([dense, np.round(sparse)])).astype(np.int64)

    def curves(inv_freq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        angles = np.outer(distances, inv_freq)
        similarity = np.cos(angles).mean(axis=1)
        partial = np.cumsum(np.exp(1j * angles), axis=1)  # S_1 ... S_{d/2}
        return similarity, np.abs(partial).sum(axis=1) / len(inv_freq)

    similarity, bound = curves(frequencies.inv_freq)
    similarity_unscaled, bound_unscaled = curves(frequencies.inv_freq_unscaled)
    return RotaryDecay(distances, similarity, similarity_unscaled, bound, bound_unscaled)


@dataclass(frozen=True)
class RotaryOverlay:
    """Several rotary models side by side: each one's ladder and decay, each as applied at its
    own context (max_position_embeddings), the decays to one common largest distance.

    Attributes
    ----------
    frequencies : dict of str to RotaryFrequencies
        By model label, in the order given.
    decays : dict of str to RotaryDecay
        By model label: B(Δ) and RoFormer's bound, Δ = 0 … the common `max_distance`.
    """

    frequencies: dict[str, RotaryFrequencies]
    decays: dict[str, RotaryDecay]
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per model and pair: its place in the ladder and its wavelength as applied."""
        import pandas as pd

        return pd.concat(
            [
                pd.DataFrame(
                    {
                        "model": label,
                        "pair": np.arange(f.spec.n_pairs),
                        "pair_fraction": np.arange(f.spec.n_pairs) / f.spec.n_pairs,
                        "wavelength": f.wavelengths,
                    }
                )
                for label, f in self.frequencies.items()
            ],
            ignore_index=True,
        )

    def decay_table(self) -> pd.DataFrame:
        """One row per model and distance: B(Δ) and RoFormer's bound as applied."""
        import pandas as pd

        return pd.concat(
            [
                pd.DataFrame(
                    {
                        "model": label,
                        "distance": d.distances,
                        "similarity": d.similarity,
                        "bound": d.bound,
                    }
                )
                for label, d in self.decays.items()
            ],
            ignore_index=True,
        )


@records_params
@bounded(max_distance=DECAY_DISTANCES, n_distances=DECAY_SAMPLES)
def rotary_overlay(
    specs: Mapping[str, RotarySpec], *, max_distance: int | None = None, n_distances: int = 1024
) -> RotaryOverlay:
    """Several models' frequencies (each at its own context) and decays to one distance.

    Parameters
    ----------
    specs : mapping of str to RotarySpec
        The models, by label.
    max_distance : int, optional
        Largest Δ of every decay (default: the longest context among the models, a model
        without one counting as 4096), so the curves share one axis.
    n_distances : int
        As :func:`rotary_decay`.

    Examples
    --------
    >>> o = rotary_overlay({"a": RotarySpec("default", 8, 10000.0, context=100),
    ...                     "b": RotarySpec("default", 4, 500.0, context=300)})
    >>> [int(d.distances[-1]) for d in o.decays.values()], o.params["max_distance"]
    ([300, 300], None)
    """  # fmt: skip
    longest = max((default_context(s) for s in specs.values()), default=0)
    stop = max_distance or longest
    frequencies = {label: rotary_frequencies(spec) for label, spec in specs.items()}
    decays = {
        label: rotary_decay(f, max_distance=stop, n_distances=n_distances)
        for label, f in frequencies.items()
    }
    return RotaryOverlay(frequencies, decays)


@bounded(positions=TABLE_POSITIONS)
def rotary_table(
    frequencies: RotaryFrequencies, *, positions: int | None = None, source: str = "config.json"
) -> Embedding:
    """The rotary position table: row m is ``[cos(m θ) | sin(m θ)]`` (transformers'
    ``rotate_half`` layout, without the attention factor), one column per pair in each half.

    Parameters
    ----------
    frequencies : RotaryFrequencies
        Its ``inv_freq`` (as applied) gives θ.
    positions : int, optional
        Rows N within `TABLE_POSITIONS` (default :func:`default_positions`: the original
        context, else the context, at most `MAX_TABLE_POSITIONS`).
    source : str
        Where the scheme came from, for the table's provenance.

    Raises
    ------
    Refused
        If `positions` is outside `TABLE_POSITIONS`, or the table would take more than
        `posviz._params.MAX_RESULT_BYTES`.

    Examples
    --------
    >>> f = rotary_frequencies(RotarySpec("default", 4, 10000.0, context=16))
    >>> t = rotary_table(f)
    >>> t.shape, t.values[1].round(4).tolist()
    ((16, 4), [0.5403, 1.0, 0.8415, 0.01])
    """
    spec = frequencies.spec
    n = positions or default_positions(spec)
    check_budget(8 * n * spec.rotary_dim, f"A rotary table of {n:,} rows x {spec.rotary_dim:,}")
    angles = np.outer(np.arange(n, dtype=np.float64), frequencies.inv_freq)
    values = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    name = f"rotary {spec.rope_type} (θ={spec.base:g}, dim {spec.rotary_dim})"
    if spec.layer_type != "all":
        name += f", {spec.layer_type}"
    return Embedding.from_array(
        values, name=name, source=f"{source} · frequencies at context {frequencies.context}"
    )


def inv_freq_difference(stored: np.ndarray, frequencies: RotaryFrequencies) -> float:
    """Largest relative difference between a stored ``rotary_emb.inv_freq`` buffer and the
    unscaled frequencies the config gives (old conversions store them; some wrongly).

    Raises
    ------
    LoadError
        If the buffer's length is not the number of pairs.
    """
    stored = np.asarray(stored, dtype=np.float64).ravel()
    expected = frequencies.inv_freq_unscaled
    if stored.shape != expected.shape:
        msg = (
            f"The stored inv_freq has {stored.size} values; config.json gives "
            f"{expected.size} rotary pairs."
        )
        raise LoadError(msg)
    # Relative where θ > 0; a pair that does not rotate (θ = 0) must store 0.
    scale = np.where(expected > 0, expected, 1.0)
    return float(np.max(np.abs(stored - expected) / scale))
