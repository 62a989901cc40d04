"""A Dask estimator's branches stay on the workers (``ebf.dask.live``): graphs hold their keys
only, every output equals the gathered local model's, and gathering is explicit."""

from __future__ import annotations

import pickle

import dask.dataframe as dd
import numpy as np
import pytest

from ebf.artifact import estimator_state
from ebf.dask import (
    DaskEmpiricalBayesianForestClassifier,
    DaskEmpiricalBayesianForestRegressor,
    DaskSubsampleForestRegressor,
    predict_frame,
)
from ebf.dask.live import LivePart, has_live_parts
from tests.ebf.dask.test_dask import FEATURES, assert_same_state, make_frame


@pytest.fixture(scope="module")
def frames():
    return make_frame(3000, seed=11), make_frame(700, seed=12)


def _graph_bytes(collection) -> int:
    return len(pickle.dumps(dict(collection.__dask_graph__()), protocol=5))


def test_predictions_come_from_the_workers_branches(dask_client, frames):
    df, test = frames
    est = DaskEmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=4,
                                               trunk_max_leaves=4, random_state=0)
    est.fit(dd.from_pandas(df[FEATURES], npartitions=3), dd.from_pandas(df["y"], npartitions=3))
    parts = est.model_.branches_
    assert all(isinstance(p, LivePart) for p in parts)  # no branch came to this process
    local = est.to_local()
    assert not has_live_parts(local) and has_live_parts(est.model_)
    with pytest.raises(AttributeError, match="MondrianForestRegressor branches"):
        est.feature_importances_  # noqa: B018 - the local message, from the workers
    X = dd.from_pandas(test[FEATURES], npartitions=4)
    pred = est.predict_frame(X, quantiles=(0.1, 0.5))
    # the graph holds the branches' keys, not their bytes
    assert _graph_bytes(pred) < len(pickle.dumps(local.branches_, protocol=5)) / 10
    want = local.predict_summary(test[FEATURES], (0.1, 0.5))
    got = pred.compute()
    np.testing.assert_array_equal(got["mean"], want.mean)
    np.testing.assert_array_equal(got["std"], want.std)
    np.testing.assert_array_equal(got[["q10", "q50"]].to_numpy(), want.quantiles)
    np.testing.assert_array_equal(got["branch"], local.apply(test[FEATURES]))
    np.testing.assert_array_equal(est.predict(X).compute(), want.mean)
    y = dd.from_pandas(test["y"], npartitions=4)
    assert est.score(X, y) == pytest.approx(local.score(test[FEATURES], test["y"]), abs=1e-12)
    # a persisted input: its partitions are on the workers already
    np.testing.assert_array_equal(est.predict_frame(dask_client.persist(X)).compute()["mean"],
                                  want.mean)


def test_recalibration_and_updates_keep_the_other_branches_on_the_workers(dask_client, frames):
    df, test = frames
    kw = dict(branch="mondrian", n_estimators=3, trunk_max_leaves=4, calibrate="none",
              random_state=1)
    ddf = dd.from_pandas(df, npartitions=3)
    est = DaskEmpiricalBayesianForestRegressor(**kw).fit(ddf[FEATURES], ddf["y"])
    local = est.to_local()
    cal = dd.from_pandas(test, npartitions=2)
    est.recalibrate(cal[FEATURES], cal["y"])
    local.recalibrate(test[FEATURES], test["y"])
    assert est.model_.recalibration_ == local.recalibration_
    new = test[test["a"] < 0.2]  # rows of the branches of small ``a`` only
    touched = set(np.unique(local.apply(new[FEATURES])).tolist())
    before = [p.future.key for p in est.model_.branches_]
    est.partial_fit(dd.from_pandas(new[FEATURES], npartitions=2),
                    dd.from_pandas(new["y"], npartitions=2))
    local.partial_fit(new[FEATURES], new["y"])
    # every branch still on the workers; the updated ones new, the others the same
    after = [p.future.key for p in est.model_.branches_]
    assert {b for b, (k0, k1) in enumerate(zip(before, after, strict=True)) if k0 != k1} == touched
    got, want = estimator_state(est.to_local())["state"], estimator_state(local)["state"]
    for key in ("branches", "branch_rows", "branch_updates", "n_updates"):
        assert_same_state(got[key], want[key], path=key)
    np.testing.assert_array_equal(
        est.predict_frame(dd.from_pandas(test[FEATURES], npartitions=2)).compute()["q50"],
        local.predict_quantiles(test[FEATURES], 0.5)[:, 0])


@pytest.mark.parametrize("cls, target", [(DaskEmpiricalBayesianForestClassifier, "label"),
                                         (DaskSubsampleForestRegressor, "y")])
def test_classifier_and_ssf_outputs_equal_the_local_model(dask_client, frames, cls, target):
    df, test = frames
    ddf = dd.from_pandas(df, npartitions=3)
    est = cls(n_estimators=3, random_state=2).fit(ddf[FEATURES], ddf[target])
    local = est.to_local()
    X = dd.from_pandas(test[FEATURES], npartitions=3)
    y = dd.from_pandas(test[target], npartitions=3)
    assert est.score(X, y) == pytest.approx(local.score(test[FEATURES], test[target]),
                                            abs=1e-12)
    if target == "label":
        np.testing.assert_array_equal(est.predict_proba(X).compute(),
                                      local.predict_proba(test[FEATURES]))
        np.testing.assert_array_equal(est.predict(X).compute(), local.predict(test[FEATURES]))
    else:
        np.testing.assert_array_equal(est.predict(X).compute(), local.predict(test[FEATURES]))


def test_a_local_model_is_scattered_once(dask_client, frames):
    df, test = frames
    ddf = dd.from_pandas(df, npartitions=2)
    local = DaskEmpiricalBayesianForestRegressor(n_estimators=10, random_state=3).fit(
        ddf[FEATURES], ddf["y"]).to_local()
    X = dd.from_pandas(test[FEATURES], npartitions=2)
    held = set(dask_client.futures)
    first = predict_frame(local, X)
    scattered = set(dask_client.futures) - held
    assert len(scattered) == len(local.branches_)
    second = predict_frame(local, X)
    assert set(dask_client.futures) - held == scattered  # the same parts, scattered once
    model_bytes = len(pickle.dumps(local.branches_, protocol=5))
    assert _graph_bytes(first) - _graph_bytes(X) < model_bytes / 10
    np.testing.assert_array_equal(second.compute()["mean"], local.predict(test[FEATURES]))
