"""Tests of ``mondrian._ikn`` (HNSP/IKN classification posterior) against ``tests.naive``.

Lakshminarayanan (2016) thesis, Sec. 5.4-5.5, eq. (5.5), Alg. 5.3/5.4/5.7/5.8.
"""

from __future__ import annotations

import numpy as np
import pytest

from mondrian._ikn import branch_off_G, expected_discount, ikn_add, ikn_counts, ikn_posterior
from tests import naive


def random_tree(rng, n_leaves, K, extra=3, lifetime=np.inf, p_zero=0.3):
    """Random binary tree in the flat layout with shuffled slots and random leaf counts.

    Returns a dict with ``left, right, parent, tau, stats, root, n_nodes, leaves``; the
    capacity is ``n_nodes + extra`` (spare rows hold garbage that kernels must not read).
    """
    # grow by splitting a random leaf, on "logical" ids 0..n-1
    lefts, rights, parents = [-1], [-1], [-1]
    leaves = [0]
    while len(leaves) < n_leaves:
        j = leaves.pop(rng.integers(len(leaves)))
        for _ in range(2):
            lefts.append(-1)
            rights.append(-1)
            parents.append(j)
            leaves.append(len(lefts) - 1)
        lefts[j], rights[j] = len(lefts) - 2, len(lefts) - 1
    n = len(lefts)
    perm = rng.permutation(n)  # logical id -> slot
    C = n + extra
    left = np.full(C, -1, dtype=np.int64)
    right = np.full(C, -1, dtype=np.int64)
    parent = np.full(C, -1, dtype=np.int64)
    for i in range(n):
        s = perm[i]
        left[s] = perm[lefts[i]] if lefts[i] != -1 else -1
        right[s] = perm[rights[i]] if rights[i] != -1 else -1
        parent[s] = perm[parents[i]] if parents[i] != -1 else -1
    # split times increasing down the tree; leaves get the lifetime
    tau = np.full(C, 123.0)
    stack = [(perm[0], 0.0)]
    while stack:
        s, t_par = stack.pop()
        if left[s] == -1:
            tau[s] = lifetime
        else:
            tau[s] = t_par + rng.exponential(1.0)
            stack += [(left[s], tau[s]), (right[s], tau[s])]
    stats = rng.uniform(-5, 5, size=(C, K))  # garbage everywhere ...
    leaf_slots = np.array([perm[i] for i in leaves], dtype=np.int64)
    for s in leaf_slots:  # ... raw counts at leaves, some empty
        row = rng.integers(0, 4, size=K).astype(np.float64)
        row[rng.random(K) < p_zero] = 0.0
        if rng.random() < 0.2:
            row[:] = 0.0
        stats[s] = row
    return dict(
        left=left, right=right, parent=parent, tau=tau, stats=stats,
        root=int(perm[0]), n_nodes=n, leaves=leaf_slots,
    )


def live_slots(t):
    """Slots reachable from the root."""
    out, stack = [], [t["root"]]
    while stack:
        j = stack.pop()
        out.append(j)
        if t["left"][j] != -1:
            stack += [t["left"][j], t["right"][j]]
    return np.array(sorted(out))


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_ikn_counts_matches_naive(seed):
    rng = np.random.default_rng(seed)
    t = random_tree(rng, n_leaves=int(rng.integers(1, 12)), K=int(rng.integers(1, 5)))
    expected = naive.ikn_counts_naive(t["left"], t["right"], t["root"], t["stats"])
    got = t["stats"].copy()
    ikn_counts(t["left"], t["right"], t["root"], t["n_nodes"], got)
    np.testing.assert_array_equal(got, expected)
    # internal rows are tab sums: integers in [0, 2]
    live = live_slots(t)
    internal = live[t["left"][live] != -1]
    assert np.all((got[internal] >= 0) & (got[internal] <= 2))


@pytest.mark.parametrize("seed", SEEDS)
def test_ikn_add_online_equals_batch(seed):
    """Alg. 5.7 applied point by point gives the batch Alg. 5.3 counts after every point."""
    rng = np.random.default_rng(100 + seed)
    K = int(rng.integers(1, 5))
    t = random_tree(rng, n_leaves=int(rng.integers(1, 12)), K=K)
    C = t["stats"].shape[0]
    online = np.zeros((C, K))
    raw = np.zeros((C, K))
    for _ in range(60):
        leaf = int(rng.choice(t["leaves"]))
        k = int(rng.integers(K))
        ikn_add(t["parent"], t["left"], t["right"], online, leaf, k)
        raw[leaf, k] += 1.0
        batch = raw.copy()
        ikn_counts(t["left"], t["right"], t["root"], t["n_nodes"], batch)
        np.testing.assert_array_equal(online, batch)


def test_ikn_add_sibling_already_has_class():
    """Parent count must go 1 -> 2 when the second child gets its first point of class k."""
    left = np.array([1, -1, -1], dtype=np.int64)
    right = np.array([2, -1, -1], dtype=np.int64)
    parent = np.array([-1, 0, 0], dtype=np.int64)
    s = np.zeros((3, 2))
    ikn_add(parent, left, right, s, 1, 0)
    ikn_add(parent, left, right, s, 1, 0)
    assert s[0].tolist() == [1.0, 0.0] and s[1].tolist() == [2.0, 0.0]
    ikn_add(parent, left, right, s, 2, 0)
    assert s[0].tolist() == [2.0, 0.0] and s[2].tolist() == [1.0, 0.0]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("gamma", [0.0, 0.3, 2.0])
@pytest.mark.parametrize("lifetime", [np.inf, 50.0])
def test_ikn_posterior_matches_naive(seed, gamma, lifetime):
    rng = np.random.default_rng(200 + seed)
    K = int(rng.integers(1, 5))
    t = random_tree(rng, n_leaves=int(rng.integers(1, 12)), K=K, lifetime=lifetime)
    ikn_counts(t["left"], t["right"], t["root"], t["n_nodes"], t["stats"])
    C = t["stats"].shape[0]
    G = np.full((C, K), -7.0)
    ikn_posterior(
        t["left"], t["right"], t["tau"], t["stats"], t["root"], t["n_nodes"], gamma, G
    )
    expected = naive.ikn_posterior_naive(
        t["left"], t["right"], t["tau"], t["stats"], t["root"], gamma
    )
    live = live_slots(t)
    assert sorted(expected) == live.tolist()
    for j in live:
        np.testing.assert_allclose(G[j], expected[j], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(G[live].sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(G[live] >= 0)
    dead = np.setdiff1d(np.arange(C), live)
    assert np.all(G[dead] == -7.0)  # spare rows untouched


def test_ikn_posterior_hand_computed():
    """Root with two leaves, eq. (5.5) by hand."""
    left = np.array([-1, 2, -1], dtype=np.int64)  # root at slot 1, leaves at 2 (left), 0 (right)
    right = np.array([-1, 0, -1], dtype=np.int64)
    tau = np.array([np.inf, 0.5, np.inf])
    s = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 1.0]])
    ikn_counts(left, right, 1, 3, s)
    assert s[1].tolist() == [1.0, 1.0]
    gamma = 2.0
    G = np.zeros((3, 2))
    ikn_posterior(left, right, tau, s, 1, 3, gamma, G)
    d = np.exp(-gamma * 0.5)
    g_root = (np.array([1.0, 1.0]) - d + d * 2 * 0.5) / 2.0
    np.testing.assert_allclose(G[1], g_root)
    # left leaf: d = exp(-inf) = 0, so G = empirical frequencies
    np.testing.assert_allclose(G[2], [0.75, 0.25])
    np.testing.assert_allclose(G[0], g_root)  # empty leaf takes the parent's G


ED_CASES = [
    (1.0, 1.0, 1.0),
    (0.3, 2.0, 0.7),
    (5.0, 0.1, 3.0),
    (2.0, np.inf, 1.0),
    (0.01, np.inf, 4.0),
    (1e-12, 1.0, 1.0),
    (1e-9, 3.0, 0.5),
    (0.0, 2.0, 1.5),
    (1e-200, 0.5, 2.0),
    (40.0, 10.0, 1e-3),
    (1e-3, 200.0, 0.1),
    (3.0, 1e-6, 2.0),
    (1.0, 1.0, 0.0),
]


@pytest.mark.parametrize("eta,delta,gamma", ED_CASES)
def test_expected_discount_vs_quad(eta, delta, gamma):
    got = expected_discount(eta, delta, gamma)
    ref = naive.expected_discount_quad(eta, delta, gamma)
    assert abs(got - ref) <= 1e-10
    assert 0.0 <= got <= 1.0


def test_expected_discount_vs_monte_carlo():
    rng = np.random.default_rng(7)
    for eta, delta, gamma in [(1.0, 1.0, 1.0), (0.5, np.inf, 2.0), (3.0, 0.4, 5.0)]:
        mc = naive.expected_discount_mc(eta, delta, gamma, 400_000, rng)
        assert abs(expected_discount(eta, delta, gamma) - mc) < 5e-3


def test_expected_discount_limits():
    assert expected_discount(2.0, np.inf, 3.0) == pytest.approx(2.0 / 5.0, rel=1e-15)
    assert expected_discount(1.0, 0.0, 3.0) == 1.0
    assert expected_discount(np.inf, 1.0, 3.0) == 1.0
    # eta -> 0 is continuous with the uniform limit
    lim = -np.expm1(-2.0 * 1.5) / (2.0 * 1.5)
    assert expected_discount(0.0, 1.5, 2.0) == pytest.approx(lim, rel=1e-15)
    assert expected_discount(1e-14, 1.5, 2.0) == pytest.approx(lim, rel=1e-12)
    # monotone: larger gamma discounts more
    assert expected_discount(1.0, 2.0, 0.5) > expected_discount(1.0, 2.0, 1.5)


@pytest.mark.parametrize("seed", SEEDS)
def test_branch_off_G(seed):
    rng = np.random.default_rng(300 + seed)
    K = int(rng.integers(1, 6))
    G_par = rng.dirichlet(np.ones(K))
    c = rng.integers(0, 3, size=K).astype(np.float64)
    if seed % 4 == 0:
        c[:] = 0.0
    dbar = float(rng.uniform())
    out = np.empty(K)
    branch_off_G(G_par, c, dbar, out)
    np.testing.assert_allclose(out, naive.branch_off_G_naive(G_par, c, dbar), rtol=1e-14)
    assert out.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(out >= 0)


def test_branch_off_G_root_uses_uniform_base():
    K = 3
    H = np.full(K, 1.0 / K)
    out = np.empty(K)
    branch_off_G(H, np.array([5.0, 0.0, 2.0]), 1.0, out)  # dbar = 1: pure base
    np.testing.assert_allclose(out, H)
    branch_off_G(H, np.array([5.0, 0.0, 2.0]), 0.0, out)  # dbar = 0: tables only
    np.testing.assert_allclose(out, [0.5, 0.0, 0.5])
