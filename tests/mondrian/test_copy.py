"""A deep copy of a Mondrian forest (what an EBF update extends, leaving the original as it
was) copies the live nodes only, and behaves exactly as the original."""

from __future__ import annotations

import copy

import numpy as np

from mondrian import MondrianForestRegressor


def test_deepcopy_updates_like_the_original_and_shares_nothing():
    rng = np.random.default_rng(0)
    X = rng.random((3000, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=3000)
    forest = MondrianForestRegressor(n_estimators=3, random_state=0).fit(X[:1000], y[:1000])
    forest.partial_fit(X[1000:2000], y[1000:2000])  # capacity beyond the live nodes
    tree = forest.trees_[0]
    assert tree.left.shape[0] > tree.n_nodes
    twin = copy.deepcopy(forest)
    for a, b in zip(forest.trees_, twin.trees_, strict=True):
        assert b.left.shape == a.left.shape and b.n_nodes == a.n_nodes
        for name in a.ARRAYS[:-1]:
            np.testing.assert_array_equal(getattr(b, name)[:a.n_nodes],
                                          getattr(a, name)[:a.n_nodes])
            assert not np.shares_memory(getattr(a, name), getattr(b, name))
    before = forest.predict(X[2000:])
    twin.partial_fit(X[2000:], y[2000:])
    np.testing.assert_array_equal(forest.predict(X[2000:]), before)  # the original is as was
    forest.partial_fit(X[2000:], y[2000:])
    np.testing.assert_array_equal(twin.predict(X[:500]), forest.predict(X[:500]))
