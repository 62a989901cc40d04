"""Missing values through the CLI: ``ebf train`` with CART branches learns where nulls in a
numeric feature go, predicts and evaluates rows with them; learners that cannot take them
refuse the data from its footers, before any row is read, naming the column, the count and
the fix."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from pipelines.cli import main


@pytest.fixture
def local_threads(monkeypatch):
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)


def _write(path, n, seed):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.random((n, 3)), columns=["a", "b", "c"])
    missing = rng.random(n) < 0.2
    df.loc[missing, "b"] = np.nan  # stored as Parquet nulls
    df["y"] = 3.0 * df["a"] + np.where(missing, 5.0, 0.0) + rng.normal(0, 0.1, n)
    os.makedirs(path)
    for i in range(2):
        df.iloc[i * n // 2:(i + 1) * n // 2].to_parquet(os.path.join(path, f"part.{i}.parquet"))
    return df


def test_cart_branches_train_predict_and_evaluate_with_nulls(tmp_path, capsys, local_threads):
    _write(tmp_path / "train", 4000, 0)
    test = _write(tmp_path / "test", 1000, 1)
    model = str(tmp_path / "m")
    assert main(["train", str(tmp_path / "train"), "--target", "y", "--out", model,
                 "--branch", "bayesian", "--n-estimators", "10", "--quiet"]) == 0
    assert main(["predict", model, str(tmp_path / "test"), "--out", str(tmp_path / "p"),
                 "--quiet"]) == 0
    pred = pd.read_parquet(tmp_path / "p")
    missing = test["b"].isna().to_numpy()
    assert np.abs(pred["mean"].to_numpy()[missing] - (3.0 * test["a"] + 5.0)[missing]).mean() < 0.1
    capsys.readouterr()
    assert main(["evaluate", model, str(tmp_path / "test"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["rmse"] < 0.15


def test_mondrian_branches_refuse_nulls_from_the_footers(tmp_path, capsys, local_threads):
    _write(tmp_path / "train", 400, 0)
    out = tmp_path / "m"
    status = main(["train", str(tmp_path / "train"), "--target", "y", "--out", str(out),
                   "--branch", "mondrian"])
    err = capsys.readouterr().err
    assert status != 0 and not out.exists()
    assert "'b': " in err and "null" in err and "--branch bayesian or random" in err
