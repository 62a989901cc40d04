"""Conditional SMC of PG-BART (thesis Alg. 4.2): oracle, prior invariance, exact posterior."""

from __future__ import annotations

import numpy as np
import pytest

from ebf.bayestrees import BayesTree, LeafLikelihood, log_prior, sample_prior
from ebf.bayestrees._pgbart import conditional_smc, csmc, pg_workspace
from ebf.bayestrees._records import data_record, model_record
from ebf.bayestrees.mcmc import canonical, mh_update
from tests.ebf.bayestrees import helpers as h
from tests.naive import naive_conditional_smc, naive_relabel


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("n_particles", [1, 2, 10])
@pytest.mark.parametrize("small_pool", [False, True])
@pytest.mark.parametrize("ess_threshold", [1.0, 0.5])
def test_kernel_matches_the_naive_oracle(seed, n_particles, small_pool, ess_threshold):
    """Same seed, same tree: the kernel and a Python conditional SMC of the same uniforms
    (slot capacity 2: the particles must grow; a small pool: segments are compacted), with
    resampling at every stage (the thesis) and adaptive (ESS <= C / 2)."""
    X, y = h.mixed_problem(seed)
    old = sample_prior(X, 0.95, 0.5, rng=seed)
    lik = h.NORMAL
    ws = pg_workspace(X, n_particles, 2)
    if small_pool:
        ws = ws._replace(pool=np.empty(1, np.int64))
    k, n, ws = csmc(data_record(X, lik.row_stats(y)),
                    model_record(0.95, 0.5, lik.code, lik.params), old.splits(), seed, ws,
                    ess_threshold)
    P_int, P_float = ws.P_int, ws.P_float
    want = naive_conditional_smc(old.trimmed(), X, h.normal_leaf_ll(y), n_particles, 0.95, 0.5,
                                 seed, ess_threshold)
    assert n == want["feature"].size
    for field, name in enumerate(("feature", "left", "right", "parent", "depth")):
        np.testing.assert_array_equal(P_int[k, [0, 1, 2, 3, 4][field], :n], want[name],
                                      err_msg=name)
    np.testing.assert_array_equal(P_float[k, 0, :n], want["threshold"])
    if n_particles == 1:  # only the clamped particle: the old tree comes back
        np.testing.assert_array_equal(want["threshold"], old.trimmed()["threshold"])


def test_relabel_is_breadth_first_and_keeps_the_tree():
    X, y = h.mixed_problem(3, n=40)
    lik = h.NORMAL

    tree, _ = mh_update(BayesTree.root_only(40), X, y, lik, "growprune", 0.95, 0.0,
                        n_steps=60, rng=1)
    shuffled = tree.copy()  # a depth-first numbering of the same tree
    perm = _depth_first(tree.trimmed())
    inverse = np.argsort(perm)
    for name in BayesTree.ARRAYS:
        a = getattr(tree, name)[: tree.n_nodes][perm]
        if name in ("left", "right", "parent"):
            a = np.where(a >= 0, inverse[np.maximum(a, 0)], -1)
        getattr(shuffled, name)[: tree.n_nodes] = a
    assert tree.n_leaves >= 3
    back = canonical(shuffled)
    want = naive_relabel(shuffled.trimmed())
    for name, arr in want.items():
        np.testing.assert_array_equal(back.trimmed()[name], arr, err_msg=name)
        np.testing.assert_array_equal(back.trimmed()[name], tree.trimmed()[name])
    assert log_prior(back, X) == pytest.approx(log_prior(tree, X), rel=1e-12)


def _depth_first(arrays):
    order, stack = [], [0]
    while stack:
        j = stack.pop()
        order.append(j)
        if arrays["feature"][j] >= 0:
            stack += [arrays["right"][j], arrays["left"][j]]
    return np.array(order)


def test_bad_inputs_are_named():
    X, y = h.mixed_problem(0)
    lik = h.NORMAL
    with pytest.raises(ValueError, match="n_particles=0 must be an integer >= 1"):
        conditional_smc(BayesTree.root_only(16), X, y, lik, n_particles=0)
    with pytest.raises(ValueError, match="y has 3 rows but X has 16"):
        conditional_smc(BayesTree.root_only(16), X, y[:3], lik)
    bad = sample_prior(X, 0.95, 0.0, rng=2)
    bad.threshold[0] = X[:, bad.feature[0]].max()  # empty right child
    with pytest.raises(ValueError, match="not one the prior can make"):
        conditional_smc(bad, X, y, lik)
    for bad_threshold in (0.0, 1.5, True):
        with pytest.raises(ValueError, match="ess_threshold=.* must be a number in"):
            conditional_smc(BayesTree.root_only(16), X, y, lik, ess_threshold=bad_threshold)


# ------------------------------------------------------------------ statistical behaviour


@pytest.mark.parametrize(("beta_s", "n_particles", "from_root", "n_steps"),
                         [(0.5, 3, False, 3), (2.0, 10, True, 10)])
def test_uninformative_chains_follow_the_prior(beta_s, n_particles, from_root, n_steps):
    """Flat likelihood: the kernel leaves the prior invariant (chains started at prior draws,
    deep trees) and reaches it from the trivial tree (BART's prior, C = 10): tree depth and
    leaf count of the chains' last states against fresh prior draws.

    From the trivial tree a flat likelihood mixes slowly: the clamped particle is done at
    once and every resampling copies it into each free particle with probability 1/C, so a
    step keeps the root alone with probability ~0.45 here (path degeneracy); 10 steps leave
    ~3e-4 of the chains there."""
    X, y = h.flat_problem()
    rng = np.random.default_rng(2024)
    flat = LeafLikelihood.uninformative()
    reference = h.shape_counts(sample_prior(X, 0.95, beta_s, rng=rng) for _ in range(20_000))
    finals = []
    for _ in range(2000):
        tree = BayesTree.root_only(10) if from_root else sample_prior(X, 0.95, beta_s, rng=rng)
        for _ in range(n_steps):
            tree = conditional_smc(tree, X, y, flat, n_particles, 0.95, beta_s, rng=rng)
        finals.append(tree)
    p, cells = h.two_sample_chisquare(h.shape_counts(finals), reference)
    assert cells >= 4
    assert p > 1e-3


@pytest.mark.parametrize(("n_particles", "ess_threshold"), [(2, 1.0), (10, 1.0), (10, 0.5)])
def test_exact_posterior_draws_stay_exact(n_particles, ess_threshold):
    """Invariance of pi (eq. 4.8): chains started at exact posterior draws of the enumerated
    1-D problem are still exact after three steps, even with two particles, and with
    adaptive resampling."""
    exact = h.enumerated_posterior(0.95, 0.5)
    rng = np.random.default_rng(5)
    finals = []
    for tree in h.posterior_draws(exact, 3000, rng):
        for _ in range(3):
            tree = conditional_smc(tree, h.X1, h.Y1, h.NORMAL, n_particles, 0.95, 0.5, rng=rng,
                                   ess_threshold=ess_threshold)
        finals.append(tree)
    p, tv, cells = h.goodness_of_fit(h.structures(finals), exact)
    assert cells >= 40
    assert p > 1e-3 and tv < 0.1


@pytest.mark.parametrize("ess_threshold", [1.0, 0.5])
def test_chains_from_the_trivial_tree_reach_the_enumerated_posterior(ess_threshold):
    """Independent PG chains (C = 10) from the trivial tree: after 30 steps the h.structures
    follow the exact posterior (two root-cut modes, Normal leaves, fixed sigma^2), with
    resampling at every stage and adaptive."""
    exact = h.enumerated_posterior(0.95, 0.5)
    rng = np.random.default_rng(11)
    finals = []
    for _ in range(2000):
        tree = BayesTree.root_only(6)
        for _ in range(30):
            tree = conditional_smc(tree, h.X1, h.Y1, h.NORMAL, 10, 0.95, 0.5, rng=rng,
                                   ess_threshold=ess_threshold)
        finals.append(tree)
    p, tv, cells = h.goodness_of_fit(h.structures(finals), exact)
    assert cells >= 40
    assert p > 1e-3 and tv < 0.12
