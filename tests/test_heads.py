"""Per-head position numbers against an independent dense computation (einsum on the full
matrices, float64, to 1e-9), planted structure found exactly, and a null that labels nothing
on random weights."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posviz._params import SEED, Refused, bounds_of
from posviz.embedding import LoadError
from posviz.heads import (
    DRAWS,
    LABELS,
    MAX_POSITIONS,
    NULL_QUERIES,
    Norm,
    alibi_heads,
    alibi_offset_bias,
    learned_heads,
    offset_bias_heads,
    pair_columns,
    rotary_heads,
    t5_heads,
    t5_offset_bias,
)
from posviz.schemes.alibi import alibi_slopes
from posviz.schemes.relative import t5_buckets
from posviz.schemes.rotary import RotarySpec, rotary_frequencies

TOLERANCE = 1e-9


def dense_numbers(kernel: np.ndarray, causal: bool, window: int = 8) -> dict[str, np.ndarray]:
    """The pattern numbers of kernels (heads, n, n), written out on the full matrices."""
    n_heads, n, _ = kernel.shape
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    seen = j <= i if causal else np.ones((n, n), dtype=bool)
    logits = np.where(seen, kernel, -np.inf)
    a = np.exp(logits - logits.max(axis=2, keepdims=True))
    a /= a.sum(axis=2, keepdims=True)
    q = slice(1, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(a > 0, a * np.log(a), 0.0)
    out = {
        "attention_self": np.einsum("hii->hi", a)[:, q].mean(1),
        "attention_previous": np.array([np.diagonal(a[h], -1).mean() for h in range(n_heads)]),
        "attention_first": a[:, q, 0].mean(1),
        "attention_local": np.einsum("hij,ij->hi", a, np.abs(i - j) <= window)[:, q].mean(1),
        "mean_distance": np.einsum("hij,ij->hi", a, np.abs(i - j))[:, q].mean(1),
        "entropy_span": np.exp(-plogp.sum(2))[:, q].mean(1),
    }
    profile = np.full((n_heads, 2 * n - 1), np.nan)
    share = []
    for h in range(n_heads):
        for delta in range(-(n - 1), n):
            if not causal or delta >= 0:
                profile[h, delta + n - 1] = np.diagonal(kernel[h], -delta).mean()
        toeplitz = profile[h][i - j + n - 1]
        k = kernel[h][seen]
        share.append(1 - ((k - toeplitz[seen]) ** 2).sum() / ((k - k.mean()) ** 2).sum())
    out["toeplitz_share"] = np.array(share)
    return out | {"profile": profile}


def random_layer(
    seed: int = 0, n: int = 40, hidden: int = 24, heads: int = 4, kv: int = 2, d: int = 6
):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(n, hidden)),
        rng.normal(size=(heads, d, hidden)) * 0.4,
        rng.normal(size=(kv, d, hidden)) * 0.4,
        rng.normal(size=(heads, d)),
        rng.normal(size=(kv, d)),
    )


@pytest.mark.parametrize("causal", [True, False])
def test_learned_numbers_equal_the_dense_computation(causal):
    x, wq, wk, bq, bk = random_layer()
    result = learned_heads(x, wq, wk, bq, bk, causal, n_draws=2)
    q = np.einsum("nc,hdc->hnd", x, wq) + bq[:, None]
    k = np.einsum("nc,hdc->hnd", x, wk) + bk[:, None]
    kv = np.arange(4) // 2
    kernel = np.einsum("hid,hjd->hij", q, k[kv]) / np.sqrt(6)
    for h in range(4):
        np.testing.assert_allclose(result.kernel(h), kernel[h], atol=TOLERANCE, rtol=0)
        attention = result.attention(h)
        assert np.allclose(attention.sum(1), 1)
    dense = dense_numbers(kernel, causal)
    for name, values in result.numbers.items():
        np.testing.assert_allclose(values, dense[name], atol=TOLERANCE, rtol=0, err_msg=name)
    np.testing.assert_allclose(result.offset_profile, dense["profile"], atol=TOLERANCE, rtol=0)
    assert (result.offsets[0], result.offsets[-1]) == (-39, 39)


def test_the_null_is_the_same_numbers_on_rows_permuted_across_heads():
    x, wq, wk, _, _ = random_layer(n=300)
    result = learned_heads(x, wq, wk, None, None, True, n_draws=3, seed=7)
    rng = np.random.default_rng(7)
    rows = np.unique(np.linspace(1, 299, NULL_QUERIES).round().astype(int))
    q = (x @ wq.reshape(24, -1).T) / np.sqrt(6)
    k = x @ wk.reshape(12, -1).T
    for draw in range(3):
        pq, pk = rng.permutation(24), rng.permutation(12)
        kernel = np.einsum(
            "hid,hjd->hij", q[:, pq].reshape(300, 4, 6).transpose(1, 0, 2),
            k[:, pk].reshape(300, 2, 6).transpose(1, 0, 2)[np.arange(4) // 2],
        )  # fmt: skip
        a = dense_numbers(kernel, True)
        full = dict.fromkeys(a)  # the null averages over the sampled queries only
        logits = np.where(np.tril(np.ones((300, 300), bool)), kernel, -np.inf)[:, rows]
        weights = np.exp(logits - logits.max(2, keepdims=True))
        weights /= weights.sum(2, keepdims=True)
        previous = weights[:, np.arange(len(rows)), rows - 1].mean(1)
        np.testing.assert_allclose(
            result.null["attention_previous"][draw], previous, atol=TOLERANCE
        )
        assert full
    assert result.null["attention_self"].shape == (3, 4)
    again = learned_heads(x, wq, wk, None, None, True, n_draws=3, seed=7)
    np.testing.assert_array_equal(again.null["entropy_span"], result.null["entropy_span"])


def planted_previous_token_layer(n: int = 64, heads: int = 4, seed: int = 0):
    """Positions as 8 sinusoid pairs; head 0 maps position i's query onto position i − 1's
    key (a rotation by one step), the other heads are small random maps."""
    rng = np.random.default_rng(seed)
    omega = np.geomspace(0.1, 2.5, 8)
    angles = np.arange(n)[:, None] * omega
    x = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)  # (n, 16)
    c, s = np.cos(omega), np.sin(omega)
    rotation = np.block([[np.diag(c), np.diag(s)], [-np.diag(s), np.diag(c)]])
    wq = rng.normal(size=(heads, 16, 16)) * 0.1
    wk = rng.normal(size=(heads, 16, 16)) * 0.1
    wq[0], wk[0] = 2.5 * rotation, 2.5 * np.eye(16)
    return x, wq, wk


def test_a_planted_previous_token_head_is_found_and_only_it():
    x, wq, wk = planted_previous_token_layer()
    result = learned_heads(x, wq, wk, n_draws=8)
    assert result.numbers["attention_previous"][0] > 0.5
    assert result.labels == ("previous-token", None, None, None)
    assert result.numbers["toeplitz_share"][0] > 0.99  # a function of i − j alone


def test_random_weights_get_no_label():
    for seed in range(3):
        x, wq, wk, bq, bk = random_layer(seed, n=64)
        for causal in (True, False):
            result = learned_heads(x, wq, wk, bq, bk, causal, n_draws=8, seed=seed)
            assert result.labels == (None,) * 4


def test_norms_are_the_models():
    x = np.random.default_rng(0).normal(size=(5, 8))
    w, b = np.linspace(-1, 1, 8), np.linspace(0, 1, 8)
    centred = x - x.mean(1, keepdims=True)
    layer = centred / np.sqrt(centred.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(Norm("layer_norm", w, b, 1e-5)(x), layer, atol=TOLERANCE)
    gemma = x / np.sqrt((x**2).mean(1, keepdims=True) + 1e-6) * (1 + w)
    np.testing.assert_allclose(Norm("rms_norm", w, None, 1e-6, 1.0)(x), gemma, atol=TOLERANCE)
    np.testing.assert_array_equal(Norm()(x), x)


# --- rotary -----------------------------------------------------------------------------------

LLAMA3 = RotarySpec(
    "llama3", 128, 500000.0, context=131072, original_context=8192, factor=8.0,
    low_freq_factor=1.0, high_freq_factor=4.0,
)  # fmt: skip


def dense_usage(wq, wk, rot, interleaved):
    n_heads, n_kv = len(wq), len(wk)
    a, b = pair_columns(rot, interleaved=interleaved)
    usage = np.zeros((n_heads, rot // 2))
    for h in range(n_heads):
        g = h // (n_heads // n_kv)
        for k in range(rot // 2):
            usage[h, k] = np.linalg.norm(wq[h][[a[k], b[k]]]) * np.linalg.norm(wk[g][[a[k], b[k]]])
    return usage


@pytest.mark.parametrize("interleaved", [False, True])
def test_usage_equals_the_dense_norms(interleaved):
    rng = np.random.default_rng(1)
    spec = RotarySpec("default", 12, 10000.0, interleaved=interleaved, context=512)
    f = rotary_frequencies(spec)
    wq, wk = rng.normal(size=(6, 16, 20)), rng.normal(size=(3, 16, 20))
    gain, q_gain, k_gain = rng.normal(size=20), rng.normal(size=(6, 16)), rng.normal(size=(3, 16))
    r = rotary_heads(wq, wk, f, gain, q_gain, k_gain, n_draws=2)
    usage = dense_usage(wq, wk, 12, interleaved)
    np.testing.assert_allclose(r.usage, usage, atol=TOLERANCE, rtol=0)
    folded = dense_usage(
        wq * gain * q_gain[..., None], wk * gain * k_gain[..., None], 12, interleaved
    )
    np.testing.assert_allclose(r.usage_folded, folded, atol=TOLERANCE, rtol=0)
    g = np.arange(6) // 2
    nope = np.linalg.norm(wq[:, 12:], axis=(1, 2)) * np.linalg.norm(wk[:, 12:], axis=(1, 2))[g]
    np.testing.assert_allclose(r.nope, nope, atol=TOLERANCE)
    share = usage / usage.sum(1, keepdims=True)
    fast, slow = f.wavelengths < 10, f.wavelengths > 512
    np.testing.assert_allclose(r.numbers["fast_share"], share[:, fast].sum(1), atol=TOLERANCE)
    np.testing.assert_allclose(r.numbers["slow_share"], share[:, slow].sum(1), atol=TOLERANCE)
    wavelength = np.exp((share * np.log(f.wavelengths)).sum(1))
    np.testing.assert_allclose(r.numbers["weighted_wavelength"], wavelength, rtol=1e-12)
    for n, delta in enumerate(r.distances[:80]):
        b = (share * np.cos(f.inv_freq * delta)).sum(1)
        np.testing.assert_allclose(r.decay[:, n], b, atol=TOLERANCE)


def llama_like(seed: int = 0, heads: int = 32, kv: int = 8, hidden: int = 256):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(heads, 128, hidden)), rng.normal(size=(kv, 128, hidden))


def test_a_rotary_head_using_only_the_four_fastest_pairs_is_found_and_only_it():
    wq, wk = llama_like()
    a, b = pair_columns(128, interleaved=False)
    keep = np.concatenate([a[:4], b[:4]])
    drop = np.setdiff1d(np.arange(128), keep)
    wq[5][drop] = 0.0  # the query head alone: its kv head serves three others (GQA)
    f = rotary_frequencies(LLAMA3)
    r = rotary_heads(wq, wk, f, n_draws=8)
    assert np.flatnonzero(r.usage[5]).tolist() == [0, 1, 2, 3]
    assert r.labels[5] == "high-frequency"
    assert [h for h, label in enumerate(r.labels) if label] == [5]


def test_random_rotary_weights_get_no_label():
    for seed in range(3):
        r = rotary_heads(*llama_like(seed), rotary_frequencies(LLAMA3), n_draws=8, seed=seed)
        assert r.labels == (None,) * 32


def test_rotary_null_permutes_rows_across_heads():
    wq, wk = llama_like(heads=8, kv=2, hidden=16)
    r = rotary_heads(wq, wk, rotary_frequencies(LLAMA3), n_draws=4, seed=3)
    rng = np.random.default_rng(3)
    a, b = pair_columns(128, interleaved=False)
    q_rows, k_rows = (wq**2).sum(2), (wk**2).sum(2)
    for draw in range(4):
        pq = rng.permutation(q_rows.ravel()).reshape(8, 128)
        pk = rng.permutation(k_rows.ravel()).reshape(2, 128)
        u = np.sqrt(pq[:, a] + pq[:, b]) * np.sqrt(pk[:, a] + pk[:, b])[np.arange(8) // 4]
        fast = rotary_frequencies(LLAMA3).wavelengths < 10
        share = u[:, fast].sum(1) / u.sum(1)
        np.testing.assert_allclose(r.null["fast_share"][draw], share, atol=TOLERANCE)


# --- ALiBi and T5 ---------------------------------------------------------------------------


def test_alibi_heads_equal_the_dense_computation_and_draw_no_null():
    slopes = alibi_slopes(8)
    bias = alibi_offset_bias(slopes, 50)
    r = offset_bias_heads(bias, True, "alibi")
    i = np.arange(50)
    kernel = -slopes[:, None, None] * np.abs(i[:, None] - i[None, :])
    dense = dense_numbers(kernel, True)
    for name, values in r.numbers.items():
        if name != "toeplitz_share":
            np.testing.assert_allclose(values, dense[name], atol=TOLERANCE, err_msg=name)
    assert r.null == {}
    # Nothing learned, no null: the thresholds alone. Slope 1/2 keeps 99% within 8 positions.
    assert r.labels[0] == "local"
    assert r.labels[-1] is None


def test_t5_heads_read_the_bias_at_each_offset():
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(8, 4))
    bias = t5_offset_bias(weight, 20, bidirectional=True, num_buckets=8, max_distance=16)
    i = np.arange(20)
    buckets = t5_buckets(
        i[None, :] - i[:, None], bidirectional=True, num_buckets=8, max_distance=16
    )
    kernel = weight[buckets].transpose(2, 0, 1)
    np.testing.assert_allclose(bias[:, i[:, None] - i[None, :] + 19], kernel, atol=TOLERANCE)
    r = offset_bias_heads(bias, False, "relative_bias", n_draws=4)
    dense = dense_numbers(kernel, False)
    for name in ("attention_self", "attention_previous", "entropy_span"):
        np.testing.assert_allclose(r.numbers[name], dense[name], atol=TOLERANCE)
    assert r.null["attention_self"].shape == (4, 4)


def test_settings_are_checked_by_the_bounds_declared_beside_each_function():
    x, wq, wk, *_ = random_layer()
    with pytest.raises(LoadError, match="n_positions is 41; the layer's table has 40"):
        learned_heads(x, wq, wk, n_positions=41)  # the data's own limit
    with pytest.raises(Refused, match="n_draws is -1; it must be a whole number from 0 to 1,000"):
        learned_heads(x, wq, wk, n_draws=-1)
    with pytest.raises(Refused, match="n_positions is 4096"):
        alibi_heads(np.ones(2), n_positions=4096)
    with pytest.raises(Refused, match="seed"):
        t5_heads(np.zeros((32, 2)), seed=-1)
    with pytest.raises(Refused, match="fast_wavelength"):
        rotary_heads(*llama_like(heads=2, kv=2, hidden=8), rotary_frequencies(LLAMA3),
                     fast_wavelength=math.nan)  # fmt: skip
    # Declared where the pages read them.
    for core in (learned_heads, alibi_heads, t5_heads, rotary_heads):
        assert bounds_of(core)["n_draws"] == DRAWS
        assert bounds_of(core)["seed"] == SEED
    assert bounds_of(learned_heads)["n_positions"].high == MAX_POSITIONS
    assert set(LABELS) >= {"previous-token", "local", "first position", "high-frequency"}


def test_results_remake_themselves_from_their_params():
    x, wq, wk, bq, bk = random_layer()
    r = learned_heads(x, wq, wk, bq, bk, False, n_positions=30, n_draws=2, seed=4)
    again = learned_heads(x, wq, wk, bq, bk, False, **r.params)
    np.testing.assert_array_equal(again.numbers["entropy_span"], r.numbers["entropy_span"])
    f = rotary_frequencies(LLAMA3, context=8192)
    rot = rotary_heads(*llama_like(heads=4, kv=4, hidden=8), f, n_draws=1)
    assert rot.params["context"] == 8192


def test_a_layer_too_big_for_the_result_budget_is_refused_before_allocating():
    x = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(2048, 8192), strides=(0, 0))
    w = np.lib.stride_tricks.as_strided(
        np.zeros(1, np.float32), shape=(64, 128, 8192), strides=(0, 0, 0)
    )
    with pytest.raises(Refused, match="analyse fewer positions"):
        learned_heads(x, w, w)


def test_a_planted_low_frequency_head_is_found():
    wq, wk = llama_like(heads=8, kv=8)
    a, b = pair_columns(128, interleaved=False)
    slow = np.concatenate([a[-8:], b[-8:]])
    wq[2][np.setdiff1d(np.arange(128), slow)] = 0.0
    r = rotary_heads(wq, wk, rotary_frequencies(LLAMA3), n_draws=8)
    assert r.labels == (None, None, "low-frequency", *(None,) * 5)
