"""Flat Bayesian trees: routing and row segments against the plain-NumPy oracles."""

from __future__ import annotations

import numpy as np
import pytest

from ebf.bayestrees import BayesTree, apply, partition_rows, sample_prior
from tests.naive import naive_bayestree_rows, naive_trunk_apply


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
