"""Workers write their own shards (issue 29): a Dask fit given a model stage writes every
branch from the worker that fit it, the driver only the head, and the model equals, file
for file, the one ``ebf.artifact.save`` writes from the driver. The model appears whole or
not at all, whatever dies on the way."""

from __future__ import annotations

import os
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pytest
from distributed import Client, LocalCluster

from basics.atomic import remove_abandoned
from ebf.artifact import StoredPart, load, open_model, save, stage_model
from ebf.dask import (
    DaskEmpiricalBayesianForestClassifier,
    DaskEmpiricalBayesianForestRegressor,
    DaskSubsampleForestRegressor,
)
from ebf.dask.calibration import recalibrate
from tests.ebf.dask.test_dask import FEATURES, make_frame

ESTIMATORS = {
    "ebf_mondrian": lambda: DaskEmpiricalBayesianForestRegressor(
        n_estimators=3, trunk_max_leaves=4, branch="mondrian", random_state=4),
    "ebf_clf": lambda: DaskEmpiricalBayesianForestClassifier(
        n_estimators=3, trunk_max_leaves=3, random_state=1),
    "ssf_reg": lambda: DaskSubsampleForestRegressor(n_estimators=3, n_subsamples=3,
                                                    random_state=2),
}


def _data(name: str, n: int = 1200, seed: int = 3):
    df = make_frame(n, seed=seed)
    if "clf" in name:
        df["y"] = df["y"] > df["y"].median()
    ddf = dd.from_pandas(df, npartitions=4)
    return ddf[FEATURES], ddf["y"]


def _files(path: Path) -> dict[str, bytes]:
    """Every file of a model directory but the manifest (which records when it was written),
    by relative name."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


def _same_model(staged: Path, driver: Path) -> None:
    assert _files(staged) == _files(driver)
    a, b = open_model(staged).manifest, open_model(driver).manifest
    assert a["model_hash"] == b["model_hash"]
    assert a["shards"] == b["shards"] and a["head"] == b["head"]


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_workers_write_the_same_model_the_driver_writes(dask_client, tmp_path, name):
    X, y = _data(name)
    reference = ESTIMATORS[name]().fit(X, y).to_local()
    save(reference, tmp_path / "driver")
    est = ESTIMATORS[name]()
    with stage_model(tmp_path / "staged") as stage:
        est.fit(X, y, stage=stage)
        parts = getattr(est.model_, type(est.model_)._parts + "_")
        assert all(isinstance(p, StoredPart) for p in parts)  # no branch array came back
        assert not (tmp_path / "staged").exists()  # nothing at the destination yet
        stage.write(est.model_)
    _same_model(tmp_path / "staged", tmp_path / "driver")


def test_a_part_reference_says_where_the_part_is(dask_client, tmp_path):
    X, y = _data("ebf_mondrian")
    est = ESTIMATORS["ebf_mondrian"]()
    with stage_model(tmp_path / "m") as stage:
        est.fit(X, y, stage=stage)
        with pytest.raises(AttributeError, match="part 0 is stored in .*ebf.artifact.open_model"):
            _ = est.model_.branches_[0].predict_distribution
        stage.write(est.model_)


@pytest.mark.parametrize("name", ["ebf_mondrian", "ssf_reg"])
def test_recalibration_from_the_stage_equals_the_driver_model(dask_client, tmp_path, name):
    """The PIT map learnt from the staged shards is the one the in-memory model learns."""
    X, y = _data(name)
    Xc, yc = _data(name, n=900, seed=8)
    reference = ESTIMATORS[name]().fit(X, y).to_local()
    recalibrate(reference, Xc, yc)
    save(reference, tmp_path / "driver")
    est = ESTIMATORS[name]()
    with stage_model(tmp_path / "staged") as stage:
        est.fit(X, y, stage=stage)
        recalibrate(est.model_, Xc, yc, saved=stage.write(est.model_))
        stage.write(est.model_)
    assert est.model_.recalibration_ == reference.recalibration_
    _same_model(tmp_path / "staged", tmp_path / "driver")
    Xt = make_frame(300, seed=10)[FEATURES]
    np.testing.assert_array_equal(load(tmp_path / "staged").predict_quantiles(Xt, [0.1, 0.9]),
                                  reference.predict_quantiles(Xt, [0.1, 0.9]))


def _siblings(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir())


def test_a_stage_left_without_a_head_or_by_an_error_leaves_nothing(dask_client, tmp_path):
    X, y = _data("ebf_mondrian")
    with pytest.raises(RuntimeError, match="has no head"):
        with stage_model(tmp_path / "m") as stage:
            ESTIMATORS["ebf_mondrian"]().fit(X, y, stage=stage)
    with pytest.raises(ValueError, match="boom"):
        with stage_model(tmp_path / "m") as stage:
            ESTIMATORS["ebf_mondrian"]().fit(X, y, stage=stage)
            raise ValueError("boom")
    assert _siblings(tmp_path) == []


def test_a_worker_killed_while_writing_its_shard(tmp_path):
    """A real worker process dies half-way through writing a shard: its task is retried
    elsewhere, the half-written file never becomes part of the model, and the model is the
    driver's, file for file. A fit whose writes keep failing leaves nothing at all."""
    marker = tmp_path / "killed"

    def install(marker: str, always: bool) -> None:  # runs in each worker process
        import ebf.artifact._writer as writer

        original = writer.write_pack

        def dying(f, state, pack):
            if always:
                raise OSError("disk full")
            if not os.path.exists(marker):
                open(marker, "w").close()
                f.write(b"\x93EBFPACK half")
                f.flush()
                os._exit(1)
            return original(f, state, pack)

        writer.write_pack = dying

    X, y = _data("ebf_mondrian")
    out = tmp_path / "out"
    out.mkdir()
    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                      dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        reference = ESTIMATORS["ebf_mondrian"]()
        reference.client = client
        save(reference.fit(X, y).to_local(), tmp_path / "driver")
        client.run(install, str(marker), False)
        est = ESTIMATORS["ebf_mondrian"]()
        est.client = client
        with stage_model(out / "m") as stage:
            est.fit(X, y, stage=stage)
            stage.write(est.model_)
        assert marker.exists()
        _same_model(out / "m", tmp_path / "driver")
        assert sorted(p.name for p in (out / "m" / "shards").iterdir()) == [
            f"{b:05d}.pack" for b in range(4)]

        client.run(install, str(marker), True)
        est = ESTIMATORS["ebf_mondrian"]()
        est.client = client
        with pytest.raises(OSError, match="disk full"):
            with stage_model(out / "n") as stage:
                est.fit(X, y, stage=stage)
                stage.write(est.model_)
    remove_abandoned()  # what tasks still running wrote after the clean-up (as the CLI does)
    assert _siblings(out) == ["m"]
