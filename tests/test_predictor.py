"""The packed predictor: exact routing and outward-rounded float32 extents."""

import numpy as np
import pytest

from mondrian import MondrianForestClassifier, MondrianForestRegressor
from mondrian._predict import _branch_off


@pytest.mark.parametrize("Estimator", [MondrianForestRegressor, MondrianForestClassifier])
def test_training_points_stay_inside_their_leaf_box(Estimator):
    """Rounding extents to float32 outward never pushes a training point out of its leaf."""
    rng = np.random.default_rng(3)
    # values that float32 cannot represent exactly, plus repeated discrete values
    X = np.column_stack([rng.random(400) * 1e-3 + 1 / 3, rng.integers(0, 7, 400) / 7,
                         rng.normal(size=400) * 1e6])
    y = (X[:, 0] > 1 / 3 + 5e-4).astype(int)
    model = Estimator(n_estimators=3, min_samples_split=2, random_state=0).fit(X, y)
    Xs = model._scale(model._check_X(X, reset=False))
    leaves = model.apply(X)
    for t, tree in enumerate(model.trees_):
        order, R = model._predictor(tree)
        position = np.empty(tree.n_nodes, np.int64)
        position[order] = np.arange(order.shape[0])
        for i in range(Xs.shape[0]):
            p, eta, _ = _branch_off(R, position[leaves[i, t]], Xs[i])
            assert eta == 0.0 and p == 0.0


def test_points_outside_every_box_branch_off_at_the_root():
    """Far from the data the root's branch-off probability tends to one."""
    rng = np.random.default_rng(0)
    X = rng.random((300, 2))
    model = MondrianForestRegressor(n_estimators=2, random_state=0).fit(X, X[:, 0])
    far = model._scale(np.array([[50.0, 50.0]]))
    for tree in model.trees_:
        _, R = model._predictor(tree)
        p, eta, _ = _branch_off(R, 0, far[0])
        assert eta > 90 and p > 0.99
