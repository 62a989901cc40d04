"""The distribution API of the Dask regressors (``predict_quantiles``, ``predict(X,
quantiles=...)``, ``predict_distribution``) and the CRPS scorer: the local estimator's
numbers on the computed data, whatever the partitioning, where the model lives or held
whole, and on a saved model."""

from __future__ import annotations

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import GridSearchCV

import ebf
import ebf.dask.distribution as distribution
from basics.metrics import crps_rows
from basics.mixture import GaussianMixture
from basics.pit import RecalibratedDistribution
from basics.scorers import neg_crps_scorer
from ebf.dask import (
    DaskDistribution,
    DaskEmpiricalBayesianForestClassifier,
    DaskEmpiricalBayesianForestRegressor,
    DaskSubsampleForestRegressor,
    predict_quantiles,
)
from tests.ebf.dask.test_dask import FEATURES, make_frame

LEVELS = [0.05, 0.25, 0.5, 0.9]


@pytest.fixture(scope="module")
def frames():
    return make_frame(1200, seed=11), make_frame(500, seed=12)


@pytest.fixture(scope="module")
def fitted(dask_client, frames):
    """An EBF and a recalibrated SSF fit on the cluster (their parts on the workers)."""
    df, test = frames
    ddf = dd.from_pandas(df, npartitions=3)
    ebf_model = DaskEmpiricalBayesianForestRegressor(
        n_estimators=3, trunk_max_leaves=4, branch="mondrian", random_state=0,
    ).fit(ddf[FEATURES], ddf["y"])
    ssf = DaskSubsampleForestRegressor(n_estimators=3, n_subsamples=2, random_state=1,
                                       calibrate="none").fit(ddf[FEATURES], ddf["y"])
    cal = dd.from_pandas(test.iloc[:250], npartitions=2)
    ssf.recalibrate(cal[FEATURES], cal["y"])
    return {"ebf": ebf_model, "ssf": ssf}


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["ebf", "ssf"])
@pytest.mark.parametrize("npartitions", [1, 4, 9])
def test_quantiles_equal_the_local_estimators(fitted, frames, name, npartitions):
    est = fitted[name]
    local = est.to_local()
    test = frames[1]
    tdd = dd.from_pandas(test, npartitions=npartitions)
    got = est.predict_quantiles(tdd[FEATURES], LEVELS)
    assert isinstance(got, da.Array) and got.shape[1] == len(LEVELS)
    np.testing.assert_array_equal(got.compute(), local.predict_quantiles(test[FEATURES], LEVELS))
    one = est.predict(tdd[FEATURES], quantiles=0.9).compute()
    assert one.shape == (len(test),)
    _close(one, local.predict(test[FEATURES], quantiles=0.9))
    _close(est.predict(tdd[FEATURES], quantiles=[0.1, 0.5]).compute(),
           local.predict(test[FEATURES], quantiles=[0.1, 0.5]))
    _close(est.predict(tdd[FEATURES]).compute().to_numpy(), local.predict(test[FEATURES]))


@pytest.mark.parametrize("name", ["ebf", "ssf"])
@pytest.mark.parametrize("npartitions", [1, 4, 9])
def test_the_distribution_is_the_local_one_partition_by_partition(fitted, frames, name,
                                                                  npartitions):
    est = fitted[name]
    local = est.to_local()
    test = frames[1]
    tdd = dd.from_pandas(test, npartitions=npartitions)
    dist = est.predict_distribution(tdd[FEATURES])
    want = local.predict_distribution(test[FEATURES])
    assert isinstance(dist, DaskDistribution) and dist.npartitions == npartitions
    whole = dist.compute()
    assert type(whole) is type(want)
    assert isinstance(want, RecalibratedDistribution)  # "auto" map; recalibrate's map
    y = test["y"].to_numpy()
    mean, std, cdf, logpdf, q, crps = dask.compute(
        dist.mean, dist.std, dist.cdf(tdd["y"]), dist.logpdf(tdd["y"]), dist.quantile(LEVELS),
        dist.crps(tdd["y"]))
    for got, expected in ((mean, want.mean), (std, want.std), (cdf, want.cdf(y)),
                          (logpdf, want.logpdf(y)), (q, want.quantile(LEVELS)),
                          (crps, crps_rows(want, y)), (whole.cdf(y), want.cdf(y))):
        _close(got, expected)
    lo, hi = dist.interval(0.8)
    _close(hi.compute() - lo.compute(), np.subtract(*want.interval(0.8)[::-1]))
    assert dist.quantile(0.5).compute().shape == (len(test),)
    _close(dist.cdf(1.0).compute(), want.cdf(1.0))
    # the scorer: the local and the distributed CRPS of the same rows
    _close(neg_crps_scorer(est, tdd[FEATURES], tdd["y"]),
           neg_crps_scorer(local, test[FEATURES], y))
    _close(neg_crps_scorer(est, tdd[FEATURES], tdd["y"], sample_weight=tdd["a"]),
           neg_crps_scorer(local, test[FEATURES], y, sample_weight=test["a"]))


def test_a_model_held_whole_and_a_saved_model_give_the_same_numbers(fitted, frames,
                                                                    tmp_path, monkeypatch):
    est = fitted["ebf"]
    local = est.to_local()
    test = frames[1]
    tdd = dd.from_pandas(test, npartitions=4)
    want_q = local.predict_quantiles(test[FEATURES], LEVELS)
    want_cdf = local.predict_distribution(test[FEATURES]).cdf(test["y"].to_numpy())
    ebf.save(local, tmp_path / "m")
    _close(predict_quantiles(str(tmp_path / "m"), tdd[FEATURES], LEVELS).compute(), want_q)
    _close(distribution.predict_distribution(tmp_path / "m", tdd[FEATURES]).cdf(
        tdd["y"]).compute(), want_cdf)
    # no client: every partition predicted by the model, one key of the graph
    monkeypatch.setattr(distribution, "on_workers", lambda model, client: None)
    with dask.config.set(scheduler="sync"):
        _close(predict_quantiles(local, tdd[FEATURES], LEVELS).compute(), want_q)
        _close(distribution.predict_distribution(local, tdd[FEATURES]).cdf(
            tdd["y"]).compute(), want_cdf)


def test_empty_partitions_and_bad_targets(fitted, frames):
    est = fitted["ebf"]
    test = frames[1]
    tdd = dd.from_pandas(test, npartitions=5)
    some = tdd[tdd["a"] < 0.3]  # some partitions lose every row
    kept = test[test["a"] < 0.3]
    want = est.to_local().predict_distribution(kept[FEATURES])
    dist = est.predict_distribution(some[FEATURES])
    _close(dist.cdf(some["y"]).compute(), want.cdf(kept["y"].to_numpy()))
    assert dist.compute().n_rows == len(kept)
    assert est.predict_quantiles(some[FEATURES][some["a"] > 2], LEVELS).compute().shape == (
        0, len(LEVELS))
    with pytest.raises(TypeError, match="must be a dask Series indexed like the rows"):
        dist.cdf(kept["y"].to_numpy())
    with pytest.raises(ValueError, match="not both"):
        est.to_local().predict(test[FEATURES], quantiles=0.5, return_std=True)


def test_classifiers_have_no_quantiles(dask_client, frames):
    df = frames[0].assign(label=lambda d: np.where(d["y"] > d["y"].median(), "hi", "lo"))
    ddf = dd.from_pandas(df, npartitions=2)
    clf = DaskEmpiricalBayesianForestClassifier(n_estimators=2, trunk_max_leaves=2,
                                                random_state=0).fit(ddf[FEATURES], ddf["label"])
    with pytest.raises(TypeError, match="needs a fitted regressor; got a classifier"):
        predict_quantiles(clf.model_, ddf[FEATURES])
    assert not hasattr(clf, "predict_distribution")


def test_the_crps_scorer_selects_in_grid_search(frames):
    """GridSearchCV with scoring=neg_crps_scorer: minus the mean CRPS of each held-out fold,
    the larger the better; the chosen parameters have the best mean."""
    df = frames[0]
    numeric = [c for c in FEATURES if df[c].dtype.kind == "f"]
    X, y = df[numeric].to_numpy(), df["y"].to_numpy()
    search = GridSearchCV(ebf.BayesianForestRegressor(n_estimators=5, random_state=0),
                          {"min_samples_leaf": [2, 200]}, scoring=neg_crps_scorer, cv=3)
    search.fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(scores < 0) and search.best_index_ == int(np.argmax(scores))
    model = ebf.BayesianForestRegressor(n_estimators=5, random_state=0,
                                        min_samples_leaf=2).fit(X[:800], y[:800])
    dist = model.predict_distribution(X[800:])
    assert neg_crps_scorer(model, X[800:], y[800:]) == pytest.approx(
        -np.mean(crps_rows(dist, y[800:])), rel=1e-12)


def test_stack_pads_narrower_mixtures():
    a = GaussianMixture([[0.5, 0.5]], [[-1.0, 1.0]], [[1.0, 2.0]])
    b = GaussianMixture.from_moments([3.0, 4.0], [1.0, 1.0])
    s = GaussianMixture.stack([b, a])
    assert s.weights.shape == (3, 2) and s.weights[0, 1] == 0.0
    _close(s.cdf([0.0, 1.0, 2.0]), np.concatenate([b.cdf([0.0, 1.0]), a.cdf([2.0])]))
    _close(s.quantile(LEVELS), np.vstack([b.quantile(LEVELS), a.quantile(LEVELS)]))
    with pytest.raises(ValueError, match="at least one"):
        GaussianMixture.stack([])


def test_targets_from_a_parquet_read_partitioned_otherwise(fitted, frames, tmp_path):
    """Dask reads one Parquet column in fewer partitions than several (it fuses small
    files): the targets still meet their own rows."""
    est = fitted["ebf"]
    test = frames[1]
    for i in range(8):
        test.iloc[i * 60:(i + 1) * 60].to_parquet(tmp_path / f"part.{i}.parquet")
    ddf = dd.read_parquet(tmp_path)
    kept = pd.read_parquet(tmp_path)
    assert ddf[FEATURES].to_delayed().__len__() != ddf["y"].to_delayed().__len__()
    want = est.to_local().predict_distribution(kept[FEATURES])
    got = est.predict_distribution(ddf[FEATURES]).cdf(ddf["y"]).compute()
    _close(got, want.cdf(kept["y"].to_numpy()))  # to rounding: mixtures padded otherwise
