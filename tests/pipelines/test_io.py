"""Parquet schema checks, reads, atomic writes and the Friedman data generator."""

from __future__ import annotations

import json
import os
from decimal import Decimal

import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from basics.locations import output_kind
from pipelines.io import (
    atomic_output_dir,
    read_dataset,
    read_parquet_metadata,
    write_parquet_atomic,
)
from pipelines.make_data import (
    METADATA_KEY,
    friedman_mean,
    friedman_partition,
    make_friedman,
)
from pipelines.schema import SchemaError, check_schema, inspect_schema

# --------------------------------------------------------------------------- helpers


def _leftovers(parent) -> list[str]:
    """Hidden temporary directories an atomic write could leave behind."""
    return [name for name in os.listdir(parent) if name.startswith(".")]


def _naive_friedman(df: pd.DataFrame) -> np.ndarray:
    """Oracle: Friedman #1 written out from the paper (x1..x5 are x0..x4)."""
    x = [df[f"x{j}"].to_numpy() for j in range(5)]
    return 10 * np.sin(np.pi * x[0] * x[1]) + 20 * (x[2] - 0.5) ** 2 + 10 * x[3] + 5 * x[4]


@pytest.fixture
def flat_file(tmp_path):
    df = pd.DataFrame(
        {
            "a": np.arange(6, dtype=np.float64),
            "b": np.arange(6, dtype=np.int64),
            "s": list("abcabc"),
            "when": pd.date_range("2024-01-01", periods=6),
            "y": np.linspace(0, 1, 6),
        }
    )
    path = tmp_path / "flat.parquet"
    df.to_parquet(path, index=False)
    return path


@pytest.fixture
def hive_dir(tmp_path):
    root = tmp_path / "hive"
    df = pd.DataFrame(
        {
            "v": np.arange(8, dtype=np.float64),
            "w": np.arange(8, dtype=np.float64) * 10,
            "y": np.arange(8, dtype=np.float64) / 8,
            "year": [2013, 2013, 2013, 2014, 2014, 2014, 2015, 2015],
        }
    )
    pq.write_to_dataset(pa.Table.from_pandas(df, preserve_index=False), root, ["year"])
    return root


# --------------------------------------------------------------------------- schema


def test_schema_all_columns_but_the_target(hive_dir):
    features, target = check_schema(hive_dir, "y")
    assert features == ["v", "w", "year"]  # hive partition column last, as Dask reads it
    assert (target.name, target.kind, target.is_discrete) == ("y", "float", False)
    year = inspect_schema(hive_dir)["year"]
    assert year.partition and year.kind == "categorical"


def test_schema_missing_feature_names_it_and_lists_columns(flat_file):
    with pytest.raises(SchemaError) as info:
        check_schema(flat_file, "y", ["a", "zz"])
    message = str(info.value)
    assert "'zz'" in message and "available columns" in message
    assert "'a', 'b', 's', 'when', 'y'" in message
    assert info.value.columns == ["zz"]


def test_schema_missing_target_suggests_close_names(flat_file):
    with pytest.raises(SchemaError, match=r"target column 'Y'.*did you mean 'y'") as info:
        check_schema(flat_file, "Y", ["a"])
    assert info.value.columns == ["Y"]


def test_schema_target_among_features(flat_file):
    with pytest.raises(SchemaError, match=r"target column 'y' is also listed in features"):
        check_schema(flat_file, "y", ["a", "y"])


def test_schema_datetime_column_named_with_the_fix(flat_file):
    with pytest.raises(SchemaError) as info:
        check_schema(flat_file, "y")  # features=None takes 'when' too
    message = str(info.value)
    assert "'when'" in message and "timestamp" in message and "features=[" in message
    assert info.value.columns == ["when"]
    features, _ = check_schema(flat_file, "y", ["a", "b", "s"])  # leaving it out works
    assert features == ["a", "b", "s"]


def test_schema_reports_every_unusable_column(tmp_path):
    table = pa.table(
        {
            "nested": pa.array([[1], [2, 3]]),
            "blob": pa.array([b"a", b"b"]),
            "money": pa.array([Decimal("1.25"), Decimal("2.50")], type=pa.decimal128(5, 2)),
            "cat": pa.array(["u", "v"]).dictionary_encode(),
            "flag": [True, False],
            "y": [0.5, 1.5],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(SchemaError) as info:
        check_schema(tmp_path / "t.parquet", "y")
    assert info.value.columns == ["nested", "blob", "money"]
    assert "3 problems" in str(info.value)
    kinds = {name: c.kind for name, c in inspect_schema(tmp_path / "t.parquet").items()}
    assert kinds == {
        "nested": "nested",
        "blob": "binary",
        "money": "decimal",
        "cat": "categorical",
        "flag": "boolean",
        "y": "float",
    }


def test_schema_of_dataframes_and_bad_arguments(flat_file, tmp_path):
    ddf = dd.read_parquet(flat_file)
    features, target = check_schema(ddf, "b", ["a", "s"])
    assert features == ["a", "s"] and target.kind == "integer" and target.is_discrete
    with pytest.raises(TypeError, match="list of column names"):
        check_schema(flat_file, "y", "a")
    with pytest.raises(FileNotFoundError, match="no Parquet dataset"):
        check_schema(tmp_path / "missing", "y")
    with pytest.raises(SchemaError, match="no feature columns"):
        check_schema(pd.DataFrame({"y": [1.0]}), "y")


# --------------------------------------------------------------------------- reading


def test_read_dataset_projects_columns(flat_file):
    ddf = read_dataset(flat_file, ["y", "a"])
    assert list(ddf.columns) == ["y", "a"]
    df = ddf.compute()
    assert list(df.columns) == ["y", "a"]
    np.testing.assert_array_equal(df["a"].to_numpy(), np.arange(6.0))


def test_read_hive_partitioned_directory(hive_dir):
    ddf = read_dataset(hive_dir, ["v", "year"])
    assert isinstance(ddf["year"].dtype, pd.CategoricalDtype)
    assert ddf["year"].cat.known
    df = ddf.compute()
    assert df["v"].tolist() == list(np.arange(8.0))
    assert df["year"].astype(int).tolist() == [2013] * 3 + [2014] * 3 + [2015] * 2
    filtered = read_dataset(hive_dir, ["v"], filters=[("year", "==", 2014)]).compute()
    assert filtered["v"].tolist() == [3.0, 4.0, 5.0]
    globbed = read_dataset(str(hive_dir / "*" / "*.parquet"), ["v"]).compute()
    assert globbed["v"].tolist() == list(np.arange(8.0))


# --------------------------------------------------------------------------- atomic writes


def test_write_pandas_round_trip_with_metadata(tmp_path):
    df = pd.DataFrame({"mean": np.arange(5.0)[::-1], "q": list("edcba")}, index=[9, 3, 7, 1, 0])
    out = tmp_path / "scores"
    write_parquet_atomic(df, out, metadata={"ebf.model_sha256": "ab12", "ebf.version": "1"})
    back = pd.read_parquet(out)
    assert list(back.columns) == ["mean", "q"]  # write_index=False: no index column
    assert back["mean"].tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]
    assert read_parquet_metadata(out) == {"ebf.model_sha256": "ab12", "ebf.version": "1"}
    assert _leftovers(tmp_path) == []


def test_write_dask_keeps_row_order_across_partitions(tmp_path, dask_client):
    df = pd.DataFrame({"i": np.arange(250), "x": np.random.default_rng(0).random(250)})
    ddf = dd.from_pandas(df, npartitions=12)
    out = tmp_path / "many"
    write_parquet_atomic(ddf, out, metadata={"k": "v"})
    # the marker starts with "_", which every Parquet reader skips
    assert sorted(os.listdir(out)) == ["_ebf_output.json"] + [
        f"part.{i:06d}.parquet" for i in range(12)]
    back = read_dataset(out, None).compute()
    assert back["i"].tolist() == list(range(250))
    assert read_parquet_metadata(out) == {"k": "v"}


def test_write_refuses_existing_output_and_reserved_metadata(tmp_path):
    df = pd.DataFrame({"a": [1.0]})
    out = tmp_path / "o"
    write_parquet_atomic(df, out, metadata={})
    with pytest.raises(FileExistsError, match="overwrite"):
        write_parquet_atomic(df, out, metadata={})
    write_parquet_atomic(pd.DataFrame({"a": [2.0]}), out, metadata={}, overwrite=True)
    assert pd.read_parquet(out)["a"].tolist() == [2.0]
    with pytest.raises(ValueError, match="reserved"):
        write_parquet_atomic(df, tmp_path / "p", metadata={"pandas": "{}"})
    with pytest.raises(TypeError, match="string"):
        write_parquet_atomic(df, tmp_path / "p", metadata={"k": 1})
    assert not (tmp_path / "p").exists() and _leftovers(tmp_path) == []


def _fail_on_partition(part: pd.DataFrame, partition_info=None) -> pd.DataFrame:
    if partition_info is not None and partition_info["number"] == 2:
        raise RuntimeError("injected failure")
    return part


def test_failed_write_leaves_nothing(tmp_path, dask_client):
    ddf = dd.from_pandas(pd.DataFrame({"a": np.arange(40.0)}), npartitions=4)
    bad = ddf.map_partitions(_fail_on_partition, meta=ddf._meta)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="injected failure"):
        write_parquet_atomic(bad, out, metadata={})
    assert not out.exists() and _leftovers(tmp_path) == []
    # with overwrite=True a failure keeps the previous version
    write_parquet_atomic(ddf, out, metadata={"v": "1"})
    with pytest.raises(RuntimeError, match="injected failure"):
        write_parquet_atomic(bad, out, metadata={"v": "2"}, overwrite=True)
    assert read_parquet_metadata(out) == {"v": "1"} and len(pd.read_parquet(out)) == 40
    assert _leftovers(tmp_path) == []


def test_atomic_dir_on_an_fsspec_url():
    import fsspec

    url = "memory://ebf-test-io/out"
    fs = fsspec.filesystem("memory")
    if fs.exists("/ebf-test-io"):
        fs.rm("/ebf-test-io", recursive=True)
    write_parquet_atomic(pd.DataFrame({"a": [1.0, 2.0]}), url, metadata={"k": "v"})
    assert read_parquet_metadata(url) == {"k": "v"}
    assert fs.ls("/ebf-test-io", detail=False) == ["/ebf-test-io/out"]
    with pytest.raises(RuntimeError):
        with atomic_output_dir("memory://ebf-test-io/other"):
            raise RuntimeError("boom")
    assert fs.ls("/ebf-test-io", detail=False) == ["/ebf-test-io/out"]
    fs.rm("/ebf-test-io", recursive=True)


# --------------------------------------------------------------------------- make_friedman


def test_friedman_same_data_for_one_and_two_workers(tmp_path, dask_client):
    kwargs = dict(n_features=6, partition_rows=700, random_state=7)
    make_friedman(tmp_path / "two", 2_000, client=dask_client, **kwargs)
    with (
        distributed.LocalCluster(
            processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as one,
    ):
        make_friedman(tmp_path / "one", 2_000, client=one, **kwargs)
    two = pd.read_parquet(tmp_path / "two")
    pd.testing.assert_frame_equal(two, pd.read_parquet(tmp_path / "one"))
    expected = pd.concat(
        [
            friedman_partition(i, n, n_features=6, random_state=7)
            for i, n in enumerate((700, 700, 600))
        ],
        ignore_index=True,
    )
    pd.testing.assert_frame_equal(two, expected)


def test_friedman_partitions_columns_and_metadata(tmp_path, dask_client):
    seen = []
    info = make_friedman(
        tmp_path / "d",
        10_500,
        n_features=5,
        partition_rows=3_000,
        progress=lambda d, n: seen.append((d, n)),
    )
    assert info.n_partitions == 4 and seen[-1] == (4, 4)
    marker, *files = sorted(os.listdir(tmp_path / "d"))
    assert marker == "_ebf_output.json" and output_kind(tmp_path / "d") == "dataset"
    assert files == [f"part.{i:06d}.parquet" for i in range(4)]
    assert [pq.ParquetFile(tmp_path / "d" / f).metadata.num_rows for f in files] == [3000] * 3 + [
        1500
    ]
    ddf = read_dataset(tmp_path / "d", None)
    assert list(ddf.columns) == ["x0", "x1", "x2", "x3", "x4", "y"]
    assert all(dtype == np.float64 for dtype in ddf.dtypes)
    meta = json.loads(read_parquet_metadata(tmp_path / "d")[METADATA_KEY])
    assert (meta["rows"], meta["partition_rows"], meta["random_state"]) == (10_500, 3_000, 0)
    features, target = check_schema(tmp_path / "d", "y")
    assert features == ["x0", "x1", "x2", "x3", "x4"] and target.kind == "float"
    with pytest.raises(ValueError, match="n_features"):
        make_friedman(tmp_path / "e", 10, n_features=4, client=dask_client)
    with pytest.raises(FileExistsError):
        make_friedman(tmp_path / "d", 10, client=dask_client)


def test_friedman_noise_is_heteroskedastic(tmp_path, dask_client):
    make_friedman(tmp_path / "d", 40_000, n_features=5, partition_rows=10_000, random_state=3)
    df = pd.read_parquet(tmp_path / "d")
    np.testing.assert_allclose(
        friedman_mean(df[[f"x{j}" for j in range(5)]].to_numpy()), _naive_friedman(df)
    )
    residual = df["y"].to_numpy() - _naive_friedman(df)
    high = df["x0"].to_numpy() > 0.5
    ratio = residual[high].var() / residual[~high].var()
    assert 3.4 < ratio < 4.2  # theory: (49/12) / (13/12) = 3.77
    assert stats.levene(residual[high], residual[~high]).pvalue < 1e-12
    # residual / (0.5 + 2 x0) is standard normal
    standardized = residual / (0.5 + 2 * df["x0"].to_numpy())
    assert stats.kstest(standardized, "norm").pvalue > 1e-3


def test_friedman_classification(tmp_path, dask_client):
    make_friedman(
        tmp_path / "c", 30_000, n_features=5, task="classification", partition_rows=10_000
    )
    make_friedman(tmp_path / "r", 30_000, n_features=5, partition_rows=10_000)
    c, r = pd.read_parquet(tmp_path / "c"), pd.read_parquet(tmp_path / "r")
    assert c["y"].dtype == np.int64 and set(c["y"].unique()) == {0, 1, 2}
    pd.testing.assert_frame_equal(c.drop(columns="y"), r.drop(columns="y"))  # same features
    counts = np.bincount(c["y"].to_numpy(), minlength=3)
    assert stats.chisquare(counts).pvalue > 1e-3  # classes about equally frequent
    f_by_class = pd.Series(_naive_friedman(c)).groupby(c["y"]).mean()
    assert f_by_class.is_monotonic_increasing  # ordered classes of f + noise
    meta = json.loads(read_parquet_metadata(tmp_path / "c")[METADATA_KEY])
    assert meta["task"] == "classification" and len(meta["class_thresholds"]) == 2


def test_friedman_failure_leaves_nothing(tmp_path, dask_client, monkeypatch):
    import pipelines.make_data as make_data

    real = make_data._partition_table

    def failing(partition, *args):
        if partition == 1:
            raise RuntimeError("injected failure")
        return real(partition, *args)

    monkeypatch.setattr(make_data, "_partition_table", failing)
    with pytest.raises(RuntimeError, match="injected failure"):
        make_friedman(tmp_path / "d", 4_000, n_features=5, partition_rows=1_000)
    assert not (tmp_path / "d").exists() and _leftovers(tmp_path) == []
