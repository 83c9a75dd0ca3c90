"""How each attention head of one layer reads position, from the layer's weights alone.

Learned absolute tables (GPT-2, BERT, ViT, OPT, ...): each head's positional kernel
``K_h(i, j) = q_h(x_i) · k_h(x_j) · s`` with ``x_i`` the layer's input for position i alone
(through the model's own normalisation, see :class:`Norm`) and s the model's logit scale
(1/√d_h but for GPT-Neo's 1), its offset profile, how Toeplitz it is, and the attention
pattern of this positional term alone (causal for decoders) with its numbers per head.
ALiBi and T5 give each head its positional term directly, a function of the offset: the same
pattern numbers follow (:func:`offset_bias_heads`).

Rotary models (:func:`rotary_heads`): the usage ``u_h(k) = ‖W_Q rows of head h, pair k‖ ·
‖W_K rows of kv head g(h), pair k‖`` (Barbero et al., ICLR 2025), its shares on fast and slow
pairs, the usage-weighted wavelength, and the content-free positional term B_h(Δ).

Every per-head number has a null beside it: the same computation with the layer's query and
key rows permuted across heads (each row, and so every row norm, kept), over seeded draws. A
head is labelled only beyond every null draw of every head and above the threshold in
`LABELS`. docs/heads.md states every definition and its source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import threadpool_limits

from posviz._params import SEED, Bound, Refused, bounded, check_budget, records_params
from posviz.embedding import LoadError
from posviz.schemes.rotary import DECAY_DISTANCES, RotaryFrequencies

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DRAWS",
    "LABELS",
    "MAX_KERNEL_VALUES",
    "MAX_POSITIONS",
    "NULL_QUERIES",
    "PATTERN_NUMBERS",
    "POSITIONS",
    "ROTARY_NUMBERS",
    "WINDOW",
    "Norm",
    "PatternHeads",
    "RotaryHeads",
    "alibi_heads",
    "alibi_offset_bias",
    "check_work",
    "learned_heads",
    "offset_bias_heads",
    "pair_columns",
    "rotary_heads",
    "t5_heads",
    "t5_offset_bias",
]

#: Most positions a kernel is computed over (n² per head; GPT-2's table has 1024, OPT's 2050).
MAX_POSITIONS = 2048
#: Positions a kernel may be computed over (`n_positions`; a learned table's own rows too).
POSITIONS = Bound(2, MAX_POSITIONS)
#: Null draws (`n_draws`; 0: no null, no labels): each is one more pass of the numbers.
DRAWS = Bound(0, 1000)
#: The local window |i − j| ≤ w (`local_window`).
WINDOW = Bound(1, MAX_POSITIONS)
#: The per-head numbers of a kernel's attention pattern, in words (averaged over queries
#: i = 1 … n − 1: query 0 of a decoder sees only itself).
PATTERN_NUMBERS = {
    "attention_self": "attention on the query's own position, A(i, i)",
    "attention_previous": "attention on the previous position, A(i, i − 1)",
    "attention_first": "attention on the first position, A(i, 0)",
    "attention_local": "attention within |i − j| ≤ the local window",
    "mean_distance": "mean attended distance, Σ_j A(i, j) |i − j|",
    "entropy_span": "entropy span exp(H_i): how many positions the attention is spread over",
    "toeplitz_share": "share of the kernel's variance its offset profile explains (1: a function "
    "of i − j alone)",
}
#: The per-head numbers of a rotary layer, in words.
ROTARY_NUMBERS = {
    "fast_share": "share of the usage on pairs that turn more than once in `fast_wavelength` "
    "positions",
    "slow_share": "share of the usage on pairs that never complete a turn in the original context",
    "weighted_wavelength": "usage-weighted wavelength (weighted geometric mean over the pairs "
    "that turn, positions)",
    "nope_share": "the position-free columns' q·k norm product over it plus the pairs' usage",
}
#: label -> (the number it reads, the value it must reach). A head is labelled only when its
#: number is also above every draw of the null (all heads, all draws).
LABELS = {
    "previous-token": ("attention_previous", 0.5),
    "self": ("attention_self", 0.5),
    "first position": ("attention_first", 0.5),
    "local": ("attention_local", 0.8),
    "high-frequency": ("fast_share", 0.5),
    # Half of a rotary model's pairs or more are often slow (Llama-3's at 131k: 39 of 64), so
    # a random head already puts ~0.6 there: only a head nearly all slow is called so.
    "low-frequency": ("slow_share", 0.9),
}


@dataclass(frozen=True)
class Norm:
    """A model's normalisation of a layer's input, as it computes it.

    Attributes
    ----------
    kind : {"layer_norm", "rms_norm", "none"}
    weight, bias : ndarray of shape (width,) or None
        The gain and shift (None: absent, as OLMo's non-parametric LayerNorm).
    eps : float
    offset : float
        Added to the stored gain: Gemma's RMSNorm multiplies by ``1 + weight``.
    name : str
        The tensor it was read from ("" when it has none).
    """

    kind: str = "none"
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    eps: float = 1e-5
    offset: float = 0.0
    name: str = ""

    @property
    def gain(self) -> np.ndarray | None:
        """What multiplies each normalised column (None: 1)."""
        return None if self.weight is None else np.asarray(self.weight, np.float64) + self.offset

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """`x` normalised over its last axis, in float64."""
        x = np.asarray(x, dtype=np.float64)
        if self.kind == "none":
            return x
        if self.kind == "layer_norm":
            x = x - x.mean(axis=-1, keepdims=True)
            x = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + self.eps)
        elif self.kind == "rms_norm":
            x = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + self.eps)
        else:
            msg = f"Unknown normalisation {self.kind!r}."
            raise ValueError(msg)
        if self.gain is not None:
            x = x * self.gain
        if self.bias is not None:
            x = x + np.asarray(self.bias, np.float64)
        return x


def pair_columns(rotary_dim: int, *, interleaved: bool) -> tuple[np.ndarray, np.ndarray]:
    """The two columns of each rotary pair k inside a head (k = 0 the fastest).

    >>> [c.tolist() for c in pair_columns(8, interleaved=False)]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    >>> [c.tolist() for c in pair_columns(8, interleaved=True)]
    [[0, 2, 4, 6], [1, 3, 5, 7]]
    """
    k = np.arange(rotary_dim // 2)
    return (2 * k, 2 * k + 1) if interleaved else (k, k + rotary_dim // 2)


# --- the null and labels ----------------------------------------------------------------------


def _spread(null: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Each number's null pooled over heads and draws: mean, sd, 95th percentile, max."""
    out = {}
    for name, values in null.items():
        v = values[np.isfinite(values)]
        out[name] = (
            {"mean": float(v.mean()), "sd": float(v.std()), "q95": float(np.quantile(v, 0.95)),
             "max": float(v.max())}
            if v.size else {"mean": math.nan, "sd": math.nan, "q95": math.nan, "max": math.nan}
        )  # fmt: skip
    return out


def _head_frame(result: PatternHeads | RotaryHeads) -> pd.DataFrame:
    """One row per head: its key head, label, numbers, and each number's null max."""
    import pandas as pd

    frame = pd.DataFrame({"head": np.arange(result.n_heads), "kv_head": result.kv_head})
    frame["label"] = [label or "" for label in result.labels]
    for name, values in result.numbers.items():
        frame[name] = values
    for name, spread in result.spread().items():
        frame[f"{name}_null_max"] = spread["max"]
    return frame


def _labels(
    numbers: dict[str, np.ndarray], null: dict[str, np.ndarray], *, learned: bool = True
) -> tuple[str | None, ...]:
    """Each head's label: the first of `LABELS` whose number passes its threshold and every
    null draw; None when the null explains the head. Without anything learned (ALiBi's
    slopes are a formula) there is no null, and the threshold alone decides."""
    n_heads = len(next(iter(numbers.values())))
    labels: list[str | None] = [None] * n_heads
    for label, (name, threshold) in LABELS.items():
        if name not in numbers:
            continue
        if learned and (name not in null or not null[name].size):
            continue
        beyond = np.nanmax(null[name]) if learned else -np.inf
        for h in range(n_heads):
            value = numbers[name][h]
            if labels[h] is None and value >= threshold and value > beyond:
                labels[h] = label
    return tuple(labels)


# --- kernels: learned tables, ALiBi, T5 -----------------------------------------------------


@dataclass(frozen=True)
class PatternHeads:
    """Each head's positional term as a kernel over positions, and its attention pattern.

    Attributes
    ----------
    kind : {"learned", "alibi", "relative_bias"}
    causal : bool
        Queries see keys j ≤ i only (decoders).
    n_positions : int
        Positions n the kernels span (0 … n − 1).
    kv_head : ndarray of int, shape (n_heads,)
        The key head each query head reads.
    queries, keys : ndarray of shape (n_heads, n, d) and (n_kv_heads, n, d), or None
        Learned tables: each head's query and key of every position alone, with the logit
        scale folded into the queries, so ``K_h = queries[h] @ keys[kv_head[h]].T``.
    offset_bias : ndarray of shape (n_heads, 2n − 1) or None
        ALiBi and T5: each head's bias at offset Δ = i − j = −(n − 1) … n − 1.
    offsets : ndarray of int, shape (2n − 1,)
        Δ = i − j (query minus key): positive looks back.
    offset_profile : ndarray of shape (n_heads, 2n − 1)
        m_h(Δ): the mean of K_h over the pairs at offset Δ the attention sees (NaN ahead of a
        causal query).
    numbers : dict of str to ndarray of shape (n_heads,)
        `PATTERN_NUMBERS`.
    null : dict of str to ndarray of shape (n_draws, n_heads)
        The same numbers with query and key rows permuted across heads (empty when nothing
        is learned: ALiBi's slopes are set by formula).
    labels : tuple of (str or None)
        See `LABELS`.
    """

    kind: str
    causal: bool
    n_positions: int
    kv_head: np.ndarray
    queries: np.ndarray | None
    keys: np.ndarray | None
    offset_bias: np.ndarray | None
    offsets: np.ndarray
    offset_profile: np.ndarray
    numbers: dict[str, np.ndarray]
    null: dict[str, np.ndarray]
    labels: tuple[str | None, ...]
    params: dict = field(default_factory=dict)

    @property
    def n_heads(self) -> int:
        return len(self.kv_head)

    def kernel(self, head: int, stop: int | None = None) -> np.ndarray:
        """K_h over positions 0 … stop − 1 (default all), float64."""
        stop = self.n_positions if stop is None else min(stop, self.n_positions)
        if self.queries is not None and self.keys is not None:  # set together, or neither
            return self.queries[head, :stop] @ self.keys[self.kv_head[head], :stop].T
        if self.offset_bias is None:
            msg = "These heads hold neither queries and keys nor a bias per offset."
            raise ValueError(msg)
        n = self.n_positions
        i = np.arange(stop)
        return self.offset_bias[head][i[:, None] - i[None, :] + n - 1]

    def attention(self, head: int, stop: int | None = None) -> np.ndarray:
        """The attention pattern of K_h alone over positions 0 … stop − 1 (each row sums to 1;
        zero ahead of a causal query). Rows see only keys within the first `stop`."""
        kernel = self.kernel(head, stop)
        return _softmax(kernel, _mask(len(kernel), self.causal))

    def spread(self) -> dict[str, dict[str, float]]:
        """Each number's null: mean, sd, 95th percentile and max over heads and draws."""
        return _spread(self.null)

    def to_frame(self) -> pd.DataFrame:
        """One row per head: its key head, label, numbers, and each number's null max."""
        return _head_frame(self)

    def offset_table(self) -> pd.DataFrame:
        """One row per head and offset Δ the attention sees: m_h(Δ)."""
        import pandas as pd

        seen = np.isfinite(self.offset_profile[0])
        rows = [
            pd.DataFrame(
                {"head": h, "offset": self.offsets[seen], "mean": self.offset_profile[h, seen]}
            )
            for h in range(self.n_heads)
        ]
        return pd.concat(rows, ignore_index=True)


def _mask(n: int, causal: bool) -> np.ndarray:
    """Which (query, key) pairs the attention sees."""
    return np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)


def _softmax(kernel: np.ndarray, mask: np.ndarray) -> np.ndarray:
    logits = np.where(mask, kernel, -np.inf)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


#: Queries the null's kernels are computed on: evenly spaced over 1 … n − 1 (all when fewer).
#: Each null head then costs a sixteenth of a head at n = 1024; a mean over fewer queries only
#: widens the null's spread, so labels beyond it stay earned.
NULL_QUERIES = 64
#: Blocks a null draw's queries are made in: a decoder's block of them spans a quarter of the
#: positions, so the keys ahead of its queries (computed, then masked) are a fifth of its
#: values (a GPT-2's in blocks of 42 rows: a third); 8 blocks cost more calls than they save.
_NULL_BLOCKS = 4
#: Most kernel values a layer's heads are computed over, the null's draws included. The
#: kernels are made in blocks of rows of every head (`_BLOCK_VALUES`) and dropped, so the memory
#: stays two blocks' (8 MB); this bounds the time: a GPT-2 layer's 12 heads over 1,024
#: positions with 8 draws are 19 million (0.3 s on 2 busy cores), OPT-30B's 56 heads over 2,048
#: positions 294 million, 1,024 heads 5.4 billion.
MAX_KERNEL_VALUES = 2**29


def check_work(n_heads: int, n_positions: int, n_draws: int) -> None:
    """Refuse the kernels of `n_heads` heads over `n_positions` positions and `n_draws` null
    draws before any is computed, when they pass `MAX_KERNEL_VALUES` (the message says how
    many positions fit).

    >>> check_work(12, 1024, 8)
    >>> check_work(1024, 2048, 8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    posviz._params.Refused: The kernels of 1,024 heads ... (n_positions: at most 512 fit).
    """

    def values(n: int) -> int:
        return n_heads * n * (n + n_draws * min(n - 1, NULL_QUERIES))

    if values(n_positions) <= MAX_KERNEL_VALUES:
        return
    fit = next(
        (
            n
            for n in range(n_positions - 1, 1, -1)  # 2 positions at least (POSITIONS)
            if values(n) <= MAX_KERNEL_VALUES
        ),
        None,
    )
    msg = (
        f"The kernels of {n_heads:,} heads over {n_positions:,} positions, with {n_draws} null "
        f"draws, are {values(n_positions):,} values, above the {MAX_KERNEL_VALUES:,} a layer's "
        "heads are computed over: "
        + (
            f"analyse fewer positions (n_positions: at most {fit:,} fit)."
            if fit
            else "no number of positions fits so many heads."
        )
    )
    raise Refused(msg)


#: Query rows per block (ALiBi, T5: a head's): a causal block of rows a … b − 1 needs keys
#: 0 … b − 1 only, so the unseen half of a decoder's kernel is never computed; a block is
#: 128 x n floats.
_BLOCK = 128
#: Kernel values of one block of a learned layer's heads, all heads at once (4 MB): each numpy
#: call then serves every head, and a GPT-2's blocks are 42 rows, whose keys ahead (computed,
#: then masked) are a third of 128 rows'.
_BLOCK_VALUES = 2**19


def _ahead(rows: np.ndarray, width: int) -> np.ndarray:
    """Which keys ``rows[0] … width − 1`` are ahead of each query of `rows` (ascending). The
    keys before the first query are behind every query: masks need only these columns (a
    decoder's block of consecutive rows: its last len(rows) columns, not all of it)."""
    return np.arange(rows[0], width)[None, :] > rows[:, None]


def _row_numbers(
    kernel: np.ndarray,
    rows: np.ndarray,
    causal: bool,
    window: int,
    weights: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per query row of `kernel` (heads, rows, width) or (rows, width), rows `rows` (ascending)
    over keys 0 … width − 1; overwritten: the attention of the kernel alone on itself, the
    previous and first position, within the window, its mean distance, its entropy span.
    `weights` (the kernel's shape; overwritten) holds the attention weights when given."""
    width = kernel.shape[-1]
    keys = np.arange(width, dtype=np.float64)
    first = rows[0]
    ahead = _ahead(rows, width)
    if causal:  # keys after the query are not seen: −∞, whose exp is 0 (and as fast as any
        np.copyto(kernel[..., first:], -np.inf, where=ahead)  # number's; −1e300's: 2x slower)
    top = kernel.max(axis=-1)
    kernel -= top[..., None]
    weights = np.exp(kernel, out=weights)
    if causal:  # 0 · −∞ is NaN: the unseen logits as 0 in Σ_j w (K − top) below
        np.copyto(kernel[..., first:], 0.0, where=ahead)
    z = weights.sum(axis=-1)
    # Σ_j A log A = Σ_j w (K − top) / z − log z.
    entropy = np.log(z) - np.vecdot(weights, kernel) / z
    # The band |i − j| ≤ window of every row at once (rows, Δ): O(rows · window).
    k = np.arange(len(rows))
    j = rows[:, None] - np.arange(0 if causal else -window, window + 1)[None, :]
    inside = (j >= 0) & (j < width)
    band = weights[..., k[:, None], np.clip(j, 0, width - 1)]
    local = np.where(inside, band, 0.0).sum(axis=-1)
    distance = rows * z - weights @ keys  # Σ_j w (i − j): a decoder's seen keys are behind
    if not causal:  # |i − j| = (i − j) + 2 (j − i) for the keys ahead (all from `first` on),
        tail = np.multiply(weights[..., first:], ahead, out=kernel[..., first:])  # in `kernel`
        distance += 2 * (tail @ keys[first:] - rows * tail.sum(axis=-1))
    return {
        "attention_self": weights[..., k, rows] / z,
        "attention_previous": weights[..., k, np.maximum(rows - 1, 0)] / z,
        "attention_first": weights[..., 0] / z,
        "attention_local": local / z,
        "mean_distance": distance / z,
        "entropy_span": np.exp(entropy),
    }


def _offset_counts(rows: np.ndarray, n: int, causal: bool) -> np.ndarray:
    """How many (query, key) pairs of queries `rows` the attention sees at each offset
    Δ = −(n − 1) … n − 1."""
    if len(rows) == n:  # every query: n − |Δ| pairs at Δ (none ahead of a causal query)
        offsets = np.arange(-(n - 1), n)
        return np.where((offsets >= 0) | (not causal), n - np.abs(offsets), 0).astype(np.float64)
    offset = rows[:, None] - np.arange(n)[None, :]
    seen = offset >= 0 if causal else np.ones(offset.shape, dtype=bool)
    return np.bincount((offset + n - 1)[seen], minlength=2 * n - 1).astype(np.float64)


def _toeplitz(sums: np.ndarray, squares: float, counts: np.ndarray) -> tuple[np.ndarray, float]:
    """The offset profile m(Δ) (NaN where no pair is seen) and the share of the kernel's
    variance it explains, from the kernel's sums per offset and sum of squares."""
    with np.errstate(invalid="ignore", divide="ignore"):
        profile = np.where(counts > 0, sums / counts, np.nan)
    count = counts.sum()
    mean = sums.sum() / count
    total = squares - count * mean * mean
    explained = np.nansum(counts * np.nan_to_num(profile) ** 2) - count * mean * mean
    return profile, (explained / total if total > 0 else math.nan)


def _pattern(found: list[tuple[np.ndarray, dict[str, np.ndarray]]]) -> dict[str, np.ndarray]:
    """The `PATTERN_NUMBERS` (but the Toeplitz share) from row blocks' (rows, `_row_numbers`),
    averaged over queries i ≥ 1 (query 0 of a decoder sees only itself), per head when the
    blocks held heads."""
    return {
        name: np.concatenate(
            [numbers[name][..., rows >= 1] for rows, numbers in found], axis=-1
        ).mean(axis=-1)
        for name in found[0][1]
    }


def _row_blocks(rows: np.ndarray, size: int = _BLOCK) -> list[np.ndarray]:
    return [rows[a : a + size] for a in range(0, len(rows), size)]


def _null_rows(n: int) -> np.ndarray:
    """The queries the null is computed on (see `NULL_QUERIES`)."""
    if n - 1 <= NULL_QUERIES:
        return np.arange(1, n)
    return np.unique(np.linspace(1, n - 1, NULL_QUERIES).round().astype(np.int64))


def _check_available(n_available: int, n_positions: int | None) -> int:
    """The positions analysed: `n_positions`, or all the layer has (at most `MAX_POSITIONS`);
    refused when the layer has fewer (the bound itself is checked by `bounded`)."""
    n = min(n_available, MAX_POSITIONS) if n_positions is None else n_positions
    if n > n_available:
        msg = (
            f"n_positions is {n}; the layer's table has {n_available} positions: choose 2 to "
            f"{min(n_available, MAX_POSITIONS)}."
        )
        raise LoadError(msg)
    return n


@records_params
@bounded(
    n_positions=Bound(POSITIONS.low, POSITIONS.high, optional=True),
    local_window=WINDOW,
    n_draws=DRAWS,
    seed=SEED,
)
def learned_heads(
    inputs: np.ndarray,
    wq: np.ndarray,
    wk: np.ndarray,
    bq: np.ndarray | None = None,
    bk: np.ndarray | None = None,
    causal: bool = True,
    logit_scale: float | None = None,
    *,
    n_positions: int | None = None,
    local_window: int = 8,
    n_draws: int = 8,
    seed: int = 0,
) -> PatternHeads:
    """Each head's positional kernel from a learned table, its attention pattern and numbers.

    Parameters
    ----------
    inputs : ndarray of shape (n_available, hidden)
        The layer's input for each position alone, already through the model's normalisation
        (x_i; see :class:`Norm`).
    wq, wk : ndarray of shape (n_heads, d, hidden) and (n_kv_heads, d, hidden)
        Each head's query and key rows (``q = x @ wq[h].T + bq[h]``).
    bq, bk : ndarray of shape (n_heads, d) and (n_kv_heads, d), optional
        The projections' biases.
    causal : bool
        A decoder: query i sees keys j ≤ i.
    logit_scale : float, optional
        What multiplies q·k (default 1/√d).
    n_positions : int, optional
        Positions analysed, 0 … n − 1 (default all, at most `MAX_POSITIONS`).
    local_window : int
        |i − j| counted as local.
    n_draws : int
        Null draws: query and key rows permuted across heads (0: no null, no labels).
    seed : int
        Seed of the null's permutations.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> r = learned_heads(rng.normal(size=(16, 8)), rng.normal(size=(2, 4, 8)),
    ...                   rng.normal(size=(2, 4, 8)), n_draws=2)
    >>> r.offset_profile.shape, sorted(r.null)[:2], len(r.labels)
    ((2, 31), ['attention_first', 'attention_local'], 2)
    """
    n = _check_available(len(inputs), n_positions)
    n_heads, d, _ = wq.shape
    n_kv = wk.shape[0]
    if n_heads % n_kv:
        msg = f"{n_heads} query heads cannot share {n_kv} key heads evenly."
        raise LoadError(msg)
    check_work(n_heads, n, n_draws)
    check_budget(  # x, q, k in float64
        8 * n * (2 * inputs.shape[1] + (n_heads + n_kv) * d),
        f"The queries and keys of {n} positions of this layer (n_positions: analyse fewer "
        "positions)",
    )
    scale = 1 / math.sqrt(d) if logit_scale is None else logit_scale
    x = np.asarray(inputs[:n], dtype=np.float64)
    q = x @ np.asarray(wq, np.float64).reshape(n_heads * d, -1).T
    # k's columns as rows (n_kv · d, n): any key head's keys, permuted or not, are whole rows.
    k_columns = np.asarray(wk, np.float64).reshape(n_kv * d, -1) @ x.T
    if bq is not None:
        q += np.asarray(bq, np.float64).ravel()
    if bk is not None:
        k_columns += np.asarray(bk, np.float64).reshape(-1, 1)
    q *= scale
    kv_head = np.arange(n_heads) // (n_heads // n_kv)

    # A block's kernels and weights, made in these two buffers again and again: a new 4 MB
    # array each time costs its pages' first touch (a GPT-2 layer: 11,000 page faults, 50 ms).
    most = max(1, _BLOCK_VALUES // (n_heads * n))
    buffers = np.empty((2, n_heads * most * n))

    def numbers_of(qs: np.ndarray, ks: np.ndarray, rows: np.ndarray, size: int) -> tuple:
        """Each head's numbers and offset profile over query `rows` (all, or the null's) in
        blocks of `size` rows, from its queries at `rows` (heads, rows, d) and its key head's
        keys' columns (heads, d, n)."""
        counts = totals if len(rows) == n else _offset_counts(rows, n, causal)
        sums, squares = np.zeros((n_heads, 2 * n - 1)), np.zeros(n_heads)
        found = []
        for at, block in zip(range(0, len(rows), size), _row_blocks(rows, size), strict=True):
            width = block[-1] + 1 if causal else n
            shape = (n_heads, len(block), width)
            kernel, weights = (b[: math.prod(shape)].reshape(shape) for b in buffers)
            np.matmul(qs[:, at : at + size], ks[..., :width], out=kernel)
            if causal:  # the keys ahead of a query as 0: nothing in the sums of squares
                np.copyto(kernel[..., block[0] :], 0.0, where=_ahead(block, width))
            squares += np.vecdot(kernel, kernel).sum(axis=-1)
            # Each pair by its offset index i − j + n − 1 (a decoder's keys ahead, 0, in the
            # offsets below 0, which are dropped).
            index = (block[:, None] - np.arange(width)[None, :] + n - 1).ravel()
            for h in range(n_heads):
                sums[h] += np.bincount(index, weights=kernel[h].ravel(), minlength=2 * n - 1)
            found.append((block, _row_numbers(kernel, block, causal, local_window, weights)))
        seen = counts > 0
        toeplitz = [
            _toeplitz(np.where(seen, s, 0.0), sq, counts)
            for s, sq in zip(sums, squares, strict=True)
        ]
        numbers = _pattern(found) | {"toeplitz_share": np.array([t[1] for t in toeplitz])}
        return numbers, [t[0] for t in toeplitz]

    everyone = np.arange(n)
    # Views, not copies (a transposing copy of 6 MB is ~10 ms): any layout serves `kernel`.
    queries = q.reshape(n, n_heads, d).transpose(1, 0, 2)
    keys = k_columns.reshape(n_kv, d, n).transpose(0, 2, 1)
    totals = _offset_counts(everyone, n, causal)
    rng = np.random.default_rng(seed)
    sample = _null_rows(n)
    # One BLAS thread: the products are small (n x d x n), and a second thread's hand-offs cost
    # more than they save on a shared 2-core machine (as for the probes' fits).
    with threadpool_limits(1, user_api="blas"):
        ks = k_columns.reshape(n_kv, d, n)
        ks = ks[kv_head] if n_kv < n_heads else ks  # a copy only when heads share keys
        numbers, profile = numbers_of(queries, ks, everyone, most)
        draws, size = [], min(most, -(-len(sample) // _NULL_BLOCKS))
        for _ in range(n_draws):
            q_rows, k_rows = rng.permutation(n_heads * d), rng.permutation(n_kv * d)
            qs = q[sample][:, q_rows].reshape(len(sample), n_heads, d).transpose(1, 0, 2)
            ks = k_columns[k_rows.reshape(n_kv, d)[kv_head].ravel()].reshape(n_heads, d, n)
            draws.append(numbers_of(qs, ks, sample, size)[0])
            del ks  # before the next draw's
    null = {name: np.array([draw[name] for draw in draws]) for name in numbers} if draws else {}
    return PatternHeads(
        kind="learned",
        causal=causal,
        n_positions=n,
        kv_head=kv_head,
        queries=queries,
        keys=keys,
        offset_bias=None,
        offsets=np.arange(-(n - 1), n),
        offset_profile=np.array(profile),
        numbers=numbers,
        null=null,
        labels=_labels(numbers, null),
    )


def alibi_offset_bias(slopes: np.ndarray, n: int) -> np.ndarray:
    """ALiBi's bias b_h(Δ) = −m_h · |Δ| for Δ = −(n − 1) … n − 1 (a decoder sees Δ ≥ 0).

    >>> alibi_offset_bias(np.array([0.5]), 3).tolist()
    [[-1.0, -0.5, 0.0, -0.5, -1.0]]
    """
    offsets = np.arange(-(n - 1), n)
    return 0.0 - np.outer(slopes, np.abs(offsets))


def t5_offset_bias(
    weight: np.ndarray, n: int, *, bidirectional: bool, num_buckets: int, max_distance: int
) -> np.ndarray:
    """T5's learned bias b_h(Δ) for Δ = i − j = −(n − 1) … n − 1, from its bucket table
    ``relative_attention_bias`` [num_buckets, n_heads] (T5's relative position is key −
    query = −Δ)."""
    from posviz.schemes.relative import t5_buckets

    offsets = np.arange(-(n - 1), n)
    buckets = t5_buckets(
        -offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    return np.asarray(weight, dtype=np.float64)[buckets].T


@records_params
@bounded(local_window=WINDOW, n_draws=DRAWS, seed=SEED)
def offset_bias_heads(
    offset_bias: np.ndarray,
    causal: bool = True,
    kind: str = "alibi",
    *,
    local_window: int = 8,
    n_draws: int = 8,
    seed: int = 0,
) -> PatternHeads:
    """The attention pattern and numbers of positional terms that are functions of the
    offset alone: ALiBi's −m_h|Δ| (:func:`alibi_offset_bias`; nothing learned, so no null)
    and T5's learned bias per bucket (:func:`t5_offset_bias`; its null permutes each
    offset's bias across heads).

    Parameters
    ----------
    offset_bias : ndarray of shape (n_heads, 2n − 1)
        b_h(Δ) for Δ = −(n − 1) … n − 1.
    causal : bool
    kind : {"alibi", "relative_bias"}
    local_window, n_draws, seed
        As :func:`learned_heads` (ALiBi draws no null whatever `n_draws`).
    """
    bias = np.asarray(offset_bias, dtype=np.float64)
    n_heads, width = bias.shape
    n = (width + 1) // 2
    POSITIONS.check("The offset bias' positions", n)
    check_work(n_heads, n, 0 if kind == "alibi" else n_draws)
    i = np.arange(n)
    totals = _offset_counts(i, n, causal)

    def numbers_of(table: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        counts = totals if len(rows) == n else _offset_counts(rows, n, causal)
        found = []
        for h in range(n_heads):
            kernels = ((b, table[h][b[:, None] - i[None, :] + n - 1]) for b in _row_blocks(rows))
            blocks = [(b, _row_numbers(k, b, causal, local_window)) for b, k in kernels]
            seen = counts > 0  # a function of Δ alone: its profile is the bias itself
            sums = np.where(seen, table[h] * counts, 0.0)
            squares = float(np.sum(np.where(seen, table[h] ** 2 * counts, 0.0)))
            share = _toeplitz(sums, squares, counts)[1]
            found.append(_pattern(blocks) | {"toeplitz_share": share})
        return {name: np.array([f[name] for f in found]) for name in PATTERN_NUMBERS}

    numbers = numbers_of(bias, i)
    profile = np.where(totals > 0, bias, np.nan)
    draws = []
    if kind != "alibi":
        rng = np.random.default_rng(seed)
        for _ in range(n_draws):
            order = np.argsort(rng.random(bias.shape), axis=0)  # per offset, across heads
            draws.append(numbers_of(np.take_along_axis(bias, order, axis=0), _null_rows(n)))
    null = {name: np.array([draw[name] for draw in draws]) for name in numbers} if draws else {}
    return PatternHeads(
        kind=kind,
        causal=causal,
        n_positions=n,
        kv_head=np.arange(n_heads),
        queries=None,
        keys=None,
        offset_bias=bias,
        offsets=np.arange(-(n - 1), n),
        offset_profile=profile,
        numbers=numbers,
        null=null,
        labels=_labels(numbers, null, learned=kind != "alibi"),
    )


@records_params
@bounded(n_positions=POSITIONS, local_window=WINDOW, n_draws=DRAWS, seed=SEED)
def alibi_heads(
    slopes: np.ndarray,
    *,
    n_positions: int = 512,
    local_window: int = 8,
    n_draws: int = 8,
    seed: int = 0,
) -> PatternHeads:
    """ALiBi's per-head view: the pattern of −m_h·Δ over `n_positions` positions of a decoder
    (:func:`offset_bias_heads`; nothing is learned, so no null draws whatever `n_draws`)."""
    bias = alibi_offset_bias(np.asarray(slopes, dtype=np.float64), n_positions)
    return offset_bias_heads(bias, True, "alibi", local_window=local_window)


@records_params
@bounded(n_positions=POSITIONS, local_window=WINDOW, n_draws=DRAWS, seed=SEED)
def t5_heads(
    weight: np.ndarray,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    *,
    n_positions: int = 512,
    local_window: int = 8,
    n_draws: int = 8,
    seed: int = 0,
) -> PatternHeads:
    """T5's per-head view: its learned bias per bucket (`weight` [num_buckets, n_heads]) as a
    kernel over `n_positions` positions (:func:`t5_offset_bias`, :func:`offset_bias_heads`)."""
    bias = t5_offset_bias(
        weight, n_positions, bidirectional=bidirectional, num_buckets=num_buckets,
        max_distance=max_distance,
    )  # fmt: skip
    return offset_bias_heads(
        bias, not bidirectional, "relative_bias", local_window=local_window, n_draws=n_draws,
        seed=seed,
    )  # fmt: skip


# --- rotary ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RotaryHeads:
    """How each head of a rotary layer spreads its query/key norm over frequency pairs.

    Attributes
    ----------
    frequencies : RotaryFrequencies
        θ_k of each pair as applied, its band and wavelength.
    kv_head : ndarray of int, shape (n_heads,)
        g(h) = h // (n_heads / n_kv_heads).
    usage : ndarray of shape (n_heads, n_pairs)
        u_h(k) on the stored weights, k = 0 the fastest pair; not normalised.
    usage_folded : ndarray of shape (n_heads, n_pairs)
        The same with the input norm's gain (and a q/k norm's gain) folded into the rows.
    nope : ndarray of shape (n_heads,)
        ‖W_Q columns rot:d of head h‖ · ‖W_K columns rot:d of g(h)‖: the position-free part of
        a partially rotary head (0 when every column rotates).
    distances : ndarray of int, shape (n_distances,)
    decay : ndarray of shape (n_heads, n_distances)
        B_h(Δ) = Σ_k u_h(k) cos(θ_k Δ) / Σ_k u_h(k).
    numbers : dict of str to ndarray of shape (n_heads,)
        `ROTARY_NUMBERS`.
    null : dict of str to ndarray of shape (n_draws, n_heads)
        The numbers with query rows (and key rows) permuted across the heads' rotating rows.
    labels : tuple of (str or None)
    """

    frequencies: RotaryFrequencies
    kv_head: np.ndarray
    usage: np.ndarray
    usage_folded: np.ndarray
    nope: np.ndarray
    distances: np.ndarray
    decay: np.ndarray
    numbers: dict[str, np.ndarray]
    null: dict[str, np.ndarray]
    labels: tuple[str | None, ...]
    params: dict = field(default_factory=dict)

    kind = "rotary"

    @property
    def n_heads(self) -> int:
        return len(self.kv_head)

    @property
    def usage_share(self) -> np.ndarray:
        """u_h(k) / Σ_k u_h(k)."""
        return self.usage / self.usage.sum(axis=1, keepdims=True)

    def spread(self) -> dict[str, dict[str, float]]:
        return _spread(self.null)

    def to_frame(self) -> pd.DataFrame:
        """One row per head: its key head, label, numbers, and each number's null max."""
        return _head_frame(self)

    def usage_table(self) -> pd.DataFrame:
        """One row per head and pair: θ_k, wavelength, band, u_h(k) stored and folded."""
        import pandas as pd

        f = self.frequencies
        n_pairs = self.usage.shape[1]
        return pd.DataFrame(
            {
                "head": np.repeat(np.arange(self.n_heads), n_pairs),
                "pair": np.tile(np.arange(n_pairs), self.n_heads),
                "inv_freq": np.tile(f.inv_freq, self.n_heads),
                "wavelength": np.tile(f.wavelengths, self.n_heads),
                "band": np.tile(f.band, self.n_heads),
                "usage": self.usage.ravel(),
                "usage_folded": self.usage_folded.ravel(),
            }
        )


def _pair_norms(rows: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """‖(row a_k, row b_k)‖ per head and pair, from each row's squared norm (heads, d)."""
    return np.sqrt(rows[:, a] + rows[:, b])


@records_params
@bounded(
    fast_wavelength=Bound(0, None, whole=False),
    max_distance=DECAY_DISTANCES,
    n_draws=DRAWS,
    seed=SEED,
)
def rotary_heads(
    wq: np.ndarray,
    wk: np.ndarray,
    frequencies: RotaryFrequencies,
    input_gain: np.ndarray | None = None,
    q_gain: np.ndarray | None = None,
    k_gain: np.ndarray | None = None,
    *,
    fast_wavelength: float = 10.0,
    max_distance: int | None = None,
    n_draws: int = 8,
    seed: int = 0,
) -> RotaryHeads:
    """Each rotary head's usage of each frequency pair, its shares, wavelength and B_h(Δ).

    Parameters
    ----------
    wq, wk : ndarray of shape (n_heads, d, hidden) and (n_kv_heads, d, hidden)
        Each head's query and key rows as stored, in the head's own column order (rotate_half
        or interleaved: `frequencies.spec.interleaved`); columns ``rotary_dim : d`` do not
        rotate.
    frequencies : RotaryFrequencies
        The layer's θ_k as applied (:func:`posviz.schemes.rotary.rotary_frequencies`: its
        `context` is recorded with these params).
    input_gain : ndarray of shape (hidden,), optional
        The input norm's gain (Gemma's 1 + w), folded into `usage_folded`.
    q_gain, k_gain : ndarray of shape (n_heads, d) and (n_kv_heads, d), optional
        A q/k norm's gain per head and column (Gemma-3, OLMo-2, Phi, StableLM), folded too.
    fast_wavelength : float
        Pairs whose wavelength is below this turn more than once within it ("fast").
    max_distance : int, optional
        Largest Δ of B_h(Δ) (default the context the frequencies apply at, else 4096).
    n_draws, seed
        The null: each draw permutes the query rows, and independently the key rows, across
        every head's rotating rows.

    Examples
    --------
    >>> from posviz.schemes.rotary import RotarySpec, rotary_frequencies
    >>> f = rotary_frequencies(RotarySpec("default", 8, 10000.0), context=64)
    >>> rng = np.random.default_rng(0)
    >>> r = rotary_heads(rng.normal(size=(4, 8, 16)), rng.normal(size=(2, 8, 16)), f)
    >>> r.usage.shape, r.kv_head.tolist(), r.params["context"]
    ((4, 4), [0, 0, 1, 1], 64)
    """
    spec = frequencies.spec
    n_heads, d, _ = wq.shape
    n_kv = wk.shape[0]
    rot = spec.rotary_dim
    if rot > d or n_heads % n_kv:
        msg = (
            f"A rotary width of {rot} does not fit heads of {d} columns, or {n_heads} query "
            f"heads cannot share {n_kv} key heads."
        )
        raise LoadError(msg)
    kv_head = np.arange(n_heads) // (n_heads // n_kv)
    a, b = pair_columns(rot, interleaved=spec.interleaved)

    def squared_rows(w: np.ndarray, gain: np.ndarray | None, head_gain: np.ndarray | None):
        """Each row's squared norm, gains folded in; a head at a time in float64 (a Llama-8B
        layer's q is 64 MB as float32: never copied whole)."""
        g2 = None if gain is None else np.asarray(gain, np.float64) ** 2
        out = np.empty(w.shape[:2])
        for h in range(len(w)):
            rows = np.asarray(w[h], dtype=np.float64)
            out[h] = np.einsum("dc,dc->d", rows, rows) if g2 is None else (rows * rows) @ g2
        if head_gain is not None:
            out *= np.asarray(head_gain, np.float64) ** 2
        return out

    q_rows, k_rows = squared_rows(wq, None, None), squared_rows(wk, None, None)
    usage = _pair_norms(q_rows, a, b) * _pair_norms(k_rows, a, b)[kv_head]
    folded_q = squared_rows(wq, input_gain, q_gain)
    folded_k = squared_rows(wk, input_gain, k_gain)
    usage_folded = _pair_norms(folded_q, a, b) * _pair_norms(folded_k, a, b)[kv_head]
    nope = np.sqrt(q_rows[:, rot:].sum(axis=1)) * np.sqrt(k_rows[:, rot:].sum(axis=1))[kv_head]

    with np.errstate(divide="ignore"):
        wavelengths = frequencies.wavelengths  # infinite for a pair that does not rotate
    original = spec.pretraining_context
    fast = wavelengths < fast_wavelength
    slow = wavelengths > original if original else np.zeros_like(fast)
    turning = np.isfinite(wavelengths)
    log_wavelength = np.log(np.where(turning, wavelengths, 1.0))

    def numbers_of(u: np.ndarray, nope_part: np.ndarray) -> dict[str, np.ndarray]:
        total = u.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return {
                "fast_share": u[:, fast].sum(axis=1) / total,
                "slow_share": u[:, slow].sum(axis=1) / total,
                "weighted_wavelength": np.exp(u @ log_wavelength / u[:, turning].sum(axis=1)),
                "nope_share": nope_part / (nope_part + total),
            }

    numbers = numbers_of(usage, nope)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_draws):
        pq = rng.permutation(q_rows[:, :rot].ravel()).reshape(n_heads, rot)
        pk = rng.permutation(k_rows[:, :rot].ravel()).reshape(n_kv, rot)
        u = _pair_norms(pq, a, b) * _pair_norms(pk, a, b)[kv_head]
        draws.append(numbers_of(u, nope))
    null = {
        name: np.array([draw[name] for draw in draws]) for name in numbers if name != "nope_share"
    }
    null = null if draws else {}
    stop = max_distance or frequencies.context or 4096
    dense = np.arange(min(stop, 64) + 1)
    sparse = np.geomspace(64, stop, 1024) if stop > 64 else np.empty(0)
    distances = np.unique(np.concatenate([dense, np.round(sparse)])).astype(np.int64)
    cosines = np.cos(np.outer(frequencies.inv_freq, distances))
    with np.errstate(invalid="ignore", divide="ignore"):
        decay = (usage @ cosines) / usage.sum(axis=1, keepdims=True)
    return RotaryHeads(
        frequencies=frequencies,
        kv_head=kv_head,
        usage=usage,
        usage_folded=usage_folded,
        nope=nope,
        distances=distances,
        decay=decay,
        numbers=numbers,
        null=null,
        labels=_labels(numbers, null),
    )
