"""``min_samples_split`` bounds the size of a Mondrian tree, in batch and online growth alike.

A block with fewer than ``min_samples_split`` points is paused (Lakshminarayanan, Roy & Teh
2016, Sec. 2; thesis Sec. 5.5.1): online, it absorbs points and is resampled from them once
it holds enough (thesis Alg. 5.9-5.10). Trees grown online must have the batch law of size
and depth under the bound (fixed seeds, chi-square homogeneity), every internal node must
hold at least ``min_samples_split`` points, and a larger bound must give smaller trees.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from basics.tasks import REGRESSION
from mondrian import MondrianForestRegressor
from tests import naive
from tests.mondrian.test_tree import ALPHA, POWER, build, chi2_homogeneity

N_TREES = 800


def _depths(left, right, root) -> int:
    """Depth (edges on the longest root-to-leaf path) of a flat tree."""
    depth = {int(root): 0}
    stack = [int(root)]
    while stack:
        j = stack.pop()
        if left[j] != -1:
            for c in (int(left[j]), int(right[j])):
                depth[c] = depth[j] + 1
                stack.append(c)
    return max(depth.values())


def _problem(seed=21, n=30):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    return X, np.linspace(-1.0, 1.0, n), np.zeros(n, np.int64)


@pytest.fixture(scope="module")
def grown() -> dict:
    """``(mode, mss) -> [(n_leaves, depth)]`` for trees over the same 30 points."""
    X, y, labels = _problem()
    rows = np.arange(X.shape[0])
    out = {}
    for mss in (3, 8):
        for mode in ("batch", "online"):
            sizes = []
            for s in range(N_TREES):
                tree = build(X, y, labels, rows, REGRESSION, mss, np.inf,
                             500_000 * (mss + (mode == "online")) + s, mode)
                _assert_bound_honoured(tree, X, mss)
                sizes.append((tree.n_leaves, _depths(tree.left, tree.right, tree.root)))
            out[mode, mss] = sizes
    return out


def _assert_bound_honoured(tree, X, mss) -> None:
    """Internal nodes hold >= mss points; leaves fewer (distinct points, infinite lifetime)."""
    for j in range(tree.n_nodes):
        n_j = tree.stats[j, 0]
        if tree.left[j] != -1:
            assert n_j >= mss
        else:
            assert n_j < mss
            assert len(naive.flat_tree_leaf_rows(tree, j)) == n_j


@pytest.mark.parametrize("mss", [3, 8])
def test_online_trees_have_the_batch_size_and_depth_under_the_bound(grown, mss):
    batch, online = grown["batch", mss], grown["online", mss]
    for k, what in enumerate(("n_leaves", "depth")):
        a = [s[k] for s in batch]
        b = [s[k] for s in online]
        assert len(set(a)) >= 3, what  # not degenerate
        assert chi2_homogeneity(a, b) > ALPHA, what


def test_a_larger_bound_gives_smaller_trees(grown):
    for k in (0, 1):
        small = [s[k] for s in grown["online", 8]] + [s[k] for s in grown["batch", 8]]
        large = [s[k] for s in grown["online", 3]] + [s[k] for s in grown["batch", 3]]
        assert stats.mannwhitneyu(small, large, alternative="less").pvalue < POWER


def test_forest_grown_online_in_chunks_has_the_batch_size_law():
    """The estimator: ``fit`` on all rows vs ``fit`` on some and ``partial_fit`` on the rest,
    with a bound of 25 points: same law of leaves per tree, and fewer leaves than with 5."""
    rng = np.random.default_rng(3)
    X = rng.random((400, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=400)
    kw = dict(n_estimators=200, min_samples_split=25)
    batch = MondrianForestRegressor(random_state=1, **kw).fit(X, y)
    online = MondrianForestRegressor(random_state=2, **kw).fit(X[:60], y[:60])
    for a, b in ((60, 200), (200, 201), (201, 400)):
        online.partial_fit(X[a:b], y[a:b])
    p = stats.ks_2samp(batch.n_leaves_, online.n_leaves_).pvalue
    depth = [[_depths(t.left, t.right, t.root) for t in m.trees_] for m in (batch, online)]
    assert min(p, chi2_homogeneity(*depth)) > ALPHA
    finer = MondrianForestRegressor(n_estimators=50, min_samples_split=5, random_state=1)
    assert finer.fit(X, y).n_leaves_.min() > 2 * batch.n_leaves_.max()
