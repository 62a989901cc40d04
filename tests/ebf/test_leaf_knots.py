"""Empirical leaves of the CART regressors (``ebf._leaf_knots``, ``leaf_model="empirical"``).

Oracles: :func:`tests.naive.naive_leaf_knots` (the quantile sketch on the exact weighted
measure), :func:`tests.naive.naive_knot_leaf` (one leaf's kernels) and the mixture oracles
of :mod:`tests.naive.mixture` (CRPS by numerical integration, CDF, log density, quantiles),
fed with each leaf's own training rows and the trees' bootstrap weights drawn again.
"""

from __future__ import annotations

import numpy as np
import pytest

from basics.metrics import crps_rows
from basics.mixture import GaussianMixture
from ebf import _cart as cart
from ebf import load, save
from ebf._forests import BayesianForestRegressor
from ebf._leaf_knots import KERNEL_SHARE, tree_knots
from ebf.bootstrap import draw_weights, tree_rng
from ebf.estimators import EmpiricalBayesianForestRegressor, SubsampleForestRegressor
from tests.naive import (
    naive_crps_numeric,
    naive_knot_leaf,
    naive_leaf_knots,
    naive_mixture_cdf,
    naive_mixture_logpdf,
    naive_mixture_quantile,
)


def _data(n=400, seed=0, integer=False):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    y = 5 * X[:, 0] + rng.exponential(2.0, size=n)  # skewed
    return X, (np.round(y) if integer else y)


def _fit(X, y, **kw):
    params = dict(n_estimators=6, random_state=0, calibrate="none", min_samples_leaf=5)
    return BayesianForestRegressor(**{**params, **kw}).fit(X, y)


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_sketch_matches_the_oracle_on_random_leaves(k):
    rng = np.random.default_rng(k)
    for _ in range(60):
        m = int(rng.integers(1, 40))
        y = np.round(rng.normal(size=m), int(rng.integers(0, 3)))  # ties
        w = rng.exponential(size=m)
        centre = np.sum(w * y) / w.sum()
        got = tree_knots(np.zeros(m, np.int64), y, w, np.array([centre]), 1, k)
        values, weights = naive_leaf_knots(y, w, k)
        assert got["knot_offsets"].tolist() == [0, values.size]
        np.testing.assert_allclose(got["knot_value"] + centre, values, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got["knot_weight"], weights, rtol=1e-6)
        # the knots' weighted mean is the leaf mean
        assert np.sum(weights * values) == pytest.approx(centre, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("splitter", ["hist", "exact"])
def test_forest_knots_are_each_leafs_sketch(splitter):
    X, y = _data()
    bf = _fit(X, y, leaf_model="empirical", leaf_knots=4, splitter=splitter,
              leaf_prior_rows=None)
    f = bf.forest_
    leaves = cart.apply(f, X)
    for t in range(f.n_trees):
        w = draw_weights("exponential", X.shape[0], tree_rng(bf.entropy_, 0, t))
        for leaf in np.unique(leaves[:, t]):
            rows = (leaves[:, t] == leaf) & (w > 0)
            values, weights = naive_leaf_knots(y[rows], w[rows], 4)
            lo, hi = f.knot_offsets[leaf], f.knot_offsets[leaf + 1]
            np.testing.assert_allclose(f.knot_value[lo:hi] + f.value[leaf, 0], values,
                                       rtol=1e-6, atol=1e-5)
            np.testing.assert_allclose(f.knot_weight[lo:hi], weights, rtol=1e-6)
    internal = f.left != -1
    assert np.all(np.diff(f.knot_offsets)[internal] == 0)


def test_mixture_is_the_oracle_of_every_rows_leaves():
    X, y = _data(integer=True)
    bf = _fit(X, y, leaf_model="empirical", leaf_knots=3)
    f = bf.forest_
    Xt = np.random.default_rng(5).random((7, 3))
    w, m, v = cart.knot_components(f, Xt, bf.var_floor_)
    leaves = cart.apply(f, Xt)
    for i in range(Xt.shape[0]):
        parts = [naive_knot_leaf(f.knot_value[f.knot_offsets[j]:f.knot_offsets[j + 1]],
                                 f.knot_weight[f.knot_offsets[j]:f.knot_offsets[j + 1]],
                                 f.value[j, 0], f.variance[j], bf.var_floor_, KERNEL_SHARE)
                 for j in leaves[i]]
        nw = np.concatenate([p[0] for p in parts]) / f.n_trees
        live = w[i] > 0
        np.testing.assert_allclose(w[i, live], nw, rtol=1e-6)
        np.testing.assert_allclose(m[i, live], np.concatenate([p[1] for p in parts]),
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(v[i, live], np.concatenate([p[2] for p in parts]),
                                   rtol=1e-9)
        assert np.all(w[i, ~live] == 0)


@pytest.mark.parametrize("integer", [False, True])
def test_empirical_leaves_keep_the_gaussian_leaves_mean_and_variance(integer):
    X, y = _data(integer=integer)
    Xt = np.random.default_rng(3).random((50, 3))
    gauss = _fit(X, y).predict_distribution(Xt, recalibrated=False)
    emp = _fit(X, y, leaf_model="empirical", leaf_knots=4).predict_distribution(
        Xt, recalibrated=False)
    assert emp.n_components > gauss.n_components
    np.testing.assert_allclose(emp.mean, gauss.mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(emp.var, gauss.var, rtol=1e-9)


def test_a_leaf_of_equal_targets_is_the_gaussian_leaf():
    rng = np.random.default_rng(2)
    X = rng.random((300, 2))
    y = np.where(X[:, 0] < 0.5, 3.0, 10 + rng.normal(size=300))  # left half: one value
    Xt = np.array([[0.1, 0.5], [0.3, 0.2]])
    gauss = _fit(X, y, max_depth=1).predict_distribution(Xt, recalibrated=False)
    bf = _fit(X, y, max_depth=1, leaf_model="empirical")
    emp = bf.predict_distribution(Xt, recalibrated=False)
    live = emp.weights > 0
    assert live.sum(axis=1).tolist() == [6, 6]  # one knot per tree
    np.testing.assert_allclose(emp.means[live].reshape(2, 6), gauss.means, rtol=1e-12)
    np.testing.assert_allclose(emp.variances[live].reshape(2, 6), gauss.variances, rtol=1e-12)
    # not a point mass: the Gaussian leaf's variance, at least the floor
    assert np.all(emp.variances[live] >= bf.var_floor_)


def test_crps_cdf_quantiles_and_log_density_are_the_mixtures():
    X, y = _data(n=200, integer=True)
    bf = _fit(X, y, n_estimators=3, leaf_model="empirical", leaf_knots=4)
    Xt = np.random.default_rng(4).random((3, 3))
    dist = bf.predict_distribution(Xt, recalibrated=False)
    yt = np.array([2.0, 5.0, 9.0])
    got = crps_rows(dist, yt)
    for i in range(3):
        w, m, v = dist.weights[i], dist.means[i], dist.variances[i]
        keep = w > 0
        w, m, v = w[keep], m[keep], v[keep]

        def cdf(t, w=w, m=m, v=v):
            return naive_mixture_cdf(w, m, v, t)

        lo, hi = m.min() - 12 * np.sqrt(v.max()), m.max() + 12 * np.sqrt(v.max())
        assert got[i] == pytest.approx(naive_crps_numeric(cdf, yt[i], lo, hi), rel=1e-4)
        assert dist.cdf(yt)[i] == pytest.approx(cdf(yt[i]), abs=1e-7)
        assert dist.logpdf(yt)[i] == pytest.approx(naive_mixture_logpdf(w, m, v, yt[i]),
                                                   rel=1e-9)
        assert dist.quantile(0.3)[i] == pytest.approx(naive_mixture_quantile(w, m, v, 0.3),
                                                      abs=1e-6)


def test_save_load_round_trip_and_predictions(tmp_path):
    X, y = _data(integer=True)
    bf = _fit(X, y, leaf_model="empirical", leaf_knots=5)
    save(bf, tmp_path / "bf")
    back = load(tmp_path / "bf")
    Xt = X[:20]
    np.testing.assert_array_equal(back.predict_quantiles(Xt, (0.1, 0.5, 0.9)),
                                  bf.predict_quantiles(Xt, (0.1, 0.5, 0.9)))
    assert back.forest_.knot_value.dtype == np.float32
    assert back.forest_.nbytes == bf.forest_.nbytes


def _forged(bf, **arrays):
    state = bf._get_state()
    state["forest"] = {**state["forest"], **arrays}
    return state


def _refused(bf, state, match, **params):
    fresh = BayesianForestRegressor(**{**bf.get_params(), **params})
    with pytest.raises(ValueError, match=match):
        fresh._set_state(state)


def test_forged_knots_are_refused():
    X, y = _data()
    bf = _fit(X, y, leaf_model="empirical", leaf_knots=4)
    f = bf.forest_
    leaf = int(np.flatnonzero(np.diff(f.knot_offsets) > 1)[0])
    off = f.knot_offsets.copy()
    off[leaf + 1] = off[leaf]  # a leaf without knots, the next one with too many
    _refused(bf, _forged(bf, knot_offsets=off), "knots")
    off = f.knot_offsets.copy()
    off[-1] += 1
    _refused(bf, _forged(bf, knot_offsets=off), "knot_value")
    value = f.knot_value.copy()
    value[0] = np.nan
    _refused(bf, _forged(bf, knot_value=value), "knot_value")
    weight = f.knot_weight.copy()
    weight[f.knot_offsets[leaf]] *= 0.5
    _refused(bf, _forged(bf, knot_weight=weight), "sum to 1")
    weight = f.knot_weight.copy()
    weight[0] = -weight[0]
    _refused(bf, _forged(bf, knot_weight=weight), "knot_weight")
    state = _forged(bf)
    del state["forest"]["knot_weight"]
    _refused(bf, state, "not all of")
    _refused(bf, bf._get_state(), "leaf_model is not 'empirical'", leaf_model="gaussian")
    _refused(bf, bf._get_state(), "more than leaf_knots=2", leaf_knots=2)
    gauss = _fit(X, y)
    _refused(gauss, gauss._get_state(), "holds no leaf knots", leaf_model="empirical")


def test_ensembles_take_the_leaf_model_as_a_branch_parameter():
    X, y = _data(n=600)
    Xt = X[:30]
    for cls in (EmpiricalBayesianForestRegressor, SubsampleForestRegressor):
        kw = dict(n_estimators=4, random_state=0, calibrate="none")
        gauss = cls(**kw).fit(X, y)
        emp = cls(**kw, branch_params={"leaf_model": "empirical", "leaf_knots": 3}).fit(X, y)
        np.testing.assert_allclose(emp.predict(Xt), gauss.predict(Xt), rtol=1e-10)
        d = emp.predict_distribution(Xt, recalibrated=False)
        assert isinstance(d, GaussianMixture) and d.n_components > 4
