"""Tests of the Mondrian forest estimators (``mondrian._forest``).

Behaviour from Lakshminarayanan, Roy & Teh (2016) (regression, predictive mixtures that
widen away from the data, Fig. 2) and the scikit-learn conventions of docs/architecture.md (errors
that name the column and the count; a failed call leaves the model unchanged).
"""

from __future__ import annotations

import copy
import pickle
import re

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from basics.mixture import GaussianMixture
from mondrian import MondrianForestClassifier, MondrianForestRegressor
from mondrian._tree import TreeArrays

POSTERIORS = ("exact", "empirical")


# ------------------------------------------------------------------------------ helpers


def _smooth(n, d=2, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-5, 5, (n, d))
    y = np.sin(X).sum(axis=1) + noise * rng.normal(size=n)
    return X, y


def _blobs(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = (X[:, 0] + X[:, 1] > 1).astype(int) + 2 * (X[:, 0] > 0.8)
    return X, y


def _snapshot(model) -> dict:
    """Everything a failed call must not touch: attributes, tree arrays, data buffer."""
    snap = {"keys": sorted(vars(model))}
    for key, value in vars(model).items():
        if key == "trees_":
            for t, tree in enumerate(value):
                for name in TreeArrays.ARRAYS:
                    snap[f"tree{t}.{name}"] = getattr(tree, name).copy()
                snap[f"tree{t}.root"] = tree.root
                snap[f"tree{t}.n_nodes"] = tree.n_nodes
        elif key == "_posterior":
            snap[key] = [p is None for p in value]
        else:
            snap[key] = copy.deepcopy(value)
    return snap


def _assert_same_snapshot(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        va, vb = a[key], b[key]
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb, err_msg=key)
        elif isinstance(va, dict):
            assert va.keys() == vb.keys(), key
        else:
            assert va == vb, key


def _assert_same_trees(m1, m2) -> None:
    assert len(m1.trees_) == len(m2.trees_)
    for t1, t2 in zip(m1.trees_, m2.trees_, strict=True):
        assert t1.n_nodes == t2.n_nodes and t1.root == t2.root
        live1, live2 = t1.trimmed(), t2.trimmed()
        for name in TreeArrays.ARRAYS[:-1]:
            np.testing.assert_array_equal(live1[name], live2[name], err_msg=name)


@pytest.fixture(scope="module")
def reg_data():
    return _smooth(600, d=2, seed=1)


@pytest.fixture(scope="module")
def fitted_reg(reg_data):
    X, y = reg_data
    return MondrianForestRegressor(n_estimators=8, random_state=0, calibrate="none").fit(X, y)


@pytest.fixture(scope="module")
def clf_data():
    return _blobs(500, seed=2)


# ------------------------------------------------------------------------------ API


def test_regressor_api_and_mixture(fitted_reg, reg_data):
    X, y = reg_data
    Xt = X[:40] + 0.05
    mean = fitted_reg.predict(Xt)
    mean2, std = fitted_reg.predict(Xt, return_std=True)
    assert mean.shape == std.shape == (40,)
    np.testing.assert_array_equal(mean, mean2)
    assert np.all(std > 0) and np.all(np.isfinite(std))

    dist = fitted_reg.predict_distribution(Xt)
    assert isinstance(dist, GaussianMixture)
    assert dist.n_rows == 40
    np.testing.assert_allclose(dist.mean, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dist.std, std, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(dist.var, std**2, rtol=1e-8, atol=1e-12)

    q = [0.05, 0.25, 0.5, 0.75, 0.95]
    quant = fitted_reg.predict_quantiles(Xt, q)
    assert quant.shape == (40, 5)
    np.testing.assert_allclose(quant, dist.quantile(q), rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(quant, axis=1) > 0)
    np.testing.assert_allclose(dist.cdf(quant), np.tile(q, (40, 1)), atol=1e-9)
    lo, hi = dist.interval(0.9)
    np.testing.assert_allclose(lo, quant[:, 0], atol=1e-9)
    np.testing.assert_allclose(hi, quant[:, -1], atol=1e-9)
    assert np.all(np.isfinite(dist.logpdf(mean)))
    # the default levels
    assert fitted_reg.predict_quantiles(Xt).shape == (40, 3)

    draws = dist.sample(4000, random_state=0)
    assert draws.shape == (40, 4000)
    np.testing.assert_allclose(draws.mean(axis=1), mean, atol=6 * std.max() / np.sqrt(4000))

    assert 0.8 < fitted_reg.score(X, y) <= 1.0
    assert fitted_reg.n_features_in_ == 2
    assert fitted_reg.n_samples_seen_ == len(X)
    assert len(fitted_reg.trees_) == 8
    assert set(fitted_reg.hyperparameters_) == {"mu_H", "gamma1", "gamma2", "noise_var"}


def test_quantiles_across_prediction_blocks(fitted_reg, reg_data, monkeypatch):
    import basics.predictive

    X, _ = reg_data
    full = fitted_reg.predict_quantiles(X[:50], [0.1, 0.9])
    mean, std = fitted_reg.predict(X[:50], return_std=True)
    monkeypatch.setattr(basics.predictive, "PREDICT_BLOCK", 7)
    np.testing.assert_allclose(fitted_reg.predict_quantiles(X[:50], [0.1, 0.9]), full,
                               rtol=1e-12, atol=1e-12)
    s = fitted_reg.predict_summary(X[:50], [0.1, 0.9])  # the same bits in one pass
    for got, want in zip(s[:3], (mean, std, full), strict=True):
        np.testing.assert_array_equal(got, want)


def test_unfitted_raises():
    X = np.zeros((3, 2))
    with pytest.raises(NotFittedError):
        MondrianForestRegressor().predict(X)
    with pytest.raises(NotFittedError):
        MondrianForestRegressor().predict_distribution(X)
    with pytest.raises(NotFittedError):
        MondrianForestClassifier().predict_proba(X)


@pytest.mark.parametrize("posterior", POSTERIORS)
def test_accuracy_on_smooth_function(posterior):
    X, y = _smooth(1500, d=2, seed=3)
    Xt, _ = _smooth(500, d=2, seed=4)
    yt = np.sin(Xt).sum(axis=1)
    model = MondrianForestRegressor(n_estimators=10, posterior=posterior, random_state=0)
    assert model.fit(X, y).score(Xt, yt) > 0.8


def test_classifier_probabilities_and_accuracy(clf_data):
    X, y = clf_data
    clf = MondrianForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2, 3])
    Xt, yt = _blobs(400, seed=5)
    proba = clf.predict_proba(Xt)
    assert proba.shape == (400, 4)
    assert np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(clf.predict(Xt), clf.classes_[proba.argmax(axis=1)])
    assert clf.score(Xt, yt) > 0.85
    # far from the data the probabilities are still a distribution
    far = clf.predict_proba(np.array([[50.0, -50.0], [1e6, 1e6]]))
    assert np.all((far >= 0) & (far <= 1))
    np.testing.assert_allclose(far.sum(axis=1), 1.0, atol=1e-12)


def test_classifier_string_labels_and_partial_fit(clf_data):
    X, y = clf_data
    names = np.array(["a", "b", "c", "d"])[y]
    clf = MondrianForestClassifier(n_estimators=5, random_state=0)
    with pytest.raises(ValueError, match="classes must be passed"):
        clf.partial_fit(X[:10], names[:10])
    for start in range(0, len(X), 100):
        clf.partial_fit(X[start:start + 100], names[start:start + 100],
                        classes=["d", "c", "b", "a"] if start == 0 else None)
    np.testing.assert_array_equal(clf.classes_, ["a", "b", "c", "d"])
    assert clf.n_samples_seen_ == len(X)
    assert clf.score(X, names) > 0.85


def test_pandas_feature_names(clf_data, reg_data):
    import pandas as pd

    X, y = clf_data
    df = pd.DataFrame(X, columns=["alpha", "beta"])
    clf = MondrianForestClassifier(n_estimators=4, random_state=0).fit(df, y)
    np.testing.assert_array_equal(clf.feature_names_in_, ["alpha", "beta"])
    proba = clf.predict_proba(df.iloc[:20])
    with pytest.warns(UserWarning, match="feature names"):
        np.testing.assert_array_equal(proba, clf.predict_proba(X[:20]))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.feature_names_in_, ["alpha", "beta"])
    with pytest.raises(ValueError, match="feature names"):
        clf.predict_proba(df[["beta", "alpha"]])

    # NaN messages use the column names of a DataFrame
    Xr, yr = reg_data
    bad = pd.DataFrame(Xr[:30], columns=["alpha", "beta"])
    bad.iloc[[1, 4, 7], 1] = np.nan
    with pytest.raises(ValueError, match=r"'beta': 3 NaN"):
        MondrianForestRegressor(n_estimators=2).fit(bad, yr[:30])


def test_pickle_round_trip(fitted_reg, reg_data, clf_data):
    X, _ = reg_data
    Xt = X[:30] + 0.3
    before = fitted_reg.predict(Xt, return_std=True)
    clone = pickle.loads(pickle.dumps(fitted_reg))
    after = clone.predict(Xt, return_std=True)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    np.testing.assert_array_equal(fitted_reg.predict_quantiles(Xt, [0.1, 0.9]),
                                  clone.predict_quantiles(Xt, [0.1, 0.9]))
    # an unpickled model keeps learning like the original
    Xc, yc = clf_data
    clf = MondrianForestClassifier(n_estimators=4, random_state=0).fit(Xc[:200], yc[:200])
    clf2 = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clf.predict_proba(Xc), clf2.predict_proba(Xc))
    clf.partial_fit(Xc[200:], yc[200:])
    clf2.partial_fit(Xc[200:], yc[200:])
    np.testing.assert_array_equal(clf.predict_proba(Xc), clf2.predict_proba(Xc))


# ------------------------------------------------------------------------------ bad input


def test_nan_inf_in_X_message_names_count_and_column(reg_data):
    X, y = reg_data
    X = X[:50].copy()
    X = np.column_stack([X, X[:, 0]])
    X[[2, 5], 1] = np.nan
    X[9, 2] = np.inf
    X[10, 2] = -np.inf
    X[11, 2] = np.nan
    model = MondrianForestRegressor(n_estimators=2)
    with pytest.raises(ValueError) as err:
        model.fit(X, y[:50])
    msg = str(err.value)
    assert "2 column(s)" in msg
    assert "'column 1': 2 NaN" in msg
    assert "'column 2': 1 NaN and 2 inf" in msg
    assert "column 0" not in msg
    assert not hasattr(model, "n_features_in_")

    clf = MondrianForestClassifier(n_estimators=2)
    with pytest.raises(ValueError, match=re.escape("'column 1': 2 NaN")):
        clf.fit(X, (y[:50] > 0).astype(int))


def test_nan_inf_in_y_message(reg_data):
    X, y = reg_data
    y = y[:50].copy()
    y[[0, 3, 4]] = np.nan
    y[7] = np.inf
    with pytest.raises(ValueError, match=re.escape("'y': 3 NaN and 1 inf")):
        MondrianForestRegressor(n_estimators=2).fit(X[:50], y)
    with pytest.raises(ValueError, match=re.escape("'y': 3 NaN and 1 inf")):
        MondrianForestRegressor(n_estimators=2).partial_fit(X[:50], y)
    with pytest.raises(ValueError, match=re.escape("'y': 3 NaN")):
        MondrianForestClassifier(n_estimators=2).fit(X[:50], y)


def test_nan_at_predict(fitted_reg, reg_data):
    X, _ = reg_data
    Xt = X[:5].copy()
    Xt[3, 0] = np.nan
    for method in (fitted_reg.predict, fitted_reg.predict_distribution,
                   fitted_reg.predict_quantiles):
        with pytest.raises(ValueError, match=re.escape("'column 0': 1 NaN")):
            method(Xt)


def test_wrong_number_of_features(fitted_reg, reg_data):
    X, y = reg_data
    X3 = np.column_stack([X[:10], X[:10, 0]])
    with pytest.raises(ValueError, match="features"):
        fitted_reg.predict(X3)
    with pytest.raises(ValueError, match="features"):
        fitted_reg.predict_distribution(X3)
    model = copy.deepcopy(fitted_reg)
    before = _snapshot(model)
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(X3, y[:10])
    _assert_same_snapshot(before, _snapshot(model))


def test_empty_input_raises(reg_data):
    X, y = reg_data
    with pytest.raises(ValueError):
        MondrianForestRegressor().fit(np.empty((0, 2)), np.empty(0))
    with pytest.raises(ValueError):
        MondrianForestRegressor().partial_fit(np.empty((0, 2)), np.empty(0))
    with pytest.raises(ValueError):
        MondrianForestClassifier().partial_fit(np.empty((0, 2)), np.empty(0), classes=[0, 1])
    with pytest.raises(ValueError):
        MondrianForestRegressor().fit(X[:5], y[:4])
    model = MondrianForestRegressor(n_estimators=2, random_state=0).fit(X, y)
    with pytest.raises(ValueError):
        model.predict(np.empty((0, 2)))


def test_one_sample_constant_features_duplicates():
    # one sample
    m = MondrianForestRegressor(n_estimators=3, random_state=0).fit([[1.0, 2.0]], [3.0])
    mean, std = m.predict([[1.0, 2.0], [5.0, -1.0]], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)
    np.testing.assert_allclose(mean[0], 3.0, atol=1e-6)
    clf = MondrianForestClassifier(n_estimators=3, random_state=0)
    clf.partial_fit([[0.0, 0.0]], [1], classes=[0, 1])
    proba = clf.predict_proba([[0.0, 0.0], [3.0, 3.0]])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert proba[0, 1] > proba[0, 0]

    # constant features (and a constant target)
    rng = np.random.default_rng(0)
    Xc = np.column_stack([np.full(60, 2.0), rng.normal(size=60), np.full(60, -1.0)])
    yc = Xc[:, 1] + 0.1 * rng.normal(size=60)
    for posterior in POSTERIORS:
        m = MondrianForestRegressor(n_estimators=4, posterior=posterior, random_state=0)
        mean, std = m.fit(Xc, yc).predict(Xc, return_std=True)
        assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))
        mean, std = m.fit(Xc, np.full(60, 4.0)).predict(Xc + 1, return_std=True)
        assert np.all(np.isfinite(std))
        np.testing.assert_allclose(mean, 4.0, atol=1e-6)

    # every row the same point (with different labels)
    Xd = np.tile([[0.5, -0.5]], (40, 1))
    yd = np.arange(40, dtype=float)
    m = MondrianForestRegressor(n_estimators=4, random_state=0).fit(Xd, yd)
    mean, std = m.predict(Xd[:2], return_std=True)
    np.testing.assert_allclose(mean, yd.mean(), rtol=0.2)
    assert np.all(np.isfinite(std))
    clf = MondrianForestClassifier(n_estimators=4, random_state=0).fit(Xd, np.arange(40) % 2)
    np.testing.assert_allclose(clf.predict_proba(Xd[:1]), [[0.5, 0.5]], atol=0.1)
    # a batch of duplicates added online
    m.partial_fit(Xd[:10], yd[:10])
    assert m.n_samples_seen_ == 50


def test_new_class_in_partial_fit_is_rejected_and_model_unchanged(clf_data):
    X, y = clf_data
    clf = MondrianForestClassifier(n_estimators=4, random_state=0)
    clf.partial_fit(X[:200], y[:200], classes=[0, 1, 2, 3])
    clf.predict_proba(X)  # fill the posterior cache
    before = _snapshot(clf)
    proba = clf.predict_proba(X)
    y_new = y[200:260].copy()
    y_new[[3, 8]] = 7
    with pytest.raises(ValueError, match=r"2 rows with classes \[7\].*declared classes"):
        clf.partial_fit(X[200:260], y_new)
    with pytest.raises(ValueError, match="differs from the classes"):
        clf.partial_fit(X[200:260], y[200:260], classes=[0, 1, 2, 3, 7])
    _assert_same_snapshot(before, _snapshot(clf))
    np.testing.assert_array_equal(clf.predict_proba(X), proba)


@pytest.mark.parametrize("posterior", POSTERIORS)
def test_failed_partial_fit_leaves_model_unchanged(reg_data, posterior):
    X, y = reg_data
    model = MondrianForestRegressor(n_estimators=4, posterior=posterior, random_state=0)
    model.partial_fit(X[:200], y[:200])
    Xt = X[:50] + 0.1
    mean, std = model.predict(Xt, return_std=True)
    quant = model.predict_quantiles(Xt, [0.1, 0.9])
    before = _snapshot(model)

    X_nan = X[200:260].copy()
    X_nan[5, 1] = np.nan
    y_inf = y[200:260].copy()
    y_inf[0] = np.inf
    bad_calls = [
        (X_nan, y[200:260]),                       # NaN in X
        (X[200:260], y_inf),                       # inf in y
        (X[200:260, :1], y[200:260]),              # wrong number of features
        (X[200:260], y[200:250]),                  # X / y length mismatch
        (np.empty((0, 2)), np.empty(0)),           # empty batch
        (X[200:260], np.ones((60, 2))),            # y not 1-D
        (X[200:260], None),                        # no y
    ]
    for Xb, yb in bad_calls:
        with pytest.raises(ValueError):
            model.partial_fit(Xb, yb)
        _assert_same_snapshot(before, _snapshot(model))
    mean2, std2 = model.predict(Xt, return_std=True)
    np.testing.assert_array_equal(mean, mean2)
    np.testing.assert_array_equal(std, std2)
    np.testing.assert_array_equal(quant, model.predict_quantiles(Xt, [0.1, 0.9]))
    # and the model still learns afterwards
    model.partial_fit(X[200:260], y[200:260])
    assert model.n_samples_seen_ == 260


def test_failed_first_call_leaves_estimator_unfitted(reg_data, clf_data):
    X, y = reg_data
    reg = MondrianForestRegressor(n_estimators=2)
    keys = sorted(vars(reg))
    y_bad = y[:20].copy()
    y_bad[3] = np.nan
    with pytest.raises(ValueError):
        reg.partial_fit(X[:20], y_bad)
    assert sorted(vars(reg)) == keys
    Xc, yc = clf_data
    clf = MondrianForestClassifier(n_estimators=2)
    with pytest.raises(ValueError, match="not among the declared classes"):
        clf.partial_fit(Xc[:20], yc[:20], classes=[0])
    assert sorted(vars(clf)) == sorted(vars(MondrianForestClassifier()))


def test_failed_refit_leaves_model_unchanged(fitted_reg, reg_data):
    X, y = reg_data
    model = copy.deepcopy(fitted_reg)
    before = _snapshot(model)
    X5 = np.column_stack([X[:30], X[:30], X[:30, :1]])
    y_bad = y[:30].copy()
    y_bad[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(X5, y_bad)  # new shape, then bad y: n_features_in_ must not change
    _assert_same_snapshot(before, _snapshot(model))
    np.testing.assert_array_equal(model.predict(X[:20]), fitted_reg.predict(X[:20]))


# ------------------------------------------------------------------------------ determinism


def test_same_seed_same_model_whatever_n_jobs(reg_data, clf_data):
    X, y = reg_data
    Xt, _ = _smooth(3000, d=2, seed=9)  # several row blocks when predicting in threads
    m1 = MondrianForestRegressor(n_estimators=6, random_state=7, n_jobs=1).fit(X, y)
    m2 = MondrianForestRegressor(n_estimators=6, random_state=7, n_jobs=2).fit(X, y)
    _assert_same_trees(m1, m2)
    for a, b in zip(m1.predict(Xt, return_std=True), m2.predict(Xt, return_std=True),
                    strict=True):
        np.testing.assert_array_equal(a, b)
    m1.partial_fit(Xt[:300], np.sin(Xt[:300]).sum(axis=1))
    m2.partial_fit(Xt[:300], np.sin(Xt[:300]).sum(axis=1))
    np.testing.assert_array_equal(m1.predict(Xt), m2.predict(Xt))

    Xc, yc = clf_data
    c1 = MondrianForestClassifier(n_estimators=6, random_state=3, n_jobs=1).fit(Xc, yc)
    c2 = MondrianForestClassifier(n_estimators=6, random_state=3, n_jobs=-1).fit(Xc, yc)
    _assert_same_trees(c1, c2)
    Xtc, _ = _blobs(3000, seed=11)
    np.testing.assert_array_equal(c1.predict_proba(Xtc), c2.predict_proba(Xtc))


def test_fit_twice_gives_same_model(reg_data, clf_data):
    X, y = reg_data
    model = MondrianForestRegressor(n_estimators=4, random_state=0)
    first = model.fit(X, y).predict(X[:50], return_std=True)
    model.partial_fit(X[:100], y[:100])  # fit must also discard online updates
    second = model.fit(X, y).predict(X[:50], return_std=True)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert model.n_samples_seen_ == len(X)
    other = MondrianForestRegressor(n_estimators=4, random_state=1).fit(X, y)
    assert not np.array_equal(other.predict(X[:50]), first[0])

    Xc, yc = clf_data
    clf = MondrianForestClassifier(n_estimators=4, random_state=0)
    p1 = clf.fit(Xc, yc).predict_proba(Xc)
    p2 = clf.fit(Xc, yc).predict_proba(Xc)
    np.testing.assert_array_equal(p1, p2)


@pytest.mark.parametrize("posterior", POSTERIORS)
def test_partial_fit_one_batch_or_several(posterior):
    X, y = _smooth(1500, d=2, seed=5)
    Xt, _ = _smooth(400, d=2, seed=6)
    yt = np.sin(Xt).sum(axis=1)
    kw = dict(n_estimators=8, posterior=posterior, random_state=0)
    batch = MondrianForestRegressor(**kw).fit(X, y)
    one = MondrianForestRegressor(**kw).partial_fit(X, y)
    # one partial_fit on an unfitted model is the batch algorithm with the same seeds
    _assert_same_trees(batch, one)
    np.testing.assert_array_equal(batch.predict(Xt), one.predict(Xt))

    online = MondrianForestRegressor(**kw)
    for start in range(0, len(X), 250):
        online.partial_fit(X[start:start + 250], y[start:start + 250])
    assert online.n_samples_seen_ == len(X)
    assert online.score(Xt, yt) > 0.8
    assert one.score(Xt, yt) > 0.8


def test_exact_posterior_recomputed_after_partial_fit(reg_data):
    X, y = reg_data
    model = MondrianForestRegressor(n_estimators=5, posterior="exact", random_state=0)
    model.fit(X[:300], y[:300])
    Xt = X[300:400] + 0.05
    before = model.predict(Xt, return_std=True)
    assert all(p is not None for p in model._posterior)  # cache filled
    model.partial_fit(X[300:], y[300:])
    after = model.predict(Xt, return_std=True)
    assert not np.allclose(before[0], after[0])
    after_q = model.predict_quantiles(Xt, [0.2, 0.8])
    model._posterior = [None] * model.n_estimators  # force a fresh computation
    fresh = model.predict(Xt, return_std=True)
    np.testing.assert_array_equal(after[0], fresh[0])
    np.testing.assert_array_equal(after[1], fresh[1])
    np.testing.assert_array_equal(after_q, model.predict_quantiles(Xt, [0.2, 0.8]))


# ------------------------------------------------------------------------------ uncertainty


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("posterior", POSTERIORS)
def test_std_grows_away_from_training_data(d, posterior):
    """Paper Fig. 2: trained on [-5, 5]^d, the predictive std widens outside the data."""
    X, y = _smooth(400, d=d, seed=8)
    model = MondrianForestRegressor(n_estimators=20, posterior=posterior, random_state=0)
    model.fit(X, y)
    # distance 0: the training inputs themselves
    std0 = np.median(model.predict(X, return_std=True)[1])

    def std_at(dist):
        # points at `dist` outside the data box, in several directions
        rng = np.random.default_rng(0)
        P = rng.uniform(-5, 5, (40, d))
        P[:20, 0] = 5 + dist
        P[20:, 0] = -5 - dist
        return np.median(model.predict(P, return_std=True)[1])

    s2, s10, s100 = std_at(2.0), std_at(10.0), std_at(100.0)
    assert std0 < 0.9 * s2, (std0, s2)
    assert std0 < 0.9 * s10
    # further out it does not shrink (it saturates at the prior's width)
    assert s10 >= 0.95 * s2, (s2, s10)
    assert s100 >= 0.95 * s10, (s10, s100)
    # and the mean reverts towards the overall mean
    far_mean = model.predict(np.full((1, d), 1e3))[0]
    assert abs(far_mean - y.mean()) < 0.5
