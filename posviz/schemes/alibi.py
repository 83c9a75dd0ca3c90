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

from posviz._params import records_params
from posviz.embedding import LoadError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FALLS", "AlibiBias", "alibi_bias", "alibi_slopes"]

#: Logits by which the bias has fallen at the distances reported per head.
FALLS = (1, 5, 10)


def alibi_slopes(n_heads: int, *, alibi_bias_max: float = 8.0) -> np.ndarray:
    """Each head's slope, in the order the heads are stored.

    Parameters
    ----------
    n_heads : int
        Attention heads (any positive number).
    alibi_bias_max : float
        MPT's ``alibi_bias_max`` (8 in BLOOM and the paper): the power-of-2 heads' slopes are
        ``2 ** (-alibi_bias_max · k / n)``.

    Raises
    ------
    LoadError
        If `n_heads` is not positive or `alibi_bias_max` is not a positive number.

    Examples
    --------
    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> alibi_slopes(6).round(4).tolist()
    [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125]
    """
    if isinstance(n_heads, bool) or not isinstance(n_heads, int | np.integer) or n_heads < 1:
        msg = f"ALiBi needs a positive number of attention heads, not {n_heads!r}."
        raise LoadError(msg)
    if not (math.isfinite(alibi_bias_max) and alibi_bias_max > 0):
        msg = f"alibi_bias_max must be a positive number, not {alibi_bias_max!r}."
        raise LoadError(msg)
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
def alibi_bias(n_heads: int, *, alibi_bias_max: float = 8.0, max_distance: int = 2048) -> AlibiBias:
    """Slopes, bias against distance, and where each head's bias has fallen by `FALLS` logits.

    Examples
    --------
    >>> b = alibi_bias(2, max_distance=4)
    >>> b.bias[0].tolist()
    [0.0, -0.0625, -0.125, -0.1875, -0.25]
    >>> b.falls[0].tolist()
    [16.0, 80.0, 160.0]
    """
    slopes = alibi_slopes(n_heads, alibi_bias_max=alibi_bias_max)
    distances = np.arange(max_distance + 1, dtype=np.int64)
    bias = 0.0 - np.outer(slopes, distances)  # 0.0, not -0.0, at distance 0
    falls = np.asarray(FALLS, dtype=np.float64)[None, :] / slopes[:, None]
    return AlibiBias(slopes, distances, bias, falls)
