"""The Mondrian kernel's baselines: Cauchy random Fourier features and random binning
approximate the Laplace kernel (oracle: ``tests.naive.naive_laplace_kernel``)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from mondrian.laplace_features import LaplaceRandomFeatures, RandomBinningFeatures
from tests.naive import naive_laplace_kernel

X = np.random.default_rng(0).random((60, 2))
LAM = 3.0
K = naive_laplace_kernel(X, X, LAM)


@parametrize_with_checks([LaplaceRandomFeatures(n_components=5, random_state=0),
                          RandomBinningFeatures(n_components=5, random_state=0)])
def test_sklearn_compatible_transformers(estimator, check):
    check(estimator)


def test_cauchy_random_features_approximate_the_laplace_kernel():
    # every entry is a mean of D bounded terms cos(.) in [-1, 1]: Hoeffding with a union
    # bound over the 60 x 60 pairs gives max error <= sqrt(2 log(2 n^2 / 0.01) / D) with
    # probability 0.99; the error falls as 1 / sqrt(D) (a 16x larger D: about 4x smaller)
    errors = {}
    for d in (100, 1600):
        Z = LaplaceRandomFeatures(n_components=d, lifetime=LAM, random_state=0).fit_transform(X)
        errors[d] = np.abs(Z @ Z.T - K).max()
        assert errors[d] <= np.sqrt(2 * np.log(2 * 60**2 / 0.01) / d)
    assert 2.0 <= errors[100] / errors[1600] <= 8.0
    np.testing.assert_allclose(np.diag(Z @ Z.T), 1.0)


def test_random_binning_is_unbiased():
    # each seed's single-repetition kernel is the indicator "same bin", Bernoulli(k); its
    # mean over 2000 seeds is within 4.5 standard errors of k at every pair
    hits = np.zeros_like(K)
    seeds = 2000
    for s in range(seeds):
        Z = RandomBinningFeatures(n_components=1, lifetime=LAM, random_state=s).fit_transform(X)
        hits += (Z @ Z.T).toarray()
    mean = hits / seeds
    se = np.sqrt(K * (1 - K) / seeds) + 1e-12
    assert np.all(np.abs(mean - K) <= 4.5 * se + 1e-9)


def test_random_binning_features_are_one_bin_per_repetition():
    f = RandomBinningFeatures(n_components=20, lifetime=LAM, random_state=0).fit(X)
    Z = f.transform(X)
    assert Z.shape == (60, f.n_features_out_) and f.n_features_out_ == f.n_bins_.sum() + 20
    np.testing.assert_array_equal(Z.getnnz(axis=1), 20)
    far = f.transform(X + 100.0)  # every bin unseen: the repetitions' unseen columns
    assert np.all((far @ Z.T).toarray() == 0)


@pytest.mark.parametrize("cls", [LaplaceRandomFeatures, RandomBinningFeatures])
def test_bad_lifetime_is_named(cls):
    with pytest.raises(ValueError, match="lifetime"):
        cls(lifetime=0.0).fit(X)
