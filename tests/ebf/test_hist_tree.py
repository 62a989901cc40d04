"""Tests of the deep histogram CART trees (``ebf._hist_tree``, issue 15).

Oracles: ``naive_grow`` of ``tests/naive/`` (plain-NumPy CART over given edges: with the
midpoints of every distinct value as edges it is exact CART), ``naive_node_stats`` /
``naive_class_fractions`` for the leaf statistics, and scikit-learn's exact trees.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.tree import DecisionTreeRegressor

from ebf._hist_tree import grow_tree, node_statistics, resolve_max_features
from ebf.binning import bin_data, bin_edges
from ebf.histogram import row_statistics
from tests.naive import naive_apply, naive_class_fractions, naive_grow, naive_node_stats


def _data(n=400, d=3, levels=40, task="regression", seed=0):
    """float32-exact inputs with ``levels`` distinct values per feature, Exp(1) weights."""
    rng = np.random.default_rng(seed)
    X = (rng.integers(0, levels, (n, d)) / levels + rng.random(d)).astype(np.float32)
    f = 4 * X[:, 0] + np.sin(5 * X[:, 1]) + 0.5 * rng.normal(size=n)
    y = f if task == "regression" else np.digitize(f, np.quantile(f, [0.3, 0.7]))
    return X, y.astype(np.float64), rng.exponential(size=n)


def _grow(X, y, w, task, edges=None, max_bins=255, **kw):
    edges = bin_edges(X, max_bins) if edges is None else edges
    classification = task == "classification"
    rows = np.flatnonzero(w > 0)
    S = row_statistics(y[rows], w[rows], task, 3 if classification else None)
    n_bins = np.array([e.size + 1 for e in edges])
    tree = grow_tree(bin_data(X, edges), S, rows, n_bins, classification=classification, **kw)
    tree.update(node_statistics(tree, y, w, 3 if classification else 0))
    return tree, edges


def _structure(tree, edges, j=0):
    """The tree from node ``j`` as nested (feature, threshold, rows, left, right)."""
    if tree["left"][j] < 0:
        return ("leaf", int(tree["count"][j]))
    f = int(tree["feature"][j])
    return (f, float(edges[f][tree["bin"][j]]), int(tree["count"][j]),
            _structure(tree, edges, tree["left"][j]), _structure(tree, edges, tree["right"][j]))


def _naive_structure(naive, j=0):
    if naive["left"][j] < 0:
        return ("leaf", int(naive["n_rows"][j]))
    return (int(naive["feature"][j]), float(naive["threshold"][j]), int(naive["n_rows"][j]),
            _naive_structure(naive, naive["left"][j]), _naive_structure(naive, naive["right"][j]))


def _thresholds(tree, edges):
    split = tree["feature"] >= 0
    thr = np.full(split.size, np.nan)
    thr[split] = [edges[f][b] for f, b in zip(tree["feature"][split], tree["bin"][split],
                                              strict=True)]
    return thr


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("kw", [dict(min_samples_leaf=5), dict(min_samples_leaf=8),
                                dict(min_samples_leaf=3, max_depth=4)])
def test_hist_tree_equals_exact_cart_with_few_distinct_values(task, kw):
    # at most 255 distinct values: every value has its own bin, the edges are the
    # midpoints exact CART tries, so the histogram tree is exact CART (leaves of 5 rows or
    # more: in tinier nodes two features often make the same partition, a tie that the
    # rounding of the two sums breaks)
    X, y, w = _data(task=task)
    tree, edges = _grow(X, y, w, task, **kw)
    assert all(e.size == np.unique(X[:, f]).size - 1 for f, e in enumerate(edges))
    naive = naive_grow(X.astype(np.float64), y.astype(int) if task != "regression" else y, w,
                       edges, task, 3, None, kw["min_samples_leaf"], 0.0, kw.get("max_depth"))
    assert _structure(tree, edges) == _naive_structure(naive)
    assert tree["left"].size > 15


def test_hist_tree_with_two_byte_codes_equals_exact_cart():
    # 600 distinct values, max_bins 4096: every value its own bin, codes are uint16
    X, y, w = _data(n=1500, levels=600, seed=7)
    tree, edges = _grow(X, y, w, "regression", max_bins=4096, min_samples_leaf=10)
    assert max(e.size for e in edges) > 255
    naive = naive_grow(X.astype(np.float64), y, w, edges, "regression", None, None, 10)
    assert _structure(tree, edges) == _naive_structure(naive)


def test_hist_tree_equals_cart_on_the_binned_data_with_many_values():
    # more than 255 distinct values: quantile bins, and exact CART over those edges
    X, y, w = _data(n=1500, levels=10_000, seed=1)
    tree, edges = _grow(X, y, w, "regression", min_samples_leaf=20)
    assert max(e.size for e in edges) == 254
    naive = naive_grow(X.astype(np.float64), y, w, edges, "regression", None, None, 20)
    assert _structure(tree, edges) == _naive_structure(naive)


def test_hist_tree_equals_scikit_learn_regression_tree():
    X, y, w = _data(n=600, levels=60, seed=2)
    tree, edges = _grow(X, y, w, "regression", min_samples_leaf=4)
    sk = DecisionTreeRegressor(min_samples_leaf=4, random_state=0).fit(X, y, sample_weight=w)
    assert tree["left"].size == sk.tree_.node_count
    # route with the histogram tree's thresholds: same leaf means for every row
    thr = _thresholds(tree, edges)
    leaf = np.zeros(X.shape[0], np.int64)
    while True:
        split = tree["feature"][leaf] >= 0
        if not split.any():
            break
        j = leaf[split]
        go_left = X[split, tree["feature"][j]] <= thr[j]
        leaf[split] = np.where(go_left, tree["left"][j], tree["right"][j])
    np.testing.assert_allclose(tree["value"][leaf, 0], sk.predict(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_node_statistics_match_numpy(task):
    X, y, w = _data(task=task, seed=3)
    w[::7] = 0.0  # rows of weight zero are not in the tree
    tree, edges = _grow(X, y, w, task, min_samples_leaf=5)
    thr = _thresholds(tree, edges)
    if task == "regression":
        mean, var = naive_node_stats(tree["left"], tree["right"], tree["feature"], thr, 0, X,
                                     y, w)
        assert sorted(mean) == list(range(tree["left"].size))
        for j in mean:
            assert tree["value"][j, 0] == pytest.approx(mean[j], rel=1e-12, abs=1e-12)
            assert tree["variance"][j] == pytest.approx(var[j], rel=1e-9, abs=1e-12)
    else:
        leaves = naive_apply(tree["left"], tree["right"], tree["feature"], thr, 0, X)
        keep = w > 0
        fractions = naive_class_fractions(leaves[keep], y[keep].astype(int), w[keep], 3)
        for j, frac in fractions.items():
            np.testing.assert_allclose(tree["value"][j], frac, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(tree["value"][0], np.bincount(
            y[keep].astype(int), w[keep], 3) / w[keep].sum(), rtol=1e-12)
    assert tree["count"][0] == np.count_nonzero(w)
    assert tree["weight"][0] == pytest.approx(w.sum(), rel=1e-12)
    is_leaf = tree["left"] < 0
    assert tree["count"][is_leaf].sum() == np.count_nonzero(w)
    assert tree["count"][is_leaf].min() >= 5


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_sibling_subtraction_equals_direct_histograms(task):
    # small_rows=1: every node's histogram is a full one and the larger child's comes from
    # subtraction; a huge small_rows: every node is histogrammed directly from its rows
    X, y, w = _data(n=3000, levels=10**6, task=task, seed=4)
    trees = [_grow(X, y, w, task, min_samples_leaf=6, small_rows=s)[0]  # S fresh each time
             for s in (1, 64, 10**9)]
    for other in trees[1:]:
        for name in ("left", "right", "feature", "bin", "count"):
            np.testing.assert_array_equal(trees[0][name], other[name])
        np.testing.assert_allclose(trees[0]["value"], other["value"], rtol=1e-12)


def test_max_features_draws_the_features_uniformly():
    # max_features=1: the root splits on the one feature drawn for it, uniform over the
    # four (all informative here); chi-square over 400 seeds
    rng = np.random.default_rng(5)
    X = rng.random((200, 4)).astype(np.float32)
    y = X.sum(axis=1) + 0.1 * rng.normal(size=200)
    edges = bin_edges(X)
    binned = bin_data(X, edges)
    S = row_statistics(y)
    n_bins = np.array([e.size + 1 for e in edges])
    roots = [grow_tree(binned, S.copy(), np.arange(200), n_bins, classification=False,
                       min_samples_leaf=50, max_features=1, seed=s)["feature"][0]
             for s in range(400)]
    counts = np.bincount(roots, minlength=4)
    assert stats.chisquare(counts).pvalue > 0.01, counts
    # all features: the best one, whatever the seed
    best = {int(grow_tree(binned, S.copy(), np.arange(200), n_bins, classification=False,
                          min_samples_leaf=50, seed=s)["feature"][0]) for s in range(5)}
    assert len(best) == 1


def test_constant_features_are_skipped_and_do_not_count():
    rng = np.random.default_rng(6)
    X = np.column_stack([np.zeros(300), rng.random(300), np.ones(300)]).astype(np.float32)
    y = X[:, 1] + 0.01 * rng.normal(size=300)
    edges = bin_edges(X)
    S = row_statistics(y)
    n_bins = np.array([e.size + 1 for e in edges])
    for s in range(20):  # max_features=1 still finds the one non-constant feature
        t = grow_tree(bin_data(X, edges), S.copy(), np.arange(300), n_bins, classification=False,
                      min_samples_leaf=10, max_features=1, seed=s)
        assert set(t["feature"][t["feature"] >= 0].tolist()) == {1}


def test_resolve_max_features_follows_scikit_learn():
    assert [resolve_max_features(m, 10) for m in (None, "sqrt", "log2", 0.25, 4, 1.0)] == [
        10, 3, 3, 2, 4, 10]
    assert resolve_max_features(0.01, 10) == 1
    with pytest.raises(ValueError, match="max_features=11"):
        resolve_max_features(11, 10)


def test_grow_tree_refuses_inconsistent_inputs():
    X, y, w = _data(n=50)
    edges = bin_edges(X)
    n_bins = np.array([e.size + 1 for e in edges])
    S = row_statistics(y, w)
    with pytest.raises(ValueError, match="at least one row"):
        grow_tree(bin_data(X, edges), S, np.array([], np.int64), n_bins, classification=False)
    with pytest.raises(ValueError, match="do not agree"):
        grow_tree(bin_data(X, edges), S[:10], np.arange(20), n_bins, classification=False)
    with pytest.raises(ValueError, match="writeable"):
        grow_tree(bin_data(X, edges), S.astype(np.float32), np.arange(50), n_bins,
                  classification=False)
