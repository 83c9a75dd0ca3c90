"""The top principal components by certified Lanczos equal the dense eigensolver's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse.linalg

from posviz import components, simulate
from posviz.components import _lanczos_pairs, principal_components


@pytest.fixture
def solvers(monkeypatch: pytest.MonkeyPatch):
    """`solve(values, k, center, dense)`: the components by either path, and whether the
    Lanczos pairs were certified (None on the dense path)."""
    certified = []

    def spy(g, k):
        pairs = _lanczos_pairs(g, k)
        certified.append(pairs is not None)
        return pairs

    monkeypatch.setattr(components, "_lanczos_pairs", spy)

    def solve(values, k, center, *, dense):
        certified.clear()
        monkeypatch.setattr(components, "KRYLOV_MIN_SIZE", 2**62 if dense else 0)
        return principal_components(values, n_components=k, center=center), (certified or [None])[0]

    return solve


def assert_same(a: components.PrincipalComponents, b: components.PrincipalComponents, tol: float):
    top = b.singular_values[0]
    np.testing.assert_allclose(a.loadings, b.loadings, rtol=0, atol=tol)
    np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=tol * top)
    np.testing.assert_allclose(a.singular_values, b.singular_values, rtol=0, atol=tol * top)
    np.testing.assert_allclose(a.explained_variance, b.explained_variance, rtol=0, atol=tol)


@pytest.mark.parametrize("shape", [(400, 300), (300, 520)])
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("k", [1, 6, 20])
def test_lanczos_components_are_the_dense_ones_within_1e_10(solvers, shape, center, k):
    values = simulate.learned_like(*shape, seed=3).values
    lanczos, certified = solvers(values, k, center, dense=False)
    dense, _ = solvers(values, k, center, dense=True)
    assert certified  # the Lanczos path was taken, not the fallback
    assert_same(lanczos, dense, 1e-10)


def test_repeated_singular_values_fall_back_to_the_dense_solver(solvers):
    # An exact double singular value among the top 6: its vectors are any basis of a plane,
    # so only the dense solver's choice is the one the app has always shown.
    rng = np.random.default_rng(0)
    u, _ = np.linalg.qr(rng.standard_normal((300, 40)))
    v, _ = np.linalg.qr(rng.standard_normal((200, 40)))
    s = np.array([9.0, 7.0, 7.0, 5.0, 4.0, 3.0, 2.5, *np.linspace(2, 1, 33)])
    values = (u * s) @ v.T
    lanczos, certified = solvers(values, 6, False, dense=False)
    dense, _ = solvers(values, 6, False, dense=True)
    assert certified is False
    assert_same(lanczos, dense, 0.0)


def test_k_beyond_the_rank_falls_back_to_the_dense_solver(solvers):
    rng = np.random.default_rng(1)
    values = rng.standard_normal((300, 3)) @ rng.standard_normal((3, 280))
    lanczos, certified = solvers(values, 6, True, dense=False)
    dense, _ = solvers(values, 6, True, dense=True)
    assert certified is False
    assert_same(lanczos, dense, 0.0)


def test_pairs_missing_an_eigenvalue_are_caught_by_the_certificate(
    monkeypatch: pytest.MonkeyPatch,
):
    # A single start vector can miss an eigenvalue (a copy of a repeated one). Here Lanczos is
    # made to return exact eigenpairs 2..8 of a matrix whose largest is 100: the residuals
    # and gaps pass, so only the Cholesky certificate (nothing else above sigma) can tell.
    size, k = 300, 6
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((size, size)))
    lam = np.concatenate([[100.0, 50, 40, 30, 20, 10, 5, 4], np.linspace(1, 0.1, size - 8)])
    g = np.asfortranarray((q * lam) @ q.T)

    def missing_the_largest(a, k, **kwargs):
        return lam[1 : k + 1], q[:, 1 : k + 1]

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", missing_the_largest)
    assert _lanczos_pairs(g.copy(order="F"), k) is None
    # The same pairs with the largest included are certified.
    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", lambda a, k, **kw: (lam[:k], q[:, :k]))
    top, vectors = _lanczos_pairs(g.copy(order="F"), k)
    np.testing.assert_array_equal(top, lam[:k])
    np.testing.assert_array_equal(vectors, q[:, :k])
