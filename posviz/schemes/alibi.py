"""How an ALiBi model biases attention against distance: one slope per head.

Slopes by the ALiBi paper's reference recursion, which is BLOOM's ``build_alibi_tensor`` and
(with ``alibi_bias_max``) MPT's ``gen_slopes``: a geometric sequence for the largest power of
2 of heads, the odd terms of the next power's sequence for the rest. The shortcut
``2 ** (-8 (h + 1) / n)`` agrees with it only when n is a power of 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from posviz._params import Bound, bounded, check_budget, records_params

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BIAS_MAX", "DISTANCES", "FALLS", "HEADS", "AlibiBias", "alibi_bias", "alibi_slopes"]

#: Logits by which the bias has fallen at the distances reported per head.
FALLS = (1, 5, 10)
#: Heads (BLOOM: 112; far past any model), distances (the bias is drawn to at most 65,536;
#: heads x distances within `posviz._params.MAX_RESULT_BYTES`), and MPT's alibi_bias_max (8 in
#: every model; beyond 64 the last head's slope is below 2**-64: no bias at any distance).
HEADS = Bound(1, 4096)
DISTANCES = Bound(1, 65536)
BIAS_MAX = Bound(0.1, 64.0, whole=False)


@bounded(n_heads=HEADS, alibi_bias_max=BIAS_MAX)
def alibi_slopes(n_heads: int, *, alibi_bias_max: float = 8.0) -> np.ndarray:
    """Each head's slope, in the order the heads are stored.

    Parameters
    ----------
    n_heads : int
        Attention heads (any number within `HEADS`).
    alibi_bias_max : float
        MPT's ``alibi_bias_max`` (8 in BLOOM and the paper): the power-of-2 heads' slopes are
        ``2 ** (-alibi_bias_max · k / n)``.

    Raises
    ------
    Refused
        If `n_heads` or `alibi_bias_max` is outside `HEADS` or `BIAS_MAX`.

    Examples
    --------
    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> alibi_slopes(6).round(4).tolist()
    [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125]
    """
    power = 2 ** math.floor(math.log2(n_heads))
    slopes = 2.0 ** (-alibi_bias_max * np.arange(1, power + 1) / power)
    odd = np.arange(1, 2 * (n_heads - power), 2)
    extra = 2.0 ** (-alibi_bias_max / 2 * odd / power)
    return np.concatenate([slopes, extra])


@dataclass(frozen=True)
class AlibiBias:
    """ALiBi's bias per head against the distance from query back to key.

    Attributes
    ----------
    slopes : ndarray of shape (n_heads,)
    distances : ndarray of int64, shape (n_distances,)
        0 … max_distance.
    bias : ndarray of shape (n_heads, n_distances)
        ``−slope · distance`` (BLOOM adds ``slope · key_position``: the same after softmax).
    falls : ndarray of shape (n_heads, len(FALLS))
        Distance at which each head's bias has fallen by 1, 5 and 10 logits: ``x / slope``.
    """

    slopes: np.ndarray
    distances: np.ndarray
    bias: np.ndarray
    falls: np.ndarray
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per head: its slope and the distances where its bias has fallen by
        `FALLS` logits."""
        import pandas as pd

        frame = pd.DataFrame({"head": np.arange(len(self.slopes)), "slope": self.slopes})
        for k, fall in enumerate(FALLS):
            frame[f"distance for -{fall} logits"] = self.falls[:, k]
        return frame


@records_params
@bounded(n_heads=HEADS, alibi_bias_max=BIAS_MAX, max_distance=DISTANCES)
def alibi_bias(n_heads: int, *, alibi_bias_max: float = 8.0, max_distance: int = 2048) -> AlibiBias:
    """Slopes, bias against distance, and where each head's bias has fallen by `FALLS` logits.

    Raises
    ------
    Refused
        If an argument is out of its bound, or the bias (heads x distances) would take more
        than `posviz._params.MAX_RESULT_BYTES`.

    Examples
    --------
    >>> b = alibi_bias(2, max_distance=4)
    >>> b.bias[0].tolist()
    [0.0, -0.0625, -0.125, -0.1875, -0.25]
    >>> b.falls[0].tolist()
    [16.0, 80.0, 160.0]
    """
    check_budget(
        8 * n_heads * (max_distance + 1),
        f"The bias of {n_heads:,} heads to distance {max_distance:,}",
    )
    slopes = alibi_slopes(n_heads, alibi_bias_max=alibi_bias_max)
    distances = np.arange(max_distance + 1, dtype=np.int64)
    bias = 0.0 - np.outer(slopes, distances)  # 0.0, not -0.0, at distance 0
    falls = np.asarray(FALLS, dtype=np.float64)[None, :] / slopes[:, None]
    return AlibiBias(slopes, distances, bias, falls)
