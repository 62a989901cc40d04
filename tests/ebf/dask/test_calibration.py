"""Recalibration on a cluster (ebf.dask.calibration): the local map for the same rows."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from ebf import EmpiricalBayesianForestRegressor
from ebf.artifact import save
from ebf.calibration import calibration_split
from ebf.dask import DaskEmpiricalBayesianForestRegressor
from ebf.dask._predict import predict_frame
from ebf.dask.calibration import calibration_rows, pit_counts_dask, recalibrate


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    n = 4_000
    df = pd.DataFrame({"a": rng.random(n), "b": rng.random(n)})
    df["y"] = np.sin(3 * df.a) + (0.1 + df.b) * rng.standard_t(3, n)
    return df


@pytest.mark.parametrize("method", ["recent", "holdout"])
@pytest.mark.parametrize("npartitions", [1, 6])
def test_same_rows_and_same_map_as_local(frame, method, npartitions, dask_client):
    ddf = dd.from_pandas(frame, npartitions=npartitions)
    fit, cal, n_rows = calibration_rows(ddf, method, 0.25, 7, dask_client)
    fit_rows, cal_rows = calibration_split(len(frame), method, 0.25, 7)
    assert n_rows == len(frame)
    np.testing.assert_array_equal(cal.index.compute().to_numpy(), cal_rows)
    np.testing.assert_array_equal(fit.index.compute().to_numpy(), fit_rows)
    model = EmpiricalBayesianForestRegressor(n_estimators=3, branch="mondrian",
                                             trunk_max_leaves=3, random_state=0)
    model.fit(frame[["a", "b"]].iloc[fit_rows], frame.y.iloc[fit_rows])
    local = model.recalibrate(frame[["a", "b"]].iloc[cal_rows], frame.y.iloc[cal_rows])
    local_map = local.recalibration_
    recalibrate(model, cal[["a", "b"]], cal.y, client=dask_client)
    assert model.recalibration_ == local_map


def test_missing_targets_are_counted_and_refused(frame, dask_client):
    df = frame.copy()
    df.loc[[5, 17, 900], "y"] = np.nan
    ddf = dd.from_pandas(df, npartitions=3)
    model = EmpiricalBayesianForestRegressor(n_estimators=2, random_state=0,
                                             calibrate="none").fit(frame[["a", "b"]], frame.y)
    counts, missing = pit_counts_dask(model, ddf[["a", "b"]], ddf.y, dask_client)
    assert missing == 3 and counts.sum() == len(df) - 3
    # the same counts when the model goes to the workers instead of the rows to the model
    shipped, shipped_missing = pit_counts_dask(model, ddf[["a", "b"]], ddf.y, dask_client,
                                               gather_bytes=0)
    np.testing.assert_array_equal(shipped, counts)
    assert shipped_missing == missing
    with pytest.raises(ValueError, match="3 calibration rows have a missing"):
        recalibrate(model, ddf[["a", "b"]], ddf.y, client=dask_client)
    assert getattr(model, "recalibration_", None) is None


def test_dask_estimator_and_sharded_predictions_follow_the_map(frame, tmp_path, dask_client):
    ddf = dd.from_pandas(frame, npartitions=4)
    fit, cal, _ = calibration_rows(ddf, "recent", 0.2, 0, dask_client)
    est = DaskEmpiricalBayesianForestRegressor(n_estimators=3, branch="mondrian",
                                               trunk_max_leaves=3, random_state=0,
                                               client=dask_client)
    est.fit(fit[["a", "b"]], fit.y).recalibrate(cal[["a", "b"]], cal.y)
    local = est.to_local()
    assert local.recalibration_ is not None
    save(local, tmp_path / "m")
    q = (0.05, 0.5, 0.95)
    want = local.predict_summary(frame[["a", "b"]], q)
    X = ddf[["a", "b"]]
    for strategy in ("broadcast", "sharded"):
        got = predict_frame(str(tmp_path / "m"), X, q, client=dask_client,
                            strategy=strategy).compute()
        np.testing.assert_allclose(got[["q05", "q50", "q95"]].to_numpy(), want.quantiles,
                                   rtol=1e-12)
        np.testing.assert_array_equal(got["mean"].to_numpy(), want.mean)


def test_rows_brought_here_are_counted_in_threads_as_on_the_workers(frame, dask_client):
    """Counts from blocks of rows in this process's threads equal the workers' counts."""
    from ebf.dask.graph import in_threads

    blocks = in_threads(lambda block: block.index.to_numpy(), frame)
    np.testing.assert_array_equal(np.concatenate(blocks), frame.index.to_numpy())
    assert len(in_threads(len, frame.iloc[:0])) == 1
    model = EmpiricalBayesianForestRegressor(n_estimators=3, branch="mondrian",
                                             trunk_max_leaves=3, random_state=0)
    model.fit(frame[["a", "b"]].iloc[:3000], frame.y.iloc[:3000])
    ddf = dd.from_pandas(frame.iloc[3000:], npartitions=3)
    here = pit_counts_dask(model, ddf[["a", "b"]], ddf.y, dask_client)
    there = pit_counts_dask(model, ddf[["a", "b"]], ddf.y, dask_client, gather_bytes=0)
    np.testing.assert_array_equal(here[0], there[0])
    assert here[0].sum() == 1000 and here[1] == there[1] == 0
