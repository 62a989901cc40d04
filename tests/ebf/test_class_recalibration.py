"""Recalibrated classifiers of ebf and mondrian (basics.class_recalibration): every
prediction follows the map, a fit drops it, partial_fit and compact keep it, and it is saved
with the model (checked on load)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from basics.class_calibration import ClassCalibrationMap
from basics.metrics import class_rows, expected_calibration_error
from ebf import (
    BayesianForestClassifier,
    EmpiricalBayesianForestClassifier,
    SubsampleForestClassifier,
)
from ebf.artifact import load, save
from ebf.bayestrees import SMCTreeClassifier
from mondrian import MondrianForestClassifier


def _frame(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Three classes whose probabilities depend smoothly on two features (noisy labels, so a
    forest's leaf fractions are over-confident)."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.random(n), "b": rng.random(n)})
    logits = np.column_stack([3 * X["a"], 3 * X["b"], np.full(n, 1.5)])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    codes = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return X, np.array(["x", "y", "z"])[np.minimum(codes, 2)]


@pytest.fixture(scope="module")
def data() -> dict:
    return {"fit": _frame(1500, 0), "cal": _frame(1000, 1), "test": _frame(3000, 2)}


def _classifiers():
    raw = {"random_state": 0, "calibrate": "none"}  # fit without a map: recalibrate adds one
    return [
        BayesianForestClassifier(n_estimators=10, min_samples_leaf=1, **raw),
        EmpiricalBayesianForestClassifier(n_estimators=4, trunk_max_leaves=3, **raw),
        SubsampleForestClassifier(n_estimators=3, n_subsamples=2, **raw),
        MondrianForestClassifier(n_estimators=3, **raw),
        SMCTreeClassifier(n_particles=5, n_islands=2, random_state=0),
    ]


@pytest.mark.parametrize("est", _classifiers(), ids=lambda e: type(e).__name__)
def test_every_prediction_follows_the_map(est, data, tmp_path):
    (X, y), (Xc, yc), (Xt, yt) = data["fit"], data["cal"], data["test"]
    model = clone(est).fit(X, y)
    raw = model.predict_proba(Xt)
    assert getattr(model, "class_calibration_", None) is None
    model.recalibrate(Xc, yc)
    cal = model.class_calibration_
    assert isinstance(cal, ClassCalibrationMap) and cal.n_rows == 1000
    proba = model.predict_proba(Xt)
    np.testing.assert_array_equal(model.predict_proba(Xt, recalibrated=False), raw)
    np.testing.assert_array_equal(proba, cal(raw))
    np.testing.assert_array_equal(model.predict(Xt), model.classes_[np.argmax(proba, axis=1)])
    np.testing.assert_array_equal(model.predict_log_proba(Xt), np.log(proba))
    summary = model.predict_summary(Xt)
    np.testing.assert_array_equal(summary.proba, proba)
    assert model.score(Xt, yt) == np.mean(model.predict(Xt) == yt)
    save(model, tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded.class_calibration_ == cal
    np.testing.assert_array_equal(loaded.predict_proba(Xt), proba)
    model.fit(X, y)  # a new fit drops the map
    assert model.class_calibration_ is None
    np.testing.assert_array_equal(model.predict_proba(Xt), raw)


def test_a_recalibrated_forest_is_better_calibrated(data):
    """A Bayesian forest of deep trees is over-confident; the map fixes that on new rows."""
    (X, y), (Xc, yc), (Xt, yt) = data["fit"], data["cal"], data["test"]
    model = BayesianForestClassifier(n_estimators=20, min_samples_leaf=1,
                                     random_state=3, calibrate="none").fit(X, y)
    codes = pd.Index(model.classes_).get_indexer(yt)
    raw = model.predict_proba(Xt)
    model.recalibrate(Xc, yc)
    proba = model.predict_proba(Xt)
    loss = [class_rows(p, model.classes_, yt)[1].mean() for p in (raw, proba)]
    ece = [expected_calibration_error(p, codes) for p in (raw, proba)]
    assert model.class_calibration_.method != "identity"
    assert loss[1] < loss[0] - 0.02 and ece[1] < ece[0] / 2 and ece[1] < 0.03


def test_map_survives_compact_and_partial_fit(data):
    (X, y), (Xc, yc) = data["fit"], data["cal"]
    ebf = EmpiricalBayesianForestClassifier(n_estimators=2, branch="mondrian",
                                            trunk_max_leaves=2, random_state=0).fit(X, y)
    ebf.recalibrate(Xc, yc)
    assert ebf.compact().class_calibration_ == ebf.class_calibration_
    kept = ebf.class_calibration_
    ebf.partial_fit(Xc[:100], yc[:100])
    assert ebf.class_calibration_ is kept
    mf = MondrianForestClassifier(n_estimators=2, random_state=0, calibrate="none").fit(X, y)
    mf.recalibrate(Xc, yc)
    kept = mf.class_calibration_
    mf.partial_fit(Xc[:200], yc[:200])
    assert mf.class_calibration_ is kept
    assert mf.compact().class_calibration_ == kept


def test_bad_calibration_rows_leave_the_model_unchanged(data):
    (X, y), (Xc, yc) = data["fit"], data["cal"]
    model = BayesianForestClassifier(n_estimators=3, random_state=0, calibrate="none").fit(X, y)
    bad = yc[:100].astype(object)
    bad[[3, 7]] = None
    with pytest.raises(ValueError, match="2 missing labels of 100"):
        model.recalibrate(Xc[:100], bad)
    with pytest.raises(ValueError, match=r"1 labels the model never saw \(e.g. \['w'\]\)"):
        model.recalibrate(Xc[:100], np.where(np.arange(100) == 5, "w", yc[:100]))
    with pytest.raises(ValueError, match="at least 50 held-out rows"):
        model.recalibrate(Xc[:20], yc[:20])
    assert getattr(model, "class_calibration_", None) is None
    with pytest.raises(ValueError, match="the map is for 2 classes but the model has 3"):
        model.set_class_calibration(ClassCalibrationMap.identity(2))
    with pytest.raises(TypeError, match="ClassCalibrationMap or None"):
        model.set_class_calibration("isotonic")
    with pytest.raises(Exception, match="not fitted"):
        BayesianForestClassifier().set_class_calibration(None)


def test_set_class_calibration_is_the_seam_for_held_out_rows(data):
    """A map fitted elsewhere on held-out probabilities and class codes, set on the model."""
    (X, y), (Xc, yc), (Xt, _) = data["fit"], data["cal"], data["test"]
    model = BayesianForestClassifier(n_estimators=5, random_state=0, calibrate="none").fit(X, y)
    codes = pd.Index(model.classes_).get_indexer(yc)
    cal = ClassCalibrationMap.fit(model.predict_proba(Xc), codes)
    model.set_class_calibration(cal)
    np.testing.assert_array_equal(model.predict_proba(Xt),
                                  cal(model.predict_proba(Xt, recalibrated=False)))
    other = clone(model).fit(X, y).recalibrate(Xc, yc)
    assert other.class_calibration_ == cal
    assert model.set_class_calibration(None).predict_proba(Xt).tolist() == \
        model.predict_proba(Xt, recalibrated=False).tolist()


@pytest.mark.parametrize("est", _classifiers()[:4], ids=lambda e: type(e).__name__)
def test_a_crafted_map_in_a_model_state_is_refused(est, data):
    from ebf.artifact.classes import estimator_from_state, estimator_state

    (X, y), (Xc, yc) = data["fit"], data["cal"]
    model = clone(est).fit(X, y)
    model.set_class_calibration(ClassCalibrationMap.fit(
        model.predict_proba(Xc), pd.Index(model.classes_).get_indexer(yc)))
    d = estimator_state(model)
    state = d["state"]
    good = state["class_calibration"]
    state["class_calibration"] = {**good, "n_classes": 2}
    with pytest.raises(ValueError, match="class_calibration.n_classes"):
        estimator_from_state(d)
    state["class_calibration"] = {**good, "method": "pickle"}
    with pytest.raises(ValueError, match="class_calibration: method must be one of"):
        estimator_from_state(d)
    state["class_calibration"] = good
    assert estimator_from_state(d).class_calibration_ == model.class_calibration_
