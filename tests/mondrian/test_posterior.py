"""Tests of ``mondrian._posterior`` (Lakshminarayanan, Roy & Teh (2016), Sec. 3.1 / App. B / C)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mondrian._posterior import (
    edge_variance,
    empirical_moments,
    gaussian_posterior,
    hyperparameters,
)
from mondrian._records import MondrianTree, Prior
from tests.naive import gaussian_posterior_dense

# ------------------------------------------------------------------------------ tree helpers


def _tree_arrays(par, lch, rch, tau, leaf_y, rng, shuffle=True, extra=3):
    """Flat Mondrian tree arrays from a tree given in creation order (root = 0).

    Slots are shuffled (non-topological order) and ``extra`` garbage slots are appended
    beyond ``n_nodes`` to check that kernels stay within the live range.
    """
    n = len(par)
    perm = rng.permutation(n) if shuffle else np.arange(n)
    cap = n + extra

    def m(i):
        return -1 if i == -1 else int(perm[i])

    left = np.full(cap, -1, dtype=np.int64)
    right = np.full(cap, -1, dtype=np.int64)
    parent = np.full(cap, -1, dtype=np.int64)
    t = rng.uniform(0, 5, size=cap)  # garbage in dead slots
    stats = rng.normal(size=(cap, 3)) * 1e3
    new_y = [np.empty(0)] * n
    # subtree statistics (children are created after parents: reverse creation order)
    tot = np.zeros((n, 3))
    for i in range(n - 1, -1, -1):
        if lch[i] == -1 and rch[i] == -1:
            y = np.asarray(leaf_y[i], dtype=float)
            tot[i] = (len(y), y.sum(), (y * y).sum())
        else:
            tot[i] = tot[lch[i]] + tot[rch[i]]
    for i in range(n):
        s = perm[i]
        left[s], right[s], parent[s] = m(lch[i]), m(rch[i]), m(par[i])
        t[s] = tau[i]
        stats[s] = tot[i]
        new_y[s] = np.asarray(leaf_y[i], dtype=float)
    return left, right, parent, t, stats, int(perm[0]), n, new_y


def _random_tree(rng, target):
    """Random binary tree with >= ``target`` nodes, increasing split times, mixed leaves."""
    r = rng.uniform()
    tau0 = 0.0 if r < 0.1 else (1e-13 if r < 0.15 else rng.exponential(1.0))
    par, lch, rch, tau = [-1], [-1], [-1], [tau0]
    leaves = [0]

    def increment():
        u = rng.uniform()
        if u < 0.1:
            return 0.0  # phi = 0: equality constraint
        if u < 0.2:
            return 1e-12 * (1 + rng.uniform())  # tiny phi
        return rng.exponential(0.7)

    while len(par) < target:
        j = leaves.pop(rng.integers(len(leaves)))
        for side in (lch, rch):
            c = len(par)
            par.append(j)
            lch.append(-1)
            rch.append(-1)
            tau.append(tau[j] + increment())
            side[j] = c
            leaves.append(c)
    leaf_y = [np.empty(0)] * len(par)
    for j in leaves:
        if rng.uniform() < 0.6:
            tau[j] = np.inf  # default lifetime; otherwise keep the finite one
        k = 0 if rng.uniform() < 0.3 else int(rng.integers(1, 6))
        leaf_y[j] = rng.normal(rng.normal(0.0, 2.0), 1.0, size=k)
    return par, lch, rch, tau, leaf_y


def _record(left, right, parent, tau, stats):
    """The kernels' tree record of the arrays the posterior reads."""
    return MondrianTree.of(left=left, right=right, parent=parent, tau=tau, stats=stats)


def _run_kernel(left, right, parent, tau, stats, root, n, hp):
    cap = len(left)
    mean = np.full(cap, -7.0)
    var = np.full(cap, -7.0)
    gaussian_posterior(_record(left, right, parent, tau, stats), root, n, Prior(*hp[:3]),
                       hp[3], mean, var)
    assert np.all(mean[n:] == -7.0) and np.all(var[n:] == -7.0)  # nothing written past n
    return mean[:n], var[:n]


def _check_against_oracle(left, right, parent, tau, stats, root, n, leaf_y, hp):
    mu_h, gamma1, _, _ = hp
    mean, var = _run_kernel(left, right, parent, tau, stats, root, n, hp)
    o_mean, o_var = gaussian_posterior_dense(left, right, parent, tau, root, n, leaf_y, *hp)
    scale = max(1.0, abs(mu_h), max((np.abs(y).max() for y in leaf_y if len(y)), default=0.0))
    np.testing.assert_allclose(mean, o_mean, rtol=1e-8, atol=1e-12 * scale)
    np.testing.assert_allclose(var, o_var, rtol=1e-8, atol=1e-12 * gamma1)
    assert np.all(var >= 0.0)


def _random_hp(rng):
    return (float(rng.normal(0.0, 2.0)), float(rng.uniform(0.5, 3.0)),
            float(rng.uniform(0.2, 2.0)), float(rng.uniform(0.05, 1.0)))


# --------------------------------------------------------------------- BP vs dense oracle


@pytest.mark.parametrize("seed", range(150))
def test_bp_matches_dense_oracle(seed):
    rng = np.random.default_rng(seed)
    tree = _random_tree(rng, int(rng.integers(1, 31)))
    arrays = _tree_arrays(*tree, rng=rng)
    _check_against_oracle(*arrays, hp=_random_hp(rng))


@pytest.mark.parametrize("seed", range(5))
def test_bp_deep_caterpillar_matches_oracle(seed):
    """Depth-150 tree with tiny and zero phi on the spine."""
    rng = np.random.default_rng(1000 + seed)
    depth = 150
    par, lch, rch, tau = [-1], [-1], [-1], [0.05]
    leaf_y = [np.empty(0)]
    spine = 0
    for d in range(depth):
        u = rng.uniform()
        inc = 0.0 if u < 0.2 else (1e-12 if u < 0.4 else rng.exponential(0.05))
        kids = []
        for _ in range(2):
            c = len(par)
            par.append(spine)
            lch.append(-1)
            rch.append(-1)
            tau.append(tau[spine] + inc)
            leaf_y.append(np.empty(0))
            kids.append(c)
        lch[spine], rch[spine] = kids
        leaf = kids[0] if d < depth - 1 else None
        for c in kids if leaf is None else [leaf]:
            tau[c] = np.inf if rng.uniform() < 0.5 else tau[c] + rng.exponential(0.1)
            leaf_y[c] = rng.normal(0.1 * d, 1.0, size=int(rng.integers(0, 4)))
        spine = kids[1]
    arrays = _tree_arrays(par, lch, rch, tau, leaf_y, rng)
    _check_against_oracle(*arrays, hp=_random_hp(rng))


def test_bp_ignores_internal_stats():
    rng = np.random.default_rng(7)
    left, right, parent, tau, stats, root, n, leaf_y = _tree_arrays(*_random_tree(rng, 21), rng)
    hp = _random_hp(rng)
    ref = _run_kernel(left, right, parent, tau, stats, root, n, hp)
    garbage = stats.copy()
    internal = (left[:n] >= 0) | (right[:n] >= 0)
    garbage[:n][internal] = rng.normal(size=(int(internal.sum()), 3)) * 100
    got = _run_kernel(left, right, parent, tau, garbage, root, n, hp)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


# ----------------------------------------------------------------- closed-form special cases


def _single_leaf(y, tau_leaf):
    left = np.array([-1], dtype=np.int64)
    stats = np.array([[len(y), np.sum(y), np.sum(np.square(y))]], dtype=float)
    return left, left.copy(), left.copy(), np.array([tau_leaf]), stats


@pytest.mark.parametrize("k", [0, 1, 7])
@pytest.mark.parametrize("tau_leaf", [np.inf, 0.8])
def test_single_leaf_is_conjugate_normal(k, tau_leaf):
    rng = np.random.default_rng(k)
    y = rng.normal(3.0, 2.0, size=k)
    mu_h, gamma1, gamma2, noise = 0.5, 2.0, 0.7, 0.3
    left, right, parent, tau, stats = _single_leaf(y, tau_leaf)
    mean, var = np.empty(1), np.empty(1)
    gaussian_posterior(_record(left, right, parent, tau, stats), 0, 1,
                       Prior(mu_h, gamma1, gamma2), noise, mean, var)
    phi = gamma1 * (1.0 / (1.0 + math.exp(-gamma2 * tau_leaf)) - 0.5)
    post_var = 1.0 / (1.0 / phi + k / noise)
    post_mean = post_var * (mu_h / phi + np.sum(y) / noise)
    np.testing.assert_allclose(var[0], post_var, rtol=1e-12)
    np.testing.assert_allclose(mean[0], post_mean, rtol=1e-12)


def test_root_with_zero_split_time_is_pinned_to_prior_mean():
    """tau_root = 0 -> phi_root = 0: mu_root = mu_H exactly, no nan/inf."""
    rng = np.random.default_rng(3)
    par, lch, rch, tau, leaf_y = _random_tree(rng, 15)
    tau[0] = 0.0
    for j in range(1, len(tau)):
        if np.isfinite(tau[j]):
            tau[j] = max(tau[j], 0.0)
    arrays = _tree_arrays(par, lch, rch, tau, leaf_y, rng)
    hp = (1.25, 1.5, 0.8, 0.2)
    mean, var = _run_kernel(*arrays[:7], hp)
    root = arrays[5]
    assert mean[root] == 1.25 and var[root] == 0.0
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var))
    _check_against_oracle(*arrays, hp=hp)


def test_all_equal_split_times_pool_the_data():
    """phi = 0 on every internal edge: all means equal, posterior = conjugate on all data."""
    rng = np.random.default_rng(11)
    par, lch, rch, tau, leaf_y = _random_tree(rng, 25)
    tau = [0.5] * len(tau)  # leaves too (finite lifetime equal to the root split time)
    left, right, parent, t, stats, root, n, new_y = _tree_arrays(par, lch, rch, tau, leaf_y, rng)
    mu_h, gamma1, gamma2, noise = -0.4, 2.5, 1.3, 0.15
    mean, var = _run_kernel(left, right, parent, t, stats, root, n,
                            (mu_h, gamma1, gamma2, noise))
    y = np.concatenate(new_y)
    phi = gamma1 * (1.0 / (1.0 + math.exp(-gamma2 * 0.5)) - 0.5)
    post_var = 1.0 / (1.0 / phi + len(y) / noise)
    post_mean = post_var * (mu_h / phi + y.sum() / noise)
    np.testing.assert_allclose(var, post_var, rtol=1e-10)
    np.testing.assert_allclose(mean, post_mean, rtol=1e-10)


def test_very_deep_tree_is_finite_and_shrinks():
    """Depth-3000 caterpillar (no oracle): finite output, posterior var <= prior marginal."""
    rng = np.random.default_rng(5)
    depth = 3000
    n = 2 * depth + 1
    left = np.full(n, -1, dtype=np.int64)
    right = np.full(n, -1, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    tau = np.zeros(n)
    stats = np.zeros((n, 3))
    spine, t = 0, 0.01
    tau[0] = t
    for d in range(depth):
        a, b = 2 * d + 1, 2 * d + 2
        left[spine], right[spine] = a, b
        parent[a] = parent[b] = spine
        t += rng.choice([0.0, 1e-13, 1e-3])
        tau[a] = np.inf
        tau[b] = t if d < depth - 1 else np.inf
        y = rng.normal(size=int(rng.integers(0, 3)))
        stats[a] = (len(y), y.sum(), (y * y).sum())
        spine = b
    mean, var = _run_kernel(left, right, parent, tau, stats, 0, n, (0.0, 1.0, 0.5, 0.1))
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var))
    assert np.all(var >= 0.0) and np.all(var <= 1.0 * (1.0 - 0.5) + 1e-12)


def test_edge_variance_is_accurate_for_tiny_gaps():
    g1, g2, t = 2.0, 0.9, 1.7
    s = 1.0 / (1.0 + math.exp(-g2 * t))
    for gap in (1e-6, 1e-10, 1e-13):
        t2 = t + gap
        dt = t2 - t  # the gap actually representable (exact subtraction)
        exact = g1 * s * (1 - s) * g2 * dt  # first order; O(dt^2) error
        np.testing.assert_allclose(edge_variance(t2, t, g1, g2), exact, rtol=1e-5)
    assert edge_variance(t, t, g1, g2) == 0.0
    assert edge_variance(t - 0.1, t, g1, g2) == 0.0
    np.testing.assert_allclose(edge_variance(np.inf, t, g1, g2), g1 * (1 - s), rtol=1e-14)
    np.testing.assert_allclose(edge_variance(np.inf, 0.0, g1, g2), g1 / 2, rtol=1e-15)


# ------------------------------------------------------------------------ hyperparameters


@pytest.mark.parametrize("n_points, d", [(37, 3), (5000, 8), (1, 2)])
def test_hyperparameters_appendix_b(n_points, d):
    rng = np.random.default_rng(n_points)
    y = rng.normal(4.0, 3.0, size=n_points)
    mu_h, gamma1, gamma2, noise = hyperparameters(len(y), y.sum(), (y * y).sum(), d)
    k = min(2000, 2 * n_points)
    assert mu_h == pytest.approx(y.mean(), rel=1e-12)
    if n_points > 1:
        assert gamma1 * (0.5 + 1.0 / k) == pytest.approx(np.var(y), rel=1e-9)
        assert noise == pytest.approx(gamma1 / k, rel=1e-12)
    assert gamma2 == pytest.approx(d / (20 * math.log2(max(n_points, 2))), rel=1e-12)
    assert all(isinstance(v, float) for v in (mu_h, gamma1, gamma2, noise))


def test_hyperparameters_constant_targets_stay_finite():
    y = np.full(50, 12.5)
    mu_h, gamma1, gamma2, noise = hyperparameters(len(y), y.sum(), (y * y).sum(), 4)
    assert mu_h == 12.5
    assert gamma1 > 0.0 and noise > 0.0 and np.isfinite(gamma2)
    assert gamma1 == pytest.approx(1e-12 * 12.5**2)
    # BP stays finite with these hyperparameters
    left, right, parent, tau, stats = _single_leaf(y, np.inf)
    mean, var = np.empty(1), np.empty(1)
    gaussian_posterior(_record(left, right, parent, tau, stats), 0, 1,
                       Prior(mu_h, gamma1, gamma2), noise, mean, var)
    assert mean[0] == pytest.approx(12.5) and np.isfinite(var[0]) and var[0] > 0


def test_hyperparameters_reject_empty():
    with pytest.raises(ValueError):
        hyperparameters(0, 0.0, 0.0, 3)


# ---------------------------------------------------------------------- empirical moments


def test_empirical_moments_match_numpy():
    rng = np.random.default_rng(2)
    groups = [rng.normal(rng.normal(), rng.uniform(0.1, 3), size=k) for k in (5, 0, 1, 40, 2, 0)]
    cap = len(groups) + 2
    stats = np.zeros((cap, 3))
    for j, y in enumerate(groups):
        stats[j] = (len(y), y.sum(), (y * y).sum())
    out_mean = np.full(cap, -3.0)
    out_var = np.full(cap, -3.0)
    noise = 0.25
    empirical_moments(stats, len(groups), noise, out_mean, out_var)
    for j, y in enumerate(groups):
        if len(y) == 0:
            assert np.isnan(out_mean[j]) and np.isnan(out_var[j])
        else:
            assert out_mean[j] == pytest.approx(np.mean(y), rel=1e-12, abs=1e-14)
            assert out_var[j] == pytest.approx(np.var(y) + noise, rel=1e-10)
    assert np.all(out_mean[len(groups):] == -3.0) and np.all(out_var[len(groups):] == -3.0)
