"""CGM and GrowPrune Metropolis-Hastings moves (thesis Sec. 4.3.2): ratios against whole-tree
oracles, prior invariance, the enumerated posterior."""

from __future__ import annotations

import numpy as np
import pytest

from ebf.bayestrees import BayesTree, LeafLikelihood, partition_rows, sample_prior
from ebf.bayestrees._records import data_record, model_record, small_scratch
from ebf.bayestrees.mcmc import MOVES, SAMPLERS, UNIFORMS_PER_MOVE, mh_step, mh_update
from tests.ebf.bayestrees import helpers as h
from tests.naive import naive_bayestree_log_prior, naive_bayestree_rows, naive_mh_log_ratio


def _segments(tree, X, order, start, count):
    """The row set of every live node from a partition, and from the tree itself."""
    got = [frozenset(order[start[j]: start[j] + count[j]].tolist()) for j in range(tree.n_nodes)]
    want = [frozenset(r.tolist()) for r in naive_bayestree_rows(tree.trimmed(), X)]
    return got, want


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("move", range(4))
def test_acceptance_ratio_matches_the_whole_tree_oracle(seed, move):
    """log alpha of every move equals the oracle's from the trees before and after, and an
    accepted move leaves a canonical tree with a consistent row partition."""
    X, y = h.mixed_problem(seed)
    tree = sample_prior(X, 0.95, 0.3, rng=seed)
    order, start, count = partition_rows(tree, X)
    u = np.random.default_rng(seed).random(UNIFORMS_PER_MOVE)
    u[0] = (move + 0.5) / 4
    u[4] = 0.0  # accept whatever has a positive ratio
    before = {k: v.copy() for k, v in tree.trimmed().items()}
    n, got_move, accepted, log_alpha = mh_step(
        tree.record(X.shape[0], order, start, count), tree.n_nodes,
        data_record(X, h.NORMAL.row_stats(y)),
        model_record(0.95, 0.3, h.NORMAL.code, h.NORMAL.params), SAMPLERS["cgm"], u,
        small_scratch(X.shape[1], 3))
    assert got_move == move
    tree.n_nodes = int(n)
    got, want = _segments(tree, X, order, start, count)
    assert got == want
    tree.check(X.shape[1])
    if not accepted:  # nothing to act on, no valid cut, or a change / swap emptying a node
        assert log_alpha == -np.inf
        for k, v in before.items():
            np.testing.assert_array_equal(tree.trimmed()[k], v)
        return
    after = tree.trimmed()
    assert naive_bayestree_log_prior(after, X, 0.95, 0.3) > -np.inf
    expected = naive_mh_log_ratio(before, after, X, h.normal_leaf_ll(y), MOVES[move],
                                  SAMPLERS["cgm"], 0.95, 0.3)
    np.testing.assert_allclose(log_alpha, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_rejected_moves_restore_tree_and_rows(seed):
    X, y = h.mixed_problem(seed)
    tree = sample_prior(X, 0.95, 0.3, rng=seed + 100)
    order, start, count = partition_rows(tree, X)
    before = {k: v.copy() for k, v in tree.trimmed().items()}
    rng = np.random.default_rng(seed)
    for move in range(4):
        u = rng.random(UNIFORMS_PER_MOVE)
        u[0] = (move + 0.5) / 4
        u[4] = 1.0  # reject everything
        lik = h.NORMAL
        n, _, accepted, _ = mh_step(tree.record(X.shape[0], order, start, count),
                                    tree.n_nodes, data_record(X, lik.row_stats(y)),
                                    model_record(0.95, 0.3, lik.code, lik.params),
                                    SAMPLERS["cgm"], u, small_scratch(X.shape[1], 3))
        assert not accepted and n == tree.n_nodes
        for k, v in before.items():
            np.testing.assert_array_equal(tree.trimmed()[k], v)
        got, want = _segments(tree, X, order, start, count)
        assert got == want


def test_moves_are_all_accepted_sometimes():
    """Over a chain every move of CGM is proposed and accepted at least once."""
    X, y = h.mixed_problem(1, n=60)
    _, log = mh_update(BayesTree.root_only(60), X, y, h.NORMAL, "cgm", 0.95, 0.5, n_steps=2000,
                       rng=0)
    for move in range(4):
        mine = log[log[:, 0] == move]
        assert mine.shape[0] > 300 and mine[:, 1].sum() > 5, MOVES[move]


@pytest.mark.parametrize("sampler", ["cgm", "growprune"])
def test_uninformative_chains_leave_the_prior_invariant(sampler):
    """Flat likelihood: independent chains started at prior draws still follow the prior
    (tree depth and leaves) after 25 moves."""
    X, y = h.flat_problem()
    rng = np.random.default_rng(7)
    flat = LeafLikelihood.uninformative()
    reference = h.shape_counts(sample_prior(X, 0.95, 0.5, rng=rng) for _ in range(20_000))
    finals = [mh_update(sample_prior(X, 0.95, 0.5, rng=rng), X, y, flat, sampler, 0.95, 0.5,
                        n_steps=25, rng=rng)[0] for _ in range(3000)]
    p, cells = h.two_sample_chisquare(h.shape_counts(finals), reference)
    assert cells >= 5
    assert p > 1e-3


@pytest.mark.parametrize("sampler", ["cgm", "growprune"])
def test_exact_posterior_draws_stay_exact(sampler):
    """Chains started at exact posterior draws of the enumerated 1-D problem stay exact."""
    exact = h.enumerated_posterior(0.95, 0.5)
    rng = np.random.default_rng(3)
    finals = [mh_update(tree, h.X1, h.Y1, h.NORMAL, sampler, 0.95, 0.5, n_steps=20, rng=rng)[0]
              for tree in h.posterior_draws(exact, 3000, rng)]
    p, tv, cells = h.goodness_of_fit(h.structures(finals), exact)
    assert cells >= 40
    assert p > 1e-3 and tv < 0.1


def test_cgm_chains_from_the_trivial_tree_reach_the_enumerated_posterior():
    """Independent CGM chains from the trivial tree: after 300 moves the h.structures follow
    the exact posterior.

    GrowPrune does not: its chains stay with the root cut they grew first (to move it they
    would have to prune back to the root alone, which has little posterior mass), the
    trapping of Sec. 4.3.2; a chain of 100k moves never left it. Its invariance is tested
    above, its mixing by the hypercube ESS in ``test_bart.py``."""
    exact = h.enumerated_posterior(0.95, 0.5)
    rng = np.random.default_rng(13)
    finals = [mh_update(BayesTree.root_only(6), h.X1, h.Y1, h.NORMAL, "cgm", 0.95, 0.5,
                        n_steps=300, rng=rng)[0] for _ in range(2000)]
    p, tv, cells = h.goodness_of_fit(h.structures(finals), exact)
    assert cells >= 40
    assert p > 1e-3 and tv < 0.12


def test_bad_inputs_are_named():
    X, y = h.mixed_problem(0)
    with pytest.raises(ValueError, match="sampler='pg' is not one of"):
        mh_update(BayesTree.root_only(16), X, y, h.NORMAL, sampler="pg")
    bad = sample_prior(X, 0.95, 0.0, rng=2)
    bad.threshold[0] = X[:, bad.feature[0]].max()
    with pytest.raises(ValueError, match="not one the prior can make"):
        mh_update(bad, X, y, h.NORMAL)
