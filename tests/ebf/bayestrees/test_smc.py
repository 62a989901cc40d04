"""SMC for Bayesian decision trees (thesis Alg. 3.1) against the prior and exact enumeration."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from ebf.bayestrees import BayesTree, LeafLikelihood, sample_prior
from ebf.bayestrees._proposals import OPTIMAL, dense_ranks, optimal_masses
from ebf.bayestrees._records import data_record, model_record, scratch
from ebf.bayestrees._smc import ParticleSet, _copy_ancestors, run_smc
from tests.naive import (
    naive_bayestree_rows,
    naive_dirichlet_multinomial_polya,
    naive_enumerate_trees_1d,
    naive_structure_1d,
)

PROPOSALS = ["prior", "empirical", "optimal"]
EXPANSIONS = ["node", "layer"]
ALPHA_S, BETA_S = 0.95, 0.5


def _tree(trees, t):
    """Tree ``t`` of a ParticleTrees as local arrays (for the oracles)."""
    a, b = trees.offsets[t], trees.offsets[t + 1]
    local = {name: getattr(trees, name)[a:b] for name in ("feature", "threshold")}
    for name in ("left", "right"):
        v = getattr(trees, name)[a:b]
        local[name] = np.where(v >= 0, v - a, -1)
    return local


# ------------------------------------------------------- the posterior is the prior


def _clustered(n=12):
    """Eight nearly equal inputs and four spread ones: uniform-over-gaps (empirical) cuts and
    uniform-over-the-extent (prior) cuts give very different subtrees, so a wrong weight
    correction shows in the depth and leaf counts."""
    rng = np.random.default_rng(0)
    X = np.empty((n, 3))
    X[:, 0] = np.concatenate([rng.normal(0, 0.01, n - 4), [1.0, 3.0, 6.0, 10.0]])
    X[:, 1] = rng.integers(0, 3, size=n)  # ties
    X[:, 2] = 1.0  # constant
    return X


@pytest.fixture(scope="module")
def prior_cells():
    X = _clustered()
    rng = np.random.default_rng(5)
    drawn = Counter()
    for _ in range(20_000):
        tree = sample_prior(X, ALPHA_S, BETA_S, rng=rng)
        drawn[(tree.max_depth, tree.n_leaves)] += 1
    return drawn


def _two_sample_pvalue(ref: Counter, got: Counter) -> float:
    cells = sorted(set(ref) | set(got), key=lambda c: -ref.get(c, 0))
    a = np.array([ref.get(c, 0) for c in cells])
    b = np.array([got.get(c, 0) for c in cells])
    keep = a + b >= 10  # the sparse cells pooled into one
    table = np.vstack([np.append(a[keep], a[~keep].sum()), np.append(b[keep], b[~keep].sum())])
    assert keep.sum() >= 5
    return stats.chi2_contingency(table[:, table.sum(axis=0) > 0]).pvalue


@pytest.mark.parametrize("expansion", EXPANSIONS)
@pytest.mark.parametrize("proposal", ["prior", "optimal"])
def test_flat_likelihood_prior_and_optimal_particles_are_prior_draws(proposal, expansion,
                                                                     prior_cells):
    """With l = 1 the prior and the optimal proposal sample the prior itself: every weight is
    1 / C (no resampling), so the particles are independent prior draws."""
    X = _clustered()
    trees = run_smc(X, np.zeros(12), LeafLikelihood.uninformative(), n_particles=3000,
                    proposal=proposal, expansion=expansion, random_state=1)
    counts = trees.weight * 3000
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)  # merged copies: k / C
    assert trees.n_resampled[0] == 0 and abs(trees.log_evidence[0]) < 1e-9
    got = Counter()
    for d, k, c in zip(trees.max_depth, trees.n_leaves, np.round(counts).astype(int),
                       strict=True):
        got[(d, k)] += c
    assert _two_sample_pvalue(prior_cells, got) > 1e-3


@pytest.mark.parametrize("expansion", EXPANSIONS)
def test_flat_likelihood_empirical_particles_follow_the_prior(expansion, prior_cells):
    """The empirical proposal is not the prior: only its weights (P/Q of eq. 3.7) make the
    particles prior draws. One draw per island by weight: 1000 independent draws (with the
    proposal-to-prior ratio left out, this test fails with p ~ 1e-16)."""
    X = _clustered()
    trees = run_smc(X, np.zeros(12), LeafLikelihood.uninformative(), n_particles=200,
                    n_islands=1000, proposal="empirical", expansion=expansion, random_state=3)
    assert trees.n_resampled.sum() > 0  # the weights are not trivial
    u = np.random.default_rng(9).random(trees.n_islands)
    picks = []
    for i, (a, b) in enumerate(zip(trees.islands[:-1], trees.islands[1:], strict=True)):
        cum = np.cumsum(trees.weight[a:b])
        picks.append(a + min(np.searchsorted(cum, u[i] * cum[-1], side="right"), b - a - 1))
    got = Counter(zip(trees.max_depth[picks].tolist(), trees.n_leaves[picks].tolist(),
                      strict=True))
    assert _two_sample_pvalue(prior_cells, got) > 1e-3


# ------------------------------------------------------- exact enumeration in 1-D

X6 = np.array([0.3, -1.0, 2.5, 0.0, 1.1, 1.7])
Y6 = np.array([0, 0, 1, 0, 1, 1])


def _exact_dm(x, y, alpha=1.0):
    order = np.argsort(x)
    return naive_enumerate_trees_1d(
        x, ALPHA_S, BETA_S,
        lambda idx: naive_dirichlet_multinomial_polya(y[order[idx]], alpha, 2))


def _structure_tv(trees, x, posterior, combine="evidence"):
    """Total variation between the weighted particles' tree structures and the exact law."""
    w = trees.tree_weights(combine)
    est = Counter()
    for t in range(trees.n_trees):
        est[naive_structure_1d(_tree(trees, t), x)] += w[t]
    assert set(est) <= set(posterior)
    return 0.5 * sum(abs(est[k] - p) for k, p in posterior.items())


@pytest.fixture(scope="module")
def exact6():
    log_ev, enumerated = _exact_dm(X6, Y6)
    posterior = {t["structure"]: np.exp(t["log_post"]) for t in enumerated}
    prior = {t["structure"]: np.exp(t["log_prior"]) for t in enumerated}
    # the check is sharp: the data move the law over 188 trees far from the prior
    assert len(posterior) == 188
    assert 0.5 * sum(abs(posterior[k] - prior[k]) for k in posterior) > 0.2
    return log_ev, posterior


@pytest.mark.parametrize("expansion", EXPANSIONS)
@pytest.mark.parametrize("proposal", PROPOSALS)
def test_posterior_over_trees_matches_the_enumeration(proposal, expansion, exact6):
    log_ev, posterior = exact6
    big = run_smc(X6[:, None], Y6, LeafLikelihood.dirichlet_multinomial(1.0, 2),
                  n_particles=2000, n_islands=4, proposal=proposal, expansion=expansion,
                  random_state=7)
    small = run_smc(X6[:, None], Y6, LeafLikelihood.dirichlet_multinomial(1.0, 2),
                    n_particles=25, n_islands=4, proposal=proposal, expansion=expansion,
                    random_state=7)
    tv_big = _structure_tv(big, X6, posterior)
    assert tv_big < 0.12
    assert _structure_tv(small, X6, posterior) > tv_big
    assert abs(big.log_evidence_total() - log_ev) < 0.05


@pytest.mark.parametrize("resampling", ["multinomial", "systematic"])
@pytest.mark.parametrize("proposal", PROPOSALS)
def test_evidence_is_unbiased_and_converges(proposal, resampling, exact6):
    """Z-hat is unbiased for every C (here with resampling after every stage); log Z-hat's
    error shrinks as C grows."""
    log_ev, _ = exact6
    lik = LeafLikelihood.dirichlet_multinomial(1.0, 2)

    def errors(c, n_islands):
        trees = run_smc(X6[:, None], Y6, lik, n_particles=c, n_islands=n_islands,
                        proposal=proposal, ess_threshold=1.0, resampling=resampling,
                        random_state=c)
        assert (trees.n_resampled > 0).all()
        return trees.log_evidence - log_ev

    small = errors(10, 400)
    ratio = np.exp(small)
    assert abs(ratio.mean() - 1) < 4 * ratio.std() / np.sqrt(ratio.size)  # unbiased
    big = errors(2000, 8)
    assert np.abs(big).mean() < 0.05
    assert np.abs(big).mean() < 0.5 * np.abs(small).mean()


def test_regression_posterior_matches_the_enumeration():
    """The Normal likelihood of eq. (4.9) on five points, prior and optimal proposals."""
    x = np.array([0.2, -1.3, 2.1, 0.9, 1.4])
    y = np.array([0.1, -0.8, 1.9, 1.2, 1.6])
    sigma2, mu0, tau2 = 0.3, 0.0, 1.0
    order = np.argsort(x)

    def leaf(idx):
        v = y[order[idx]]
        return stats.multivariate_normal.logpdf(v, np.full(v.size, mu0),
                                                sigma2 * np.eye(v.size) + tau2)

    log_ev, enumerated = naive_enumerate_trees_1d(x, ALPHA_S, BETA_S, leaf)
    posterior = {t["structure"]: np.exp(t["log_post"]) for t in enumerated}
    lik = LeafLikelihood.normal(sigma2, mu0, tau2)
    for proposal in ("prior", "optimal"):
        trees = run_smc(x[:, None], y, lik, n_particles=2000, n_islands=4, proposal=proposal,
                        random_state=2)
        assert _structure_tv(trees, x, posterior) < 0.1
        assert abs(trees.log_evidence_total() - log_ev) < 0.05


def test_one_optimal_stage_weighs_every_particle_by_the_root_predictive():
    """After one node-wise stage of the optimal proposal every weight is Z_root / l(root) (it
    does not depend on the draw), so the evidence estimate of the truncated target is exact."""
    X = np.random.default_rng(0).normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    lik = LeafLikelihood.dirichlet_multinomial(2.0, 2)
    trees = run_smc(X, y, lik, n_particles=50, proposal="optimal", max_stages=1,
                    random_state=0)
    S = lik.row_stats(y)
    tree = BayesTree.root_only(30)
    work = scratch(30, 2, 2)
    log_stop, _, _ = optimal_masses(data_record(X, S, dense_ranks(X)), tree.record(30), 0,
                                    model_record(ALPHA_S, BETA_S, lik.code, lik.params), work)
    assert OPTIMAL == 2 and trees.n_stages[0] == 1
    np.testing.assert_allclose(trees.log_evidence[0], logsumexp([log_stop, *work.dim_mass]),
                               rtol=1e-12)
    assert (trees.n_leaves <= 2).all() and trees.n_leaves.max() == 2


# ------------------------------------------------------- the particle system itself


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_trees_are_valid_and_node_statistics_are_their_rows(proposal):
    rng = np.random.default_rng(4)
    X = np.round(rng.normal(size=(80, 3)), 1)
    y = rng.integers(0, 3, size=80)
    lik = LeafLikelihood.dirichlet_multinomial(3.0, 3)
    trees = run_smc(X, y, lik, n_particles=40, n_islands=2, proposal=proposal,
                    random_state=0)
    S = lik.row_stats(y)
    np.testing.assert_allclose(np.add.reduceat(trees.weight, trees.islands[:-1]), 1.0)
    assert trees.n_leaves.max() > 3
    for t in range(trees.n_trees):
        arrays = _tree(trees, t)
        n = arrays["feature"].size
        parent = np.full(n, -1)
        depth = np.zeros(n, np.int64)
        for j in np.flatnonzero(arrays["feature"] >= 0):
            for c in (arrays["left"][j], arrays["right"][j]):
                parent[c], depth[c] = j, depth[j] + 1
        BayesTree(**arrays, parent=parent, depth=depth, n_nodes=n).check(3)
        rows = naive_bayestree_rows(arrays, X)
        a = trees.offsets[t]
        for j in range(n):
            np.testing.assert_array_equal(trees.stats[a + j], S[rows[j]].sum(axis=0))
            assert rows[j].size > 0


def test_capacity_grows_past_the_initial_slots():
    """200 distinct points and a prior that keeps splitting: trees far beyond 63 nodes."""
    x = np.arange(200.0)[:, None]
    y = np.arange(200) % 2
    trees = run_smc(x, y, LeafLikelihood.dirichlet_multinomial(1.0, 2), n_particles=8,
                    alpha_s=0.99, beta_s=0.0, random_state=0)
    assert np.diff(trees.offsets).max() > 200
    assert (trees.n_leaves <= 200).all()


def test_results_depend_on_the_seed_only():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    lik = LeafLikelihood.dirichlet_multinomial(5.0, 2)
    kw = dict(n_particles=30, n_islands=3, random_state=11)
    one = run_smc(X, y, lik, n_jobs=1, **kw)
    two = run_smc(X, y, lik, n_jobs=2, **kw)
    for name, value in one.get_state().items():
        np.testing.assert_array_equal(value, two.get_state()[name], err_msg=name)
    other = run_smc(X, y, lik, n_jobs=1, **{**kw, "random_state": 12})
    assert not np.array_equal(one.log_evidence, other.log_evidence)
    assert len(set(one.log_evidence.tolist())) == 3  # islands have their own seeds
    branch = run_smc(X, y, lik, n_jobs=1, branch=1, **kw)
    assert not np.array_equal(one.log_evidence, branch.log_evidence)


def test_copy_ancestors_keeps_survivors_in_place():
    rng = np.random.default_rng(0)
    n_part, cap, n_rows = 7, 9, 5
    ints = [rng.integers(0, 100, size=(n_part, cap)) for _ in range(7)]
    threshold = rng.random((n_part, cap))
    order = np.array([rng.permutation(n_rows) for _ in range(n_part)])
    n_nodes = rng.integers(1, cap + 1, size=n_part)
    head = rng.integers(0, 3, size=n_part)
    anc = np.sort(rng.choice(n_part, size=n_part, p=[0.4, 0.05, 0.3, 0.05, 0.1, 0.05, 0.05]))
    before = ([a.copy() for a in ints], threshold.copy(), order.copy(), n_nodes.copy(),
              head.copy())
    f, le, ri, pa, de, st, co = ints
    p = ParticleSet(f, threshold, le, ri, pa, de, st, co, order, n_nodes, head,
                    np.zeros(n_part), np.zeros(n_part), np.zeros(n_part, np.int64),
                    np.zeros(n_rows, np.int64))
    made = _copy_ancestors(anc, p)
    drawn = Counter(anc.tolist())
    assert made == sum(k - 1 for k in drawn.values())
    source = {c: c for c in drawn}  # survivors keep their slot
    for c in range(n_part):
        if c not in source:
            # a free slot holds a copy of some particle drawn more than once
            src = [s for s in drawn if n_nodes[c] == before[3][s] and
                   np.array_equal(order[c], before[2][s])]
            assert src
            source[c] = src[0]
    assert Counter(source.values()) == drawn
    for c, s in source.items():
        n = before[3][s]
        assert n_nodes[c] == n and head[c] == before[4][s]
        np.testing.assert_array_equal(threshold[c, :n], before[1][s, :n])
        for a, b in zip(ints, before[0], strict=True):
            np.testing.assert_array_equal(a[c, :n], b[s, :n])


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(n_particles=0), "n_particles=0 must be an integer >= 1"),
    (dict(n_islands=1.5), "n_islands=1.5 must be an integer >= 1"),
    (dict(proposal="greedy"), "proposal='greedy' is not one of"),
    (dict(expansion="depth"), "expansion='depth' is not one of"),
    (dict(ess_threshold=1.5), "ess_threshold=1.5 must be a number in"),
    (dict(resampling="stratified"), "resampling='stratified' is not one of"),
    (dict(max_stages=0), "max_stages=0 must be None or an integer >= 1"),
    (dict(alpha_s=1.0), "alpha_s=1.0 must lie in the open interval"),
])
def test_bad_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_smc(X6[:, None], Y6, LeafLikelihood.dirichlet_multinomial(1.0, 2), **kwargs)


def test_bad_data_is_named():
    lik = LeafLikelihood.dirichlet_multinomial(1.0, 2)
    with pytest.raises(ValueError, match="y has 5 rows but X has 6"):
        run_smc(X6[:, None], Y6[:5], lik)
    with pytest.raises(ValueError, match="not class codes"):
        run_smc(X6[:, None], Y6 + 1, lik)
    with pytest.raises(ValueError, match="NaN"):
        run_smc(np.full((6, 1), np.nan), Y6, lik)
