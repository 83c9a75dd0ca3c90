"""Which frequencies a rotary model rotates at, what its ``rope_scaling`` rule does to each
pair, how fast its content-free similarity decays, and its position table.

Formulas as Hugging Face transformers' ``modeling_rope_utils`` computes ``inv_freq`` and
``attention_factor`` (``_compute_*_parameters``), in float64 (transformers: float32). Pair ``i``
of ``rotary_dim / 2`` rotates by ``inv_freq[i]`` radians per position; its wavelength is
``2π / inv_freq[i]`` positions. docs/schemes.md names each formula and its source.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from posviz._params import records_params
from posviz.embedding import Embedding, LoadError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BANDS",
    "MAX_TABLE_POSITIONS",
    "ROPE_TYPES",
    "RotaryDecay",
    "RotaryFrequencies",
    "RotaryOverlay",
    "RotarySpec",
    "dynamic_base",
    "dynamic_base_curve",
    "inv_freq_difference",
    "rotary_decay",
    "rotary_frequencies",
    "rotary_overlay",
    "rotary_table",
    "yarn_mscale",
]

#: The scaling rules computed (transformers' ``ROPE_INIT_FUNCTIONS`` keys).
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")
#: What a scaling rule does to a pair, by the share of the full division by `factor` it takes.
BANDS = {
    "kept": "rotates as without scaling (share 0)",
    "blended": "between kept and divided by the factor (share strictly between 0 and 1)",
    "divided": "rotates `factor` times slower (share 1)",
    "rescaled": "divided by its own LongRoPE factor",
}
#: Most rows of a rotary position table (the app's and the CLI's limit).
MAX_TABLE_POSITIONS = 8192


@dataclass(frozen=True)
class RotarySpec:
    """A rotary scheme as config.json states it, checked (posviz.schemes.config.position_scheme).

    Attributes
    ----------
    rope_type : str
        One of `ROPE_TYPES`.
    rotary_dim : int
        Columns of q and k that rotate (even): ``rotary_dim / 2`` pairs.
    base : float
        ``rope_theta`` (> 1).
    interleaved : bool
        Pairs are adjacent columns (2i, 2i+1: GPT-J, CodeGen) rather than (j, j + dim/2)
        (transformers' ``rotate_half``). The frequencies are the same.
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

    @property
    def n_pairs(self) -> int:
        return self.rotary_dim // 2

    @property
    def pretraining_context(self) -> int | None:
        """The context the unscaled frequencies were trained at."""
        return self.original_context or self.context


@dataclass(frozen=True)
class RotaryFrequencies:
    """Each pair's frequency under a rotary scheme, as applied at one context length.

    Attributes
    ----------
    spec : RotarySpec
    context : int or None
        Sequence length the frequencies apply at (dynamic NTK and LongRoPE depend on it).
    inv_freq_unscaled : ndarray of shape (n_pairs,)
        ``base ** (-2i / rotary_dim)``.
    inv_freq : ndarray of shape (n_pairs,)
        As the scaling rule applies it at `context`.
    attention_factor : float
        Multiplies cos and sin, so q·k logits scale by its square.
    share : ndarray of shape (n_pairs,)
        Share of the full division by `factor` each pair takes: 0 kept, 1 divided
        (NaN for LongRoPE, whose pairs have their own factors).
    band : ndarray of str, shape (n_pairs,)
        `BANDS` key of each pair.
    base_applied : float
        The base at `context` (dynamic NTK raises it; else ``spec.base``).
    """

    spec: RotarySpec
    context: int | None
    inv_freq_unscaled: np.ndarray
    inv_freq: np.ndarray
    attention_factor: float
    share: np.ndarray
    band: np.ndarray
    base_applied: float
    params: dict = field(default_factory=dict)

    @property
    def wavelengths(self) -> np.ndarray:
        """Positions per full turn of each pair, as applied: ``2π / inv_freq``."""
        return 2 * np.pi / self.inv_freq

    @property
    def wavelengths_unscaled(self) -> np.ndarray:
        return 2 * np.pi / self.inv_freq_unscaled

    @property
    def pairs_beyond_original_context(self) -> int:
        """Pairs whose unscaled wavelength exceeds the pre-training context: they never made a
        full turn in training (what a scaling rule has to stretch, or leaves alone)."""
        context = self.spec.pretraining_context
        return 0 if context is None else int(np.sum(self.wavelengths_unscaled > context))

    def band_counts(self) -> dict[str, int]:
        """How many pairs fall in each band (bands with none left out)."""
        names, counts = np.unique(self.band, return_counts=True)
        return {str(n): int(c) for n, c in zip(names, counts, strict=True)}

    def turns(self, length: int) -> np.ndarray:
        """Full turns each pair makes over `length` positions, as applied."""
        return length * self.inv_freq / (2 * np.pi)

    def to_frame(self) -> pd.DataFrame:
        """One row per pair: frequencies, wavelength, band, share, turns within the context.

        LongRoPE has no share (each pair has a factor of its own): its column is the pair's
        ``factor``, ``inv_freq_unscaled / inv_freq``, instead of a column of NaN.
        """
        import pandas as pd  # on first use: `posviz summary` prints without loading pandas

        own = bool(np.isnan(self.share).all())
        frame = pd.DataFrame(
            {
                "pair": np.arange(self.spec.n_pairs),
                "inv_freq_unscaled": self.inv_freq_unscaled,
                "inv_freq": self.inv_freq,
                "wavelength": self.wavelengths,
                "band": self.band,
                **(
                    {"factor": self.inv_freq_unscaled / self.inv_freq}
                    if own
                    else {"share": self.share}
                ),
            }
        )
        if self.context:
            frame[f"turns in {self.context:,}"] = self.turns(self.context)
        return frame


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature: 1 for factor <= 1, else ``0.1 · mscale · ln(factor) + 1``.

    >>> round(yarn_mscale(4.0), 6) == round(0.1 * math.log(4) + 1, 6)
    True
    """
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def dynamic_base(spec: RotarySpec, lengths: np.ndarray) -> np.ndarray:
    """Dynamic NTK's base at each sequence length (`spec.base` up to ``spec.context``).

    ``base · (s · L / max_pos − (s − 1)) ** (dim / (dim − 2))`` for L > max_pos, with max_pos =
    ``max_position_embeddings`` (transformers' ``_compute_dynamic_ntk_parameters``).
    """
    lengths = np.maximum(np.asarray(lengths, dtype=np.float64), spec.context)
    s, dim = spec.factor, spec.rotary_dim
    return spec.base * (s * lengths / spec.context - (s - 1)) ** (dim / (dim - 2))


def dynamic_base_curve(spec: RotarySpec, *, n_lengths: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, base at each): log-spaced lengths from 1 to 16 times ``spec.context``."""
    lengths = np.unique(np.geomspace(1, 16 * spec.context, n_lengths).round())
    return lengths, dynamic_base(spec, lengths)


@records_params
def rotary_frequencies(spec: RotarySpec, *, context: int | None = None) -> RotaryFrequencies:
    """Each pair's frequency, unscaled and as `spec`'s scaling rule applies it at `context`.

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
    if context is not None and context < 1:
        msg = f"context must be a positive number of positions, not {context}."
        raise LoadError(msg)
    dim, base, s = spec.rotary_dim, spec.base, spec.factor
    exponent = np.arange(0, dim, 2, dtype=np.float64) / dim
    unscaled = base**-exponent
    n = len(unscaled)
    attention_factor = 1.0
    share = np.zeros(n)
    base_applied = base
    kind = spec.rope_type
    if kind == "linear":
        share = np.ones(n)
    elif kind == "dynamic":
        if context is not None and spec.context is not None and context > spec.context:
            base_applied = float(dynamic_base(spec, np.array([context]))[0])
            # base'^(-2i/d) = base^(-2i/d) / r^(2i/(d-2)) with r the stretch at the last pair.
            share = np.arange(n) / (n - 1) if n > 1 else np.zeros(n)
    elif kind == "yarn":
        attention_factor = _yarn_attention_factor(spec)
        share = _yarn_ramp(spec)
    elif kind == "llama3":
        share = _llama3_share(spec, unscaled)
    elif kind == "longrope":
        attention_factor = _longrope_attention_factor(spec)
        share = np.full(n, np.nan)
    if kind == "dynamic":
        inv_freq = base_applied**-exponent
    elif kind == "longrope":
        beyond = context is not None and context > spec.pretraining_context
        ext = np.asarray(spec.long_factor if beyond else spec.short_factor, dtype=np.float64)
        inv_freq = unscaled / ext
    else:
        # transformers' blend: (1 - share) · inv + share · inv / s.
        inv_freq = unscaled * (1 - share) + unscaled / s * share
    return RotaryFrequencies(
        spec=spec,
        context=context,
        inv_freq_unscaled=unscaled,
        inv_freq=inv_freq,
        attention_factor=float(attention_factor),
        share=share,
        band=_bands(share, unscaled / inv_freq),
        base_applied=float(base_applied),
    )


def _bands(share: np.ndarray, division: np.ndarray) -> np.ndarray:
    """`BANDS` key of each pair from its share (LongRoPE: NaN share, kept where its factor is 1)."""
    band = np.where(share <= 0, "kept", np.where(share >= 1, "divided", "blended")).astype("<U8")
    rescaled = np.isnan(share)
    band[rescaled] = np.where(np.isclose(division[rescaled], 1.0, rtol=1e-12), "kept", "rescaled")
    return band


def _yarn_attention_factor(spec: RotarySpec) -> float:
    if spec.attention_factor is not None:
        return spec.attention_factor
    if spec.mscale and spec.mscale_all_dim:
        return yarn_mscale(spec.factor, spec.mscale) / yarn_mscale(spec.factor, spec.mscale_all_dim)
    return yarn_mscale(spec.factor)


def _yarn_ramp(spec: RotarySpec) -> np.ndarray:
    """YaRN's share per pair: 0 for fast pairs (more than beta_fast turns in the original
    context), 1 for slow ones (fewer than beta_slow), linear between.

    transformers computes the correction range in units of rotary columns and applies it to
    pair indices (``linear_ramp_factor(low, high, dim // 2)``); kept as is, since models were
    trained with it.
    """
    dim, base = spec.rotary_dim, spec.base
    original = spec.pretraining_context

    def correction(turns: float) -> float:
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = correction(spec.beta_fast or 32)
    high = correction(spec.beta_slow or 1)
    if spec.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    return np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)


def _llama3_share(spec: RotarySpec, unscaled: np.ndarray) -> np.ndarray:
    """llama3's share: wavelengths below L0 / high_freq_factor kept, above L0 / low_freq_factor
    divided, ``1 − smooth`` between with smooth = (L0 / λ − low) / (high − low)."""
    original, low, high = spec.original_context, spec.low_freq_factor, spec.high_freq_factor
    wavelength = 2 * np.pi / unscaled
    smooth = (original / wavelength - low) / (high - low)
    share = 1 - smooth
    share[wavelength < original / high] = 0.0
    share[wavelength > original / low] = 1.0
    return share


def _longrope_attention_factor(spec: RotarySpec) -> float:
    if spec.attention_factor is not None:
        return spec.attention_factor
    if spec.factor <= 1:
        return 1.0
    return math.sqrt(1 + math.log(spec.factor) / math.log(spec.pretraining_context))


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


@records_params
def rotary_decay(
    frequencies: RotaryFrequencies, *, max_distance: int | None = None, n_distances: int = 1024
) -> RotaryDecay:
    """B(Δ) and RoFormer's bound against distance, before and after scaling.

    Parameters
    ----------
    frequencies : RotaryFrequencies
    max_distance : int, optional
        Largest Δ (default: the context the frequencies apply at, else 4096).
    n_distances : int
        Log-spaced distances evaluated beyond the first 64, which are all evaluated (a decay
        is read on a log axis; evenly spaced samples of these oscillations alias).

    Examples
    --------
    >>> d = rotary_decay(rotary_frequencies(RotarySpec("default", 8, 10000.0)), max_distance=10)
    >>> float(d.similarity[0]), float(d.bound[0]), d.distances.tolist()[:3]
    (1.0, 2.5, [0, 1, 2])
    """
    stop = max_distance or frequencies.context or 4096
    dense = np.arange(min(stop, 64) + 1)
    sparse = np.geomspace(64, stop, n_distances) if stop > 64 else []
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
    longest = max((s.context or s.original_context or 4096 for s in specs.values()), default=0)
    stop = max_distance or longest
    frequencies = {label: rotary_frequencies(spec) for label, spec in specs.items()}
    decays = {
        label: rotary_decay(f, max_distance=stop, n_distances=n_distances)
        for label, f in frequencies.items()
    }
    return RotaryOverlay(frequencies, decays)


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
        Rows N (default the original context, else the context; at most
        `MAX_TABLE_POSITIONS`).
    source : str
        Where the scheme came from, for the table's provenance.

    Raises
    ------
    LoadError
        If `positions` is outside 10 … `MAX_TABLE_POSITIONS`.

    Examples
    --------
    >>> f = rotary_frequencies(RotarySpec("default", 4, 10000.0, context=16))
    >>> t = rotary_table(f)
    >>> t.shape, t.values[1].round(4).tolist()
    ((16, 4), [0.5403, 1.0, 0.8415, 0.01])
    """
    spec = frequencies.spec
    n = positions or min(spec.pretraining_context or MAX_TABLE_POSITIONS, MAX_TABLE_POSITIONS)
    if not 10 <= n <= MAX_TABLE_POSITIONS:
        msg = (
            f"A rotary position table of {n} rows was asked for; choose 10 to "
            f"{MAX_TABLE_POSITIONS} positions."
        )
        raise LoadError(msg)
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
    return float(np.max(np.abs(stored - expected) / expected))
