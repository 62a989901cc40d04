"""Object storage for real: data, models, predictions and a registry on an S3 API served on
localhost by moto's server mode (the S3 protocol over HTTP, through s3fs, as against AWS).

The endpoint reaches every reader through ``AWS_ENDPOINT_URL`` (honoured by botocore, so by
s3fs and by the CLI without any option); the CLI's clusters are threads here, so they see it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("s3fs", reason="needs s3fs (pip install 'ebf[s3]')")
moto_server = pytest.importorskip("moto.server", reason="needs moto[server] (the test extra)")

from ebf import EmpiricalBayesianForestRegressor  # noqa: E402
from ebf.artifact import load, open_model, save  # noqa: E402
from pipelines.cli import main  # noqa: E402

BUCKET = "ebf-test"
FEATURES = ["x0", "x1", "x2"]


@pytest.fixture(scope="module")
def s3():
    """``s3://ebf-test``, served on localhost for this module."""
    import fsspec

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
        mp.setenv("EBF_LOCAL_PROCESSES", "0")
        mp.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
        fsspec.filesystem("s3", skip_instance_cache=True).mkdir(BUCKET)
        fsspec.config.conf.pop("s3", None)
        yield f"s3://{BUCKET}"
    server.stop()


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.random((n, 3)), columns=FEATURES)
    df["y"] = 5 * df["x0"] + 2 * (df["x1"] > 0.5) + rng.normal(0, 0.3, n)
    return df


def _write(df: pd.DataFrame, url: str, parts: int) -> None:
    for i, rows in enumerate(np.array_split(np.arange(len(df)), parts)):
        df.iloc[rows].to_parquet(f"{url}/part.{i}.parquet", index=False)


def test_train_predict_evaluate_and_a_registry_on_s3(s3, capsys):
    train, test = _frame(3000, 0), _frame(800, 1)
    _write(train, f"{s3}/data/train", 3)
    _write(test, f"{s3}/data/test", 2)
    model, pred = f"{s3}/models/m", f"{s3}/predictions/p"
    assert main(["train", f"{s3}/data/train", "--target", "y", "--branch", "mondrian",
                 "--n-estimators", "3", "--trunk-leaves", "3", "--out", model, "--quiet",
                 "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    reader = open_model(model)  # the workers wrote the shards to S3, the driver the head
    assert trained["model_hash"] == reader.model_hash and reader.n_parts == 3

    assert main(["predict", model, f"{s3}/data/test", "--out", pred, "--quiet"]) == 0
    capsys.readouterr()
    got = pd.read_parquet(pred)
    local = load(model)
    np.testing.assert_array_equal(got["mean"].to_numpy(), local.predict(test[FEATURES]))
    assert main(["predict", model, f"{s3}/data/test", "--out", pred, "--quiet"]) == 2
    assert "--overwrite" in capsys.readouterr().err  # an existing output, on S3 too

    assert main(["evaluate", model, f"{s3}/data/test", "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 800

    registry = f"{s3}/registry"
    assert main(["retrain", registry, f"{s3}/data/train", "--target", "y",
                 "--n-estimators", "2", "--trunk-leaves", "2", "--quiet", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert (made["version"], made["decision"]) == (1, "trained")
    assert main(["registry", "list", registry, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["current"] == 1 and len(listing["versions"]) == 1
    assert main(["predict", f"{registry}@1", f"{s3}/data/test", "--out",
                 f"{s3}/predictions/from-registry", "--quiet"]) == 0


def test_save_and_load_a_model_on_s3(s3):
    """The README's ``save(model, "s3://bucket/...")``: the same model back, and a failed
    save leaves nothing at the destination."""
    df = _frame(1500, 2)
    model = EmpiricalBayesianForestRegressor(n_estimators=3, trunk_max_leaves=3,
                                             random_state=0).fit(df[FEATURES], df["y"])
    url = save(model, f"{s3}/saved/ebf")
    back = load(url)
    np.testing.assert_array_equal(back.predict(df[FEATURES]), model.predict(df[FEATURES]))
    with pytest.raises(FileExistsError):
        save(model, url)
    import fsspec

    fs = fsspec.filesystem("s3")
    before = sorted(fs.ls(f"{BUCKET}/saved"))
    with pytest.raises(TypeError):
        save(object(), f"{s3}/saved/broken")
    assert sorted(fs.ls(f"{BUCKET}/saved", refresh=True)) == before


def test_an_output_in_a_missing_bucket_fails_before_any_work_and_makes_no_bucket(s3, capsys):
    """``--out s3://typo-bucket/...``: one line naming the bucket and the fix, before the data
    is read (the data here does not exist either: the output is checked first), and no
    bucket is made, by the CLI's writers (model, predictions, registry) nor by ``save``."""
    import fsspec

    fs = fsspec.filesystem("s3")
    typo = "s3://typo-bucket"
    for argv, what in [
        (["train", f"{s3}/no-data", "--target", "y", "--out", f"{typo}/models/m"],
         "the --out model"),
        (["predict", f"{s3}/no-model", f"{s3}/no-data", "--out", f"{typo}/p"],
         "the --out predictions"),
        (["retrain", f"{typo}/registry", f"{s3}/no-data", "--target", "y"],
         "the model registry"),
    ]:
        assert main([*argv, "--quiet"]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert (f"cannot write {what} to 's3://typo-bucket/" in err
                and "the bucket 'typo-bucket' does not exist" in err
                and "ebf never creates buckets; create it first (e.g. aws s3 mb "
                "s3://typo-bucket) or fix the name" in err), err
    df = _frame(300, 5)
    model = EmpiricalBayesianForestRegressor(n_estimators=2, trunk_max_leaves=2,
                                             random_state=0).fit(df[FEATURES], df["y"])
    with pytest.raises(ValueError, match="the bucket 'typo-bucket' does not exist"):
        save(model, f"{typo}/saved")
    fs.invalidate_cache()
    assert not fs.exists("typo-bucket")
    assert "typo-bucket" not in {p.rstrip("/") for p in fs.ls("", refresh=True)}


@pytest.fixture
def processes(s3, tmp_path):
    """A scheduler and two workers started as separate processes from a scheduler file;
    they reach the S3 API through the environment, as workers of a real cluster would."""
    import os

    from tests.pipelines.processes import process_cluster

    with process_cluster(tmp_path, dict(os.environ)) as address:
        yield address


def test_the_cli_on_separate_scheduler_and_worker_processes_with_data_on_s3(
        s3, processes, capsys):
    """`--scheduler-file`: the workers are other processes, so the branches they fit reach
    the model only through S3 (each task writes its shard there)."""
    train, test = _frame(2500, 3), _frame(600, 4)
    _write(train, f"{s3}/remote/train", 2)
    _write(test, f"{s3}/remote/test", 2)
    model, pred = f"{s3}/remote/model", f"{s3}/remote/pred"
    cluster = ["--scheduler-file", processes, "--quiet"]
    assert main(["train", f"{s3}/remote/train", "--target", "y", "--branch", "mondrian",
                 "--n-estimators", "3", "--trunk-leaves", "3", "--out", model, *cluster]) == 0
    assert main(["predict", model, f"{s3}/remote/test", "--out", pred, *cluster]) == 0
    capsys.readouterr()
    np.testing.assert_array_equal(pd.read_parquet(pred)["mean"].to_numpy(),
                                  load(model).predict(test[FEATURES]))
    assert main(["evaluate", model, f"{s3}/remote/test", "--json", *cluster]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 600
