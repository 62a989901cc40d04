"""Empirical Bayesian forests and sub-sample forests (Taddy et al. 2015, Sec. 4)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ebf import (
    BARTRegressor,
    BayesianForestClassifier,
    BayesianForestRegressor,
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SMCTreeClassifier,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
)
from ebf.branches import ConstantBranch
from mondrian import MondrianForestClassifier, MondrianForestRegressor
from tests.ebf.model_helpers import assert_roundtrip


def friedman(n, rng, p=10):
    """Friedman (1991), the paper's eq. (5), with ``p - 5`` spurious features."""
    X = rng.random((n, p))
    f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4])
    return X, f + rng.normal(size=n), f


def rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)))


def assert_same_mixture(a, b):
    """The same mixtures (and the same recalibration maps, if any)."""
    assert getattr(a, "pit_map", None) == getattr(b, "pit_map", None)
    a, b = getattr(a, "base", a), getattr(b, "base", b)
    for k in ("weights", "means", "variances"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))


# ---------------------------------------------------------------- EBF = BF with one leaf


@pytest.mark.parametrize("weights, branch", [("exponential", "bayesian"), ("poisson", "random")])
def test_one_leaf_trunk_ebf_equals_bf(weights, branch):
    rng = np.random.default_rng(0)
    X, y, _ = friedman(600, rng)
    bf = BayesianForestRegressor(n_estimators=8, weights=weights, random_state=4).fit(X, y)
    ebf = EmpiricalBayesianForestRegressor(n_estimators=8, branch=branch, trunk_max_leaves=1,
                                           random_state=4).fit(X, y)
    assert ebf.trunk_.n_leaves_ == 1
    assert_same_mixture(bf.predict_distribution(X), ebf.predict_distribution(X))
    np.testing.assert_array_equal(bf.predict(X), ebf.predict(X))


def test_one_leaf_trunk_ebf_classifier_equals_bf():
    rng = np.random.default_rng(1)
    X = rng.random((500, 4))
    y = np.where(X[:, 0] > 0.5, "a", np.where(X[:, 1] > 0.3, "b", "c"))
    bf = BayesianForestClassifier(n_estimators=6, random_state=2).fit(X, y)
    ebf = EmpiricalBayesianForestClassifier(n_estimators=6, trunk_max_leaves=1,
                                            random_state=2).fit(X, y)
    np.testing.assert_array_equal(bf.predict_proba(X), ebf.predict_proba(X))
    np.testing.assert_array_equal(ebf.classes_, ["a", "b", "c"])


# ---------------------------------------------------------------- the paper's claims


def test_ebf_within_three_percent_of_bf_on_friedman():
    """Sec. 4.1: EBF predicts nearly as well as the full BF (n = 20,000).

    The trunk has the paper's minimum leaf size (3,500 rows, Sec. 3.2), here 4 leaves;
    RMSE on held-out noisy targets, as in the paper's out-of-sample experiments. (Against
    the noise-free f the gap is larger, about 5%: the trunk's boundaries are the same in
    every tree, so the smooth Friedman surface is cut at fixed places.)
    """
    rng = np.random.default_rng(11)
    X, y, _ = friedman(20_000, rng)
    X_te, y_te, _ = friedman(4_000, rng)
    kw = dict(n_estimators=20, random_state=0, n_jobs=2)
    bf = BayesianForestRegressor(**kw).fit(X, y)
    ebf = EmpiricalBayesianForestRegressor(trunk_min_leaf_rows=3500, **kw).fit(X, y)
    r_bf, r_ebf = rmse(bf.predict(X_te), y_te), rmse(ebf.predict(X_te), y_te)
    assert ebf.trunk_.n_leaves_ >= 4
    assert r_ebf <= 1.03 * r_bf, (r_ebf, r_bf)


def test_ssf_worse_than_ebf_on_deep_structure():
    """Sec. 4: sub-samples learn the deep structure from a fifth of the data each."""
    gaps = []
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        X, y, _ = friedman(4_000, rng)
        X_te, _, f_te = friedman(2_000, rng)
        kw = dict(n_estimators=10, random_state=seed)
        ebf = EmpiricalBayesianForestRegressor(trunk_max_leaves=5, **kw).fit(X, y)
        ssf = SubsampleForestRegressor(n_subsamples=5, **kw).fit(X, y)
        gaps.append(rmse(ssf.predict(X_te), f_te) / rmse(ebf.predict(X_te), f_te) - 1)
    assert min(gaps) > 0.05, gaps


# ---------------------------------------------------------------- structure and branches


def test_branches_are_fit_on_their_rows_only_with_their_own_seed():
    rng = np.random.default_rng(3)
    X, y, _ = friedman(3_000, rng, p=5)
    ebf = EmpiricalBayesianForestRegressor(n_estimators=4, trunk_max_leaves=4,
                                           random_state=9).fit(X, y)
    leaf = ebf.apply(X)
    np.testing.assert_array_equal(np.bincount(leaf), ebf.branch_sizes_)
    for b in range(len(ebf.branches_)):
        rows = leaf == b
        # a BF on the branch's rows, with the branch's seed and learnt prior, is the branch
        alone = BayesianForestRegressor(
            n_estimators=4, random_state=9,
            leaf_prior_rows=ebf.branches_[b].leaf_prior_rows_)._fit_branch(
            X[rows], y[rows], None, entropy=9, branch=b)
        assert_same_mixture(alone.predict_distribution(X[rows]),
                            ebf.predict_distribution(X[rows], recalibrated=False))


def test_mondrian_branches_and_constant_fallback():
    rng = np.random.default_rng(4)
    X = rng.random((400, 2))
    y = np.where(X[:, 0] < 0.02, 50.0, X[:, 1]) + 0.1 * rng.normal(size=400)
    ebf = EmpiricalBayesianForestRegressor(
        n_estimators=3, branch="mondrian", trunk_max_leaves=3, trunk_min_leaf_rows=1,
        min_samples_leaf=20, random_state=0).fit(X, y)
    kinds = [type(b) for b in ebf.branches_]
    assert MondrianForestRegressor in kinds and ConstantBranch in kinds
    small = kinds.index(ConstantBranch)
    rows = ebf.apply(X) == small
    assert rows.sum() < 40
    mean, std = ebf.predict(X[rows], return_std=True)
    np.testing.assert_allclose(mean, y[rows].mean())
    np.testing.assert_allclose(std, y[rows].std())
    g = ebf.predict_distribution(X, recalibrated=False)  # mixtures of different widths, padded
    np.testing.assert_allclose(g.weights.sum(axis=1), 1.0)


@pytest.mark.parametrize("branch", ["bayesian", "mondrian", "smc"])
def test_single_class_and_single_row_branches(branch):
    rng = np.random.default_rng(5)
    X = rng.random((300, 2))
    y = np.where(X[:, 0] > 0.5, "hi", "lo")
    y[np.argmax(X[:, 1])] = "odd"
    clf = EmpiricalBayesianForestClassifier(
        n_estimators=3, branch=branch, trunk_max_leaves=4, trunk_min_leaf_rows=1,
        random_state=0).fit(X, y)
    assert clf.branch_sizes_.min() >= 1
    proba = clf.predict_proba(X)
    assert proba.shape == (300, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert (clf.predict(X) == y).mean() > 0.95
    if branch == "mondrian":
        assert any(isinstance(b, MondrianForestClassifier) for b in clf.branches_)
    if branch == "smc":
        assert any(isinstance(b, SMCTreeClassifier) for b in clf.branches_)


def test_bart_branches_regress_and_refuse_classes_before_reading_data():
    rng = np.random.default_rng(7)
    X, y, _ = friedman(1_200, rng, p=5)
    ebf = EmpiricalBayesianForestRegressor(
        n_estimators=10, branch="bart", trunk_max_leaves=3, random_state=0,
        branch_params={"n_iter": 60, "burn_in": 20}).fit(X, y)
    assert all(isinstance(b, BARTRegressor) for b in ebf.branches_)
    assert ebf.branches_[0].n_trees == 10
    X_te, y_te, f_te = friedman(400, rng, p=5)
    assert np.sqrt(np.mean((ebf.predict(X_te) - f_te) ** 2)) < np.std(y_te) / 2
    bad = np.full((3, 2), np.nan)  # never read: the parameters fail first
    with pytest.raises(ValueError, match="branch='bart' does not do classification"):
        EmpiricalBayesianForestClassifier(branch="bart").fit(bad, [0, 1, 0])


def test_same_seed_same_model_whatever_threads():
    rng = np.random.default_rng(6)
    X, y, _ = friedman(1_500, rng, p=5)
    for Est in (EmpiricalBayesianForestRegressor, SubsampleForestRegressor):
        a = Est(n_estimators=5, random_state=1, n_jobs=1).fit(X, y)
        b = Est(n_estimators=5, random_state=1, n_jobs=2).fit(X, y)
        assert_same_mixture(a.predict_distribution(X), b.predict_distribution(X))


def test_bart_branches_fit_at_once_give_the_same_model():
    """A BART chain is one thread, so ``n_jobs`` fits several branches (and their
    cross-fitted calibration groups) at once: the same model and calibration map."""
    rng = np.random.default_rng(8)
    X, y, _ = friedman(900, rng, p=5)
    a, b = (EmpiricalBayesianForestRegressor(
        n_estimators=4, branch="bart", trunk_max_leaves=3, random_state=2, n_jobs=jobs,
        branch_params={"n_iter": 20, "burn_in": 5}).fit(X, y) for jobs in (1, 2))
    assert a.trunk_.n_leaves_ == 3
    assert_same_mixture(a.predict_distribution(X), b.predict_distribution(X))
    np.testing.assert_array_equal(a.predict_quantiles(X[:50], [0.1, 0.9]),
                                  b.predict_quantiles(X[:50], [0.1, 0.9]))


def test_ssf_pools_all_trees_equally():
    rng = np.random.default_rng(7)
    X, y, _ = friedman(1_000, rng, p=5)
    ssf = SubsampleForestRegressor(n_estimators=4, n_subsamples=3, random_state=0).fit(X, y)
    assert sorted(ssf.subsample_sizes_) == [333, 333, 334]
    g = ssf.predict_distribution(X[:10], recalibrated=False)
    assert g.n_components == 12
    np.testing.assert_allclose(g.weights, 1 / 12)
    mean = np.mean([s.predict(X[:10]) for s in ssf.subsamples_], axis=0)
    np.testing.assert_allclose(ssf.predict(X[:10]), mean)


# ---------------------------------------------------------------- input and errors


def test_pandas_categoricals_and_unseen_category():
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"x": rng.random(600),
                       "city": pd.Categorical(rng.choice(["a", "b", "c"], 600))})
    y = df["x"] * 3 + (df["city"] == "b") * 5 + 0.1 * rng.normal(size=600)
    ebf = EmpiricalBayesianForestRegressor(n_estimators=5, trunk_max_leaves=3,
                                           random_state=0).fit(df, y)
    np.testing.assert_array_equal(ebf.feature_names_in_, ["x", "city"])
    assert "city" in ebf.export_trunk()
    new = pd.DataFrame({"city": ["b", "zzz"], "x": [0.5, 0.5]})  # reordered, unseen
    assert np.isfinite(ebf.predict(new)).all()
    with pytest.raises(ValueError, match="city"):
        ebf.predict(df[["x"]])


@pytest.mark.parametrize("Est", [EmpiricalBayesianForestRegressor, SubsampleForestRegressor])
def test_errors_name_the_problem_and_change_nothing(Est):
    rng = np.random.default_rng(9)
    X = pd.DataFrame({"a": rng.random(50), "b": rng.random(50)})
    y = pd.Series(rng.random(50), name="target")
    model = Est(n_estimators=2, random_state=0).fit(X, y)
    before = model.predict(X)
    y_bad = y.copy()
    y_bad[[3, 7]] = np.nan
    with pytest.raises(ValueError, match="2 missing|2 NaN"):
        model.fit(X, y_bad)
    X_bad = X.copy()
    X_bad.loc[4, "b"] = np.inf
    with pytest.raises(ValueError, match="'b'"):
        model.fit(X_bad, y)
    with pytest.raises(ValueError, match="target"):
        model.fit(X.assign(target=y), y)
    np.testing.assert_array_equal(model.predict(X), before)


def test_mondrian_branches_refuse_unequal_weights():
    rng = np.random.default_rng(10)
    X, y, _ = friedman(200, rng, p=5)
    with pytest.raises(ValueError, match="sample weights"):
        EmpiricalBayesianForestRegressor(n_estimators=2, branch="mondrian").fit(
            X, y, sample_weight=rng.random(200))


# ---------------------------------------------------------------- persistence


@pytest.mark.parametrize("make", [
    lambda: EmpiricalBayesianForestRegressor(n_estimators=3, trunk_max_leaves=3, random_state=0),
    lambda: EmpiricalBayesianForestRegressor(n_estimators=3, branch="mondrian",
                                             trunk_max_leaves=3, random_state=0),
    lambda: SubsampleForestRegressor(n_estimators=3, n_subsamples=2, random_state=0),
])
def test_roundtrip_regressors(make, tmp_path):
    rng = np.random.default_rng(12)
    X, y, _ = friedman(400, rng, p=5)
    assert_roundtrip(make().fit(X, y), X, tmp_path)


@pytest.mark.parametrize("Est", [EmpiricalBayesianForestClassifier, SubsampleForestClassifier])
def test_roundtrip_classifiers(Est, tmp_path):
    rng = np.random.default_rng(13)
    X = pd.DataFrame({"u": rng.random(300), "k": rng.choice(["p", "q"], 300)})
    y = np.where(X["u"] > 0.4, "yes", "no")
    assert_roundtrip(Est(n_estimators=3, random_state=0).fit(X, y), X, tmp_path)


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("learner", ["bayesian", "random", "mondrian", "smc"])
def test_single_row_branch_is_constant(task, learner):
    from ebf.branches import BranchSpec, fit_branch

    spec = BranchSpec(learner=learner, task=task, n_estimators=3, min_samples_leaf=1,
                      max_features=1.0, max_depth=None, n_classes=3, params={}, n_jobs=None)
    y = np.array([2.0]) if task == "regression" else np.array([1])
    branch = fit_branch(spec, np.array([[0.3, 0.7]]), y, None, entropy=0, branch=0)
    assert isinstance(branch, ConstantBranch)
    X = np.random.default_rng(0).random((4, 2))
    if task == "regression":
        g = branch.predict_distribution(X)
        np.testing.assert_array_equal(g.mean, 2.0)
        assert np.all(g.var > 0)
    else:
        np.testing.assert_array_equal(branch.predict_proba(X), [[0.0, 1.0, 0.0]] * 4)


# ---------------------------------------------------------------- one-pass summaries


def _summary_models():
    kw = dict(n_estimators=4, random_state=3)
    return [
        BayesianForestRegressor(**kw),
        BayesianForestRegressor(uncertainty="tree_spread", **kw),
        EmpiricalBayesianForestRegressor(trunk_max_leaves=4, **kw),
        EmpiricalBayesianForestRegressor(branch="mondrian", trunk_max_leaves=3,
                                         trunk_min_leaf_rows=1, min_samples_leaf=20, **kw),
        SubsampleForestRegressor(n_subsamples=3, **kw),
        SubsampleForestRegressor(n_subsamples=3, branch="mondrian", **kw),
    ]


@pytest.mark.parametrize("model", _summary_models(), ids=lambda m: type(m).__name__)
def test_predict_summary_is_predict_and_quantiles_bit_for_bit(model, monkeypatch):
    rng = np.random.default_rng(40)
    X, y, _ = friedman(900, rng, p=5)
    X_te = friedman(300, rng, p=5)[0]
    model.fit(X, y)
    levels = (0.05, 0.5, 0.975)
    s = model.predict_summary(X_te, levels)
    mean, std = model.predict(X_te, return_std=True)
    np.testing.assert_array_equal(s.mean, mean)
    np.testing.assert_array_equal(s.std, std)
    np.testing.assert_array_equal(s.mean, model.predict(X_te))
    np.testing.assert_array_equal(s.quantiles, model.predict_quantiles(X_te, levels))
    if hasattr(model, "trunk_"):
        np.testing.assert_array_equal(s.branch, model.apply(X_te))
    else:
        assert s.branch is None
    dist = model.predict_distribution(X_te)
    np.testing.assert_allclose(s.mean, dist.mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.quantiles, dist.quantile(levels), rtol=1e-12, atol=1e-9)
    # many small blocks (other rows, other padding widths): the same bits
    monkeypatch.setattr("basics.predictive.PREDICT_BLOCK", 37)
    small = model.predict_summary(X_te, levels)
    for got, want in zip(small, s, strict=True):
        np.testing.assert_array_equal(got, want)
    empty = model.predict_summary(X_te[:0], levels)
    assert empty.mean.shape == (0,) and empty.quantiles.shape == (0, 3)


@pytest.mark.parametrize("branch", ["bayesian", "mondrian"])
def test_ebf_summary_of_a_row_is_its_branch_mixture_alone(branch):
    from basics.mixture import summarize

    rng = np.random.default_rng(41)
    X, y, _ = friedman(1200, rng, p=5)
    X_te = friedman(400, rng, p=5)[0]
    ebf = EmpiricalBayesianForestRegressor(n_estimators=3, branch=branch, trunk_max_leaves=4,
                                           random_state=5, calibrate="none").fit(X, y)
    levels = np.array([0.1, 0.5, 0.9])
    s = ebf.predict_summary(X_te, levels)
    A = ebf.encoder_.transform(X_te)
    for b in np.unique(s.branch):
        rows = np.flatnonzero(s.branch == b)[::2]  # a shard holds other rows than a block
        mean, std, qs = summarize(ebf.branches_[b].predict_distribution(A[rows]), levels)
        np.testing.assert_array_equal(mean, s.mean[rows])
        np.testing.assert_array_equal(std, s.std[rows])
        np.testing.assert_array_equal(qs, s.quantiles[rows])


@pytest.mark.parametrize("cls", [EmpiricalBayesianForestClassifier, SubsampleForestClassifier,
                                 BayesianForestClassifier])
def test_classifier_summary_is_proba_predict_and_apply(cls):
    rng = np.random.default_rng(42)
    X = rng.random((600, 3))
    y = np.where(X[:, 0] > 0.5, "a", np.where(X[:, 1] > 0.3, "b", "c"))
    clf = cls(n_estimators=4, random_state=1).fit(X, y)
    s = clf.predict_summary(X[:200])
    np.testing.assert_array_equal(s.proba, clf.predict_proba(X[:200]))
    np.testing.assert_array_equal(s.predicted, clf.predict(X[:200]))
    if hasattr(clf, "trunk_"):
        np.testing.assert_array_equal(s.branch, clf.apply(X[:200]))
    else:
        assert s.branch is None
