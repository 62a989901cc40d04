"""Leaf marginal likelihoods (thesis eq. 3.2, 4.9) against independent oracles."""

from __future__ import annotations

import numpy as np
import pytest

from ebf.bayestrees import LeafLikelihood, apply, log_likelihood, sample_prior
from ebf.bayestrees._likelihood import nig_posterior
from tests.naive import (
    naive_dirichlet_multinomial_polya,
    naive_nig_marginal_sequential,
    naive_normal_marginal_quad,
)


@pytest.mark.parametrize(("n", "sigma2", "mu0", "sigma_mu2"), [
    (1, 1.0, 0.0, 1.0), (5, 0.3, 1.5, 0.2), (40, 2.0, -3.0, 10.0), (7, 0.01, 0.4, 1e-3),
])
def test_normal_marginal_matches_quadrature(n, sigma2, mu0, sigma_mu2):
    y = np.random.default_rng(n).normal(2.0, 1.5, size=n)
    lik = LeafLikelihood.normal(sigma2, mu0, sigma_mu2)
    stats = lik.row_stats(y).sum(axis=0, keepdims=True)
    expected = naive_normal_marginal_quad(y, sigma2, mu0, sigma_mu2)
    np.testing.assert_allclose(lik(stats), [expected], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("n", "nu", "lam", "mu0", "kappa"), [
    (1, 3.0, 1.0, 0.0, 1.0), (6, 3.0, 0.2, 1.5, 0.05), (40, 10.0, 4.0, -3.0, 3.0),
    (9, 2.5, 1e-3, 0.4, 1e-4),
])
def test_normal_inverse_gamma_matches_the_sequential_student_t(n, nu, lam, mu0, kappa):
    """Closed-form marginal and posterior against the chain rule of one-row updates."""
    y = np.random.default_rng(n).normal(2.0, 1.5, size=n)
    lik = LeafLikelihood.normal_inverse_gamma(nu, lam, mu0, kappa)
    stats = lik.row_stats(y).sum(axis=0, keepdims=True)
    logp, mean, var = naive_nig_marginal_sequential(y, nu, lam, mu0, kappa)
    np.testing.assert_allclose(lik(stats), [logp], rtol=1e-10)
    m, k, a, b = nig_posterior(lik.params, stats)
    np.testing.assert_allclose(m, [mean], rtol=1e-12)
    np.testing.assert_allclose(b * (k + 1) / (k * (a - 1)), [var], rtol=1e-10)


def test_normal_marginal_of_an_empty_leaf_is_one():
    for lik in (LeafLikelihood.normal(1.0), LeafLikelihood.normal_inverse_gamma(3.0, 1.0)):
        np.testing.assert_array_equal(lik(np.zeros((2, 3))), [0.0, 0.0])


@pytest.mark.parametrize(("alpha", "k"), [(1.0, 2), (5.0, 3), (0.1, 4), (20.0, 1)])
def test_dirichlet_multinomial_matches_the_polya_urn(alpha, k):
    rng = np.random.default_rng(k)
    lik = LeafLikelihood.dirichlet_multinomial(alpha, k)
    leaves = [rng.integers(0, k, size=m) for m in (0, 1, 6, 31)]
    stats = np.array([lik.row_stats(lab).sum(axis=0) if lab.size else np.zeros(k)
                      for lab in leaves])
    expected = [naive_dirichlet_multinomial_polya(lab, alpha, k) for lab in leaves]
    np.testing.assert_allclose(lik(stats), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("which", ["dm", "normal", "nig", "flat"])
def test_tree_log_likelihood_sums_the_leaves(which):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 2))
    tree = sample_prior(X, 0.95, 0.5, rng=4)
    if which == "dm":
        y = rng.integers(0, 3, size=50)
        lik = LeafLikelihood.dirichlet_multinomial(2.0, 3)
        per_leaf = lambda lab: naive_dirichlet_multinomial_polya(lab, 2.0, 3)  # noqa: E731
    elif which == "normal":
        y = X[:, 0] + rng.normal(size=50)
        lik = LeafLikelihood.normal(0.5, 0.1, 2.0)
        per_leaf = lambda v: naive_normal_marginal_quad(v, 0.5, 0.1, 2.0)  # noqa: E731
    elif which == "nig":
        y = X[:, 0] + rng.normal(size=50)
        lik = LeafLikelihood.normal_inverse_gamma(3.0, 0.5, 0.1, 0.2)
        per_leaf = lambda v: naive_nig_marginal_sequential(v, 3.0, 0.5, 0.1, 0.2)[0]  # noqa: E731
    else:
        y = rng.normal(size=50)
        lik = LeafLikelihood.uninformative()
        per_leaf = lambda v: 0.0  # noqa: E731
    leaf = apply(tree, X)
    expected = sum(per_leaf(y[leaf == j]) for j in np.unique(leaf))
    assert tree.n_leaves > 2
    np.testing.assert_allclose(log_likelihood(tree, X, y, lik), expected, rtol=1e-9)


def test_bad_parameters_and_labels_are_named():
    with pytest.raises(ValueError, match="alpha=0.0 must be finite and > 0"):
        LeafLikelihood.dirichlet_multinomial(0.0, 2)
    with pytest.raises(ValueError, match="n_classes=1.5 must be an integer"):
        LeafLikelihood.dirichlet_multinomial(1.0, 1.5)
    with pytest.raises(ValueError, match="sigma2=-1 must be finite and > 0"):
        LeafLikelihood.normal(-1)
    with pytest.raises(ValueError, match="sigma_mu2=inf"):
        LeafLikelihood.normal(1.0, 0.0, np.inf)
    with pytest.raises(ValueError, match="mu0=nan must be finite"):
        LeafLikelihood.normal(1.0, np.nan)
    with pytest.raises(ValueError, match="nu=0 must be finite and > 0"):
        LeafLikelihood.normal_inverse_gamma(0, 1.0)
    with pytest.raises(ValueError, match="kappa=-1.0 must be finite and > 0"):
        LeafLikelihood.normal_inverse_gamma(3, 1.0, 0.0, -1.0)
    with pytest.raises(ValueError, match="2 value.* not class codes 0 .. 1 .first: 2"):
        LeafLikelihood.dirichlet_multinomial(1.0, 2).row_stats(np.array([0, 2, 1, -1]))
    with pytest.raises(ValueError, match="y holds 1 NaN or inf"):
        LeafLikelihood.normal(1.0).row_stats(np.array([0.0, np.nan]))
    X = np.zeros((3, 1))
    with pytest.raises(ValueError, match="y has 2 rows but X has 3"):
        log_likelihood(sample_prior(X, rng=0), X, np.zeros(2), LeafLikelihood.normal(1.0))
    with pytest.raises(ValueError, match="stats must have shape"):
        LeafLikelihood.normal(1.0)(np.zeros((2, 2)))
