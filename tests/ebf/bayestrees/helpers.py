"""What the sampler tests share: exact 1-D posteriors, chains of one tree, goodness of fit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
from scipy import stats

from ebf.bayestrees import BayesTree, LeafLikelihood
from tests.naive import (
    naive_enumerate_trees_1d,
    naive_structure_1d,
    naive_tree_from_structure_1d,
)

SIGMA2, SIGMA_MU2 = 0.3, 1.0
NORMAL = LeafLikelihood.normal(SIGMA2, 0.0, SIGMA_MU2)

#: Six distinct 1-D inputs and labels with two competing root cuts (after the 1st or the
#: 3rd smallest input), so a sampler must move between modes.
X1 = np.array([[0.3], [-1.0], [2.5], [0.0], [1.1], [1.6]])
Y1 = np.array([0.2, -1.1, 1.9, -0.7, 1.0, 1.3])


def normal_leaf_ll(y: np.ndarray) -> Callable[[np.ndarray], float]:
    """log of eq. (4.9) as a multivariate normal density: y_rows ~ N(0, s2 I + s_mu2 11')."""
    def ll(rows):
        n = len(rows)
        if n == 0:
            return 0.0
        cov = SIGMA2 * np.eye(n) + SIGMA_MU2 * np.ones((n, n))
        return float(stats.multivariate_normal(np.zeros(n), cov).logpdf(y[rows]))
    return ll


def as_tree(arrays: dict, n_rows: int) -> BayesTree:
    """A BayesTree holding ``arrays`` (trimmed node arrays)."""
    tree = BayesTree.root_only(n_rows)
    n = len(arrays["feature"])
    for name in BayesTree.ARRAYS:
        getattr(tree, name)[:n] = arrays[name]
    tree.n_nodes = n
    return tree


def enumerated_posterior(alpha_s: float, beta_s: float) -> dict:
    """structure -> exact posterior probability on (X1, Y1) with Normal leaves."""
    order = np.argsort(X1[:, 0])
    ll = normal_leaf_ll(Y1[order])
    _, trees = naive_enumerate_trees_1d(X1[:, 0], alpha_s, beta_s, ll)
    return {t["structure"]: np.exp(t["log_post"]) for t in trees}


def posterior_draws(exact: dict, n: int, rng: np.random.Generator) -> list[BayesTree]:
    """``n`` exact posterior draws on X1 (structure by enumeration, cuts uniform in gaps)."""
    cells = list(exact)
    p = np.array([exact[c] for c in cells])
    picks = rng.choice(len(cells), size=n, p=p / p.sum())
    return [as_tree(naive_tree_from_structure_1d(cells[i], X1[:, 0], rng), len(X1))
            for i in picks]


def structures(trees) -> Counter:
    return Counter(naive_structure_1d(t.trimmed(), X1[:, 0]) for t in trees)


def goodness_of_fit(observed: Counter, exact: dict) -> tuple[float, float, int]:
    """(chi-square p-value with cells expecting < 5 pooled, total variation, cells)."""
    n = sum(observed.values())
    cells = sorted(exact, key=exact.get, reverse=True)
    expected = np.array([exact[c] * n for c in cells])
    obs = np.array([observed[c] for c in cells], float)
    assert obs.sum() == n, "a tree outside the enumeration"
    tv = 0.5 * np.abs(obs - expected).sum() / n
    keep = int(np.searchsorted(-expected, -5.0, side="right"))
    expected[keep - 1] += expected[keep:].sum()
    obs[keep - 1] += obs[keep:].sum()
    return float(stats.chisquare(obs[:keep], expected[:keep]).pvalue), tv, keep


def shape_counts(trees) -> Counter:
    """(max depth, leaves) of every tree."""
    return Counter((t.max_depth, t.n_leaves) for t in trees)


def two_sample_chisquare(a: Counter, b: Counter, min_expected: float = 5.0) -> tuple[float, int]:
    """p-value of a chi-square test that two samples of cells have one law (rare cells
    pooled), and the number of cells tested."""
    cells = sorted(set(a) | set(b), key=lambda c: -(a[c] + b[c]))
    table = np.array([[a[c] for c in cells], [b[c] for c in cells]], float)
    expected_min = table.sum(axis=0) * table.sum(axis=1).min() / table.sum()
    keep = max(int(np.sum(expected_min >= min_expected)), 2)
    pooled = np.column_stack([table[:, : keep - 1], table[:, keep - 1:].sum(axis=1)])
    return float(stats.chi2_contingency(pooled)[1]), keep


def mixed_problem(seed: int, n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Three inputs (one with ties, so a node may not vary along it) and labels with a step."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X[:, 1] = rng.integers(0, 3, size=n)
    y = np.where(X[:, 0] > 0, 1.5, -1.0) + 0.5 * rng.normal(size=n)
    return X, y


def flat_problem(seed: int = 2024, n: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """2-D inputs, one of them with ties, and dummy labels for the flat likelihood."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X[:, 1] = np.round(X[:, 1])
    return X, np.zeros(n)
