"""Flat Bayesian trees: routing and row segments against the plain-NumPy oracles."""

from __future__ import annotations

import numpy as np
import pytest

from ebf.bayestrees import BayesTree, apply, partition_rows, sample_prior
from ebf.bayestrees._likelihood import segment_stats
from ebf.bayestrees._trees import (
    dim_extent,
    link_children,
    node_extent,
    split_copy_sums,
    varying_dims,
)
from tests.naive import naive_bayestree_rows, naive_split_sums, naive_trunk_apply


def _data(seed, n=40, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, -1] = np.round(X[:, -1])  # ties: rows equal to a threshold go left
    return X


@pytest.mark.parametrize("seed", range(6))
def test_apply_and_segments_match_the_oracle(seed):
    X = _data(seed)
    tree = sample_prior(X, 0.95, 0.5, rng=seed)
    arrays = tree.trimmed()
    expected = naive_trunk_apply(X, {**arrays, "leaf_id": np.arange(tree.n_nodes)})
    np.testing.assert_array_equal(apply(tree, X), expected)
    # fresh rows route like the oracle too, including rows equal to a threshold
    Z = np.vstack([_data(seed + 100), np.repeat(arrays["threshold"][:1], 3)[None, :]])
    Z = np.nan_to_num(Z)
    np.testing.assert_array_equal(
        apply(tree, Z), naive_trunk_apply(Z, {**arrays, "leaf_id": np.arange(tree.n_nodes)}))

    order, start, count = partition_rows(tree, X)
    np.testing.assert_array_equal(np.sort(order), np.arange(X.shape[0]))
    for j, rows in enumerate(naive_bayestree_rows(arrays, X)):
        seg = order[start[j]:start[j] + count[j]]
        np.testing.assert_array_equal(np.sort(seg), np.sort(rows))
        if arrays["feature"][j] < 0:  # stable partitions: a leaf's rows stay in row order
            np.testing.assert_array_equal(seg, np.sort(rows))
    tree.check(X.shape[1])


def test_root_only_and_copy():
    tree = BayesTree.root_only(5)
    assert tree.feature.shape == (9,) and tree.n_leaves == 1 and tree.max_depth == 0
    X = _data(0, n=5)
    np.testing.assert_array_equal(apply(tree, X), np.zeros(5))
    grown = sample_prior(X, 0.9, 0.0, rng=1)
    twin = grown.copy()
    twin.feature[0] = 7
    assert grown.feature[0] != 7 and twin.n_nodes == grown.n_nodes


def test_check_names_the_bad_node():
    X = _data(1)
    tree = sample_prior(X, 0.95, 0.0, rng=2)
    assert tree.n_nodes >= 3
    bad = tree.copy()
    bad.depth[2] = 5
    with pytest.raises(ValueError, match="node 2: parent .* depth 5 disagree"):
        bad.check(X.shape[1])
    bad = tree.copy()
    bad.feature[0] = X.shape[1]
    with pytest.raises(ValueError, match="node 0: split feature 3 is outside"):
        bad.check(X.shape[1])
    bad = tree.copy()
    bad.left[0] = 0
    with pytest.raises(ValueError, match="node 0"):
        bad.check(X.shape[1])


def _record(X, rows_first, cap=8):
    """A one-node :class:`~ebf.bayestrees._records.Tree` whose root holds ``rows_first``,
    with pool room after them."""
    n = rows_first.size
    tree = BayesTree.root_only(cap)
    order = np.concatenate([rows_first, np.full(2 * n, -7)]).astype(np.int64)
    start, count = np.zeros(2 * cap, np.int64), np.zeros(2 * cap, np.int64)
    count[0] = n
    return tree.record(X.shape[0], order, start, count)._replace(
        buf=np.empty(X.shape[0], np.int64))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_stats", [3, 1, 4])
@pytest.mark.parametrize("copy", [False, True])
def test_split_copy_sums_matches_the_oracle(seed, n_stats, copy):
    """The fused copy, stable partition and per-side sums of the conditional SMC: the same
    rows in the same order as the oracle, and sums equal bit for bit to a row-by-row sum
    (the Normal's three statistics take the branch-free path, other widths the plain one)."""
    rng = np.random.default_rng(seed)
    X = np.asfortranarray(_data(seed, n=60, d=4))
    S = rng.normal(size=(60, n_stats))
    S[:, 0] = 1.0
    rows = np.sort(rng.choice(60, 45, replace=False))[rng.permutation(45)]  # any order
    t = _record(X, rows)
    f = int(rng.integers(4))
    thr = float(np.median(X[rows, f]))
    n_new = link_children(t, 1, 0, f, thr)
    assert n_new == 3
    if copy:
        t.start[0] = rows.size  # the pool space after the source
    sl, sr = np.full(n_stats, np.nan), np.full(n_stats, np.nan)
    split_copy_sums(X, S, t, 0, 0, sl, sr)
    left, right, want_l, want_r = naive_split_sums(X, S, rows, f, thr)
    seg = lambda j: t.order[t.start[j]:t.start[j] + t.count[j]]  # noqa: E731
    np.testing.assert_array_equal(seg(1), left)
    np.testing.assert_array_equal(seg(2), right)
    assert t.start[1] == t.start[0] and t.start[2] == t.start[0] + left.size
    np.testing.assert_array_equal(sl, want_l)  # exact: summed in the same order
    np.testing.assert_array_equal(sr, want_r)
    for j, stats in ((1, sl), (2, sr)):
        again = np.empty(n_stats)
        segment_stats(S, t, j, again)
        np.testing.assert_array_equal(again, stats)
    if copy:  # the source is left as it was
        np.testing.assert_array_equal(t.order[:rows.size], rows)


@pytest.mark.parametrize("seed", range(6))
def test_varying_dims_and_dim_extent_match_the_full_extent(seed):
    """Which dimensions vary, read lazily, and the extent of one of them: what the full
    extent of every dimension (``node_extent``, the oracle's min / max) says."""
    rng = np.random.default_rng(seed)
    X = _data(seed, n=30, d=5)
    X[:, 1] = 2.0  # a constant dimension
    X[:, 3] = np.where(np.arange(30) == 29, 1.0, 0.0)  # varies only at the last row
    rows = rng.permutation(30)[: 12 + seed]
    if seed == 0:
        rows = np.array([4, 9])
    t = _record(X, rows)
    lo, hi = np.empty(5), np.empty(5)
    n_valid = varying_dims(X, t, 0, lo, hi)
    want_lo, want_hi = X[rows].min(axis=0), X[rows].max(axis=0)
    np.testing.assert_array_equal(lo < hi, want_lo < want_hi)
    assert n_valid == int(np.sum(want_lo < want_hi))
    full_lo, full_hi = np.empty(5), np.empty(5)
    assert node_extent(X, t, 0, full_lo, full_hi) == n_valid
    for d in range(5):
        dim_extent(X, t, 0, d, lo, hi)
        assert (lo[d], hi[d]) == (want_lo[d], want_hi[d]) == (full_lo[d], full_hi[d])
