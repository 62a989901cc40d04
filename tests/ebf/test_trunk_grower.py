"""Tests of the level-wise grower (``ebf.grower``): equal to the naive grower, the same
trunk from partitioned and chunked sources, and sibling subtraction (only the smaller
child asked for, ill-conditioned children asked for directly, bounded kept histograms).

Compared with the plain-NumPy oracles of ``tests/naive/``.
"""

from __future__ import annotations

import numpy as np
import pytest

from ebf import grower
from ebf._splitting import best_splits
from ebf.binning import (
    bin_data,
    bin_edges,
    n_bins_of,
)
from ebf.grower import (
    SUBTRACT_MAX_COND,
    BinnedSource,
    apply_binned,
    grow_trunk,
    node_histograms,
)
from ebf.histogram import build_histograms, row_statistics, subtract_histogram
from tests.ebf.trunk_helpers import assert_same_trunk, trunk_data
from tests.naive import (
    naive_grow,
    naive_stats,
    naive_subtract_histogram,
    naive_trunk_requests,
)

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
    X, y, w = trunk_data(4, task=task)
    trunk, edges = _grow(X, y, w, task, **kw)
    naive = naive_grow(X, y, w, edges, task, 3, kw.get("max_leaves"),
                       kw.get("min_leaf_rows", 1), kw.get("min_leaf_weight", 0.0),
                       kw.get("max_depth"))
    assert_same_trunk(trunk, naive)
    assert trunk.n_leaves > 2
    if "max_leaves" in kw:
        assert trunk.n_leaves <= kw["max_leaves"]


def test_trunk_unweighted_regression_equals_naive_and_grows_to_the_end():
    X, y, w = trunk_data(5, n=300, weighted=False)
    trunk, edges = _grow(X, y, w, "regression", min_leaf_rows=15)
    assert_same_trunk(trunk, naive_grow(X, y, w, edges, min_rows=15))
    # no budget, no depth: every leaf is unsplittable
    trunk, edges = _grow(X[:80], np.round(y[:80]), w[:80], "regression")
    S = row_statistics(np.round(y[:80]))
    nodes = apply_binned(trunk, bin_data(X[:80], edges), n_bins_of(edges))
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
    X, y, _ = trunk_data(6, n=900, task=task)
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
    assert_same_trunk(local, parts, exact_sums=True)
    # float labels and weights: the same structure, sums equal to rounding
    X, y, w = trunk_data(7, n=900, task=task)
    S = row_statistics(y, w, task, n_classes)
    binned = bin_data(X, bin_edges(X))
    local = grow_trunk(BinnedSource(binned, S, n_bins_of(edges)), edges, task, n_classes, **kw)
    parts = grow_trunk(_partitioned_source(binned, S, n_bins_of(edges), 4), edges, task,
                       n_classes, **kw)
    assert_same_trunk(local, parts)


def test_chunked_source_calls_and_source_shape_check():
    X, y, w = trunk_data(8)
    full, edges = _grow(X, y, w, "regression", min_leaf_rows=20)
    calls = []
    src = BinnedSource(bin_data(X, edges), row_statistics(y, w), n_bins_of(edges))

    def counting(trunk, open_nodes):
        calls.append(len(open_nodes))
        return src(trunk, open_nodes)

    per_node = X.shape[1] * n_bins_of(edges) * 4 * 8
    chunked = grow_trunk(counting, edges, min_leaf_rows=20, max_hist_bytes=2 * per_node)
    assert_same_trunk(full, chunked, exact_sums=True)
    assert max(calls) == 2 and len(calls) > full.depth.max()
    with pytest.raises(ValueError, match="histogram source returned shape"):
        grow_trunk(lambda t, o: np.zeros((len(o), 1, 1, 4)), edges)


def test_max_depth_and_max_leaves_one():
    X, y, w = trunk_data(9)
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
    X, y, w = trunk_data(4, n=1500, task=task)
    sub, src = _recorded_growth(X, y, w, task, **kw)
    direct, dsrc = _recorded_growth(X, y, w, task, subtract=False, **kw)
    assert_same_trunk(sub, direct)
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
    assert_same_trunk(unbounded, direct)
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
    X, y, _ = trunk_data(3, n=1200)
    y = np.round(4 * y)
    w = rng.integers(1, 4, y.size).astype(float)
    sub, src = _recorded_growth(X, y, w, "regression", min_leaf_rows=25)
    direct, dsrc = _recorded_growth(X, y, w, "regression", min_leaf_rows=25, subtract=False)
    assert_same_trunk(sub, direct, exact_sums=True)
    assert src.nodes.size < dsrc.nodes.size


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_subtract_histogram_equals_naive_and_direct(task):
    X, y, w = trunk_data(10, n=700, task=task)
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
    assert_same_trunk(sub, direct)
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
    assert_same_trunk(sub, direct)
    assert sub.depth.max() > 8
    assert src.nodes.tolist() == naive_trunk_requests(sub, "regression", 10,
                                                      max_cond=SUBTRACT_MAX_COND)
    parent = _parent_of(sub)[src.nodes[1:]]
    assert 0 < parent.size - np.unique(parent).size < 0.05 * parent.size


def test_kept_histograms_are_bounded_and_do_not_depend_on_chunking():
    X, y, w = trunk_data(14, n=2000)
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
        assert_same_trunk(one, full)
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
    assert_same_trunk(nothing, direct, exact_sums=True)
    np.testing.assert_array_equal(src.nodes, dsrc.nodes)


def test_inconsistent_source_is_an_error():
    X, y, w = trunk_data(15)
    edges = bin_edges(X)
    src = BinnedSource(bin_data(X, edges), row_statistics(y, w), n_bins_of(edges))

    def doubled_children(trunk, open_nodes):
        hist = src(trunk, open_nodes)
        return hist if trunk.n_nodes == 1 else 2 * hist

    with pytest.raises(ValueError, match=r"more rows in node \d+ than in its parent node 0"):
        grow_trunk(doubled_children, edges, min_leaf_rows=20)
