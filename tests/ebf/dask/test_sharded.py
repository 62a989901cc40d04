"""Sharded prediction (``ebf.dask.sharded``): every branch from its own shard, the same bits
as the broadcast path and the local model, whatever the workers and the partitions."""

from __future__ import annotations

import os

import dask
import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client, LocalCluster, WorkerPlugin

from ebf import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
)
from ebf.artifact import open_model, save
from ebf.dask import cache, sharded
from ebf.dask._predict import predict_frame
from tests.ebf.dask.test_dask import FEATURES, make_frame

QUANTILES = (0.05, 0.5, 0.95)

MODELS = {
    "ebf_reg": lambda: EmpiricalBayesianForestRegressor(n_estimators=3, trunk_max_leaves=4,
                                                        random_state=0),
    "ebf_clf": lambda: EmpiricalBayesianForestClassifier(n_estimators=3, trunk_max_leaves=3,
                                                         random_state=1),
    "ssf_reg": lambda: SubsampleForestRegressor(n_estimators=3, n_subsamples=3, random_state=2),
    "ssf_clf": lambda: SubsampleForestClassifier(n_estimators=2, n_subsamples=2, random_state=3),
    "ebf_mondrian": lambda: EmpiricalBayesianForestRegressor(
        n_estimators=3, trunk_max_leaves=3, branch="mondrian", random_state=4),
}


def _fit(name: str, df: pd.DataFrame):
    model = MODELS[name]()
    target = df["y"] if "reg" in name or "mondrian" in name else (df["y"] > df["y"].median())
    return model.fit(df[FEATURES], target)


def _local_frame(model, X: pd.DataFrame) -> pd.DataFrame:
    """What the local model predicts, through its separate methods."""
    cols = {}
    if hasattr(model, "classes_"):
        proba = model.predict_proba(X)
        for j, c in enumerate(model.classes_):
            cols[f"proba_{c}"] = proba[:, j]
        cols["predicted"] = model.predict(X)
    else:
        cols["mean"], cols["std"] = model.predict(X, return_std=True)
        q = model.predict_quantiles(X, QUANTILES)
        for j, name in enumerate(["q05", "q50", "q95"]):
            cols[name] = q[:, j]
    if hasattr(model, "trunk_"):
        cols["branch"] = model.apply(X)
    return pd.DataFrame(cols, index=X.index)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    df = make_frame(1500, seed=3)
    root = tmp_path_factory.mktemp("sharded")
    return {name: (save(_fit(name, df), root / name), _fit(name, df)) for name in MODELS}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("npartitions", [1, 3, 7])
def test_sharded_equals_broadcast_equals_local(dask_client, saved, name, npartitions):
    path, model = saved[name]
    test = make_frame(700, seed=11)
    test.index = test.index * 3 + 5  # a non-default index must come back as it was
    X = dd.from_pandas(test[FEATURES], npartitions=npartitions)
    expected = _local_frame(model, test[FEATURES])
    reader = open_model(path)
    got = {s: predict_frame(reader, X, QUANTILES, strategy=s).compute()
           for s in ("sharded", "broadcast")}
    for frame in got.values():
        pd.testing.assert_frame_equal(frame, expected, check_exact=True)
    assert predict_frame(path, X, QUANTILES).npartitions == npartitions


def test_same_bits_with_one_worker_and_small_groups(saved):
    path, model = saved["ebf_mondrian"]
    test = make_frame(500, seed=12)
    X = dd.from_pandas(test[FEATURES], npartitions=5)
    with LocalCluster(processes=False, n_workers=1, threads_per_worker=1,
                      dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        frame = sharded.predict_sharded(open_model(path), X, QUANTILES, group=2)
        got = client.compute(frame).result()
    pd.testing.assert_frame_equal(got, _local_frame(model, test[FEATURES]), check_exact=True)


def test_empty_partitions_and_empty_branches(dask_client, saved):
    path, model = saved["ebf_reg"]
    test = make_frame(300, seed=13)
    test = test[test["a"] > test["a"].quantile(0.8)]  # some branches get no row
    parts = [test.iloc[:0][FEATURES], test[FEATURES].iloc[:150], test.iloc[:0][FEATURES],
             test[FEATURES].iloc[150:]]
    X = dd.from_delayed([dask.delayed(p) for p in parts], meta=test[FEATURES].iloc[:0])
    assert len(set(model.apply(test[FEATURES]))) < model.trunk_.n_leaves_
    got = predict_frame(open_model(path), X, QUANTILES, strategy="sharded").compute()
    pd.testing.assert_frame_equal(got, _local_frame(model, test[FEATURES]), check_exact=True)


def test_driver_reads_only_the_head(dask_client, saved, monkeypatch):
    path, _ = saved["ebf_reg"]
    read = []
    real = sharded.ModelReader.load_part

    def spy(self, i):
        read.append(i)
        return real(self, i)

    monkeypatch.setattr(sharded.ModelReader, "load_part", spy)
    X = dd.from_pandas(make_frame(200, seed=1)[FEATURES], npartitions=2)
    frame = predict_frame(open_model(path), X, QUANTILES, strategy="sharded")
    assert read == []  # building the graph loads no branch
    cache.clear_cache()
    frame.compute()
    assert sorted(set(read)) == list(range(open_model(path).n_parts))  # the workers did


def test_schema_errors_come_before_any_work(dask_client, saved):
    path, _ = saved["ebf_reg"]
    X = dd.from_pandas(make_frame(100)[FEATURES[1:]], npartitions=2)
    with pytest.raises(ValueError, match=FEATURES[0]):
        predict_frame(open_model(path), X, QUANTILES, strategy="sharded")


def test_a_worker_killed_during_sharded_prediction(saved, tmp_path):
    """A real worker process dies inside a branch task; the output is complete and equal."""
    marker = tmp_path / "killed"

    class KillOnce(WorkerPlugin):  # defined here so that it is pickled by value
        def __init__(self, path: str) -> None:
            self.path = path

        def transition(self, key, start, finish, **kwargs):
            if (finish == "executing" and "ebf-part-" in str(key)
                    and not os.path.exists(self.path)):
                open(self.path, "w").close()
                os._exit(1)

    path, model = saved["ebf_mondrian"]
    test = make_frame(600, seed=14)
    X = dd.from_pandas(test[FEATURES], npartitions=4)
    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                      dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        client.register_plugin(KillOnce(str(marker)))
        got = client.compute(sharded.predict_sharded(open_model(path), X, QUANTILES)).result()
    assert marker.exists()
    pd.testing.assert_frame_equal(got, _local_frame(model, test[FEATURES]), check_exact=True)


def _peak_cached_bytes() -> int:
    return cache.cache_peak_bytes()


def test_a_memory_limit_below_the_model_chooses_shards_and_holds_one(saved):
    """Workers whose memory limit is below the whole model but above its largest shard:
    the chooser picks sharded prediction, which succeeds, and no worker ever holds more
    cached branches than the cache's share of its limit (here: one shard)."""
    path, model = saved["ebf_mondrian"]
    reader = open_model(path)
    limit = (max(reader.part_bytes) + reader.nbytes) // 2
    assert max(reader.part_bytes) < limit < reader.nbytes
    test = make_frame(800, seed=15)
    X = dd.from_pandas(test[FEATURES], npartitions=6)
    # the limit is far below what a Python process needs: let the nanny report it, not act
    off = {f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause",
                                                              "terminate")}
    with dask.config.set(off), LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, memory_limit=limit,
            dashboard_address=":0") as cluster, Client(cluster, set_as_default=False) as client:
        assert sharded.choose_strategy(reader, client) == "sharded"
        got = client.compute(predict_frame(reader, X, QUANTILES, client=client)).result()
        peaks = client.run(_peak_cached_bytes)
    pd.testing.assert_frame_equal(got, _local_frame(model, test[FEATURES]), check_exact=True)
    # what each part holds once it has predicted (its posterior too), as the cache counts it
    held = []
    for i in range(reader.n_parts):
        part = reader.load_part(i)
        part.predict_distribution(reader.head().encoder.transform(test[FEATURES].iloc[:5]))
        held.append(cache.object_nbytes(part))
    bound = max(cache.CACHE_FRACTION * limit, max(held))
    assert 0 < max(peaks.values()) <= bound < sum(held)


def test_an_ebf_is_sharded_a_small_ssf_and_old_formats_broadcast(dask_client, saved,
                                                                   tmp_path):
    path, model = saved["ebf_reg"]
    assert sharded.choose_strategy(open_model(path), dask_client) == "sharded"
    assert sharded.choose_strategy(open_model(saved["ssf_reg"][0]), dask_client) == "broadcast"
    old = open_model(save(model, tmp_path / "v1", format_version=1))
    assert sharded.choose_strategy(old, dask_client) == "broadcast"
    test = make_frame(200, seed=16)
    X = dd.from_pandas(test[FEATURES], npartitions=2)
    pd.testing.assert_frame_equal(predict_frame(old, X, QUANTILES).compute(),
                                  _local_frame(model, test[FEATURES]), check_exact=True)


def test_predict_only_fits_compact_branches_on_the_workers(dask_client):
    """``predict_only=True``: every Mondrian branch is compacted in its task, so workers and
    the driver only ever hold the compact form; the model equals ``compact()`` of a full fit
    and the Dask fit equals the local one."""
    from ebf.dask import DaskEmpiricalBayesianForestRegressor

    df = make_frame(900, seed=21)
    params = dict(n_estimators=2, trunk_max_leaves=3, branch="mondrian", random_state=6)
    full = EmpiricalBayesianForestRegressor(**params).fit(df[FEATURES], df["y"])
    local = EmpiricalBayesianForestRegressor(**params, predict_only=True).fit(df[FEATURES],
                                                                              df["y"])
    dist = DaskEmpiricalBayesianForestRegressor(**params, predict_only=True).fit(
        dd.from_pandas(df[FEATURES], npartitions=3), dd.from_pandas(df["y"], npartitions=3))
    assert local.compact_ and not full.compact_ and dist.to_local().compact_
    test = make_frame(300, seed=22)[FEATURES]
    expected = _local_frame(full.compact(), test)
    for model in (local, dist.to_local()):
        pd.testing.assert_frame_equal(_local_frame(model, test), expected, check_exact=True)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _paused_messages(client: Client) -> list[str]:
    return [msg for logs in client.get_worker_logs().values() for _, msg in logs
            if "Pausing worker" in msg]


def test_a_worker_limit_just_above_one_part_completes_without_pausing(tmp_path):
    """Workers with Dask's memory management on and a limit of their idle size plus twice
    (the largest part as it predicts + a partition's rows): sharded prediction completes,
    no worker pauses, and the numbers are the local model's. The cache must not keep parts
    Dask cannot spill: a worker paused for them would never run the task that frees them.
    """
    df = make_frame(60_000, seed=31)
    model = EmpiricalBayesianForestRegressor(n_estimators=8, trunk_max_leaves=4,
                                             branch="mondrian", random_state=7)
    model.fit(df[FEATURES], df["y"])
    reader = open_model(save(model, tmp_path / "m"))
    test = make_frame(40_000, seed=32)
    X = dd.from_pandas(test[FEATURES], npartitions=8)
    A = reader.head().encoder.transform(test[FEATURES].iloc[:5000])
    held = []
    for i in range(reader.n_parts):
        part = reader.load_part(i)
        part.predict_distribution(A)
        held.append(cache.object_nbytes(part))
    rows = test.memory_usage(deep=True).sum() // X.npartitions * 4  # frame, encoded, outputs
    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                      dashboard_address=":0", memory_limit="4GB") as cluster, \
            Client(cluster, set_as_default=False) as client:
        # the workers' own size once they have imported and compiled what prediction uses
        client.compute(sharded.predict_sharded(reader, X.partitions[:1], QUANTILES)).result()
        client.run(cache.clear_cache)
        idle = max(client.run(_rss).values())
    pause = dask.config.get("distributed.worker.memory.pause")
    limit = int((idle + 2 * (max(held) + rows)) / pause)
    assert cache.CACHE_FRACTION * limit > 2 * max(held)  # room for more than one part
    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                      dashboard_address=":0", memory_limit=limit) as cluster, \
            Client(cluster, set_as_default=False) as client:
        got = client.compute(sharded.predict_sharded(reader, X, QUANTILES)).result(timeout=150)
        paused = _paused_messages(client)
    assert paused == []
    pd.testing.assert_frame_equal(got, _local_frame(model, test[FEATURES]), check_exact=True)
