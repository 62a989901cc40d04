"""Calibrated out of the box: the cross-fitted calibration groups of ``calibrate="auto"``."""

from __future__ import annotations

import numpy as np
import pytest

from basics import calibration as cal
from basics.metrics import coverage, one_sided_coverage
from basics.mixture import GaussianMixture
from basics.pit import PITMap
from tests.naive import crossfit as naive


def test_folds_depend_on_the_position_alone():
    positions = np.arange(10_000)
    whole = cal.row_folds(positions, seed=3)
    parts = np.concatenate([cal.row_folds(p, seed=3) for p in np.array_split(positions, 7)])
    np.testing.assert_array_equal(whole, parts)
    assert set(np.unique(whole)) == set(range(cal.N_FOLDS))
    assert not np.array_equal(whole, cal.row_folds(positions, seed=4))
    # every fold holds about a fifth of the rows (binomial sd 0.4%)
    np.testing.assert_allclose(np.bincount(whole) / whole.size, 0.2, atol=0.02)


def test_a_group_never_predicts_a_row_it_was_fit_on():
    positions = np.arange(100, 1100)
    fitted_on: dict[int, set] = {}

    def fit_group(keep, fold):
        fitted_on[fold] = set(positions[keep].tolist())
        return fold

    def held_out(fold, rows):
        assert not fitted_on[fold] & set(positions[rows].tolist())
        assert set(cal.row_folds(positions[rows], 0)) == {fold}
        return cal.HeldOutCounts(cal.pit_counts(np.full(rows.size, 0.5)),
                                 cal.pit_counts(np.full(2 * rows.size, 0.5)))

    folds = cal.crossfit(fit_group, held_out, positions, seed=0)
    counts = sum((c for _, c in folds), cal.HeldOutCounts.empty())
    assert counts.n_rows == positions.size  # every row predicted once
    assert sorted(fitted_on) == list(range(cal.N_FOLDS))


def test_held_out_counts_match_the_oracle():
    rng = np.random.default_rng(0)
    n, k = 300, 7
    w = rng.random((n, k))
    m, v = rng.normal(size=(n, k)), rng.uniform(0.1, 2, (n, k))
    y = rng.normal(size=n)
    got = cal.held_out_counts(GaussianMixture(w, m, v), y)
    whole, halves = naive.held_out_counts(w / w.sum(1, keepdims=True), m, v, y)
    np.testing.assert_array_equal(got.whole, whole)
    np.testing.assert_array_equal(got.halves, halves)


def test_without_more_trees_the_map_is_the_groups_map():
    rng = np.random.default_rng(1)
    u = rng.beta(2, 2, 5000)
    counts = cal.HeldOutCounts(cal.pit_counts(u), 2 * cal.pit_counts(u))
    got = cal.extrapolated_map(counts, group=10, model=10)
    want = PITMap.fit(u)
    np.testing.assert_allclose(got(np.linspace(0, 1, 101)), want(np.linspace(0, 1, 101)),
                               atol=2e-3)


def _ensemble_pit(rng, n_rows, n_members):
    """Targets and an ensemble of exchangeable members calibrated in the limit: members
    N(m_j, 0.2) with m_j ~ N(0, 0.8), targets N(0, 1)."""
    y = rng.normal(size=n_rows)
    means = rng.normal(size=(n_rows, n_members)) * np.sqrt(0.8)
    return GaussianMixture(np.ones_like(means), means, np.full_like(means, 0.2)), y


def test_the_map_of_small_groups_carries_over_to_the_whole_forest():
    """The rank-histogram effect: members of an ensemble put 2 / (m + 1) of the targets
    outside their range, so a map fit on 10-member groups over-corrects a 100-member
    forest; the map extrapolated from the groups and their halves does not (fixed seed)."""
    rng = np.random.default_rng(5)
    group, model = 10, 100
    mix, y = _ensemble_pit(rng, 20_000, group)
    counts = cal.held_out_counts(mix, y)
    naive_map = PITMap.from_counts(counts.whole)
    extrapolated = cal.extrapolated_map(counts, group, model)
    test_mix, y_test = _ensemble_pit(rng, 20_000, model)
    from basics.pit import RecalibratedDistribution

    levels = np.arange(1, 20) / 20

    def gap(pit_map):
        dist = RecalibratedDistribution(test_mix, pit_map)
        return float(np.max(np.abs(one_sided_coverage(y_test, dist, levels) - levels)))

    assert gap(PITMap.identity()) < 0.01  # the 100-member forest needs no map
    assert gap(naive_map) > 0.025  # the groups' own map over-corrects it
    assert gap(extrapolated) < 0.015


def _friedman(rng, n):
    X = rng.random((n, 5))
    f = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
    return X, f + (0.5 + 2.0 * X[:, 0]) * rng.normal(size=n)


@pytest.mark.parametrize("name", ["BayesianForestRegressor", "EmpiricalBayesianForestRegressor",
                                  "SubsampleForestRegressor"])
def test_calibrated_by_default_on_fresh_rows(name):
    import ebf

    rng = np.random.default_rng(2)
    X, y = _friedman(rng, 4000)
    Xt, yt = _friedman(rng, 4000)
    model = getattr(ebf, name)(random_state=0).fit(X, y)
    assert model.calibration_ == ({"method": "subsamples", "rows": 4000, "parts": 5}
                                  if name == "SubsampleForestRegressor" else
                                  {"method": "folds", "rows": 4000, "folds": 5,
                                   "group_trees": 10, "model_trees": 100})
    raw = getattr(ebf, name)(random_state=0, calibrate="none").fit(X, y)
    assert raw.recalibration_ is None and raw.calibration_ is None
    # the same trees: calibration takes no row from the model
    np.testing.assert_array_equal(model.predict(Xt), raw.predict(Xt))
    levels = np.arange(1, 10) / 10
    got = np.max(np.abs(coverage(yt, model.predict_distribution(Xt), levels) - levels))
    before = np.max(np.abs(coverage(yt, raw.predict_distribution(Xt), levels) - levels))
    assert got < 0.03 < before


@pytest.mark.parametrize("name", ["BayesianForestClassifier", "EmpiricalBayesianForestClassifier",
                                  "SubsampleForestClassifier"])
def test_classifiers_calibrated_by_default_on_fresh_rows(name):
    """Deep trees are over-confident; the held-out groups' class map fixes that on new rows
    without taking a row from the model (fixed seed)."""
    import ebf
    from basics.metrics import expected_calibration_error

    rng = np.random.default_rng(3)

    def draw(n):
        X = rng.random((n, 4))
        p = 1 / (1 + np.exp(-4 * (X[:, 0] + X[:, 1] - 1)))
        return X, (rng.random(n) < p).astype(int)

    (X, y), (Xt, yt) = draw(4000), draw(4000)
    model = getattr(ebf, name)(n_estimators=40, min_samples_leaf=1, random_state=0).fit(X, y)
    raw = getattr(ebf, name)(n_estimators=40, min_samples_leaf=1, random_state=0,
                             calibrate="none").fit(X, y)
    assert model.calibration_["rows"] == 4000
    np.testing.assert_array_equal(model.predict_proba(Xt, recalibrated=False),
                                  raw.predict_proba(Xt))
    got, before = (expected_calibration_error(m.predict_proba(Xt), yt) for m in (model, raw))
    assert got < 0.03  # the SSF's pool of shallow parts is calibrated already (0.014)
    assert before > 0.03 or name == "SubsampleForestClassifier"


def test_a_calibrated_classifier_round_trips_and_forged_halves_are_refused(tmp_path):
    from basics.class_calibration import ClassCalibrationMap
    from ebf import BayesianForestClassifier
    from ebf.artifact import load, save

    rng = np.random.default_rng(4)
    X = rng.random((600, 3))
    y = (rng.random(600) < X[:, 0]).astype(int)
    model = BayesianForestClassifier(n_estimators=30, random_state=0).fit(X, y)
    again = load(save(model, tmp_path / "m"))
    assert again.class_calibration_ == model.class_calibration_
    assert again.calibration_ == model.calibration_
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))
    state = model.class_calibration_.to_state()
    if "half" in state:
        state["half"] = dict(state, method=state["method"])  # a half with a half
        with pytest.raises(ValueError, match="half"):
            ClassCalibrationMap.from_state(state)
        state = model.class_calibration_.to_state()
        state["extrapolation"] = float("nan")
        with pytest.raises(ValueError, match="extrapolation"):
            ClassCalibrationMap.from_state(state)


def test_an_ssf_row_is_held_out_by_the_other_subsamples_only():
    """Sub-sample p's rows are predicted by the pool of the others (none saw them): the
    counts are those of the mean of the other forests' CDFs, one row at a time."""
    from ebf import SubsampleForestRegressor
    from ebf.subsample import held_out_by_others, subsample_groups

    rng = np.random.default_rng(6)
    X, y = _friedman(rng, 900)
    model = SubsampleForestRegressor(n_estimators=4, n_subsamples=3, random_state=0,
                                     calibrate="none").fit(X, y)
    groups = subsample_groups(model.entropy_, y.size, 3)
    rows = groups[1]
    cdfs = [[float(np.clip(model.subsamples_[q].predict_distribution(X[[i]]).cdf(y[[i]])[0],
                           0, 1)) for i in rows] for q in (0, 2)]
    want = cal.pit_counts(np.mean(cdfs, axis=0))
    got = held_out_by_others([np.array(c) for c in cdfs], y[rows], rows, "regression")
    np.testing.assert_array_equal(got.whole, want)
    assert got.halves.sum() == 2 * rows.size
