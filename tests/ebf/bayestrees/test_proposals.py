"""SMC proposal kernels (thesis Sec. 3.3, 3.3.1, eq. 3.5-3.7) against the NumPy oracles."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from ebf.bayestrees import LeafLikelihood, partition_rows, sample_prior
from ebf.bayestrees._proposals import (
    EMPIRICAL,
    OPTIMAL,
    PRIOR,
    PROPOSAL_UNIFORMS,
    dense_ranks,
    expand_node,
    optimal_masses,
    proposal_code,
    sort_positions,
)
from ebf.bayestrees._records import data_record, model_record, scratch
from tests.naive import (
    naive_bayestree_rows,
    naive_dirichlet_multinomial_polya,
    naive_expand_empirical,
    naive_optimal_proposal,
)

ALPHA_S, BETA_S = 0.95, 0.5


def _problem(seed, kind, n=40):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 1] = np.round(X[:, 1])  # ties
    X[:, 2] = rng.integers(0, 2, size=n)  # two values: a single gap
    X[:, 3] = 7.0  # constant: never in V_j
    if kind == "dm":
        y = rng.integers(0, 3, size=n)
        lik = LeafLikelihood.dirichlet_multinomial(2.0, 3)

        def leaf(rows):
            return naive_dirichlet_multinomial_polya(y[rows], 2.0, 3)
    else:
        y = X[:, 0] + 0.5 * rng.normal(size=n)
        lik = LeafLikelihood.normal(0.4, 0.2, 1.5)

        def leaf(rows):  # eq. (4.9) as the joint Normal of the leaf's labels
            cov = 0.4 * np.eye(rows.size) + 1.5
            return stats.multivariate_normal.logpdf(y[rows], np.full(rows.size, 0.2), cov) \
                if rows.size else 0.0
    return X, y, lik, leaf


def _nodes(seed, kind):
    """A problem, a small prior tree on it, the rows of its nodes and its leaves with at
    least two rows (the nodes to expand)."""
    X, y, lik, leaf = _problem(seed, kind)
    tree = sample_prior(X, 0.9, 1.0, rng=seed)
    rows = naive_bayestree_rows(tree.trimmed(), X)
    leaves = [j for j in np.flatnonzero(tree.is_leaf) if rows[j].size >= 2]
    return X, lik, lik.row_stats(y), leaf, tree, rows, leaves


def _expand(proposal, tree, X, lik, S, j, u, ranks=None):
    tree = tree.copy()
    order, start, count = partition_rows(tree, X)
    work = scratch(X.shape[0], X.shape[1], S.shape[1])
    n_new, log_inc = expand_node(proposal, tree.record(X.shape[0], order, start, count),
                                 tree.n_nodes, data_record(X, S, ranks), j,
                                 model_record(ALPHA_S, BETA_S, lik.code, lik.params), u, work)
    tree.n_nodes = int(n_new)
    return tree, log_inc, (order, start, count, work)


def test_proposal_names():
    assert [proposal_code(n) for n in ("prior", "empirical", "optimal")] == [PRIOR, EMPIRICAL,
                                                                           OPTIMAL]
    with pytest.raises(ValueError, match="proposal='best' is not one of"):
        proposal_code("best")


@pytest.mark.parametrize("kind", ["dm", "normal"])
@pytest.mark.parametrize("seed", range(4))
def test_prior_and_empirical_expansions_match_the_oracle(kind, seed):
    X, lik, S, leaf, tree, rows, leaves = _nodes(seed, kind)
    rng = np.random.default_rng(seed)
    for j in leaves:
        depth = tree.depth[j]
        for _ in range(6):
            u = rng.random(PROPOSAL_UNIFORMS)
            u[0] *= 0.5  # mostly splits
            for proposal in (PRIOR, EMPIRICAL):
                grown, log_inc, _ = _expand(proposal, tree, X, lik, S, j, u)
                if proposal == EMPIRICAL:
                    expected = naive_expand_empirical(X, rows[j], depth, ALPHA_S, BETA_S, u)
                elif u[0] < ALPHA_S * (1 + depth) ** -BETA_S:  # the prior kernel's own oracle
                    f, t, _ = naive_expand_empirical(X, rows[j], depth, ALPHA_S, BETA_S, u)
                    lo, hi = X[rows[j], f].min(), X[rows[j], f].max()
                    t = lo + u[2] * (hi - lo)
                    expected = (f, t, 0.0)
                else:
                    expected = None
                if expected is None:
                    assert grown.n_nodes == tree.n_nodes and log_inc == 0.0
                    continue
                f, t, log_ratio = expected
                assert (grown.feature[j], grown.threshold[j]) == (f, pytest.approx(t, abs=0))
                left = rows[j][X[rows[j], f] <= t]
                right = rows[j][X[rows[j], f] > t]
                gain = leaf(left) + leaf(right) - leaf(rows[j])
                np.testing.assert_allclose(log_inc, log_ratio + gain, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", ["dm", "normal"])
@pytest.mark.parametrize("seed", range(4))
def test_optimal_masses_match_the_oracle(kind, seed):
    X, lik, S, leaf, tree, rows, leaves = _nodes(seed, kind)
    ranks = dense_ranks(X)
    t = tree.record(X.shape[0], *partition_rows(tree, X))
    work = scratch(X.shape[0], X.shape[1], S.shape[1])
    data = data_record(X, S, ranks)
    model = model_record(ALPHA_S, BETA_S, lik.code, lik.params)
    for j in leaves:
        log_z, choices = naive_optimal_proposal(X, rows[j], tree.depth[j], ALPHA_S, BETA_S, leaf)
        log_stop, ll_j, n_valid = optimal_masses(data, t, j, model, work)
        dim_mass = work.dim_mass
        np.testing.assert_allclose(ll_j, leaf(rows[j]), rtol=1e-9)
        np.testing.assert_allclose(log_stop, choices[0][3], rtol=1e-9)
        for f in range(X.shape[1]):
            expected = [c[3] for c in choices if c[0] == f]
            if not expected:
                assert dim_mass[f] == -np.inf
                continue
            np.testing.assert_allclose(dim_mass[f], logsumexp(expected), rtol=1e-9)
        np.testing.assert_allclose(logsumexp([log_stop, *dim_mass]), log_z, rtol=1e-9)
        assert n_valid == 3 or np.ptp(X[rows[j]], axis=0)[:3].min() == 0


@pytest.mark.parametrize("kind", ["dm", "normal"])
def test_optimal_expansion_draws_from_the_oracle_masses(kind):
    """Given its uniforms the kernel takes the oracle's choice (two-level inverse CDF: stop
    or dimension by ``u[0]``, gap by ``u[2]``, location ``u[3]``), its weight increment is
    log Z_j - log l(j) whatever it draws, and its draws follow the masses (chi-square)."""
    X, lik, S, leaf, tree, rows, leaves = _nodes(11, kind)
    j = max(leaves, key=lambda k: rows[k].size)
    log_z, choices = naive_optimal_proposal(X, rows[j], tree.depth[j], ALPHA_S, BETA_S, leaf)
    mass = np.exp(np.array([c[3] for c in choices]) - log_z)
    dims = np.array([c[0] for c in choices])
    rng = np.random.default_rng(3)
    drawn = np.zeros(len(choices))
    ranks = dense_ranks(X)
    ll_j = leaf(rows[j])
    for _ in range(3000):
        u = rng.random(PROPOSAL_UNIFORMS)
        grown, log_inc, _ = _expand(OPTIMAL, tree, X, lik, S, j, u, ranks)
        np.testing.assert_allclose(log_inc, log_z - ll_j, rtol=1e-9, atol=1e-9)
        # the oracle's choice for these uniforms
        per_dim = {f: mass[dims == f].sum() for f in dict.fromkeys(dims.tolist())}
        cum = np.cumsum(list(per_dim.values()))
        f = list(per_dim)[min(np.searchsorted(cum, u[0] * cum[-1], side="right"),
                              len(cum) - 1)]
        if f == -1:
            assert grown.n_nodes == tree.n_nodes
            drawn[0] += 1
            continue
        idx = np.flatnonzero(dims == f)
        gcum = np.cumsum(mass[idx])
        k = idx[min(np.searchsorted(gcum, u[2] * gcum[-1], side="right"), idx.size - 1)]
        _, lo, hi, _ = choices[k]
        t = lo + u[3] * (hi - lo)
        assert grown.feature[j] == f
        np.testing.assert_allclose(grown.threshold[j], t if t < hi else lo, rtol=1e-12)
        drawn[k] += 1
    expected = mass * drawn.sum()
    keep = expected >= 5
    observed = np.append(drawn[keep], drawn[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    assert keep.sum() >= 5
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_optimal_node_without_a_valid_split_stops_with_weight_one():
    X = np.ones((5, 2))
    lik = LeafLikelihood.dirichlet_multinomial(1.0, 2)
    S = lik.row_stats(np.array([0, 1, 1, 0, 1]))
    tree = sample_prior(X, rng=0)
    grown, log_inc, _ = _expand(OPTIMAL, tree, X, lik, S, 0, np.zeros(4), dense_ranks(X))
    assert grown.n_nodes == 1 and log_inc == 0.0


@pytest.mark.parametrize("n_values", [3, 1000])
def test_sort_positions_sorts_by_value(n_values):
    """Counting sort (few distinct values) and key sort (a wide rank range) both sort."""
    rng = np.random.default_rng(n_values)
    X = rng.integers(0, n_values, size=(2000, 1)).astype(float)
    ranks = dense_ranks(X)
    order = rng.permutation(2000)
    s, n = 100, 50 if n_values > 3 else 900
    perm = np.empty(n, np.int64)
    sort_positions(ranks, order, s, n, 0, perm, np.empty(2001, np.int64),
                   np.empty(n, np.int64))
    values = X[order[s:s + n], 0]
    assert sorted(perm.tolist()) == list(range(n))
    np.testing.assert_array_equal(values[perm], np.sort(values))
