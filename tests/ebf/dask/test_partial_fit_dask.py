"""The Dask ``partial_fit`` equals the local one on the same rows, and refuses what the local
one refuses, before reading data."""

from __future__ import annotations

import os

import dask.dataframe as dd
import numpy as np
import pytest

from ebf import EmpiricalBayesianForestClassifier, EmpiricalBayesianForestRegressor
from ebf.artifact import estimator_state

from .test_dask import FEATURES, assert_same_predictions, assert_same_state, fit_both, make_frame


@pytest.mark.parametrize("local_cls, target", [
    (EmpiricalBayesianForestRegressor, "y"), (EmpiricalBayesianForestClassifier, "label")])
def test_dask_partial_fit_equals_local_partial_fit(dask_client, local_cls, target):
    model, local, _ = fit_both(local_cls, make_frame(1500, seed=2), 3, dask_client, target,
                               n_estimators=3, branch="mondrian", trunk_max_leaves=5,
                               random_state=7)
    for seed in (3, 4):
        new = make_frame(700, seed=seed)
        ddf = dd.from_pandas(new, npartitions=4)
        model.partial_fit(ddf[FEATURES], ddf[target])
        local.partial_fit(new[FEATURES], new[target])
    got = model.to_local()
    assert got.n_updates_ == 2
    assert {"summary", "encode", "route", "branches"} <= set(model.fit_timings_)
    assert_same_state(estimator_state(got), estimator_state(local),
                      loose=("stats", "weight", "gain"))
    assert_same_predictions(got, local, make_frame(300, seed=9)[FEATURES])


def test_dask_partial_fit_refusals_leave_the_model_unchanged(dask_client):
    df = make_frame(1200, seed=2)
    model, _, _ = fit_both(EmpiricalBayesianForestClassifier, df, 2, dask_client, "label",
                           n_estimators=2, branch="mondrian", trunk_max_leaves=3,
                           random_state=0)
    before = estimator_state(model.to_local())
    new = make_frame(300, seed=5)
    new.loc[:2, "label"] = "extreme"
    ddf = dd.from_pandas(new, npartitions=2)
    with pytest.raises(ValueError, match=r"1 label\(s\) the model never saw \(\['extreme'\]\)"):
        model.partial_fit(ddf[FEATURES], ddf["label"])
    with pytest.raises(ValueError, match="X has 4 columns"):
        model.partial_fit(ddf[FEATURES[:4]], ddf["label"])
    with pytest.raises(TypeError, match="Column 'a'"):
        model.partial_fit(ddf[FEATURES].astype({"a": str}), ddf["label"])
    assert_same_state(estimator_state(model.to_local()), before)
    cart, _, _ = fit_both(EmpiricalBayesianForestRegressor, df, 2, dask_client, "y",
                          n_estimators=2, trunk_max_leaves=3, random_state=0)
    with pytest.raises(ValueError, match=r"extends only \['mondrian'\].*previous="):
        cart.partial_fit(ddf[FEATURES], ddf["y"])


def test_dask_partial_fit_of_an_unfitted_model_is_fit(dask_client):
    from ebf.dask import DaskEmpiricalBayesianForestRegressor

    ddf = dd.from_pandas(make_frame(800, seed=1), npartitions=2)
    a = DaskEmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                             random_state=0, client=dask_client)
    b = DaskEmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                             random_state=0, client=dask_client)
    X = ddf[FEATURES].compute()
    np.testing.assert_array_equal(a.partial_fit(ddf[FEATURES], ddf["y"]).to_local().predict(X),
                                  b.fit(ddf[FEATURES], ddf["y"]).to_local().predict(X))


def test_from_local_wraps_a_loaded_model_for_updates(dask_client, tmp_path):
    from ebf.artifact import load, save
    from ebf.dask import DaskEmpiricalBayesianForestRegressor

    df = make_frame(1000, seed=1)
    local = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                             trunk_max_leaves=3, random_state=0)
    local.fit(df[FEATURES], df["y"])
    loaded = load(save(local, tmp_path / "m"))
    est = DaskEmpiricalBayesianForestRegressor.from_local(loaded, client=dask_client)
    assert est.to_local() is loaded and est.get_params()["n_estimators"] == 2
    new = make_frame(300, seed=2)
    ddf = dd.from_pandas(new, npartitions=2)
    est.partial_fit(ddf[FEATURES], ddf["y"])
    local.partial_fit(new[FEATURES], new["y"])
    assert_same_predictions(loaded, local, make_frame(100, seed=3)[FEATURES])
    with pytest.raises(TypeError, match="takes a EmpiricalBayesianForestRegressor"):
        DaskEmpiricalBayesianForestRegressor.from_local(object())


@pytest.mark.parametrize("local_cls, target", [
    (EmpiricalBayesianForestRegressor, "y"), (EmpiricalBayesianForestClassifier, "label")])
def test_staged_partial_fit_writes_the_local_update_touching_only_its_branches(
        dask_client, tmp_path, local_cls, target):
    """A saved model updated into a stage on the workers is the local ``partial_fit`` of
    the same rows, byte for byte (the same model hash); the branches no row reaches are
    carried over as they are (their files linked, not rewritten)."""
    from ebf.artifact import model_hash, open_model, save, stage_model
    from ebf.dask import DaskEmpiricalBayesianForestClassifier as DaskClf
    from ebf.dask import DaskEmpiricalBayesianForestRegressor as DaskReg

    df = make_frame(1500, seed=2)
    local = local_cls(n_estimators=3, branch="mondrian", trunk_max_leaves=4,
                      random_state=7).fit(df[FEATURES], df[target])
    reader = open_model(save(local, tmp_path / "v1"))
    new = make_frame(2000, seed=3)
    new = new[local.apply(new[FEATURES]) == 1].iloc[:300]  # rows for branch 1 only
    ddf = dd.from_pandas(new, npartitions=3)
    dask_cls = DaskReg if local_cls is EmpiricalBayesianForestRegressor else DaskClf
    est = dask_cls.from_local(reader.load(), client=dask_client)
    with stage_model(tmp_path / "v2") as stage:
        est.partial_fit(ddf[FEATURES], ddf[target], stage=stage, saved=reader)
        stage.write(est.model_)
    local.partial_fit(new[FEATURES], new[target])
    assert model_hash(tmp_path / "v2") == model_hash(save(local, tmp_path / "local"))
    assert list(est.model_.branch_updates_) == [0, 1, 0, 0]
    before, after = reader.manifest["shards"], open_model(tmp_path / "v2").manifest["shards"]
    for b in range(4):
        same = os.path.samefile(tmp_path / "v1" / before[b]["file"],
                                tmp_path / "v2" / after[b]["file"])
        assert same == (b != 1) and (before[b]["sha256"] == after[b]["sha256"]) == (b != 1)
    with pytest.raises(ValueError, match="give both stage and saved"):
        est.partial_fit(ddf[FEATURES], ddf[target], saved=reader)
