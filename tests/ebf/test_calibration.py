"""Recalibrated regressors of ebf and mondrian (basics.recalibration, ebf.calibration)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from basics import metrics
from basics.pit import PITMap, RecalibratedDistribution
from ebf import (
    BayesianForestRegressor,
    EmpiricalBayesianForestRegressor,
    SubsampleForestRegressor,
)
from ebf.artifact import load, save
from ebf.calibration import (
    calibration_split,
    fit_recalibrated,
    holdout_mask,
    period_blocks,
    recent_start,
    rolling_recalibration,
)
from mondrian import MondrianForestRegressor

LEVELS = np.round(np.arange(0.1, 1.0, 0.1), 1)


def heavy_tailed(n, seed):
    """Student-t(3) noise whose scale grows with x1: heteroskedastic and heavy-tailed."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    y = np.sin(3 * X[:, 0]) + (0.1 + 0.5 * X[:, 1]) * rng.standard_t(3, n)
    return X, y


@pytest.mark.parametrize("seed", [0, 1])
def test_recalibrated_intervals_cover_on_fresh_data(seed):
    X, y = heavy_tailed(36_000, seed)
    fit, cal, test = slice(0, 8_000), slice(8_000, 16_000), slice(16_000, None)
    # the paper's noise variance (App. B): miscalibrated on these heavy tails, to be mended
    model = MondrianForestRegressor(n_estimators=5, random_state=seed, noise="forest",
                                    calibrate="none").fit(X[fit], y[fit])
    before = metrics.calibration_table(y[test], model.predict_distribution(X[test]), LEVELS)
    model.recalibrate(X[cal], y[cal])
    after = metrics.calibration_table(y[test], model.predict_distribution(X[test]), LEVELS)
    assert np.max(np.abs(before["observed_minus_nominal"])) > 0.05
    assert np.max(np.abs(after["observed_minus_nominal"])) < 0.02


@pytest.fixture(scope="module")
def data():
    X, y = heavy_tailed(3_000, 2)
    return pd.DataFrame(X, columns=["a", "b"]), y


def _regressors():
    return [
        BayesianForestRegressor(n_estimators=5, random_state=0),
        EmpiricalBayesianForestRegressor(n_estimators=3, branch="mondrian",
                                         trunk_max_leaves=3, random_state=0),
        SubsampleForestRegressor(n_estimators=3, n_subsamples=2, random_state=0),
        MondrianForestRegressor(n_estimators=3, random_state=0),
    ]


@pytest.mark.parametrize("est", _regressors(), ids=lambda e: type(e).__name__)
def test_every_prediction_follows_the_map(est, data, tmp_path):
    X, y = data
    model = fit_recalibrated(clone(est), X, y, calibrate="holdout", fraction=0.3)
    assert isinstance(model.recalibration_, PITMap)
    dist = model.predict_distribution(X[:50])
    assert isinstance(dist, RecalibratedDistribution)
    base = model.predict_distribution(X[:50], recalibrated=False)
    q = (0.05, 0.5, 0.95)
    np.testing.assert_allclose(model.predict_quantiles(X[:50], q), dist.quantile(q),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(dist.mean, base.mean)  # the point prediction is the model's
    np.testing.assert_allclose(model.predict(X[:50]), base.mean, rtol=1e-12)
    if hasattr(model, "predict_summary"):
        s = model.predict_summary(X[:50], q)
        np.testing.assert_array_equal(s.quantiles, model.predict_quantiles(X[:50], q))
    save(model, tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded.recalibration_ == model.recalibration_
    np.testing.assert_array_equal(loaded.predict_quantiles(X[:50], q),
                                  model.predict_quantiles(X[:50], q))
    model.fit(X, y)  # a new fit drops the map
    assert model.recalibration_ is None
    assert not isinstance(model.predict_distribution(X[:5]), RecalibratedDistribution)


def test_map_survives_compact_and_partial_fit(data):
    X, y = data
    ebf = EmpiricalBayesianForestRegressor(n_estimators=2, branch="mondrian",
                                           trunk_max_leaves=2, random_state=0).fit(X, y)
    ebf.recalibrate(X[:500], y[:500])
    assert ebf.compact().recalibration_ == ebf.recalibration_
    mf = MondrianForestRegressor(n_estimators=2, random_state=0).fit(X.iloc[:1000], y[:1000])
    mf.recalibrate(X[1000:2000], y[1000:2000])
    kept = mf.recalibration_
    mf.partial_fit(X[2000:2500], y[2000:2500])
    assert mf.recalibration_ is kept
    mf.update_recalibration(X[2500:], y[2500:])
    assert mf.recalibration_ != kept and mf.recalibration_.nominal.size == kept.nominal.size


def test_bad_calibration_rows_leave_the_model_unchanged(data):
    X, y = data
    model = BayesianForestRegressor(n_estimators=3, random_state=0, calibrate="none").fit(X, y)
    bad = y[:100].copy()
    bad[[3, 7]] = np.nan
    with pytest.raises(ValueError, match="2 missing or infinite targets of 100"):
        model.recalibrate(X[:100], bad)
    with pytest.raises(ValueError, match="at least 50 calibration rows"):
        model.recalibrate(X[:20], y[:20])
    assert getattr(model, "recalibration_", None) is None
    with pytest.raises(Exception, match="not fitted"):
        BayesianForestRegressor().set_recalibration(None)


def test_calibration_sets():
    fit, cal = calibration_split(1000, "recent", 0.1)
    assert cal.tolist() == list(range(900, 1000)) and fit.size == 900
    assert recent_start(1000, 0.1) == 900
    fit, cal = calibration_split(10_000, "holdout", 0.2, random_state=3)
    assert abs(cal.size - 2000) < 150 and np.intersect1d(fit, cal).size == 0
    # the holdout depends on positions only: any cut into partitions picks the same rows
    parts = np.split(np.arange(10_000), [17, 4000, 4001, 9000])
    picked = np.concatenate([p[holdout_mask(p, 0.2, 3)] for p in parts])
    np.testing.assert_array_equal(picked, cal)
    assert not np.array_equal(calibration_split(10_000, "holdout", 0.2, 4)[1], cal)
    with pytest.raises(ValueError, match="fraction must be in"):
        calibration_split(10, "recent", 1.0)
    with pytest.raises(ValueError, match="method must be"):
        calibration_split(10, "oob", 0.1)


@pytest.mark.parametrize("est", _regressors(), ids=lambda e: type(e).__name__)
def test_a_crafted_map_in_a_model_state_is_refused(est, data):
    from ebf.artifact.classes import estimator_from_state, estimator_state

    X, y = data
    model = fit_recalibrated(clone(est), X, y, calibrate="holdout", fraction=0.3)
    d = estimator_state(model)
    state = d["state"]
    levels = state["recalibration"]["levels"].copy()
    levels[2] = np.nan
    state["recalibration"] = {**state["recalibration"], "levels": levels}
    with pytest.raises(ValueError, match="recalibration"):
        estimator_from_state(d)
    state["recalibration"] = {"nominal": np.array([0.0, 1.0])}
    with pytest.raises(ValueError, match="recalibration"):
        estimator_from_state(d)


def test_rolling_aci_equals_the_loop_by_hand():
    """Predict a period with the current map, then update it by ACI with the period's
    outcomes: the protocol equals that loop written out, and the model ends with the last
    map."""
    X, y = heavy_tailed(3000, 11)
    y[1800:] += 0.6  # the later periods drift upwards
    X = pd.DataFrame(X, columns=["x0", "x1"])
    fit, cal, test = slice(0, 800), slice(800, 1800), slice(1800, 3000)
    rolled = BayesianForestRegressor(n_estimators=5, random_state=0).fit(X[fit], y[fit])
    rolled.recalibrate(X[cal], y[cal])  # 20 knots: one at the 5% level
    by_hand = clone(rolled).fit(X[fit], y[fit]).recalibrate(X[cal], y[cal])
    periods = np.repeat(["a", "b", "c", "d"], 300)
    Xt, yt = X[test], y[test]
    got = list(rolling_recalibration(rolled, Xt, yt, periods, update="aci", step=0.02))
    assert [(r.start, r.stop) for r, _ in got] == [(0, 300), (300, 600), (600, 900), (900, 1200)]
    below = []
    for rows, dist in got:
        expected = by_hand.predict_distribution(Xt.iloc[rows])
        np.testing.assert_array_equal(dist.cdf(yt[rows]), expected.cdf(yt[rows]))
        by_hand.update_recalibration(Xt.iloc[rows], yt[rows], step=0.02)
        below.append(metrics.one_sided_coverage(yt[rows], dist, 0.5))
    assert rolled.recalibration_ == by_hand.recalibration_
    # the drift leaves few targets below the median at first; the updates bring the fraction
    # back near one half in the next periods
    assert below[0] < 0.25 and np.all(np.abs(np.array(below[1:]) - 0.5) < 0.1), below


def test_rolling_window_equals_the_loop_by_hand():
    """The default update: after each period the map is refit on the PIT values of the most
    recent periods holding ``window`` rows (the history first); written out by hand with
    PITMap.fit on the concatenated PIT values."""
    X, y = heavy_tailed(3400, 12)
    y[2000:] += 0.6  # drift after the history
    fit, hist, test = slice(0, 1000), slice(1000, 2000), slice(2000, 3400)
    model = BayesianForestRegressor(n_estimators=5, random_state=1).fit(X[fit], y[fit])
    periods = np.repeat([1, 2, 3, 4, 5, 6, 7], 200)
    got = list(rolling_recalibration(model, X[test], y[test], periods, window=500,
                                     history=(X[hist], y[hist])))
    by_hand = clone(model).fit(X[fit], y[fit])
    us = [by_hand.pit(X[hist], y[hist])]
    Xt, yt = X[test], y[test]
    below = []
    for k, (rows, dist) in enumerate(got):
        assert (rows.start, rows.stop) == (200 * k, 200 * (k + 1))
        by_hand.set_recalibration(PITMap.fit(np.concatenate(us)))
        expected = by_hand.predict_distribution(Xt[rows])
        np.testing.assert_array_equal(dist.cdf(yt[rows]), expected.cdf(yt[rows]))
        us.append(by_hand.pit(Xt[rows], yt[rows]))
        while len(us) > 1 and sum(u.size for u in us[1:]) >= 500:
            us.pop(0)
        below.append(metrics.one_sided_coverage(yt[rows], dist, 0.5))
    assert model.recalibration_ == PITMap.fit(np.concatenate(us))
    # the history window does not see the drift; three periods later the window holds only
    # drifted rows and the median is right again
    assert below[0] < 0.25 and np.all(np.abs(np.array(below[3:]) - 0.5) < 0.1), below


def test_period_blocks_refuses_labels_out_of_order():
    assert period_blocks(np.array([3, 3, 1])) == [slice(0, 2), slice(2, 3)]
    with pytest.raises(ValueError, match="not consecutive"):
        period_blocks([1, 2, 1])
    with pytest.raises(ValueError, match="labels for"):
        next(rolling_recalibration(None, np.zeros((3, 1)), np.zeros(3), [1, 1]))
    with pytest.raises(ValueError, match="update must be"):
        next(rolling_recalibration(None, np.zeros((2, 1)), np.zeros(2), [1, 1], update="x"))
    with pytest.raises(ValueError, match="window must be at least"):
        next(rolling_recalibration(None, np.zeros((2, 1)), np.zeros(2), [1, 1], window=3))
