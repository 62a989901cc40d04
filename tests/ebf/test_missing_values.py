"""Missing values (NaN) in the histogram trees and the trunk: their own bin, the side each
split sends them to (against the brute-force oracles of ``tests/naive``), prediction,
persistence (old models, crafted files), and the learners that refuse them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from ebf import (
    BayesianForestClassifier,
    BayesianForestRegressor,
    EmpiricalBayesianForestRegressor,
    SubsampleForestRegressor,
    load,
    save,
)
from ebf import (
    _cart as cart,
)
from ebf._hist_tree import grow_tree, node_statistics
from ebf._splitting import best_splits
from ebf.binning import ALL_VALUES, bin_data, bin_edges, missing_code, n_bins_of
from ebf.grower import BinnedSource, apply_binned, grow_trunk
from ebf.histogram import build_histograms, row_statistics
from ebf.trunk import Trunk
from tests.ebf.trunk_helpers import assert_same_trunk, trunk_data
from tests.naive import naive_grow, naive_node_stats, naive_trunk_apply
from tests.naive.trunk import naive_best_split


def _with_missing(X, rate, seed, columns=(0, 1, 3)):
    X = X.copy()
    rng = np.random.default_rng(seed)
    for f in columns:
        X[rng.random(X.shape[0]) < rate, f] = np.nan
    return X


def _signal(n=3000, seed=0):
    """y jumps by 5 where x1 is missing: only a model that learns the missing side fits."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    missing = rng.random(n) < 0.2
    X[missing, 1] = np.nan
    y = 3.0 * X[:, 0] + np.where(missing, 5.0, np.sin(6 * np.nan_to_num(X[:, 1])))
    return X, y + 0.1 * rng.normal(size=n)


def test_binning_gives_missing_values_their_own_code_and_edges_ignore_them():
    X = np.array([[0.0, np.nan], [1.0, np.nan], [np.nan, np.nan], [2.0, np.nan]])
    edges = bin_edges(X)
    assert edges[0].tolist() == [0.5, 1.5] and edges[1].size == 0
    assert n_bins_of(edges) == 4 and missing_code(edges) == 3
    np.testing.assert_array_equal(bin_data(X, edges), [[0, 3], [1, 3], [3, 3], [2, 3]])
    with pytest.raises(ValueError, match="finite"):
        bin_edges(np.array([[0.0], [np.inf]]))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_best_split_equals_brute_force_with_missing_values(seed, task):
    X, y, w = trunk_data(seed, n=300, task=task)
    X = _with_missing(X, [0.0, 0.1, 0.4][seed % 3], seed)
    edges = bin_edges(X)
    n_classes = 3 if task == "classification" else None
    S = row_statistics(y, w, task, n_classes)
    hist = build_histograms(bin_data(X, edges), np.zeros(len(y), np.int64),
                            np.zeros(1, np.int64), S, 1, n_bins_of(edges))
    res = best_splits(hist, task, min_leaf_rows=5)
    gain, f, b, ml = naive_best_split(X, y.astype(int) if n_classes else y, w, edges, task,
                                      n_classes, min_rows=5)
    assert (res.feature[0], res.bin[0], res.missing_left[0]) == (f, b, ml)
    assert res.gain[0] == pytest.approx(gain, rel=1e-9)


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("kw", [dict(max_leaves=6), dict(min_leaf_rows=30)])
def test_trunk_with_missing_values_equals_naive_grower(task, kw):
    X, y, w = trunk_data(3, task=task)
    X = _with_missing(X, 0.15, 1)
    edges = bin_edges(X)
    S = row_statistics(y, w, task, 3 if task == "classification" else None)
    trunk = grow_trunk(BinnedSource(bin_data(X, edges), S, n_bins_of(edges)), edges, task,
                       3 if task == "classification" else None, **kw)
    naive = naive_grow(X, y, w, edges, task, 3, kw.get("max_leaves"),
                       kw.get("min_leaf_rows", 1))
    assert_same_trunk(trunk, naive)
    np.testing.assert_array_equal(trunk.missing_left, naive["missing_left"])
    assert (naive["missing_left"] == 1).any() and (naive["feature"] >= 0).sum() > 3
    # binned and raw routing agree with the oracle's, missing values included
    leaf = naive_trunk_apply(X, naive)
    binned_leaf = trunk.leaf_id[apply_binned(trunk, bin_data(X, edges), n_bins_of(edges))]
    np.testing.assert_array_equal(binned_leaf, leaf)


def test_trunk_estimator_learns_the_missing_side_and_prints_it():
    X, y = _signal()
    t = Trunk(max_leaves=3).fit(X, y)
    text = t.export_text(["a", "b", "c"])
    assert "b is not missing" in text and "b is missing" in text
    assert t.trunk_.threshold[0] == ALL_VALUES
    leaf = t.apply(X)
    np.testing.assert_array_equal(leaf, naive_trunk_apply(X, t.trunk_.to_dict()))
    assert np.unique(leaf[np.isnan(X[:, 1])]).size == 1


def test_hist_tree_with_missing_values_equals_naive_cart():
    X, y, w = trunk_data(8, n=500)
    X = _with_missing(X, 0.2, 2)
    edges = bin_edges(X)
    rows = np.flatnonzero(w > 0)
    S = row_statistics(y[rows], w[rows])
    tree = grow_tree(bin_data(X, edges), S, rows, np.array([e.size + 1 for e in edges]),
                     classification=False, min_samples_leaf=8)
    naive = naive_grow(X, y, w, edges, "regression", None, None, 8)

    def structure(t, thr, j=0):
        if t["left"][j] < 0:
            return "leaf"
        return (int(t["feature"][j]), float(thr[j]), int(t["missing_left"][j]),
                structure(t, thr, t["left"][j]), structure(t, thr, t["right"][j]))

    split = tree["feature"] >= 0
    thr = np.full(split.size, np.nan)
    thr[split] = [e[b] if b < e.size else ALL_VALUES
                  for e, b in ((edges[f], b) for f, b in zip(tree["feature"][split],
                                                              tree["bin"][split], strict=True))]
    assert structure(tree, thr) == structure(naive, naive["threshold"])
    stats = node_statistics(tree, y, w, 0)
    assert stats["count"].sum() > 0


@pytest.mark.parametrize("splitter", ["hist", "exact"])
def test_forest_routes_training_rows_to_their_leaves(splitter):
    X, y = _signal(800)
    f = BayesianForestRegressor(n_estimators=3, random_state=0, splitter=splitter).fit(X, y)
    forest = f.forest_
    X32 = X.astype(np.float32)
    for t in range(forest.n_trees):
        root = forest.offsets[t]
        w = np.ones(len(y))
        mean, _ = naive_node_stats(forest.left, forest.right, forest.feature, forest.threshold,
                                   root, X32, y, w, forest.missing_left)
        leaves = cart.apply(forest, X)[:, t]
        # every training row the kernel routes reaches a leaf the oracle's rows reach
        assert set(leaves.tolist()) <= set(mean)
    assert (forest.missing_left[forest.left >= 0] == 1).any()


@pytest.mark.parametrize("Est", [BayesianForestRegressor, EmpiricalBayesianForestRegressor,
                                 SubsampleForestRegressor])
def test_models_learn_where_missing_values_go_as_well_as_hist_gradient_boosting(Est):
    X, y = _signal(4000)
    Xt, yt = _signal(2000, seed=1)
    params = {} if Est is BayesianForestRegressor else {"branch": "bayesian"}
    m = Est(n_estimators=20, random_state=0, calibrate="none", **params).fit(X, y)
    ours = np.sqrt(np.mean((m.predict(Xt) - yt) ** 2))
    hgb = HistGradientBoostingRegressor(random_state=0).fit(X, y)
    theirs = np.sqrt(np.mean((hgb.predict(Xt) - yt) ** 2))
    assert ours < 1.2 * theirs  # the noise is 0.1; both near it
    missing = np.isnan(Xt[:, 1])
    dist = m.predict_distribution(Xt[missing])
    truth = 3.0 * Xt[missing, 0] + 5.0
    assert np.mean(np.abs(dist.mean - truth)) < 0.1
    assert np.mean(dist.cdf(yt[missing]) < 0.05) < 0.1  # calibrated there too


def test_classifier_and_dataframe_with_missing_values():
    X, y = _signal(1500)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    labels = np.where(np.isnan(X[:, 1]), "missing", "present")
    clf = BayesianForestClassifier(n_estimators=5, random_state=0).fit(df, labels)
    assert (clf.predict(df) == labels).mean() > 0.99


def test_persistence_old_models_and_crafted_missing_left(tmp_path):
    X, y = _signal(600)
    m = EmpiricalBayesianForestRegressor(branch="bayesian", n_estimators=3, trunk_max_leaves=3,
                                         random_state=0).fit(X, y)
    save(m, tmp_path / "m")
    np.testing.assert_array_equal(load(tmp_path / "m").predict(X), m.predict(X))
    # a model saved before missing values were learned: no missing_left, derived on load
    forest = m.branches_[0].forest_
    state = {k: v for k, v in forest.get_state().items() if k != "missing_left"}
    old = cart.CartForest.from_state(state, n_features=3)
    split = old.left >= 0
    np.testing.assert_array_equal(
        old.missing_left[split],
        (old.count[old.left[split]] >= old.count[old.right[split]]).astype(int))
    bad = dict(forest.get_state(), missing_left=np.full(forest.left.size, 2))
    with pytest.raises(ValueError, match="missing_left 2 is not 0 or 1"):
        cart.CartForest.from_state(bad, n_features=3)
    trunk_state = m.trunk_._get_state()
    del trunk_state["trunk_"]["missing_left"]
    t = Trunk(**m.trunk_.get_params())
    t._set_state(trunk_state)
    split = t.trunk_.left >= 0
    np.testing.assert_array_equal(
        t.trunk_.missing_left[split],
        t.trunk_.n_rows[t.trunk_.left[split]] >= t.trunk_.n_rows[t.trunk_.right[split]])
    crafted = m.trunk_._get_state()
    crafted["trunk_"] = dict(crafted["trunk_"], missing_left=np.full(t.trunk_.n_nodes, 1))
    with pytest.raises(ValueError, match="missing_left 1 is not 0 or 1"):
        Trunk(**m.trunk_.get_params())._set_state(crafted)


@pytest.mark.parametrize("branch", ["mondrian", "smc"])
def test_learners_without_missing_values_refuse_them_naming_those_that_take_them(branch):
    X, y = _signal(300)
    m = EmpiricalBayesianForestRegressor(branch=branch, n_estimators=2, trunk_max_leaves=2)
    with pytest.raises(ValueError, match=r"'x1': \d+ NaN.*branch='bayesian' or 'random'"):
        m.fit(X, y)
    assert not hasattr(m, "trunk_")
    fitted = EmpiricalBayesianForestRegressor(branch=branch, n_estimators=2, trunk_max_leaves=2,
                                              random_state=0).fit(np.nan_to_num(X), y)
    with pytest.raises(ValueError, match="learns where missing values go"):
        fitted.predict(X)
    with pytest.raises(ValueError, match="'x0': 1 inf"):
        BayesianForestRegressor(n_estimators=2).fit(np.r_[X[:9], [[np.inf, 0, 0]]], y[:10])
