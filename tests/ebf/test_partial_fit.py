"""EmpiricalBayesianForest*.partial_fit (issue 12, work in progress): Mondrian branches
extended online under the stored trunk."""

from __future__ import annotations

import numpy as np
import pytest

from ebf import EmpiricalBayesianForestClassifier, EmpiricalBayesianForestRegressor


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, np.sin(4 * X[:, 0]) + 0.2 * rng.normal(size=n)


def test_update_matches_a_batch_fit_within_noise():
    X, y = _data(6000)
    online = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=5,
                                              trunk_max_leaves=4, random_state=0)
    online.fit(X[:3000], y[:3000]).partial_fit(X[3000:5000], y[3000:5000])
    batch = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=5,
                                             trunk_max_leaves=4, random_state=0)
    batch.fit(X[:5000], y[:5000])

    def rmse(m):
        return np.sqrt(np.mean((m.predict(X[5000:]) - y[5000:]) ** 2))

    assert rmse(online) == pytest.approx(rmse(batch), rel=0.05)


def test_learners_that_cannot_update_are_refused_and_the_model_is_unchanged():
    X, y = _data(800)
    model = EmpiricalBayesianForestRegressor(n_estimators=3, random_state=0).fit(X, y)
    before = model.predict(X[:20])
    with pytest.raises(ValueError, match="branch='bayesian' forests keep no rows"):
        model.partial_fit(X[:50], y[:50])
    np.testing.assert_array_equal(model.predict(X[:20]), before)
    compact = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                               trunk_max_leaves=2, predict_only=True,
                                               random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="predict-only"):
        compact.partial_fit(X[:50], y[:50])


def test_classifier_update_and_unknown_labels():
    X, y = _data(3000)
    labels = (y > 0.5).astype(int)
    clf = EmpiricalBayesianForestClassifier(branch="mondrian", n_estimators=3,
                                            trunk_max_leaves=3, random_state=0)
    clf.fit(X[:2000], labels[:2000]).partial_fit(X[2000:2500], labels[2000:2500])
    assert clf.score(X[2500:], labels[2500:]) > 0.8
    with pytest.raises(ValueError, match="1 labels the model never saw"):
        clf.partial_fit(X[:3], np.array([0, 1, 7]))
