"""``score`` and ``predict_proba`` of the Dask estimators: what scikit-learn's ``score`` and the
local ``predict_proba`` give on the computed data, whatever the partitioning."""

from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from ebf.dask import (
    DaskEmpiricalBayesianForestClassifier,
    DaskEmpiricalBayesianForestRegressor,
    DaskSubsampleForestClassifier,
    DaskSubsampleForestRegressor,
)
from ebf.dask._scoring import _combine
from tests.ebf.dask.test_dask import FEATURES, make_frame


@pytest.fixture(scope="module")
def frames():
    df = make_frame(1500, seed=5)
    df["label"] = np.where(df["y"] > df["y"].median(), "high", "low")
    df["w"] = np.random.default_rng(6).exponential(size=len(df))
    test = make_frame(700, seed=6)
    test["label"] = np.where(test["y"] > df["y"].median(), "high", "low")
    test["w"] = np.random.default_rng(7).exponential(size=len(test))
    return df, test


def _fit(cls, df, target):
    ddf = dd.from_pandas(df, npartitions=3)
    params = {"n_estimators": 3, "random_state": 0}
    if "Subsample" in cls.__name__:
        params["n_subsamples"] = 2
    else:
        params["trunk_max_leaves"] = 3
    return cls(**params).fit(ddf[FEATURES], ddf[target])


@pytest.mark.parametrize("cls", [DaskEmpiricalBayesianForestRegressor,
                                 DaskSubsampleForestRegressor,
                                 DaskEmpiricalBayesianForestClassifier,
                                 DaskSubsampleForestClassifier])
@pytest.mark.parametrize("npartitions", [1, 4, 9])
def test_score_is_sklearns_score_of_the_computed_data(dask_client, frames, cls, npartitions):
    df, test = frames
    target = "label" if "Classifier" in cls.__name__ else "y"
    est = _fit(cls, df, target)
    local = est.to_local()
    tdd = dd.from_pandas(test, npartitions=npartitions)
    got = est.score(tdd[FEATURES], tdd[target])
    assert got == pytest.approx(local.score(test[FEATURES], test[target]), rel=1e-12, abs=1e-12)
    weighted = est.score(tdd[FEATURES], tdd[target], sample_weight=tdd["w"])
    assert weighted == pytest.approx(
        local.score(test[FEATURES], test[target], sample_weight=test["w"]), rel=1e-12,
        abs=1e-12)
    assert weighted != pytest.approx(got, rel=1e-6)  # the weights count


def test_score_with_empty_partitions_and_no_rows(dask_client, frames):
    df, test = frames
    est = _fit(DaskEmpiricalBayesianForestRegressor, df, "y")
    tdd = dd.from_pandas(test, npartitions=5)
    tdd = tdd[tdd["a"] < 0.5]  # some partitions lose rows
    kept = test[test["a"] < 0.5]
    assert est.score(tdd[FEATURES], tdd["y"]) == pytest.approx(
        est.to_local().score(kept[FEATURES], kept["y"]), rel=1e-12)
    nothing = tdd[tdd["a"] > 2]
    with pytest.raises(ValueError, match="positive weight"):
        est.score(nothing[FEATURES], nothing["y"])


def test_partition_sums_combine_as_one_pass():
    """Chan et al.'s update against the plain weighted mean and sum of squares."""
    rng = np.random.default_rng(0)
    y, w = rng.normal(5.0, 3.0, 1000), rng.exponential(size=1000)
    cuts = [0, 1, 1, 250, 700, 1000]  # an empty piece too
    sums = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        if a == b:
            sums.append([0.0, 0.0, 0.0, 0.0])
            continue
        m = np.average(y[a:b], weights=w[a:b])
        sums.append([w[a:b].sum(), m, float(w[a:b] @ (y[a:b] - m) ** 2), 1.0])
    weight, mean, m2, errors = _combine(np.array(sums))
    m = np.average(y, weights=w)
    assert weight == pytest.approx(w.sum()) and mean == pytest.approx(m, rel=1e-13)
    assert m2 == pytest.approx(float(w @ (y - m) ** 2), rel=1e-12) and errors == 4.0


@pytest.mark.parametrize("cls", [DaskEmpiricalBayesianForestClassifier,
                                 DaskSubsampleForestClassifier])
def test_predict_proba_is_a_dask_array_of_the_local_probabilities(dask_client, frames, cls):
    df, test = frames
    est = _fit(cls, df, "label")
    got = est.predict_proba(dd.from_pandas(test[FEATURES], npartitions=4))
    assert isinstance(got, da.Array) and got.shape[1] == 2
    np.testing.assert_array_equal(got.compute(), est.to_local().predict_proba(test[FEATURES]))
    empty = dd.from_pandas(pd.DataFrame(test[FEATURES].iloc[:0]), npartitions=1)
    assert est.predict_proba(empty).compute().shape == (0, 2)
