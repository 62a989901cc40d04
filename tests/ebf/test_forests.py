"""Tests of the Bayesian / random forests: ``ebf.bootstrap``, ``ebf._cart``, ``ebf._forests``.

Taddy, Chen, Yu & Wyle (2015), Sec. 2.3 and Algorithm 1: a Bayesian forest differs from
Breiman's random forest only in the bootstrap weights (Exp(1) vs. Poisson(1)). Oracles are
scikit-learn's own trees and the plain-NumPy functions of ``tests/naive/``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.datasets import make_friedman1
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from basics import predictive
from basics.mixture import GaussianMixture
from basics.seeds import resolve_entropy
from ebf import _cart as cart
from ebf import _cart_fit as cart_fit
from ebf import binning
from ebf._forests import BayesianForestClassifier, BayesianForestRegressor
from ebf.bootstrap import draw_weights, tree_rng
from tests.ebf.test_features import state_leaves
from tests.naive import naive_apply, naive_class_fractions, naive_node_stats

ESTIMATORS = (BayesianForestRegressor, BayesianForestClassifier)


# ------------------------------------------------------------------------------ helpers


def _regression(n=300, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = 5 * X[:, 0] + np.sin(6 * X[:, 1]) + 0.3 * rng.normal(size=n)
    return X, y


def _sk_tree(X, y, task, kind, entropy, b, sample_weight=None, **params):
    """Tree ``b`` refit by hand following the seed contract: weights first, then the seed."""
    rng = tree_rng(entropy, 0, b)
    w = draw_weights(kind, X.shape[0], rng)
    if sample_weight is not None:
        w = w * sample_weight
    Tree = DecisionTreeRegressor if task == "regression" else DecisionTreeClassifier
    est = Tree(random_state=int(rng.integers(0, 2**32)), **params)
    return est.fit(X.astype(np.float32), y, sample_weight=w), w


def _tree_arrays(forest, t):
    sl = slice(forest.offsets[t], forest.offsets[t + 1])
    off = forest.offsets[t]
    left = np.where(forest.left[sl] < 0, -1, forest.left[sl] - off)
    right = np.where(forest.right[sl] < 0, -1, forest.right[sl] - off)
    return left, right, forest.feature[sl], forest.threshold[sl], sl


def _assert_valid_state(state):
    for leaf in state_leaves(state):
        if isinstance(leaf, np.ndarray):
            assert leaf.dtype != object
        else:
            json.dumps(leaf)  # a JSON scalar


# ------------------------------------------------------------------------------ bootstrap


def test_weight_distributions():
    n = 20_000
    w = draw_weights("exponential", n, tree_rng(1, 0, 0))
    assert stats.kstest(w, stats.expon.cdf).pvalue > 1e-3
    p = draw_weights("poisson", n, tree_rng(1, 0, 1))
    assert np.all(p == np.round(p)) and p.dtype == np.float64
    observed = np.bincount(p.astype(int), minlength=7)[:7].astype(float)
    observed[6] = np.sum(p >= 6)
    expected = stats.poisson.pmf(np.arange(6), 1.0) * n
    expected = np.append(expected, n - expected.sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    np.testing.assert_array_equal(draw_weights("none", 5, tree_rng(1, 0, 2)), np.ones(5))
    with pytest.raises(ValueError, match="Unknown bootstrap weights 'gamma'"):
        draw_weights("gamma", 3, tree_rng(1, 0, 0))


def test_seeds_and_entropy():
    a = tree_rng(5, 2, 3).random(4)
    np.testing.assert_array_equal(a, tree_rng(5, 2, 3).random(4))
    assert not np.array_equal(a, tree_rng(5, 3, 2).random(4))
    expected = np.random.default_rng(np.random.SeedSequence(5, spawn_key=(2, 3))).random(4)
    np.testing.assert_array_equal(a, expected)
    assert resolve_entropy(17) == 17
    assert resolve_entropy(np.random.RandomState(0)) == resolve_entropy(np.random.RandomState(0))
    with pytest.raises(ValueError, match="non-negative"):
        resolve_entropy(-1)


@pytest.mark.parametrize("kind", ["exponential", "poisson", "none"])
def test_forest_trees_use_the_drawn_weights(kind):
    """BF and RF differ only in the weights: tree b is fit with draw_weights(tree_rng(b))."""
    X, y = _regression(200)
    sw = np.linspace(0.5, 2.0, 200)
    f = cart_fit.fit_cart_forest(X, y, sw, task="regression", n_estimators=4, weights=kind,
                             entropy=11)
    for b in range(4):
        w = draw_weights(kind, 200, tree_rng(11, 0, b)) * sw
        root = f.offsets[b]
        np.testing.assert_allclose(f.weight[root], w.sum(), rtol=1e-12)
        assert f.count[root] == np.count_nonzero(w)


def test_unweighted_forest_equals_sklearn_cart():
    X, y = _regression(400)
    Xt = np.random.default_rng(9).random((300, 4))
    f = cart_fit.fit_cart_forest(X, y, None, task="regression", n_estimators=3, weights="none",
                             min_samples_leaf=7, max_features=1.0, entropy=0)
    leaves = cart.apply(f, Xt)
    for t in range(3):
        # "none" draws no weights, so the tree's seed is the first draw of its generator;
        # scikit-learn breaks ties between equally good splits with that seed.
        seed = int(tree_rng(0, 0, t).integers(0, 2**32))
        sk = DecisionTreeRegressor(min_samples_leaf=7, random_state=seed).fit(X, y)
        assert f.n_nodes[t] == sk.tree_.node_count
        np.testing.assert_array_equal(f.value[leaves[:, t], 0], sk.predict(Xt))


# ------------------------------------------------------------------------------ hist


@pytest.mark.parametrize("levels", [60, 900])
@pytest.mark.parametrize("Est", ESTIMATORS)
def test_hist_forest_equals_exact_forest_with_few_distinct_values(Est, levels):
    # at most max_bins distinct values per feature: one bin per value, and every tree
    # splits the training rows as the exact one does (equal predictions on them; where a
    # node's rows leave a gap of empty bins, exact CART cuts at the middle of the gap and
    # the histogram tree right after its occupied bins, so new rows in the gap may differ;
    # the classifier's exact trees also take zero-gain splits, which change no prediction)
    rng = np.random.default_rng(12)
    X = np.round(rng.random((500 if levels < 255 else 3000, 3)) * levels) / levels
    y = 5 * X[:, 0] + np.sin(6 * X[:, 1]) + 0.3 * rng.normal(size=X.shape[0])
    if Est is BayesianForestClassifier:
        y = np.digitize(y, np.quantile(y, [0.3, 0.6]))
    kw = dict(n_estimators=4, min_samples_leaf=6, max_features=None, random_state=5,
              calibrate="none")  # the forests; their maps see other rows out of the bins
    hist = Est(splitter="hist", **kw).fit(X, y)
    exact = Est(splitter="exact", **kw).fit(X, y)
    method = "predict" if Est is BayesianForestRegressor else "predict_proba"
    np.testing.assert_allclose(getattr(hist, method)(X), getattr(exact, method)(X),
                               rtol=1e-10, atol=1e-12)
    if Est is BayesianForestRegressor:
        np.testing.assert_array_equal(hist.n_nodes_, exact.n_nodes_)
        np.testing.assert_allclose(hist.predict(X, return_std=True)[1],
                                   exact.predict(X, return_std=True)[1], rtol=1e-9)


def test_hist_forest_splits_on_the_bin_edges():
    X, y = _regression(400)
    bf = BayesianForestRegressor(n_estimators=3, max_bins=16, random_state=0).fit(X, y)
    edges = binning.bin_edges(cart_fit.as_float32(X), 16)
    split = bf.forest_.feature >= 0
    for f, t in zip(bf.forest_.feature[split], bf.forest_.threshold[split], strict=True):
        assert t in edges[f]
    assert split.sum() > 20


def test_hist_forest_bins_categories_exactly():
    # 200 categories (<= max_bins): each has its own bin, so a tree isolates the one that
    # matters however the others are spread
    rng = np.random.default_rng(13)
    cat = rng.integers(0, 200, 4000)
    X = pd.DataFrame({"c": pd.Categorical(cat.astype(str)), "u": rng.random(4000)})
    special = X["c"].cat.categories[137]
    y = np.where(X["c"] == special, 10.0, 0.0) + 0.01 * rng.normal(size=4000)
    bf = BayesianForestRegressor(n_estimators=3, min_samples_leaf=5, random_state=0).fit(X, y)
    test = pd.DataFrame({"c": pd.Categorical([special] * 3 + ["0", "1", "99"],
                                             categories=X["c"].cat.categories),
                         "u": [0.1, 0.5, 0.9] * 2})
    np.testing.assert_allclose(bf.predict(test), [10, 10, 10, 0, 0, 0], atol=0.05)


# ------------------------------------------------------------------------------ cart


def _edge_rows(X, f, rng):
    """Rows at thresholds, next to them in float64, and float32 rounding neighbours."""
    thr = f.threshold[f.left >= 0]
    feat = f.feature[f.left >= 0]
    base = X[rng.integers(0, X.shape[0], thr.size * 4)].copy()
    k = np.arange(thr.size)
    vals = [thr, np.nextafter(thr, np.inf), np.nextafter(thr, -np.inf),
            np.float32(thr).astype(np.float64)]
    for j, v in enumerate(vals):
        base[j * thr.size + k, feat] = v
    # values equal in float32 but not in float64
    x32 = np.float32(X[:50]).astype(np.float64)
    ulp = np.spacing(np.float32(X[:50])).astype(np.float64)
    return np.vstack([base, X, x32 + 0.49 * ulp, x32 - 0.49 * ulp, x32 + 0.5 * ulp])


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_apply_matches_sklearn_and_naive(task):
    rng = np.random.default_rng(3)
    X = np.round(rng.random((300, 3)) * 20) / 7  # ties, values not exact in float32
    y = X[:, 0] + rng.normal(size=300) if task == "regression" else rng.integers(0, 3, 300)
    f = cart_fit.fit_cart_forest(X, y, None, task=task, n_classes=3, n_estimators=3,
                             weights="poisson", min_samples_leaf=2, max_features=2,
                             entropy=4)
    Xt = _edge_rows(X, f, rng)
    leaves = cart.apply(f, Xt)
    for t in range(3):
        sk, _ = _sk_tree(X, y, task, "poisson", 4, t, min_samples_leaf=2, max_features=2)
        left, right, feat, thr, sl = _tree_arrays(f, t)
        np.testing.assert_array_equal(left, sk.tree_.children_left)
        np.testing.assert_array_equal(thr[left >= 0], sk.tree_.threshold[left >= 0])
        np.testing.assert_array_equal(leaves[:, t] - f.offsets[t], sk.apply(Xt))
        np.testing.assert_array_equal(leaves[:, t] - f.offsets[t],
                                      naive_apply(left, right, feat, thr, 0, Xt))


@pytest.mark.parametrize("splitter", ["hist", "exact"])
def test_forest_kernel_outputs_are_reductions_of_the_leaves(splitter):
    # the one forest kernel writes leaves, mean, moments or components; each must be the
    # plain-NumPy reduction of the leaves it routed to, missing values included
    X, y = _regression(400)
    X[np.random.default_rng(1).random(X.shape) < 0.1] = np.nan
    f = cart_fit.fit_cart_forest(X, y, None, task="regression", n_estimators=6, entropy=2,
                                 splitter=splitter, min_samples_leaf=3)
    Xt = np.vstack([X[:100], np.full((3, X.shape[1]), np.nan)])
    leaves = cart.apply(f, Xt)
    for t in range(f.n_trees):
        left, right, feat, thr, sl = _tree_arrays(f, t)
        np.testing.assert_array_equal(leaves[:, t] - f.offsets[t], naive_apply(
            left, right, feat, thr, 0, Xt, f.missing_left[sl]))
    floor = float(np.quantile(f.variance, 0.3))
    m, v = f.value[leaves, 0], np.maximum(f.variance[leaves], floor)
    means, variances = cart.leaf_components(f, Xt, floor)
    np.testing.assert_array_equal(means, m)
    np.testing.assert_array_equal(variances, v)
    mean, spread, within = cart.regression_moments(f, Xt, floor)
    np.testing.assert_allclose(mean, m.mean(axis=1), rtol=1e-13)
    np.testing.assert_allclose(spread, m.var(axis=1), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(within, v.mean(axis=1), rtol=1e-13)
    np.testing.assert_array_equal(cart.mean_value(f, Xt)[:, 0], mean)


def test_leaf_mean_and_variance_match_naive():
    X, y = _regression(250)
    y = y + 1e6  # a large offset: one-pass E[y^2] - E[y]^2 would lose most digits
    f = cart_fit.fit_cart_forest(X, y, None, task="regression", n_estimators=2, entropy=8)
    for t in range(2):
        _, w = _sk_tree(X, y, "regression", "exponential", 8, t)
        left, right, feat, thr, sl = _tree_arrays(f, t)
        mean, var = naive_node_stats(left, right, feat, thr, 0, X, y, w)
        assert sorted(mean) == list(range(left.size))  # every node, leaves and internal
        nodes = np.arange(left.size)
        np.testing.assert_allclose(f.value[sl, 0], [mean[j] for j in nodes], rtol=1e-13)
        np.testing.assert_allclose(f.variance[sl], [var[j] for j in nodes], rtol=1e-7,
                                   atol=1e-12)
        assert np.all(f.variance[sl][left < 0] >= 0)


def test_classification_rows_are_full_width():
    """A tree fit on rows that lack a class still fills every global class column."""
    rng = np.random.default_rng(2)
    X = rng.random((120, 2))
    codes = np.where(X[:, 0] > 0.5, 0, 2)  # class 1 (and 3) absent from these rows
    f = cart_fit.fit_cart_forest(X, codes, None, task="classification", n_classes=4,
                             n_estimators=3, weights="exponential", entropy=1)
    assert f.value.shape == (f.left.size, 4)
    np.testing.assert_allclose(f.value.sum(axis=1), 1.0)
    np.testing.assert_array_equal(f.value[:, [1, 3]], 0.0)
    leaves = cart.apply(f, X)
    for t in range(3):
        _, w = _sk_tree(X, codes, "classification", "exponential", 1, t)
        expected = naive_class_fractions(leaves[:, t], codes, w, 4)
        for leaf, frac in expected.items():
            np.testing.assert_allclose(f.value[leaf], frac, rtol=1e-12)
    np.testing.assert_allclose(cart.mean_value(f, X).sum(axis=1), 1.0)


def test_forest_state_round_trip():
    X, y = _regression(100)
    f = cart_fit.fit_cart_forest(X, y, None, task="regression", n_estimators=3, entropy=0)
    g = cart.CartForest.from_state({k: v.copy() for k, v in f.get_state().items()},
                                   n_features=X.shape[1])
    np.testing.assert_array_equal(cart.apply(g, X), cart.apply(f, X))
    assert g.nbytes == f.nbytes and g.n_leaves.tolist() == f.n_leaves.tolist()
    bad = f.get_state()
    bad["offsets"] = bad["offsets"][::-1]
    with pytest.raises(ValueError, match="offsets"):
        cart.CartForest.from_state(bad, n_features=X.shape[1])


# ------------------------------------------------------------------------------ regressor


@pytest.mark.parametrize("uncertainty", ["leaf", "tree_spread"])
def test_predictive_distribution(uncertainty):
    X, y = _regression(300)
    Xt = np.random.default_rng(1).random((40, 4))
    bf = BayesianForestRegressor(n_estimators=15, uncertainty=uncertainty,
                                 random_state=0, calibrate="none").fit(X, y)
    leaves = cart.apply(bf.forest_, Xt)
    tree_pred = bf.forest_.value[leaves, 0]
    leaf_var = np.maximum(bf.forest_.variance[leaves], bf.var_floor_)
    gm = bf.predict_distribution(Xt)
    assert isinstance(gm, GaussianMixture)
    mean, std = bf.predict(Xt, return_std=True)
    np.testing.assert_allclose(bf.predict(Xt), tree_pred.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(gm.mean, tree_pred.mean(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(mean, bf.predict(Xt))
    if uncertainty == "leaf":
        assert gm.n_components == 15
        expected_var = np.var(tree_pred, axis=1) + leaf_var.mean(axis=1)
    else:
        assert gm.n_components == 1
        expected_var = np.maximum(np.var(tree_pred, axis=1), bf.var_floor_)
    np.testing.assert_allclose(gm.var, expected_var, rtol=1e-10)
    np.testing.assert_allclose(std**2, expected_var, rtol=1e-10)
    qs = bf.predict_quantiles(Xt, q=(0.1, 0.5, 0.9))
    assert qs.shape == (40, 3) and np.all(np.diff(qs, axis=1) > 0)
    np.testing.assert_allclose(qs, gm.quantile([0.1, 0.5, 0.9]), rtol=1e-10)


def test_constant_leaves_use_the_variance_floor():
    X = np.random.default_rng(0).random((60, 2))
    y = np.where(X[:, 0] > 0.5, 3.0, -1.0)
    bf = BayesianForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    assert bf.var_floor_ == pytest.approx(1e-12 * np.var(y))
    gm = bf.predict_distribution(X[:5], recalibrated=False)
    assert np.all(gm.variances >= bf.var_floor_) and np.all(np.isfinite(gm.logpdf(y[:5])))
    const = BayesianForestRegressor(n_estimators=3, random_state=0, calibrate="none").fit(
        X, np.full(60, 2.0))
    assert const.var_floor_ == pytest.approx(4e-12)
    np.testing.assert_allclose(const.predict_quantiles(X[:2], 0.5)[:, 0], 2.0)


def test_bf_beats_single_cart_on_friedman():
    X, y = make_friedman1(200, 10, noise=1.0, random_state=0)
    Xt, _ = make_friedman1(1000, 10, random_state=1)
    f = (10 * np.sin(np.pi * Xt[:, 0] * Xt[:, 1]) + 20 * (Xt[:, 2] - 0.5) ** 2
         + 10 * Xt[:, 3] + 5 * Xt[:, 4])
    rmse = {}
    for name, params in {"bf": dict(n_estimators=100), "rf": dict(n_estimators=100,
                         weights="poisson"), "dt": dict(n_estimators=1, weights="none")}.items():
        model = BayesianForestRegressor(min_samples_leaf=3, random_state=0, n_jobs=2, **params)
        rmse[name] = np.sqrt(np.mean((model.fit(X, y).predict(Xt) - f) ** 2))
    assert rmse["bf"] < 0.85 * rmse["dt"] and rmse["rf"] < 0.85 * rmse["dt"]


@pytest.mark.parametrize("splitter", ["hist", "exact"])
@pytest.mark.parametrize("Est", ESTIMATORS)
def test_same_seed_same_model_whatever_n_jobs(Est, splitter, monkeypatch):
    X, y = _regression(300)
    if Est is BayesianForestClassifier:
        y = (y > np.median(y)).astype(int)
    a = Est(n_estimators=6, splitter=splitter, random_state=3, n_jobs=1).fit(X, y)
    b = Est(n_estimators=6, splitter=splitter, random_state=3, n_jobs=2).fit(X, y)
    for name in cart.CartForest.ARRAYS:
        np.testing.assert_array_equal(getattr(a.forest_, name), getattr(b.forest_, name))
    monkeypatch.setattr(predictive, "PREDICT_BLOCK", 7)  # many row blocks, in two threads
    method = "predict" if Est is BayesianForestRegressor else "predict_proba"
    np.testing.assert_array_equal(getattr(a, method)(X), getattr(b, method)(X))
    if Est is BayesianForestRegressor:
        np.testing.assert_array_equal(a.predict_quantiles(X[:20]), b.predict_quantiles(X[:20]))
    # random_state=None: the drawn seed is kept and reproduces the model
    c = Est(n_estimators=2).fit(X, y)
    d = Est(n_estimators=2, random_state=c.entropy_).fit(X, y)
    np.testing.assert_array_equal(c.forest_.threshold, d.forest_.threshold)


def test_sample_weight_multiplies_the_bootstrap_weights():
    X, y = _regression(150)
    sw = np.r_[np.zeros(50), np.ones(100)]
    bf = BayesianForestRegressor(n_estimators=3, random_state=2).fit(X, y, sample_weight=sw)
    for b in range(3):
        w = draw_weights("exponential", 150, tree_rng(bf.entropy_, 0, b)) * sw
        assert bf.forest_.count[bf.forest_.offsets[b]] == 100
        np.testing.assert_allclose(bf.forest_.weight[bf.forest_.offsets[b]], w.sum())


# ------------------------------------------------------------------------------ classifier


def test_classifier_probabilities():
    rng = np.random.default_rng(0)
    X = rng.random((300, 3))
    y = np.array(["lo", "mid", "hi"])[np.digitize(X[:, 0] + 0.2 * X[:, 1], [0.4, 0.8])]
    clf = BayesianForestClassifier(n_estimators=10, weights="poisson", random_state=0)
    clf.fit(X, y)
    assert clf.classes_.tolist() == ["hi", "lo", "mid"]
    proba = clf.predict_proba(X)
    assert proba.shape == (300, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(proba, axis=1)])
    assert clf.score(X, y) > 0.9
    assert clf.apply(X).shape == (300, 10) and np.all(clf.n_leaves_ >= 2)


# ------------------------------------------------------------------------------ input


def _frame(n=200, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "x": rng.random(n),
        "city": pd.Categorical(rng.choice(["oslo", "rome", "lima"], n),
                               categories=["rome", "oslo", "lima"]),
        "kind": rng.choice(["a", "b"], n),
    })
    y = df["x"] * 3 + (df["city"] == "oslo") * 2.0 + (df["kind"] == "b") * 1.0
    return df, y.to_numpy()


def test_pandas_categoricals():
    df, y = _frame()
    bf = BayesianForestRegressor(n_estimators=10, random_state=0).fit(df, y)
    assert bf.feature_names_in_.tolist() == ["x", "city", "kind"] and bf.n_features_in_ == 3
    assert bf.encoder_.categories_[1].tolist() == ["rome", "oslo", "lima"]
    pred = bf.predict(df)
    shuffled = df[["kind", "x", "city"]].assign(noise=0.0)
    np.testing.assert_array_equal(bf.predict(shuffled), pred)
    assert bf.score(df, y) > 0.9
    with pytest.raises(ValueError, match="'city'"):
        bf.predict(df.drop(columns="city"))
    unseen = df.head(3).assign(city=["paris"] * 3)
    fallback = df.head(3).assign(city=[bf.encoder_.categories_[1][bf.encoder_.fallback_[1]]] * 3)
    np.testing.assert_array_equal(bf.predict(unseen), bf.predict(fallback))


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_missing_target_states_the_count(Est):
    X, y = _regression(50)
    y = y.astype(object) if Est is BayesianForestClassifier else y.copy()
    if Est is BayesianForestClassifier:
        y = np.where(np.arange(50) % 2 == 0, "a", "b").astype(object)
    y[[3, 7, 9]] = None if Est is BayesianForestClassifier else np.nan
    with pytest.raises(ValueError, match=r"3 (missing values|NaN)"):
        Est(n_estimators=2).fit(X, y)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_failed_fit_leaves_model_unchanged(Est):
    df, y = _frame(80)
    if Est is BayesianForestClassifier:
        y = (y > np.median(y)).astype(int)
    model = Est(n_estimators=3, random_state=0).fit(df, y)
    before = dict(vars(model))
    pred = model.predict(df)
    bad = df.copy()
    bad.loc[[1, 2], "x"] = np.inf  # NaN is a missing value, learnt; inf is refused
    with pytest.raises(ValueError, match=r"'x': 2 inf"):
        model.fit(bad, y)
    with pytest.raises(ValueError, match="float32 range.*'x': 1 rows"):
        model.fit(df.assign(x=np.r_[1e39, np.zeros(79)]), y)
    with pytest.raises(ValueError, match="X has 80 rows but y has 79"):
        model.fit(np.ones((80, 2)), y[:79])
    assert vars(model).keys() == before.keys()
    assert all(vars(model)[k] is v for k, v in before.items())
    np.testing.assert_array_equal(model.predict(df), pred)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_persistence_round_trip(Est):
    df, y = _frame(120)
    if Est is BayesianForestClassifier:
        y = np.where(y > np.median(y), "high", "low").astype(object)
    model = Est(n_estimators=4, random_state=0).fit(df, y)
    state = model._get_state()
    _assert_valid_state(state)
    other = Est(**model.get_params(deep=False))
    other._set_state(state)
    np.testing.assert_array_equal(other.predict(df), model.predict(df))
    assert other.feature_names_in_.tolist() == model.feature_names_in_.tolist()
    assert other.entropy_ == model.entropy_
    if Est is BayesianForestClassifier:
        assert other.classes_.dtype == object
        np.testing.assert_array_equal(other.predict_proba(df), model.predict_proba(df))
    else:
        np.testing.assert_array_equal(other.predict_quantiles(df), model.predict_quantiles(df))


def test_empty_prediction_and_model_size():
    X, y = _regression(100)
    bf = BayesianForestRegressor(n_estimators=3, random_state=0).fit(X, y)
    empty = np.empty((0, 4))
    assert bf.predict(empty).shape == (0,)
    assert bf.predict(empty, return_std=True)[1].shape == (0,)
    assert bf.predict_quantiles(empty).shape == (0, 3)
    assert bf.predict_distribution(empty).n_rows == 0
    assert bf.n_nodes_.shape == (3,) and bf.n_nodes_.sum() == bf.forest_.left.size
    with pytest.raises(ValueError, match="levels in"):
        bf.predict_quantiles(X, q=1.5)
