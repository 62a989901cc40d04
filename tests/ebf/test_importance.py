"""Impurity importances (``ebf.importance``): every split's decrease against the oracle of
``tests/naive/importance.py`` (the rows that reach a node, the tree's own weights), against
scikit-learn's, and summed over trunk and branches; local, saved and on Dask."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.tree import DecisionTreeRegressor

from ebf import (
    BayesianForestClassifier,
    BayesianForestRegressor,
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestRegressor,
    load,
    save,
)
from ebf._cart_fit import fit_cart_forest
from ebf.bootstrap import draw_weights, tree_rng
from ebf.importance import forest_decrease, normalised, trunk_decrease
from tests.naive.importance import naive_tree_decrease


def _data(n=600, d=4, seed=0):
    rng = np.random.default_rng(seed)
    # float32 values, so that the trunk's float64 rule and the trees' float32 rule agree
    X = rng.random((n, d)).astype(np.float32).astype(np.float64)
    y = 3.0 * X[:, 0] + np.sin(6.0 * X[:, 1]) + 0.2 * rng.normal(size=n)
    return X, y


def _naive_forest(f, X, y, w_of_tree, n_classes=0):
    per_tree = [naive_tree_decrease(f.left, f.right, f.feature, f.threshold, f.offsets[b],
                                    X, y, w_of_tree(b), X.shape[1], n_classes, f.missing_left)
                for b in range(f.n_trees)]
    return np.mean(per_tree, axis=0)


@pytest.mark.parametrize("splitter", ["hist", "exact"])
@pytest.mark.parametrize("kind", ["exponential", "poisson"])
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_forest_decrease_equals_the_rows_oracle(splitter, kind, task):
    X, y = _data(300)
    X[np.random.default_rng(1).random(300) < 0.2, 1] = np.nan  # missing values count too
    n_classes = 0
    if task == "classification":
        y = np.digitize(y, np.quantile(y, [0.3, 0.7])).astype(np.float64)
        n_classes = 3
    sw = np.linspace(0.5, 2.0, X.shape[0])
    f = fit_cart_forest(X, y, sw, task=task, n_estimators=3, weights=kind, entropy=4,
                        n_classes=n_classes or None, splitter=splitter, min_samples_leaf=3)
    want = _naive_forest(f, X, y, lambda b: draw_weights(kind, len(y), tree_rng(4, 0, b)) * sw,
                         n_classes)
    np.testing.assert_allclose(forest_decrease(f, X.shape[1]), want, rtol=1e-9, atol=1e-9)


def test_unweighted_tree_equals_sklearns_unnormalised_importances():
    """scikit-learn's unnormalised importances are the decreases divided by the root weight."""
    X, y = _data(400)
    f = fit_cart_forest(X, y, None, task="regression", n_estimators=1, weights="none",
                        min_samples_leaf=7, max_features=1.0, entropy=0, splitter="exact")
    seed = int(tree_rng(0, 0, 0).integers(0, 2**32))
    sk = DecisionTreeRegressor(min_samples_leaf=7, random_state=seed).fit(X, y)
    np.testing.assert_allclose(forest_decrease(f, 4) / len(y),
                               sk.tree_.compute_feature_importances(normalize=False),
                               rtol=1e-9, atol=1e-12)


def test_trunk_decrease_equals_the_rows_oracle():
    X, y = _data(800)
    ebf = EmpiricalBayesianForestRegressor(branch="bayesian", trunk_max_leaves=6,
                                           n_estimators=2, random_state=0).fit(X, y)
    t = ebf.trunk_.trunk_
    want = naive_tree_decrease(t.left, t.right, t.feature, t.threshold, 0, X, y,
                               np.ones(len(y)), 4)
    np.testing.assert_allclose(trunk_decrease(ebf.trunk_), want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("Est", [EmpiricalBayesianForestRegressor, SubsampleForestRegressor])
def test_ensemble_sums_trunk_and_branches(Est):
    X, y = _data(1500)
    params = ({"trunk_max_leaves": 4} if Est is EmpiricalBayesianForestRegressor
              else {"n_subsamples": 3})
    m = Est(branch="bayesian", n_estimators=4, random_state=0, **params).fit(X, y)
    parts = m.branches_ if hasattr(m, "branches_") else m.subsamples_
    total = sum(p._impurity_decrease() for p in parts if hasattr(p, "_impurity_decrease"))
    if hasattr(m, "trunk_"):
        total = total + trunk_decrease(m.trunk_)
    got = m.feature_importances_
    np.testing.assert_allclose(got, normalised(total), rtol=1e-12)
    assert got.shape == (4,) and got.sum() == pytest.approx(1.0)
    # the signal is in x0 and x1; x2 and x3 are noise
    assert got[:2].min() > 10 * got[2:].max()


def test_importances_find_the_signal_like_a_random_forest():
    """Same ranking and shares within 0.03 of scikit-learn's random forest on Friedman #1."""
    from sklearn.datasets import make_friedman1
    from sklearn.ensemble import RandomForestRegressor

    X, y = make_friedman1(3000, n_features=8, noise=1.0, random_state=3)
    ours = BayesianForestRegressor(n_estimators=30, random_state=0).fit(X, y)
    sk = RandomForestRegressor(30, min_samples_leaf=5, random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.feature_importances_, sk.feature_importances_, atol=0.03)
    assert set(np.argsort(ours.feature_importances_)[-5:]) == {0, 1, 2, 3, 4}


def test_classifier_and_no_split_and_persistence(tmp_path):
    X, y = _data(900)
    labels = np.where(y > np.median(y), "hi", "lo")
    m = EmpiricalBayesianForestClassifier(branch="random", trunk_max_leaves=3, n_estimators=3,
                                          random_state=0).fit(X, labels)
    imp = m.feature_importances_
    assert imp.sum() == pytest.approx(1.0) and imp[0] > imp[2]
    save(m, tmp_path / "m")
    np.testing.assert_array_equal(load(tmp_path / "m").feature_importances_, imp)
    flat = BayesianForestClassifier(n_estimators=2, random_state=0).fit(X, np.zeros(len(y)))
    np.testing.assert_array_equal(flat.feature_importances_, np.zeros(4))  # no split


@pytest.mark.parametrize("branch", ["mondrian", "smc"])
def test_learners_without_impurity_splits_have_no_importances(branch):
    X, y = _data(300)
    m = EmpiricalBayesianForestRegressor(branch=branch, n_estimators=2, trunk_max_leaves=2,
                                         random_state=0).fit(X, y)
    assert not hasattr(m, "feature_importances_")
    with pytest.raises(AttributeError, match="branch='bayesian' and branch='random'.*"
                                             "ebf importance"):
        m.feature_importances_  # noqa: B018


def test_dask_estimator_has_the_local_importances(dask_client):
    from ebf.dask import DaskEmpiricalBayesianForestRegressor

    X, y = _data(1200)
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(4)]).assign(y=y)
    ddf = dd.from_pandas(df, npartitions=3)
    est = DaskEmpiricalBayesianForestRegressor(branch="bayesian", trunk_max_leaves=3,
                                               n_estimators=3, random_state=0)
    est.fit(ddf[list(df.columns[:4])], ddf["y"])
    np.testing.assert_array_equal(est.feature_importances_,
                                  est.to_local().feature_importances_)


@pytest.mark.parametrize("scoring", ["crps", "nlpd", "squared_error"])
def test_every_regression_loss_is_its_records_rows(scoring):
    """Each permutation loss is the per-row values of its score record (the squared error:
    the RMSE record's rows, from the predictive mean)."""
    from basics.metrics import crps_rows
    from ebf import BayesianForestRegressor
    from ebf.importance import row_losses

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.random((300, 2)), columns=["a", "b"])
    y = 4 * X["a"].to_numpy() + rng.normal(size=300)
    model = BayesianForestRegressor(n_estimators=3, random_state=0).fit(X[:200], y[:200])
    dist = model.predict_distribution(X[200:])
    want = {"crps": lambda: crps_rows(dist, y[200:]), "nlpd": lambda: -dist.logpdf(y[200:]),
            "squared_error": lambda: (y[200:] - dist.mean) ** 2}[scoring]()
    np.testing.assert_allclose(row_losses(model, X[200:], y[200:], scoring), want, rtol=1e-12)
