"""The Mondrian forest regressor's one-walk kernels: its mixture (``regression_mixture``)
against a plain-Python walk of the trees, and its one-pass summary (``summarize_mixture``)
against building that mixture and summarising it, bit for bit."""

import pickle

import numpy as np
import pytest

from basics.mixture import summarize
from mondrian import MondrianForestRegressor
from mondrian._base import TreePosteriors
from tests.naive import naive_forest_components, naive_mixture_moments, naive_mixture_quantile

LEVELS = np.array([0.0, 0.01, 0.05, 0.5, 0.5, 0.95, 0.999, 1.0])


def _data(seed, n=300, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[: n // 5] = np.round(X[: n // 5], 1)  # ties: repeated coordinates
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.3 * rng.normal(size=n)
    return X, y


def _rows(X, seed):
    """Test rows inside the training box, just outside it and far outside (many branch-off
    components per tree), plus exact training rows."""
    rng = np.random.default_rng(seed + 100)
    return np.vstack([rng.normal(size=(80, X.shape[1])), 4 * rng.normal(size=(40, X.shape[1])),
                      50 * rng.normal(size=(10, X.shape[1])), X[:20]])


def _old(model, X, levels):
    return summarize(model.predict_distribution(X, recalibrated=False), levels)


@pytest.mark.parametrize("posterior", ["exact", "empirical"])
@pytest.mark.parametrize("noise", ["per_leaf", "forest"])
@pytest.mark.parametrize("n_estimators", [1, 7])
def test_equals_the_mixture_path_bit_for_bit(posterior, noise, n_estimators):
    X, y = _data(n_estimators)
    model = MondrianForestRegressor(n_estimators=n_estimators, posterior=posterior,
                                    noise=noise, min_samples_split=2, random_state=1).fit(X, y)
    Xt = _rows(X, n_estimators)
    new = model.summarize_mixture(Xt, LEVELS)
    for a, b in zip(new, _old(model, Xt, LEVELS), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("posterior", ["exact", "empirical"])
def test_the_mixture_is_the_plain_walk_of_the_trees(posterior):
    """Every row's components, in tree and path order, are the oracle's (paper Alg. 5)."""
    X, y = _data(7)
    model = MondrianForestRegressor(n_estimators=4, posterior=posterior, min_samples_split=2,
                                    random_state=2).fit(X, y)
    Xt = _rows(X, 7)
    Xs = model._scale(Xt)
    mix = model._mixture(Xs)
    want = naive_forest_components(model, Xs)
    total = np.array([sum(c[0] for c in row) for row in want])
    np.testing.assert_allclose(total, 1.0, rtol=1e-12)
    for i, row in enumerate(want):
        w, m, v = (np.array(col) for col in zip(*row, strict=True))
        k = len(row)
        np.testing.assert_allclose(mix.weights[i, :k], w / w.sum(), rtol=1e-12)
        live = w > 0  # a component whose weight underflows to 0 is padding: mean 0, var 1
        np.testing.assert_allclose(mix.means[i, :k][live], m[live], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mix.variances[i, :k][live], v[live], rtol=1e-12)
        assert not mix.weights[i, k:].any()


def test_agrees_with_the_oracles_of_the_mixture():
    X, y = _data(3)
    model = MondrianForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    Xt = _rows(X, 3)[::7]
    levels = np.array([0.05, 0.5, 0.95])
    mean, std, q = model.summarize_mixture(Xt, levels)
    mix = model.predict_distribution(Xt, recalibrated=False)
    for i in range(Xt.shape[0]):
        w, m, v = mix.weights[i], mix.means[i], mix.variances[i]
        mu, var = naive_mixture_moments(w, m, v)
        assert mean[i] == pytest.approx(mu, rel=1e-12, abs=1e-12)
        assert std[i] == pytest.approx(np.sqrt(var), rel=1e-12)
        for j, level in enumerate(levels):
            assert q[i, j] == pytest.approx(naive_mixture_quantile(w, m, v, level),
                                            rel=1e-10, abs=1e-10 * std[i])


def test_far_rows_grow_the_scratch():
    """Rows far outside the data give up to a path's length of components per tree, more
    than the kernel's first scratch holds: it grows, and the numbers stay those of the
    mixture."""
    X, y = _data(5, n=2000, d=2)
    model = MondrianForestRegressor(n_estimators=3, min_samples_split=2, random_state=0,
                                    calibrate="none")
    model.fit(X, y)
    far = np.random.default_rng(0).normal(size=(64, 2)) * 1e3
    assert model.predict_distribution(far).n_components > 2 * model.n_estimators
    for a, b in zip(model.summarize_mixture(far, LEVELS), _old(model, far, LEVELS),
                    strict=True):
        np.testing.assert_array_equal(a, b)


def test_no_levels():
    X, y = _data(2)
    model = MondrianForestRegressor(n_estimators=2, random_state=0).fit(X, y)
    mean, std, q = model.summarize_mixture(X[:5], [])
    assert q.shape == (5, 0)
    np.testing.assert_array_equal(mean, _old(model, X[:5], []).mean)


def test_an_online_update_drops_the_fused_record():
    """After ``partial_fit`` the one-pass kernel reads the updated trees, not a stale list."""
    X, y = _data(4, n=400)
    model = MondrianForestRegressor(n_estimators=3, random_state=0).fit(X[:200], y[:200])
    model.summarize_mixture(X[:10])
    assert model._posterior.fused is not None
    model.partial_fit(X[200:], y[200:])
    model.summarize_mixture(X[:10])  # rebuilt from the new trees
    for a, b in zip(model.summarize_mixture(X, LEVELS), _old(model, X, LEVELS), strict=True):
        np.testing.assert_array_equal(a, b)


def test_tree_posteriors_reset_on_change_and_travel_empty():
    post = TreePosteriors.empty(2)
    post.fused = "built"
    post[0] = "tree"
    assert post.fused is None
    post.fused = "built"
    copy = pickle.loads(pickle.dumps(post))
    assert isinstance(copy, TreePosteriors) and list(copy) == ["tree", None]
    assert copy.fused is None
    X, y = _data(6)
    model = MondrianForestRegressor(n_estimators=2, random_state=0).fit(X, y)
    model.summarize_mixture(X[:5])
    again = pickle.loads(pickle.dumps(model))
    for a, b in zip(again.summarize_mixture(X, LEVELS), model.summarize_mixture(X, LEVELS),
                    strict=True):
        np.testing.assert_array_equal(a, b)
