"""The Chipman prior (thesis eq. 3.3-3.4): sampler and density against enumeration and oracles."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from basics.flat_tree import NO_NODE
from ebf.bayestrees import BayesTree, LeafLikelihood, log_likelihood, log_prior, sample_prior
from ebf.bayestrees._prior import UNIFORMS_PER_NODE, prior_cut
from ebf.bayestrees._records import small_scratch
from ebf.bayestrees._trees import node_extent
from tests.naive import (
    naive_bayestree_log_prior,
    naive_dirichlet_multinomial_polya,
    naive_enumerate_trees_1d,
    naive_prior_cut,
    naive_sample_prior,
    naive_structure_1d,
)

#: Distinct 1-D inputs, unevenly spaced so that the gaps' masses differ.
X1 = np.array([[0.3], [-1.0], [2.5], [0.0], [1.1]])


def _ties(seed, n=30):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X[:, 1] = rng.integers(0, 3, size=n)  # few distinct values: nodes stop varying in it
    X[:, 2] = 1.0  # never varies: never a split dimension
    return X


@pytest.mark.parametrize("seed", range(8))
def test_prior_cut_matches_the_oracle_with_or_without_the_extent(seed):
    """The cut of a splitting node: found lazily (which dimensions vary, then the extent of
    the chosen one) or from a known extent, it is the oracle's from the full extent."""
    X = _ties(seed)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(X.shape[0], 2 + seed, replace=False))
    if seed == 7:
        rows = np.array([3, 3 + X.shape[0] // 2])
        X[rows[1]] = X[rows[0]]  # two equal rows: nothing varies, no cut
    t = BayesTree.root_only(X.shape[0]).record(X.shape[0], rows.astype(np.int64),
                                               np.zeros(2 * X.shape[0], np.int64),
                                               np.array([rows.size] + [0] * 59, np.int64))
    w = small_scratch(X.shape[1], 3)
    for u1, u2 in rng.random((20, 2)):
        u = np.array([0.0, u1, u2])
        want = naive_prior_cut(X, rows, u1, u2)
        got = prior_cut(X, t, 0, u, -1, w)
        n_valid = node_extent(X, t, 0, w.lower, w.upper)
        known = prior_cut(X, t, 0, u, n_valid, w)
        if want is None:
            assert got[0] == known[0] == NO_NODE
        else:
            assert got == known == (want[0], want[1])


@pytest.mark.parametrize("seed", range(8))
def test_sampler_matches_the_oracle_given_the_same_uniforms(seed):
    X = _ties(seed)
    tree = sample_prior(X, 0.95, 0.5, rng=seed)
    u = np.random.default_rng(seed).random((2 * X.shape[0] - 1, UNIFORMS_PER_NODE))
    expected = naive_sample_prior(X, 0.95, 0.5, u)
    got = tree.trimmed()
    for name, want in expected.items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    assert not np.any(got["feature"] == 2)
    np.testing.assert_allclose(log_prior(tree, X, 0.95, 0.5),
                               naive_bayestree_log_prior(got, X, 0.95, 0.5), rtol=1e-12)


def test_log_prior_is_minus_inf_for_splits_the_prior_cannot_make():
    X = _ties(0)
    tree = sample_prior(X, 0.95, 0.0, rng=1)
    assert tree.n_nodes >= 3
    for f, t in ((2, 1.0), (0, X[:, 0].max()), (0, X[:, 0].min() - 1)):
        bad = tree.copy()
        bad.feature[0], bad.threshold[0] = f, t  # a constant dimension / an empty child
        assert log_prior(bad, X, 0.95, 0.0) == -np.inf
        assert naive_bayestree_log_prior(bad.trimmed(), X, 0.95, 0.0) == -np.inf


@pytest.mark.parametrize(("alpha_s", "beta_s"), [(0.95, 2.0), (0.95, 0.5), (0.5, 0.0)])
def test_enumerated_prior_sums_to_one_and_flat_posterior_is_the_prior(alpha_s, beta_s):
    log_ev, trees = naive_enumerate_trees_1d(X1[:, 0], alpha_s, beta_s, lambda idx: 0.0)
    assert len(trees) == 51  # T(5) = 1 + sum_i T(i) T(5 - i) partition-trees on 5 points
    assert abs(log_ev) < 1e-12
    log_prior_mass = np.array([t["log_prior"] for t in trees])
    np.testing.assert_allclose(np.exp(logsumexp(log_prior_mass)), 1.0, rtol=1e-12)
    np.testing.assert_allclose([t["log_post"] for t in trees], log_prior_mass, atol=1e-12)


def _gap_log_mass(arrays, x):
    """sum over internal nodes of log(x_(i+1) - x_(i)): the cut's gap in the sorted inputs."""
    xs = np.sort(x)
    total = 0.0
    for j in np.flatnonzero(arrays["feature"] >= 0):
        i = np.searchsorted(xs, arrays["threshold"][j], side="right") - 1
        total += np.log(xs[i + 1] - xs[i])
    return total


def test_log_prior_density_integrates_to_the_enumerated_partition_mass():
    """p(T | X) is a density in the locations: times the gaps it is the partition's mass."""
    _, trees = naive_enumerate_trees_1d(X1[:, 0], 0.95, 0.5, lambda idx: 0.0)
    mass = {t["structure"]: t["log_prior"] for t in trees}
    seen = set()
    for seed in range(60):
        tree = sample_prior(X1, 0.95, 0.5, rng=seed)
        arrays = tree.trimmed()
        structure = naive_structure_1d(arrays, X1[:, 0])
        seen.add(structure)
        np.testing.assert_allclose(
            log_prior(tree, X1, 0.95, 0.5) + _gap_log_mass(arrays, X1[:, 0]), mass[structure],
            rtol=1e-12)
    assert len(seen) > 10


@pytest.mark.parametrize(("alpha_s", "beta_s"), [(0.95, 2.0), (0.95, 0.5)])
def test_depth_and_leaf_counts_follow_the_enumerated_prior(alpha_s, beta_s):
    """chi-square of the joint (max depth, leaves) law of 20k draws against enumeration."""
    _, trees = naive_enumerate_trees_1d(X1[:, 0], alpha_s, beta_s, lambda idx: 0.0)
    exact: Counter = Counter()
    for t in trees:
        exact[(t["depth"], t["n_leaves"])] += np.exp(t["log_prior"])
    rng = np.random.default_rng(12345)
    n_draws = 20_000
    drawn = Counter()
    for _ in range(n_draws):
        tree = sample_prior(X1, alpha_s, beta_s, rng=rng)
        drawn[(tree.max_depth, tree.n_leaves)] += 1
    assert set(drawn) <= set(exact)
    cells = sorted(exact, key=exact.get, reverse=True)
    expected = np.array([exact[c] * n_draws for c in cells])
    observed = np.array([drawn[c] for c in cells], float)
    keep = np.searchsorted(-expected, -5.0, side="right")  # cells expecting >= 5 draws ...
    expected[keep - 1] += expected[keep:].sum()  # ... the rest pooled into the last of them
    observed[keep - 1] += observed[keep:].sum()
    expected, observed = expected[:keep], observed[:keep]
    assert keep >= 4
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_prior_average_of_the_likelihood_is_the_enumerated_evidence():
    """p(Y | X) = E_{T ~ p(T | X)} p(Y | T, X): Monte Carlo over the sampler vs enumeration."""
    y = np.array([0, 0, 1, 0, 1])
    lik = LeafLikelihood.dirichlet_multinomial(1.0, 2)
    order = np.argsort(X1[:, 0])
    log_ev, _ = naive_enumerate_trees_1d(
        X1[:, 0], 0.95, 0.5,
        lambda idx: naive_dirichlet_multinomial_polya(y[order[idx]], 1.0, 2))
    rng = np.random.default_rng(7)
    lik_draws = np.exp([log_likelihood(sample_prior(X1, 0.95, 0.5, rng=rng), X1, y, lik)
                        for _ in range(20_000)])
    se = lik_draws.std() / np.sqrt(lik_draws.size)
    assert abs(lik_draws.mean() - np.exp(log_ev)) < 4 * se
    assert se < 0.03 * np.exp(log_ev)  # the check is sharp enough to catch a wrong prior


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(alpha_s=1.0), "alpha_s=1.0 must lie in the open interval"),
    (dict(alpha_s=0.0), "alpha_s=0.0 must lie in the open interval"),
    (dict(alpha_s=np.nan), "alpha_s=nan"),
    (dict(beta_s=-0.5), "beta_s=-0.5 must be finite and >= 0"),
    (dict(beta_s=np.inf), "beta_s=inf must be finite"),
])
def test_bad_prior_parameters_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_prior(X1, **kwargs)
    with pytest.raises(ValueError, match=match):
        log_prior(BayesTree.root_only(5), X1, **kwargs)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"X is empty \(shape \(0, 2\)\)"):
        sample_prior(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="X must be a 2-D array"):
        sample_prior(np.zeros(3))
    X = _ties(0)
    X[3, 0] = np.nan
    X[4, 0] = np.inf
    with pytest.raises(ValueError, match="'column 0': 1 NaN and 1 inf"):
        sample_prior(X)
