"""Tests of the trunk's kernels and the Trunk estimator: binning, histograms, splitting,
then routing, export, state round trips and errors (the grower: ``test_trunk_grower``).

Every kernel is compared with a plain-NumPy oracle of ``tests/naive/``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ebf._splitting import best_splits
from ebf.binning import (
    bin_data,
    bin_edges,
    check_bin_edges,
    edges_from_quantiles,
    edges_from_sample,
    n_bins_of,
    quantile_levels,
)
from ebf.config import MAX_BINS
from ebf.grower import (
    apply_binned,
    grow_trunk,
)
from ebf.histogram import build_histograms, row_statistics
from ebf.trunk import Trunk, TrunkArrays
from tests.ebf.trunk_helpers import STRUCTURE, assert_same_trunk, trunk_data
from tests.naive import (
    naive_best_split,
    naive_histogram,
    naive_stats,
    naive_trunk_apply,
)

# ------------------------------------------------------------------------------ binning


def test_bin_edges_midpoints_quantiles_and_constant():
    rng = np.random.default_rng(0)
    few = rng.integers(0, 10, 500).astype(float)
    many = rng.normal(size=5000)
    X = np.column_stack([few, many[:500], np.full(500, 3.0)])
    e_few, e_many, e_const = bin_edges(X, max_bins=64)
    np.testing.assert_array_equal(e_few, np.arange(9) + 0.5)
    assert e_const.size == 0 and e_const.dtype == np.float64
    assert e_many.size <= 63 and (np.diff(e_many) > 0).all()
    # a column and its distinct values give the same edges (the distributed recipe)
    np.testing.assert_array_equal(edges_from_sample(few), edges_from_sample(np.unique(few)))
    # many distinct values: quantiles at quantile_levels, then the shared cleaning
    q = np.quantile(many, quantile_levels(MAX_BINS), method="midpoint")
    np.testing.assert_array_equal(edges_from_sample(many), edges_from_quantiles(q))
    assert edges_from_sample(many).size == MAX_BINS - 1
    # subsampled edges are reproducible and close to the exact ones
    big = rng.normal(size=(20_000, 1))
    a = bin_edges(big, subsample=5000)[0]
    np.testing.assert_array_equal(a, bin_edges(big, subsample=5000)[0])
    assert np.abs(a - bin_edges(big, subsample=None)[0]).max() < 0.2


def test_edges_from_quantiles_cleans_and_checks():
    np.testing.assert_array_equal(edges_from_quantiles([3.0, 1.0, 1.0, 2.0], 8), [1, 2, 3])
    with pytest.raises(ValueError, match="more than max_bins - 1"):
        edges_from_quantiles(np.arange(10.0), max_bins=4)
    with pytest.raises(ValueError, match="1 NaN or inf"):
        edges_from_quantiles([1.0, np.nan])
    with pytest.raises(ValueError, match="max_bins"):
        quantile_levels(65536)


def test_wide_bins_use_two_byte_codes():
    # more than MAX_BINS bins (the forests' histogram trees): uint16 codes, same contract
    rng = np.random.default_rng(2)
    X = rng.normal(size=(5000, 2))
    X[:, 1] = np.round(X[:, 1])  # few distinct values: exact bins
    edges = bin_edges(X, max_bins=1000)
    assert edges[0].size == 999 and edges[1].size == np.unique(X[:, 1]).size - 1
    codes = bin_data(X, edges)
    assert codes.dtype == np.uint16
    for f in range(2):
        np.testing.assert_array_equal(codes[:, f], np.searchsorted(edges[f], X[:, f]))
    assert bin_data(X, bin_edges(X, max_bins=255)).dtype == np.uint8
    # exact_bins: one bin per value up to that many distinct values, else max_bins quantiles
    few = np.round(X[:, 0] * 100)  # ~700 distinct values
    np.testing.assert_array_equal(edges_from_sample(few, 255, exact_bins=4096),
                                  edges_from_sample(few, 4096))
    assert 200 < edges_from_sample(few, 255, exact_bins=500).size <= 254  # quantiles
    assert edges_from_sample(X[:, 0], 255, exact_bins=4096).size == 254


def test_bin_data_matches_searchsorted():
    rng = np.random.default_rng(1)
    X = np.asfortranarray(rng.normal(size=(3000, 3)))
    edges = bin_edges(X, max_bins=17)
    X[:10, 0] = edges[0][:10]  # values equal to an edge go to that edge's bin
    X[10, 1] = -1e300
    X[11, 1] = 1e300
    codes = bin_data(X, edges)
    assert codes.dtype == np.uint8 and codes.flags.c_contiguous
    for f in range(3):
        np.testing.assert_array_equal(codes[:, f], np.searchsorted(edges[f], X[:, f], "left"))
    with pytest.raises(ValueError, match="3 columns"):
        bin_data(X[:, :2], edges)


def test_check_bin_edges_errors():
    with pytest.raises(ValueError, match="2 features but X has 1"):
        check_bin_edges([[0.0], [1.0]], 1)
    with pytest.raises(ValueError, match=r"bin_edges\[0\] is not strictly increasing"):
        check_bin_edges([[1.0, 1.0]], 1)
    with pytest.raises(ValueError, match="at most MAX_BINS - 1"):
        check_bin_edges([np.arange(300.0)], 1)


# ---------------------------------------------------------------------------- histogram


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_histogram_kernel_matches_naive(task):
    rng = np.random.default_rng(2)
    n, d, n_bins, n_nodes = 2000, 5, 13, 7
    binned = rng.integers(0, n_bins, (n, d)).astype(np.uint8)
    node_of_row = rng.integers(0, n_nodes, n)
    slot_of_node = np.array([-1, 0, 3, -1, 1, 2, 4])
    y = rng.normal(size=n) if task == "regression" else rng.integers(0, 4, n)
    S = row_statistics(y, rng.exponential(size=n), task)
    got = build_histograms(binned, node_of_row, slot_of_node, S, 5, n_bins)
    want = naive_histogram(binned, node_of_row, slot_of_node, S, 5, n_bins)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got[..., 0], want[..., 0])


def test_row_statistics_values_and_errors():
    S = row_statistics(np.array([2.0, -1.0]), np.array([0.5, 2.0]))
    np.testing.assert_array_equal(S, [[1, 0.5, 1.0, 2.0], [1, 2.0, -2.0, 2.0]])
    S = row_statistics(np.array([1, 0, 1]), np.array([1.0, 2.0, 3.0]), "classification", 3)
    np.testing.assert_array_equal(S, [[1, 0, 1, 0], [1, 2, 0, 0], [1, 0, 3, 0]])
    with pytest.raises(ValueError, match="1 class code"):
        row_statistics(np.array([0, 3]), task="classification", n_classes=3)
    with pytest.raises(ValueError, match="task must be"):
        row_statistics(np.zeros(2), task="ranking")
    with pytest.raises(ValueError, match="bin code 5 is >= n_bins"):
        build_histograms(np.full((1, 1), 5, np.uint8), np.zeros(1, np.int64),
                         np.zeros(1, np.int64), S[:1], 1, 5)


# ---------------------------------------------------------------------------- splitting


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("min_rows, min_weight", [(1, 0.0), (25, 0.0), (1, 20.0), (40, 30.0)])
def test_best_splits_equal_brute_force(task, min_rows, min_weight):
    for seed in range(3):
        X, y, w = trunk_data(10 + seed, n=400, task=task)
        edges = bin_edges(X)
        n_nodes = 3
        node_of_row = np.random.default_rng(seed).integers(0, n_nodes, len(y))
        S = row_statistics(y, w, task, 3)
        hist = build_histograms(bin_data(X, edges), node_of_row, np.arange(n_nodes), S,
                                n_nodes, n_bins_of(edges))
        res = best_splits(hist, task, min_rows, min_weight)
        for j in range(n_nodes):
            r = node_of_row == j
            g, f, b, ml = naive_best_split(X[r], y[r], w[r], edges, task, 3, min_rows,
                                           min_weight)
            assert (res.feature[j], res.bin[j], res.missing_left[j]) == (f, b, ml), (seed, j)
            np.testing.assert_allclose(res.gain[j], g, rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(res.total[j], naive_stats(y[r], w[r], task, 3))
            if f >= 0:
                go_left = X[r, f] <= edges[f][b]
                yl, wl = y[r][go_left], w[r][go_left]
                yr, wr = y[r][~go_left], w[r][~go_left]
                np.testing.assert_allclose(res.left[j], naive_stats(yl, wl, task, 3))
                np.testing.assert_allclose(res.right[j], naive_stats(yr, wr, task, 3))
                assert res.left[j, 0] >= min_rows and res.right[j, 0] >= min_rows
                assert min(wl.sum(), wr.sum()) >= min_weight


def test_best_splits_ties_lowest_feature_then_lowest_bin():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, 200).astype(float) * 2  # values 0, 2, 4, 6
    y = (x >= 4).astype(float) + 0.01 * rng.normal(size=200)
    X = np.column_stack([rng.normal(size=200), x, x])  # features 1 and 2 tie exactly
    edges = [bin_edges(X[:, :1])[0], np.arange(7.0) + 0.5, np.arange(7.0) + 0.5]
    hist = build_histograms(bin_data(X, edges), np.zeros(200, np.int64), np.zeros(1, np.int64),
                            row_statistics(y), 1, n_bins_of(edges))
    res = best_splits(hist)
    # edges 2.5 and 3.5 give the same partition (no value 3): the lowest bin wins
    assert (res.feature[0], res.bin[0]) == (1, 2)
    assert naive_best_split(X, y, np.ones(200), edges, "regression", None)[1:3] == (1, 2)


def test_best_splits_no_split_cases():
    binned = np.array([[0], [1], [2], [3]], np.uint8)
    one = np.zeros(1, np.int64)
    # constant labels: every decrease is rounding noise
    hist = build_histograms(binned, np.zeros(4, np.int64), one,
                            row_statistics(np.full(4, 0.1), np.array([0.3, 1.7, 0.2, 2.9])),
                            1, 5)  # 4 bins, then the missing values' slot
    assert best_splits(hist).feature[0] == -1
    # pure class node
    hist = build_histograms(binned, np.zeros(4, np.int64), one,
                            row_statistics(np.ones(4, int), task="classification"), 1, 4)
    assert best_splits(hist, "classification").feature[0] == -1
    # zero weight on one side is never valid
    hist = build_histograms(binned, np.zeros(4, np.int64), one,
                            row_statistics(np.arange(4.0), np.array([0.0, 0.0, 1.0, 1.0])),
                            1, 5)  # 4 bins, then the missing values' slot
    res = best_splits(hist)
    assert res.bin[0] == 2  # only {0,1,2} | {3} has weight on both sides
    # min_leaf_rows larger than half the node: no split
    assert best_splits(hist, min_leaf_rows=3).feature[0] == -1
    with pytest.raises(ValueError, match="min_leaf_rows"):
        best_splits(hist, min_leaf_rows=0)
    with pytest.raises(ValueError, match="k = 4"):
        best_splits(hist[..., :3])


# ------------------------------------------------------------------------------- Trunk


def test_apply_raw_equals_binned_routing_and_leaf_ids():
    X, y, w = trunk_data(11, n=2000)
    t = Trunk(min_leaf_rows=150, max_leaves=9).fit(X, y, sample_weight=w)
    leaves = t.apply(X)
    nodes = apply_binned(t.trunk_, bin_data(X, t.bin_edges_), n_bins_of(t.bin_edges_))
    np.testing.assert_array_equal(leaves, t.trunk_.leaf_id[nodes])
    np.testing.assert_array_equal(leaves, naive_trunk_apply(X, t.trunk_.to_dict()))
    # unseen values, including values equal to the thresholds
    Z = np.random.default_rng(0).normal(scale=20, size=(500, 4))
    internal = np.flatnonzero(t.trunk_.feature >= 0)
    Z[: internal.size, t.trunk_.feature[internal]] = t.trunk_.threshold[internal]
    np.testing.assert_array_equal(
        t.apply(Z), t.trunk_.leaf_id[apply_binned(t.trunk_, bin_data(Z, t.bin_edges_),
                                                n_bins_of(t.bin_edges_))])
    # leaf ids are 0 .. L-1, every leaf is big enough, preorder numbering
    assert sorted(np.unique(leaves)) == list(range(t.n_leaves_))
    counts = np.bincount(leaves, minlength=t.n_leaves_)
    assert counts.min() >= 150
    np.testing.assert_array_equal(counts, t.trunk_.n_rows[t.trunk_.leaf_nodes()])
    for leaf in range(t.n_leaves_):
        r = leaves == leaf
        np.testing.assert_allclose(t.leaf_values_[leaf], np.average(y[r], weights=w[r]))


def test_sample_weight_two_gives_the_same_trunk():
    X, y, _ = trunk_data(12, n=800, weighted=False)
    a = Trunk(min_leaf_rows=40, max_leaves=8).fit(X, y)
    b = Trunk(min_leaf_rows=40, max_leaves=8).fit(X, y, sample_weight=2 * np.ones(len(y)))
    for name in STRUCTURE:
        np.testing.assert_array_equal(getattr(a.trunk_, name), getattr(b.trunk_, name))
    np.testing.assert_allclose(b.trunk_.weight, 2 * a.trunk_.weight)
    np.testing.assert_allclose(b.trunk_.gain, 2 * a.trunk_.gain)
    np.testing.assert_allclose(a.leaf_values_, b.leaf_values_)


def test_classification_trunk_and_reused_edges():
    X, y, w = trunk_data(13, n=900, task="classification")
    t = Trunk(task="classification", min_leaf_rows=50, max_leaves=6).fit(X, y, sample_weight=w)
    assert t.n_classes_ == 3 and t.leaf_values_.shape == (t.n_leaves_, 3)
    np.testing.assert_allclose(t.leaf_values_.sum(axis=1), 1.0)
    assert t.n_leaves_ > 1
    again = Trunk(task="classification", min_leaf_rows=50, max_leaves=6)
    again.fit(X, y, sample_weight=w, bin_edges=t.bin_edges_)
    assert_same_trunk(t.trunk_, again.trunk_, exact_sums=True)
    five = Trunk(task="classification", n_classes=5, max_leaves=3).fit(X, y)
    assert five.leaf_values_.shape[1] == 5 and (five.leaf_values_[:, 3:] == 0).all()


def test_export_text_names_and_dataframe():
    X, y, _ = trunk_data(14, n=600, weighted=False)
    df = pd.DataFrame(X, columns=["rooms", "income", "age", "latitude"])
    t = Trunk(min_leaf_rows=60, max_leaves=4).fit(df, y)
    np.testing.assert_array_equal(t.feature_names_in_, df.columns)
    text = t.export_text()
    used = {df.columns[f] for f in t.trunk_.feature if f >= 0}
    assert used and all(name in text for name in used)
    assert text.count("leaf ") == t.n_leaves_ and "rows" in text
    assert "x0" in t.export_text(feature_names=["x0", "x1", "x2", "x3"], decimals=1)
    with pytest.raises(ValueError, match="2 names"):
        t.export_text(feature_names=["a", "b"])
    assert "Trunk(max_leaves=4, min_leaf_rows=60)" == repr(t)


def _json_roundtrip(state):
    """What model.py does: arrays aside as .npy, the rest through JSON."""
    arrays = []

    def strip(v):
        if isinstance(v, np.ndarray):
            assert v.dtype != object
            arrays.append(v.copy())
            return {"__array__": len(arrays) - 1}
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items()}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    def fill(v):
        if isinstance(v, dict):
            return arrays[v["__array__"]] if "__array__" in v else {k: fill(x) for k, x in
                                                                    v.items()}
        if isinstance(v, list):
            return [fill(x) for x in v]
        return v

    return fill(json.loads(json.dumps(strip(state))))


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_state_round_trip(task):
    X, y, w = trunk_data(15, task=task)
    df = pd.DataFrame(X, columns=list("abcd"))
    t = Trunk(task=task, min_leaf_rows=40, max_leaves=6).fit(df, y, sample_weight=w)
    u = Trunk(**t.get_params())
    u._set_state(_json_roundtrip(t._get_state()))
    assert_same_trunk(t.trunk_, u.trunk_, exact_sums=True)
    for e, f in zip(t.bin_edges_, u.bin_edges_, strict=True):
        np.testing.assert_array_equal(e, f)
    np.testing.assert_array_equal(t.leaf_values_, u.leaf_values_)
    np.testing.assert_array_equal(t.apply(df), u.apply(df))
    assert t.export_text() == u.export_text() and u.n_leaves_ == t.n_leaves_
    np.testing.assert_array_equal(u.feature_names_in_, t.feature_names_in_)
    with pytest.raises(ValueError, match="missing"):
        Trunk()._set_state({"n_features_in_": 4})


def test_errors_and_failed_fit_leaves_model_unchanged():
    X, y, w = trunk_data(16, n=300)
    df = pd.DataFrame(X, columns=["rooms", "income", "age", "latitude"])
    df.iloc[[3, 7], 1] = np.inf  # NaN is a missing value (its own bin); inf is refused
    with pytest.raises(ValueError, match=r"'income': 2 inf"):
        Trunk().fit(df, y)
    t = Trunk(min_leaf_rows=30).fit(X, y)
    before = t.trunk_.to_dict()
    with pytest.raises(ValueError, match="1 negative"):
        t.fit(X[:, :3], y, sample_weight=np.r_[-1.0, np.ones(len(y) - 1)])
    assert t.n_features_in_ == 4
    assert_same_trunk(t.trunk_, before, exact_sums=True)
    with pytest.raises(ValueError, match="expecting 4 features"):
        t.apply(X[:, :3])
    with pytest.raises(ValueError, match="1 inf"):
        t.apply(np.r_[X[:2], [[np.inf, 0, 0, 0]]])
    with pytest.raises(ValueError, match="min_leaf_rows"):
        Trunk(min_leaf_rows=0).fit(X, y)
    with pytest.raises(ValueError, match="max_bins"):
        Trunk(max_bins=256).fit(X, y)
    with pytest.raises(ValueError, match="sums to zero"):
        Trunk().fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="1 class code"):
        Trunk(task="classification", n_classes=2).fit(X, np.r_[2, np.zeros(len(y) - 1, int)])
    with pytest.raises(ValueError, match="not integers"):
        Trunk(task="classification").fit(X, y)
    with pytest.raises(ValueError, match="bin_edges has 1 features"):
        Trunk().fit(X, y, bin_edges=[[0.5]])
    with pytest.raises(ValueError, match="min_leaf_rows"):
        grow_trunk(lambda t, o: None, [np.zeros(0)], min_leaf_rows=0)
    assert isinstance(TrunkArrays.root(4).nbytes, int)
