"""The Dask layer (``ebf.dask``): the distributed fit equals the local fit (paper Sec. 4-5).

Every test fits the same rows locally (on ``X.compute()``) and on the cluster and compares
the whole fitted state (``model.estimator_state``) and the predictions, bit for bit. With a
float target the trunk's node statistics are sums reassociated across partitions, so they
may differ in the last bits; everything else (structure, thresholds, branches, predictions)
is identical. An integer-valued target makes even those sums exact.
"""

from __future__ import annotations

import os
import pickle

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster, WorkerPlugin

from ebf import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
    Trunk,
    binning,
)
from ebf.artifact import estimator_state, load, save
from ebf.dask import (
    BranchMemoryError,
    DaskEmpiricalBayesianForestClassifier,
    DaskEmpiricalBayesianForestRegressor,
    DaskSubsampleForestClassifier,
    DaskSubsampleForestRegressor,
)
from ebf.dask.client import NoClientError, gather, wait_for
from ebf.dask.histograms import TRUNK_LEVEL, sample_bin_edges
from ebf.dask.inputs import check_inputs, encode, summarize
from ebf.features import FeatureEncoder

FEATURES = ["a", "b", "colour", "flag", "size"]

# local class -> Dask class
DASK_OF = {
    EmpiricalBayesianForestRegressor: DaskEmpiricalBayesianForestRegressor,
    EmpiricalBayesianForestClassifier: DaskEmpiricalBayesianForestClassifier,
    SubsampleForestRegressor: DaskSubsampleForestRegressor,
    SubsampleForestClassifier: DaskSubsampleForestClassifier,
}


def make_frame(n: int = 1500, seed: int = 0, integer_target: bool = False) -> pd.DataFrame:
    """Numeric, string, bool and category features; a regression and a class target."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "a": rng.random(n),
        "b": rng.normal(size=n),
        "colour": rng.choice(["red", "green", "blue"], n),
        "flag": rng.random(n) < 0.3,
        "size": pd.Categorical(rng.choice(["S", "M", "L"], n), categories=["S", "M", "L"]),
    })
    f = 6 * df["a"] + 2 * (df["colour"] == "red") + df["b"] + 1.5 * df["flag"]
    y = f + rng.normal(size=n)
    df["y"] = np.round(y) if integer_target else y
    df["label"] = np.where(f > 5, "high", np.where(f > 2.5, "mid", "low"))
    return df


def assert_same_state(a, b, loose: tuple[str, ...] = (), path: str = "") -> None:
    """Nested dicts / lists / arrays equal; keys in ``loose`` only to 1e-12 relative."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            assert_same_state(a[k], b[k], loose, f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            assert_same_state(u, v, loose, f"{path}[{i}]")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if path.rsplit(".", 1)[-1] in loose:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=path)
        else:
            assert a.shape == b.shape and (a.dtype.kind == b.dtype.kind), path
            np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), path
    else:
        assert a == b, (path, a, b)


def assert_same_predictions(model, other, X: pd.DataFrame) -> None:
    if hasattr(model, "predict_proba"):
        np.testing.assert_array_equal(model.predict_proba(X), other.predict_proba(X))
        np.testing.assert_array_equal(model.predict(X), other.predict(X))
    else:
        for u, v in zip(model.predict(X, return_std=True), other.predict(X, return_std=True),
                        strict=True):
            np.testing.assert_array_equal(u, v)
        np.testing.assert_array_equal(model.predict_quantiles(X, (0.05, 0.5, 0.95)),
                                      other.predict_quantiles(X, (0.05, 0.5, 0.95)))


def fit_both(local_cls, df: pd.DataFrame, npartitions: int, client, target: str = "y",
             **params):
    """(Dask model, local model fit on the same rows in the same order)."""
    ddf = dd.from_pandas(df, npartitions=npartitions)
    model = DASK_OF[local_cls](client=client, **params).fit(ddf[FEATURES], ddf[target])
    pdf = ddf.compute()
    local = local_cls(**params).fit(pdf[FEATURES], pdf[target])
    return model, local, ddf


# --------------------------------------------------------------------- bin edges, trunk


@pytest.mark.parametrize("n", [3000, 200_700])
def test_bin_edges_equal_the_local_ones(dask_client, n):
    """Below 200k rows all rows are gathered; above, exactly the rows the local draw takes."""
    rng = np.random.default_rng(n)
    df = pd.DataFrame({"u": rng.normal(size=n), "v": rng.integers(0, 300, n).astype(float),
                       "t": rng.random(n)})
    ddf = dd.from_pandas(df, npartitions=5)
    frame, layout = check_inputs(ddf[["u", "v"]], ddf["t"], None, "regression")
    summary = summarize(dask_client, frame, layout)
    data = encode(dask_client, frame, layout, summary)
    edges = sample_bin_edges(dask_client, data, 255)
    expected = binning.bin_edges(ddf[["u", "v"]].compute().to_numpy(), 255)
    for e, x in zip(edges, expected, strict=True):
        np.testing.assert_array_equal(e, x)


@pytest.mark.parametrize("integer_target", [True, False])
@pytest.mark.parametrize("local_cls, target", [
    (EmpiricalBayesianForestRegressor, "y"), (EmpiricalBayesianForestClassifier, "label")])
def test_distributed_trunk_equals_local_trunk(dask_client, local_cls, target, integer_target):
    df = make_frame(2500, seed=1, integer_target=integer_target)
    model, local, ddf = fit_both(local_cls, df, 4, dask_client, target, n_estimators=1,
                                 trunk_max_leaves=8, random_state=0)
    t_dask, t_local = model.trunk_, local.trunk_
    assert isinstance(t_dask, Trunk) and t_dask.n_leaves_ == t_local.n_leaves_ == 8
    loose = () if integer_target or target == "label" else ("stats", "weight", "gain")
    assert_same_state(t_dask._get_state(), t_local._get_state(), loose=loose)
    assert t_dask.export_text() == t_local.export_text()
    X = ddf[FEATURES].compute()
    np.testing.assert_array_equal(model.to_local().apply(X), local.apply(X))
    # the dashboard groups tasks by key prefix: the trunk's levels show as the trunk
    prefixes = dask_client.run_on_scheduler(lambda dask_scheduler: list(
        dask_scheduler.task_prefixes))
    assert TRUNK_LEVEL in prefixes and not any(p.startswith("ebf-hist") for p in prefixes)


# ------------------------------------------------------------------------------ parity


@pytest.mark.parametrize("branch", ["bayesian", "mondrian", "smc"])
@pytest.mark.parametrize("local_cls, target", [
    (EmpiricalBayesianForestRegressor, "y"), (EmpiricalBayesianForestClassifier, "label")])
def test_ebf_equals_local_ebf(dask_client, tmp_path, local_cls, target, branch):
    df = make_frame(1500, seed=2)
    model, local, ddf = fit_both(local_cls, df, 3, dask_client, target, n_estimators=4,
                                 branch=branch, trunk_max_leaves=5, random_state=7)
    got = model.to_local()
    assert type(got) is local_cls
    # calibrated by default: the same held-out groups, so the same map, on the cluster
    assert got.calibration_ == local.calibration_ and local.calibration_["method"] == "folds"
    assert_same_state(estimator_state(got), estimator_state(local),
                      loose=("stats", "weight", "gain"))
    X_test = make_frame(400, seed=3)[FEATURES]
    assert_same_predictions(got, local, X_test)
    # the shared artifact: save / load the distributed fit like any local model
    assert_same_predictions(load(save(got, tmp_path / "m")), local, X_test)
    timings = model.fit_timings_
    assert {"summary", "encode", "bin_edges", "trunk", "route", "branches", "fit"} <= set(timings)


@pytest.mark.parametrize("missing", [0.0, 0.15])
@pytest.mark.parametrize("splitter", ["hist", "exact"])
def test_ebf_branch_splitter_equals_local_ebf(dask_client, splitter, missing):
    """Bayesian branches of either splitter (``branch_params``) are the local ones, with
    missing values in a feature too (trunk and branches learn where they go)."""
    df = make_frame(1500, seed=12)
    df.loc[np.random.default_rng(0).random(len(df)) < missing, "b"] = np.nan
    params = dict(n_estimators=3, trunk_max_leaves=4, random_state=13,
                  branch_params={"splitter": splitter, "max_bins": 32})
    model, local, _ = fit_both(EmpiricalBayesianForestRegressor, df, 3, dask_client, **params)
    got = model.to_local()
    forests = [b for b in got.branches_ if hasattr(b, "splitter")]
    assert len(forests) == 4 and all(b.splitter == splitter for b in forests)
    assert_same_state(estimator_state(got), estimator_state(local),
                      loose=("stats", "weight", "gain"))
    assert_same_predictions(got, local, make_frame(300, seed=3)[FEATURES])


def test_ebf_empirical_leaves_equal_local_ebf(dask_client, tmp_path):
    """Empirical leaves (``branch_params``) fit on the workers are the local ones, and their
    knots survive the sharded artifact."""
    df = make_frame(1200, seed=14)
    params = dict(n_estimators=3, trunk_max_leaves=3, random_state=15,
                  branch_params={"leaf_model": "empirical", "leaf_knots": 4})
    model, local, _ = fit_both(EmpiricalBayesianForestRegressor, df, 3, dask_client, **params)
    got = model.to_local()
    forests = [b for b in got.branches_ if hasattr(b, "forest_")]
    assert forests and all(b.forest_.knot_offsets.size for b in forests)
    assert_same_state(estimator_state(got), estimator_state(local),
                      loose=("stats", "weight", "gain"))
    X_test = make_frame(300, seed=3)[FEATURES]
    assert_same_predictions(got, local, X_test)
    assert_same_predictions(load(save(got, tmp_path / "m")), local, X_test)


@pytest.mark.parametrize("npartitions", [1, 4])
def test_ebf_with_bart_branches_equals_local_ebf(dask_client, npartitions):
    """BART branches (thesis Ch. 4) fit on the workers are the local ones, bit for bit."""
    df = make_frame(1200, seed=8)
    params = dict(n_estimators=5, branch="bart", trunk_max_leaves=4, random_state=9,
                  branch_params={"n_iter": 30, "burn_in": 10, "thin": 2})
    model, local, _ = fit_both(EmpiricalBayesianForestRegressor, df, npartitions, dask_client,
                               **params)
    got = model.to_local()
    assert_same_state(estimator_state(got), estimator_state(local),
                      loose=("stats", "weight", "gain"))
    assert_same_predictions(got, local, make_frame(300, seed=3)[FEATURES])


@pytest.mark.parametrize("npartitions", [1, 3, 7])
def test_same_model_whatever_the_partitioning(dask_client, npartitions):
    df = make_frame(1200, seed=4, integer_target=True)
    model, local, _ = fit_both(EmpiricalBayesianForestRegressor, df, npartitions, dask_client,
                               n_estimators=3, trunk_max_leaves=6, random_state=3)
    assert local.calibration_["rows"] == len(df)  # every row held out once, whatever the parts
    assert_same_state(estimator_state(model.to_local()), estimator_state(local))


def test_same_model_with_one_worker(dask_client):
    df = make_frame(1200, seed=4, integer_target=True)
    ddf = dd.from_pandas(df, npartitions=3)
    params = dict(n_estimators=3, trunk_max_leaves=6, random_state=3)
    two = DaskEmpiricalBayesianForestRegressor(**params).fit(ddf[FEATURES], ddf["y"])
    with LocalCluster(processes=False, n_workers=1, threads_per_worker=1,
                      dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        one = DaskEmpiricalBayesianForestRegressor(client=client, **params)
        one.fit(ddf[FEATURES], ddf["y"])
        # neither the client nor handles to its workers travel with the model: the pickle
        # holds the branches
        copy = pickle.loads(pickle.dumps(one))
        assert one.client is client and copy.client is None
    assert_same_state(estimator_state(copy.to_local()), estimator_state(two.to_local()))
    with pytest.raises(NoClientError, match="closed.*to_local"):  # lost with the cluster
        one.to_local()


@pytest.mark.parametrize("local_cls, target", [
    (SubsampleForestRegressor, "y"), (SubsampleForestClassifier, "label")])
def test_ssf_equals_local_ssf(dask_client, local_cls, target):
    df = make_frame(1300, seed=5)
    model, local, _ = fit_both(local_cls, df, 4, dask_client, target, n_estimators=3,
                               n_subsamples=3, random_state=11)
    assert type(model.to_local()) is local_cls
    assert_same_state(estimator_state(model.to_local()), estimator_state(local))
    np.testing.assert_array_equal(model.subsample_sizes_, [434, 433, 433])
    test = make_frame(300, seed=6)[FEATURES]
    assert_same_predictions(model.to_local(), local, test)
    out = model.predict_frame(dd.from_pandas(test, npartitions=2)).compute()
    if target == "y":
        assert list(out.columns) == ["mean", "std", "q05", "q50", "q95"]
        np.testing.assert_array_equal(out["mean"], local.predict(test))
    else:
        assert list(out.columns) == ["proba_high", "proba_low", "proba_mid", "predicted"]
        np.testing.assert_array_equal(out["predicted"], local.predict(test))


def test_empty_partitions_fit_and_predict(dask_client):
    df = make_frame(1500, seed=8).sort_values("a").reset_index(drop=True)
    ddf = dd.from_pandas(df, npartitions=6)
    kept = ddf[ddf["a"] > 0.4]  # the first partitions become empty
    lengths = kept.map_partitions(len).compute().tolist()
    assert 0 in lengths and sum(lengths) > 0
    params = dict(n_estimators=3, trunk_max_leaves=4, random_state=0)
    model = DaskEmpiricalBayesianForestRegressor(**params).fit(kept[FEATURES], kept["y"])
    pdf = kept.compute()
    local = EmpiricalBayesianForestRegressor(**params).fit(pdf[FEATURES], pdf["y"])
    assert_same_state(estimator_state(model.to_local()), estimator_state(local),
                      loose=("stats", "weight", "gain"))
    out = model.predict_frame(kept[FEATURES]).compute()
    assert len(out) == len(pdf)
    np.testing.assert_array_equal(out["mean"], local.predict(pdf[FEATURES]))


def test_sample_weight_equals_local(dask_client):
    df = make_frame(1200, seed=18)
    df["w"] = np.random.default_rng(18).exponential(size=len(df))
    ddf = dd.from_pandas(df, npartitions=3)
    params = dict(n_estimators=3, trunk_max_leaves=4, random_state=2)
    model = DaskEmpiricalBayesianForestRegressor(**params)
    model.fit(ddf[FEATURES], ddf["y"], sample_weight=ddf["w"])
    pdf = ddf.compute()
    local = EmpiricalBayesianForestRegressor(**params).fit(pdf[FEATURES], pdf["y"],
                                                           sample_weight=pdf["w"])
    assert_same_state(estimator_state(model.to_local()), estimator_state(local),
                      loose=("stats", "weight", "gain"))


def test_encoder_equals_local_fit_when_partitions_have_other_categories(dask_client):
    """Unknown categories differing by partition: their union in order of appearance."""
    parts = [
        pd.DataFrame({"c": pd.Categorical(["b", "a", "b"], categories=["b", "a"]),
                      "s": ["x", None, "y"], "t": [1.0, 2.0, 3.0]}),
        pd.DataFrame({"c": pd.Categorical(["z", "a"], categories=["z", "a", "q"]),
                      "s": ["y", "y"], "t": [1.0, 2.0]}),
    ]
    ddf = dd.from_delayed([dask.delayed(p) for p in parts], meta=parts[0].iloc[:0],
                          verify_meta=False)
    frame, layout = check_inputs(ddf[["c", "s"]], ddf["t"], None, "regression")
    encoder = summarize(dask_client, frame, layout).encoder
    expected = FeatureEncoder().fit(ddf[["c", "s"]].compute())
    assert_same_state(encoder._get_state(), expected._get_state())
    assert encoder.categories_[0].tolist() == ["b", "a", "z", "q"]


# -------------------------------------------------------------------------- prediction


def test_predict_frame_columns_index_and_order(dask_client):
    df = make_frame(1500, seed=9)
    model, local, _ = fit_both(EmpiricalBayesianForestRegressor, df, 3, dask_client,
                               n_estimators=3, trunk_max_leaves=4, random_state=0)
    test = make_frame(500, seed=10)
    test.index = pd.Index([f"r{i}" for i in np.random.default_rng(0).permutation(500)])
    dtest = dd.from_pandas(test, npartitions=4, sort=False)
    lazy = model.predict_frame(dtest[FEATURES], quantiles=(0.1, 0.5, 0.975))
    assert list(lazy.columns) == ["mean", "std", "q10", "q50", "q97_5", "branch"]
    out = lazy.compute()
    assert out.index.equals(test.index)
    mean, std = local.predict(test[FEATURES], return_std=True)
    np.testing.assert_array_equal(out["mean"], mean)
    np.testing.assert_array_equal(out["std"], std)
    np.testing.assert_array_equal(out[["q10", "q50", "q97_5"]],
                                  local.predict_quantiles(test[FEATURES], (0.1, 0.5, 0.975)))
    np.testing.assert_array_equal(out["branch"], local.apply(test[FEATURES]))
    series = model.predict(dtest[FEATURES]).compute()
    assert series.index.equals(test.index)
    np.testing.assert_array_equal(series, mean)


def test_predict_frame_classifier_and_branches_without_rows(dask_client):
    df = make_frame(1500, seed=12)
    model, local, _ = fit_both(EmpiricalBayesianForestClassifier, df, 3, dask_client, "label",
                               n_estimators=3, trunk_max_leaves=4, random_state=0)
    test = make_frame(600, seed=13)
    only = test[local.apply(test[FEATURES]) == 0]  # every other branch gets zero rows
    assert len(only) > 0
    out = model.predict_frame(dd.from_pandas(only, npartitions=2)[FEATURES]).compute()
    assert list(out.columns) == ["proba_high", "proba_low", "proba_mid", "predicted", "branch"]
    np.testing.assert_array_equal(out.iloc[:, :3], local.predict_proba(only[FEATURES]))
    np.testing.assert_array_equal(out["predicted"], local.predict(only[FEATURES]))
    assert (out["branch"] == 0).all() and out.index.equals(only.index)
    classes = model.predict(dd.from_pandas(only, npartitions=2)[FEATURES]).compute()
    np.testing.assert_array_equal(classes, local.predict(only[FEATURES]))


# ---------------------------------------------------------------------------- errors


def test_partition_with_all_missing_target_is_an_error_with_the_count(dask_client):
    df = make_frame(900, seed=14)
    ddf = dd.from_pandas(df, npartitions=3)
    ddf = ddf.assign(y=ddf["y"].map_partitions(
        lambda s, partition_info=None: s * np.nan if partition_info["number"] == 1 else s,
        meta=ddf["y"]._meta))
    model = DaskEmpiricalBayesianForestRegressor(n_estimators=2, random_state=0)
    with pytest.raises(ValueError, match=r"'y' has 300 missing .* partition\(s\) \[1\] "
                                         r"\(partition\(s\) \[1\] entirely missing\)"):
        model.fit(ddf[FEATURES], ddf["y"])
    assert not hasattr(model, "model_")


def test_schema_errors_name_the_column(dask_client):
    df = make_frame(300, seed=15)
    df["when"] = pd.Timestamp("2020-01-01") + pd.to_timedelta(np.arange(300), "D")
    df["mixed"] = pd.Series([1, "x"] * 150, dtype=object)
    ddf = dd.from_pandas(df, npartitions=2)
    model = DaskEmpiricalBayesianForestRegressor(n_estimators=2, random_state=0)
    with pytest.raises(TypeError, match="'when'"):
        model.fit(ddf[[*FEATURES, "when"]], ddf["y"])
    with pytest.raises(ValueError, match="target column 'y' is also among"):
        model.fit(ddf[[*FEATURES, "y"]], ddf["y"])
    with dask.config.set({"dataframe.convert-string": False}):  # keep the object column
        mixed = dd.from_pandas(df, npartitions=2)
    with pytest.raises(TypeError, match="'mixed'"):
        model.fit(mixed[[*FEATURES, "mixed"]], mixed["y"])
    holes = df.copy()
    holes.loc[[3, 200], "b"] = np.nan
    dholes = dd.from_pandas(holes, npartitions=2)
    mondrian = DaskEmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2)
    with pytest.raises(ValueError, match=r"'b': 2 NaN.*branch='bayesian' or 'random'"):
        mondrian.fit(dholes[FEATURES], dholes["y"])
    model.fit(ddf[FEATURES], ddf["y"])
    with pytest.raises(ValueError, match=r"lacks 1 column\(s\) seen at fit: \['colour'\]"):
        model.predict_frame(ddf[["a", "b", "flag", "size"]])


def test_branch_memory_sizes_the_trunk(dask_client):
    df = make_frame(2000, seed=16, integer_target=True)
    ddf = dd.from_pandas(df, npartitions=3)
    params = dict(n_estimators=2, random_state=0)
    model = DaskEmpiricalBayesianForestRegressor(branch_memory="100kB", **params)
    model.fit(ddf[FEATURES], ddf["y"])
    limit = model.max_branch_rows_
    assert 0 < limit < 2000 / 5
    assert model.branch_sizes_.max() <= limit and model.trunk_.n_leaves_ > 5
    # the local twin, refit with the parameters it carries, is the same model
    local = model.to_local()
    pdf = ddf.compute()
    again = type(local)(**local.get_params()).fit(pdf[FEATURES], pdf["y"])
    assert_same_state(estimator_state(again), estimator_state(local))
    tight = DaskEmpiricalBayesianForestRegressor(branch_memory="100kB", trunk_max_leaves=3,
                                                 **params)
    with pytest.raises(BranchMemoryError, match="trunk_max_leaves is fixed") as failed:
        tight.fit(ddf[FEATURES], ddf["y"])
    # the advice is the workers' layout: one thread each, so no fewer threads to run
    assert "The workers run one thread each" in str(failed.value)
    assert "fewer threads" not in str(failed.value)
    with pytest.raises(ValueError, match="branch_memory must be a positive"):
        DaskEmpiricalBayesianForestRegressor(branch_memory="lots").fit(ddf[FEATURES], ddf["y"])


# ------------------------------------------------------------- a worker dies mid-branch


def test_waits_use_the_given_client_never_the_default(monkeypatch):
    """``gather`` / ``wait_for`` follow the futures on their own client's event loop.

    ``distributed.as_completed`` otherwise takes the *default* client's loop: with a client
    made ``set_as_default=False`` that is another client's loop (the waits can hang) or none.
    """
    import distributed.client

    def no_default():
        raise AssertionError("the default client was consulted")

    with LocalCluster(processes=False, n_workers=1, threads_per_worker=1,
                      dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        monkeypatch.setattr(distributed.client, "default_client", no_default)
        seen = []
        futures = client.map(lambda i: i * i, range(5), pure=False)
        assert gather(client, futures, lambda done, total: seen.append((done, total))) == [
            0, 1, 4, 9, 16]
        assert seen == [(i, 5) for i in range(6)]
        wait_for(client, client.map(lambda i: i, range(3), pure=False))
        with pytest.raises(ZeroDivisionError):
            wait_for(client, [client.submit(lambda: 1 / 0, pure=False)])


def test_fit_survives_a_worker_killed_during_a_branch(tmp_path):
    """A real worker process dies inside a branch task; the fit ends with the same model."""
    marker = tmp_path / "killed"

    class KillOnce(WorkerPlugin):  # defined here so that it is pickled by value
        def __init__(self, path: str) -> None:
            self.path = path

        def transition(self, key, start, finish, **kwargs):
            if (finish == "executing" and str(key).startswith("ebf-branch-")
                    and not os.path.exists(self.path)):
                open(self.path, "w").close()
                os._exit(1)

    df = make_frame(1200, seed=17, integer_target=True)
    ddf = dd.from_pandas(df, npartitions=4)
    params = dict(n_estimators=3, trunk_max_leaves=4, random_state=5)
    pdf = ddf.compute()
    local = EmpiricalBayesianForestRegressor(**params).fit(pdf[FEATURES], pdf["y"])
    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                      dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        client.register_plugin(KillOnce(str(marker)))
        model = DaskEmpiricalBayesianForestRegressor(client=client, **params)
        model.fit(ddf[FEATURES], ddf["y"])
        fitted = model.to_local()  # the branches live on the workers: gather them here
    assert marker.exists()
    assert_same_state(estimator_state(fitted), estimator_state(local))
