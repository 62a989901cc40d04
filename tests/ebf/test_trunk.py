"""Tests of the histogram CART trunk stack: binning, histograms, splitting, grower, Trunk.

Every kernel is compared with a plain-NumPy oracle of ``tests/naive.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ebf import grower
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
    SUBTRACT_MAX_COND,
    BinnedSource,
    apply_binned,
    grow_trunk,
    node_histograms,
)
from ebf.histogram import build_histograms, row_statistics, subtract_histogram
from ebf.splitting import best_splits
from ebf.trunk import Trunk, TrunkArrays
from tests.naive import (
    naive_best_split,
    naive_grow,
    naive_histogram,
    naive_stats,
    naive_subtract_histogram,
    naive_trunk_apply,
    naive_trunk_requests,
)

STRUCTURE = ("feature", "threshold_bin", "threshold", "left", "right", "depth", "n_rows",
             "leaf_id")
SUMS = ("weight", "stats", "gain")


def _data(seed, n=600, task="regression", n_classes=3, weighted=True):
    """Features with few distinct values (exact bins), labels depending on them."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([
        rng.integers(0, 12, n).astype(float),
        np.round(rng.normal(size=n), 1),
        rng.integers(0, 3, n) * 2.5,
        rng.integers(0, 40, n) / 4.0,
    ])
    signal = (X[:, 0] > 5) * 2.0 + np.sin(X[:, 1]) + 0.1 * X[:, 3]
    if task == "regression":
        y = signal + 0.3 * rng.normal(size=n)
    else:
        y = np.digitize(signal + 0.5 * rng.normal(size=n), [0.8, 2.0])
        y = np.minimum(y, n_classes - 1)
    w = rng.exponential(size=n) if weighted else np.ones(n)
    return X, y, w


def _assert_same_trunk(a, b, exact_sums=False):
    a = a if isinstance(a, dict) else a.to_dict()
    b = b if isinstance(b, dict) else b.to_dict()
    for name in STRUCTURE:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    for name in SUMS:
        if exact_sums:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        else:
            np.testing.assert_allclose(a[name], b[name], rtol=1e-9, atol=1e-9, err_msg=name)


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
        X, y, w = _data(10 + seed, n=400, task=task)
        edges = bin_edges(X)
        n_nodes = 3
        node_of_row = np.random.default_rng(seed).integers(0, n_nodes, len(y))
        S = row_statistics(y, w, task, 3)
        hist = build_histograms(bin_data(X, edges), node_of_row, np.arange(n_nodes), S,
                                n_nodes, n_bins_of(edges))
        res = best_splits(hist, task, min_rows, min_weight)
        for j in range(n_nodes):
            r = node_of_row == j
            g, f, b = naive_best_split(X[r], y[r], w[r], edges, task, 3, min_rows, min_weight)
            assert (res.feature[j], res.bin[j]) == (f, b), (seed, j)
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
    assert naive_best_split(X, y, np.ones(200), edges, "regression", None)[1:] == (1, 2)


def test_best_splits_no_split_cases():
    binned = np.array([[0], [1], [2], [3]], np.uint8)
    one = np.zeros(1, np.int64)
    # constant labels: every decrease is rounding noise
    hist = build_histograms(binned, np.zeros(4, np.int64), one,
                            row_statistics(np.full(4, 0.1), np.array([0.3, 1.7, 0.2, 2.9])),
                            1, 4)
    assert best_splits(hist).feature[0] == -1
    # pure class node
    hist = build_histograms(binned, np.zeros(4, np.int64), one,
                            row_statistics(np.ones(4, int), task="classification"), 1, 4)
    assert best_splits(hist, "classification").feature[0] == -1
    # zero weight on one side is never valid
    hist = build_histograms(binned, np.zeros(4, np.int64), one,
                            row_statistics(np.arange(4.0), np.array([0.0, 0.0, 1.0, 1.0])),
                            1, 4)
    res = best_splits(hist)
    assert res.bin[0] == 2  # only {0,1,2} | {3} has weight on both sides
    # min_leaf_rows larger than half the node: no split
    assert best_splits(hist, min_leaf_rows=3).feature[0] == -1
    with pytest.raises(ValueError, match="min_leaf_rows"):
        best_splits(hist, min_leaf_rows=0)
    with pytest.raises(ValueError, match="k = 4"):
        best_splits(hist[..., :3])


# ------------------------------------------------------------------------------- grower


def _grow(X, y, w, task, **kw):
    edges = bin_edges(X)
    S = row_statistics(y, w, task, 3 if task == "classification" else None)
    src = BinnedSource(bin_data(X, edges), S, n_bins_of(edges))
    n_classes = 3 if task == "classification" else None
    return grow_trunk(src, edges, task, n_classes, **kw), edges


GROWTH = [
    dict(max_leaves=6),
    dict(min_leaf_rows=40),
    dict(max_leaves=5, min_leaf_rows=30, max_depth=2),
    dict(min_leaf_rows=20, min_leaf_weight=25.0),
]


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("kw", GROWTH)
def test_trunk_equals_naive_grower(task, kw):
    X, y, w = _data(4, task=task)
    trunk, edges = _grow(X, y, w, task, **kw)
    naive = naive_grow(X, y, w, edges, task, 3, kw.get("max_leaves"),
                       kw.get("min_leaf_rows", 1), kw.get("min_leaf_weight", 0.0),
                       kw.get("max_depth"))
    _assert_same_trunk(trunk, naive)
    assert trunk.n_leaves > 2
    if "max_leaves" in kw:
        assert trunk.n_leaves <= kw["max_leaves"]


def test_trunk_unweighted_regression_equals_naive_and_grows_to_the_end():
    X, y, w = _data(5, n=300, weighted=False)
    trunk, edges = _grow(X, y, w, "regression", min_leaf_rows=15)
    _assert_same_trunk(trunk, naive_grow(X, y, w, edges, min_rows=15))
    # no budget, no depth: every leaf is unsplittable
    trunk, edges = _grow(X[:80], np.round(y[:80]), w[:80], "regression")
    S = row_statistics(np.round(y[:80]))
    nodes = apply_binned(trunk, bin_data(X[:80], edges))
    for j in np.flatnonzero(trunk.feature < 0):
        slot = np.where(np.arange(trunk.n_nodes) == j, 0, -1)
        hist = build_histograms(bin_data(X[:80], edges), nodes, slot, S, 1, n_bins_of(edges))
        assert best_splits(hist).feature[0] == -1


def _partitioned_source(binned, S, n_bins, n_parts=3):
    """What the Dask layer does: route each partition, histogram it, sum the histograms."""
    cuts = np.array_split(np.arange(binned.shape[0]), n_parts)

    def source(trunk, open_nodes):
        return sum(node_histograms(trunk, open_nodes, binned[c], S[c], n_bins) for c in cuts)

    return source


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_partitioned_source_gives_the_same_trunk(task):
    # integer labels and weights: every sum is exact, so the trunks are identical
    rng = np.random.default_rng(6)
    X, y, _ = _data(6, n=900, task=task)
    y = np.round(2 * y) if task == "regression" else y
    w = rng.integers(1, 4, len(y)).astype(float)
    edges = bin_edges(X)
    n_classes = 3 if task == "classification" else None
    S = row_statistics(y, w, task, n_classes)
    binned = bin_data(X, edges)
    kw = dict(max_leaves=7, min_leaf_rows=30)
    local = grow_trunk(BinnedSource(binned, S, n_bins_of(edges)), edges, task, n_classes, **kw)
    parts = grow_trunk(_partitioned_source(binned, S, n_bins_of(edges)), edges, task,
                       n_classes, **kw)
    _assert_same_trunk(local, parts, exact_sums=True)
    # float labels and weights: the same structure, sums equal to rounding
    X, y, w = _data(7, n=900, task=task)
    S = row_statistics(y, w, task, n_classes)
    binned = bin_data(X, bin_edges(X))
    local = grow_trunk(BinnedSource(binned, S, n_bins_of(edges)), edges, task, n_classes, **kw)
    parts = grow_trunk(_partitioned_source(binned, S, n_bins_of(edges), 4), edges, task,
                       n_classes, **kw)
    _assert_same_trunk(local, parts)


def test_chunked_source_calls_and_source_shape_check():
    X, y, w = _data(8)
    full, edges = _grow(X, y, w, "regression", min_leaf_rows=20)
    calls = []
    src = BinnedSource(bin_data(X, edges), row_statistics(y, w), n_bins_of(edges))

    def counting(trunk, open_nodes):
        calls.append(len(open_nodes))
        return src(trunk, open_nodes)

    per_node = X.shape[1] * n_bins_of(edges) * 4 * 8
    chunked = grow_trunk(counting, edges, min_leaf_rows=20, max_hist_bytes=2 * per_node)
    _assert_same_trunk(full, chunked, exact_sums=True)
    assert max(calls) == 2 and len(calls) > full.depth.max()
    with pytest.raises(ValueError, match="histogram source returned shape"):
        grow_trunk(lambda t, o: np.zeros((len(o), 1, 1, 4)), edges)


def test_max_depth_and_max_leaves_one():
    X, y, w = _data(9)
    t0, _ = _grow(X, y, w, "regression", max_depth=0)
    t1, _ = _grow(X, y, w, "regression", max_leaves=1)
    for t in (t0, t1):
        assert t.n_nodes == 1 and t.leaf_id.tolist() == [0]
        np.testing.assert_allclose(t.stats[0], naive_stats(y, w, "regression", None))
    t2, _ = _grow(X, y, w, "regression", max_depth=2)
    assert t2.depth.max() == 2 and t2.n_leaves == 4


# ------------------------------------------------------------------- sibling subtraction


class RecordingSource:
    """A histogram source that records every node it is asked for and the bytes it returns."""

    def __init__(self, source):
        self.source = source
        self.asked: list[np.ndarray] = []
        self.nbytes = 0

    def __call__(self, trunk, open_nodes):
        self.asked.append(np.array(open_nodes))
        hist = self.source(trunk, open_nodes)
        self.nbytes += hist.nbytes
        return hist

    @property
    def nodes(self) -> np.ndarray:
        return np.concatenate(self.asked)


def _recorded_growth(X, y, w, task, edges=None, **kw):
    edges = bin_edges(X) if edges is None else edges
    n_classes = 3 if task == "classification" else None
    S = row_statistics(y, w, task, n_classes)
    src = RecordingSource(BinnedSource(bin_data(X, edges), S, n_bins_of(edges)))
    return grow_trunk(src, edges, task, n_classes, **kw), src


def _parent_of(trunk):
    parent = np.full(trunk.n_nodes, -1)
    internal = np.flatnonzero(trunk.left >= 0)
    parent[trunk.left[internal]] = internal
    parent[trunk.right[internal]] = internal
    return parent


def _sibling(trunk, j):
    p = _parent_of(trunk)[j]
    return trunk.right[p] if trunk.left[p] == j else trunk.left[p]


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("kw", GROWTH)
def test_subtracting_grower_equals_direct_grower_and_asks_for_smaller_children(
        task, kw, monkeypatch):
    X, y, w = _data(4, n=1500, task=task)
    sub, src = _recorded_growth(X, y, w, task, **kw)
    direct, dsrc = _recorded_growth(X, y, w, task, subtract=False, **kw)
    _assert_same_trunk(sub, direct)
    assert sub.n_leaves > 2
    rule = dict(min_rows=kw.get("min_leaf_rows", 1), max_leaves=kw.get("max_leaves"),
                max_depth=kw.get("max_depth"))
    assert src.nodes.tolist() == naive_trunk_requests(sub, task, max_cond=SUBTRACT_MAX_COND,
                                                      **rule)
    assert src.nbytes < dsrc.nbytes
    # with no conditioning bound: the root, then only the child with fewer rows of every
    # split (the left one on ties); the direct grower asks for both children of the same
    # splits
    monkeypatch.setattr(grower, "SUBTRACT_MAX_COND", np.inf)
    unbounded, src = _recorded_growth(X, y, w, task, **kw)
    _assert_same_trunk(unbounded, direct)
    asked = src.nodes
    assert asked.tolist() == naive_trunk_requests(sub, task, **rule)
    assert asked[0] == 0 and np.unique(asked).size == asked.size
    for j in asked[1:]:
        s = _sibling(sub, j)
        assert s not in asked
        assert sub.n_rows[j] < sub.n_rows[s] or (sub.n_rows[j] == sub.n_rows[s] and j < s)
    parent = _parent_of(sub)
    assert np.array_equal(parent[asked[1:]], np.unique(parent[dsrc.nodes[1:]]))


def test_subtraction_exact_on_integer_sums():
    # integer labels and weights: every sum and every difference is exact
    rng = np.random.default_rng(3)
    X, y, _ = _data(3, n=1200)
    y = np.round(4 * y)
    w = rng.integers(1, 4, y.size).astype(float)
    sub, src = _recorded_growth(X, y, w, "regression", min_leaf_rows=25)
    direct, dsrc = _recorded_growth(X, y, w, "regression", min_leaf_rows=25, subtract=False)
    _assert_same_trunk(sub, direct, exact_sums=True)
    assert src.nodes.size < dsrc.nodes.size


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_subtract_histogram_equals_naive_and_direct(task):
    X, y, w = _data(10, n=700, task=task)
    w[::7] = 0.0  # rows without weight: their bins must still give exact zeros
    edges = bin_edges(X)
    n_classes = 3 if task == "classification" else None
    S = row_statistics(y, w, task, n_classes)
    binned = bin_data(X, edges)
    child = (X[:, 0] > 5).astype(np.int64)
    hists = build_histograms(binned, child, np.array([0, 1]), S, 2, n_bins_of(edges))
    parent = build_histograms(binned, np.zeros(700, np.int64), np.zeros(1, np.int64), S, 1,
                              n_bins_of(edges))[0]
    expected = naive_subtract_histogram(parent, hists[1], task)
    assert subtract_histogram(parent, hists[1], task) == 0
    np.testing.assert_array_equal(parent, expected)
    np.testing.assert_allclose(parent, hists[0], rtol=1e-12, atol=1e-12)
    empty = hists[0][..., 0] == 0
    assert empty.any() and (parent[empty] == 0).all()
    nonneg = [c for c in range(parent.shape[-1]) if not (task == "regression" and c == 2)]
    assert (parent[..., nonneg] >= 0).all()
    # a child with more rows than its parent: the bins are counted, and zeroed
    bad = subtract_histogram(hists[0].copy(), hists[1], task)
    assert bad > 0
    with pytest.raises(ValueError, match="C-contiguous float64"):
        subtract_histogram(hists[0].astype(np.float32), hists[1], task)


def test_ill_conditioned_child_is_asked_for_directly_and_gets_no_spurious_split():
    """A pure child beside a sibling with labels 1e4 times larger (Sec. 2.2 zero-gain rule).

    Its histogram as a difference carries rounding of the sibling's size, far above the
    rounding ``best_splits`` allows for the child's own sums: derived, it would split.
    """
    rng = np.random.default_rng(0)
    n = 4000
    X = rng.random((n, 5))
    X[:, 0] = rng.integers(0, 10, n)
    small = X[:, 0] <= 3
    y = np.where(small, 1e4 * (1 + 0.3 * rng.normal(size=n)), 1.0)
    w = rng.exponential(size=n)
    edges = bin_edges(X)
    sub, src = _recorded_growth(X, y, w, "regression", edges, max_depth=2, min_leaf_rows=20)
    direct, _ = _recorded_growth(X, y, w, "regression", edges, max_depth=2, min_leaf_rows=20,
                                 subtract=False)
    _assert_same_trunk(sub, direct)
    pure = sub.right[0]
    assert sub.n_rows[pure] == (~small).sum() and sub.feature[pure] == -1
    assert {int(sub.left[0]), int(pure)} <= set(src.nodes.tolist())  # both children asked for
    assert src.nodes.tolist() == naive_trunk_requests(sub, "regression", 20, max_depth=2,
                                                      max_cond=SUBTRACT_MAX_COND)
    # what the guard prevents: the derived histogram of the pure child splits
    S = row_statistics(y, w)
    binned = bin_data(X, edges)
    hist = build_histograms(binned, small.astype(np.int64), np.array([0, 1]), S, 2,
                            n_bins_of(edges))
    parent = build_histograms(binned, np.zeros(n, np.int64), np.zeros(1, np.int64), S, 1,
                              n_bins_of(edges))[0]
    subtract_histogram(parent, hist[1], "regression")
    assert best_splits(hist[:1]).feature[0] == -1
    assert best_splits(parent[None]).feature[0] >= 0


def test_chains_of_differences_end_with_a_direct_request():
    # a deep trunk: the larger child of a larger child ... accumulates the rounding of every
    # histogram it is made of, until one is asked for directly with its sibling
    rng = np.random.default_rng(5)
    n = 3000
    X = rng.random((n, 3))
    y = np.floor(8 * X[:, 0]) + np.floor(4 * X[:, 1]) + 0.1 * rng.normal(size=n)
    w = rng.exponential(size=n)
    sub, src = _recorded_growth(X, y, w, "regression", min_leaf_rows=10)
    direct, _ = _recorded_growth(X, y, w, "regression", min_leaf_rows=10, subtract=False)
    _assert_same_trunk(sub, direct)
    assert sub.depth.max() > 8
    assert src.nodes.tolist() == naive_trunk_requests(sub, "regression", 10,
                                                      max_cond=SUBTRACT_MAX_COND)
    parent = _parent_of(sub)[src.nodes[1:]]
    assert 0 < parent.size - np.unique(parent).size < 0.05 * parent.size


def test_kept_histograms_are_bounded_and_do_not_depend_on_chunking():
    X, y, w = _data(14, n=2000)
    edges = bin_edges(X)
    per_node = X.shape[1] * n_bins_of(edges) * 4 * 8
    full, fsrc = _recorded_growth(X, y, w, "regression", edges, min_leaf_rows=30)
    direct, dsrc = _recorded_growth(X, y, w, "regression", edges, min_leaf_rows=30,
                                    subtract=False)
    # room for one parent and one kept node: at most one derived child per level
    for chunk in (1, 3, 1000):
        one, src = _recorded_growth(X, y, w, "regression", edges, min_leaf_rows=30,
                                    max_kept_bytes=2 * per_node,
                                    max_hist_bytes=chunk * per_node)
        _assert_same_trunk(one, full)
        assert max(len(a) for a in src.asked) <= chunk
        if chunk == 1:
            first = src.nodes
        np.testing.assert_array_equal(src.nodes, first)
    assert fsrc.nodes.size < first.size < dsrc.nodes.size
    depth = full.depth
    for level in range(1, depth.max() + 1):
        n_direct = np.sum(depth[dsrc.nodes] == level)
        assert np.sum(depth[first] == level) >= n_direct - 1
    nothing, src = _recorded_growth(X, y, w, "regression", edges, min_leaf_rows=30,
                                    max_kept_bytes=0)
    _assert_same_trunk(nothing, direct, exact_sums=True)
    np.testing.assert_array_equal(src.nodes, dsrc.nodes)


def test_inconsistent_source_is_an_error():
    X, y, w = _data(15)
    edges = bin_edges(X)
    src = BinnedSource(bin_data(X, edges), row_statistics(y, w), n_bins_of(edges))

    def doubled_children(trunk, open_nodes):
        hist = src(trunk, open_nodes)
        return hist if trunk.n_nodes == 1 else 2 * hist

    with pytest.raises(ValueError, match=r"more rows in node \d+ than in its parent node 0"):
        grow_trunk(doubled_children, edges, min_leaf_rows=20)


# ------------------------------------------------------------------------------- Trunk


def test_apply_raw_equals_binned_routing_and_leaf_ids():
    X, y, w = _data(11, n=2000)
    t = Trunk(min_leaf_rows=150, max_leaves=9).fit(X, y, w)
    leaves = t.apply(X)
    nodes = apply_binned(t.trunk_, bin_data(X, t.bin_edges_))
    np.testing.assert_array_equal(leaves, t.trunk_.leaf_id[nodes])
    np.testing.assert_array_equal(leaves, naive_trunk_apply(X, t.trunk_.to_dict()))
    # unseen values, including values equal to the thresholds
    Z = np.random.default_rng(0).normal(scale=20, size=(500, 4))
    internal = np.flatnonzero(t.trunk_.feature >= 0)
    Z[: internal.size, t.trunk_.feature[internal]] = t.trunk_.threshold[internal]
    np.testing.assert_array_equal(
        t.apply(Z), t.trunk_.leaf_id[apply_binned(t.trunk_, bin_data(Z, t.bin_edges_))])
    # leaf ids are 0 .. L-1, every leaf is big enough, preorder numbering
    assert sorted(np.unique(leaves)) == list(range(t.n_leaves_))
    counts = np.bincount(leaves, minlength=t.n_leaves_)
    assert counts.min() >= 150
    np.testing.assert_array_equal(counts, t.trunk_.n_rows[t.trunk_.leaf_nodes()])
    for leaf in range(t.n_leaves_):
        r = leaves == leaf
        np.testing.assert_allclose(t.leaf_values_[leaf], np.average(y[r], weights=w[r]))


def test_sample_weight_two_gives_the_same_trunk():
    X, y, _ = _data(12, n=800, weighted=False)
    a = Trunk(min_leaf_rows=40, max_leaves=8).fit(X, y)
    b = Trunk(min_leaf_rows=40, max_leaves=8).fit(X, y, sample_weight=2 * np.ones(len(y)))
    for name in STRUCTURE:
        np.testing.assert_array_equal(getattr(a.trunk_, name), getattr(b.trunk_, name))
    np.testing.assert_allclose(b.trunk_.weight, 2 * a.trunk_.weight)
    np.testing.assert_allclose(b.trunk_.gain, 2 * a.trunk_.gain)
    np.testing.assert_allclose(a.leaf_values_, b.leaf_values_)


def test_classification_trunk_and_reused_edges():
    X, y, w = _data(13, n=900, task="classification")
    t = Trunk(task="classification", min_leaf_rows=50, max_leaves=6).fit(X, y, w)
    assert t.n_classes_ == 3 and t.leaf_values_.shape == (t.n_leaves_, 3)
    np.testing.assert_allclose(t.leaf_values_.sum(axis=1), 1.0)
    assert t.n_leaves_ > 1
    again = Trunk(task="classification", min_leaf_rows=50, max_leaves=6)
    again.fit(X, y, w, bin_edges=t.bin_edges_)
    _assert_same_trunk(t.trunk_, again.trunk_, exact_sums=True)
    five = Trunk(task="classification", n_classes=5, max_leaves=3).fit(X, y)
    assert five.leaf_values_.shape[1] == 5 and (five.leaf_values_[:, 3:] == 0).all()


def test_export_text_names_and_dataframe():
    X, y, _ = _data(14, n=600, weighted=False)
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
    X, y, w = _data(15, task=task)
    df = pd.DataFrame(X, columns=list("abcd"))
    t = Trunk(task=task, min_leaf_rows=40, max_leaves=6).fit(df, y, w)
    u = Trunk(**t.get_params())
    u._set_state(_json_roundtrip(t._get_state()))
    _assert_same_trunk(t.trunk_, u.trunk_, exact_sums=True)
    for e, f in zip(t.bin_edges_, u.bin_edges_, strict=True):
        np.testing.assert_array_equal(e, f)
    np.testing.assert_array_equal(t.leaf_values_, u.leaf_values_)
    np.testing.assert_array_equal(t.apply(df), u.apply(df))
    assert t.export_text() == u.export_text() and u.n_leaves_ == t.n_leaves_
    np.testing.assert_array_equal(u.feature_names_in_, t.feature_names_in_)
    with pytest.raises(ValueError, match="missing"):
        Trunk()._set_state({"n_features_in_": 4})


def test_errors_and_failed_fit_leaves_model_unchanged():
    X, y, w = _data(16, n=300)
    df = pd.DataFrame(X, columns=["rooms", "income", "age", "latitude"])
    df.iloc[[3, 7], 1] = np.nan
    with pytest.raises(ValueError, match=r"'income': 2 NaN"):
        Trunk().fit(df, y)
    t = Trunk(min_leaf_rows=30).fit(X, y)
    before = t.trunk_.to_dict()
    with pytest.raises(ValueError, match="1 negative"):
        t.fit(X[:, :3], y, sample_weight=np.r_[-1.0, np.ones(len(y) - 1)])
    assert t.n_features_in_ == 4
    _assert_same_trunk(t.trunk_, before, exact_sums=True)
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
