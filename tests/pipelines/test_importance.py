"""Permutation importance: the local function, the Dask job (equal to a loop over the
partitions written by hand) and ``ebf importance``."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from ebf import BayesianForestClassifier, EmpiricalBayesianForestRegressor, save
from ebf.importance import importance_table, permutation_importance, permuted_losses
from pipelines.cli import main
from pipelines.importance import permutation_importance as job_importance

FEATURES = ["a", "b", "c"]


def _thirds(frame):
    return [frame.iloc[i * len(frame) // 3:(i + 1) * len(frame) // 3] for i in range(3)]


def _frame(n, seed):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=FEATURES)
    return X.assign(y=4.0 * X["a"] + np.sin(3.0 * X["b"]) + rng.normal(0, 0.1, n))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved Mondrian EBF (no impurity importances) and three held-out Parquet files."""
    root = tmp_path_factory.mktemp("importance")
    train = _frame(1500, 0)
    model = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=3,
                                             trunk_max_leaves=2, random_state=0)
    model.fit(train[FEATURES], train["y"])
    path = str(save(model, root / "model", metadata={"target": "y"}))
    test = _frame(900, 1)
    test.loc[5, "y"] = np.nan  # rows without a target are not scored
    os.makedirs(root / "test")
    for i, part in enumerate(_thirds(test)):
        part.to_parquet(root / "test" / f"part.{i}.parquet")
    return model, path, str(root / "test"), test


def test_local_importance_ranks_the_signal_and_repeats_with_the_seed(saved):
    model, _, _, test = saved
    rows = test.dropna()
    table = permutation_importance(model, rows, rows["y"], n_repeats=3, random_state=4)
    assert table["feature"].tolist()[:2] == ["a", "b"]
    assert table.set_index("feature").loc["c", "importance"] < 0.05 * table["importance"][0]
    again = permutation_importance(model, rows, rows["y"], n_repeats=3, random_state=4)
    pd.testing.assert_frame_equal(table, again)
    nlpd = permutation_importance(model, rows, rows["y"], scoring="nlpd", n_repeats=1)
    assert nlpd["feature"][0] == "a"
    with pytest.raises(ValueError, match="log_loss.*regression|not a loss of a regression"):
        permutation_importance(model, rows, rows["y"], scoring="log_loss")


def test_classifier_importance_uses_the_log_loss():
    train, test = _frame(800, 2), _frame(400, 3)
    label = lambda f: np.where(f["a"] > 0.5, "hi", "lo")  # noqa: E731
    clf = BayesianForestClassifier(n_estimators=5, random_state=0).fit(train[FEATURES],
                                                                      label(train))
    table = permutation_importance(clf, test[FEATURES], label(test), n_repeats=2)
    assert table["feature"][0] == "a" and table["importance"][0] > 0.3
    err = permutation_importance(clf, test[FEATURES], label(test), scoring="error")
    assert 0.2 < err["importance"][0] <= 1.0  # shuffling a flips about half the labels


@pytest.mark.parametrize("max_rows", [None, 400])
def test_dask_job_equals_the_partitions_scored_by_hand(saved, dask_client, max_rows):
    model, path, data, test = saved
    res = job_importance(path, data, n_repeats=2, max_rows=max_rows, random_state=7,
                         client=dask_client)
    share = 1.0 if max_rows is None else max_rows / len(test)
    sums = 0
    for i, part in enumerate(_thirds(test)):
        rng = np.random.default_rng(np.random.SeedSequence(7, spawn_key=(i,)))
        rows = part.loc[(rng.random(len(part)) < share) & part["y"].notna().to_numpy()]
        sums = sums + permuted_losses(model, rows[FEATURES], rows["y"].to_numpy(), "crps", 2,
                                      rng)
    want = importance_table(sums, FEATURES, 2)
    pd.testing.assert_frame_equal(res["importances"], want, rtol=1e-10)
    assert res["n"] == want.attrs["n"] and res["scoring"] == "crps"
    assert (res["n"] == len(test) - 1) if max_rows is None else (300 < res["n"] < 500)


def test_cli_importance_json_and_errors(saved, capsys, monkeypatch):
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    _, path, data, _ = saved
    assert main(["importance", path, data, "--n-repeats", "1", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ebf_output"] == "importance" and out["n"] == 899
    assert [r["feature"] for r in out["importances"]][:2] == ["a", "b"]
    with pytest.raises(SystemExit) as exc:
        main(["importance", path, data, "--n-repeats", "0"])
    assert exc.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err
    assert main(["importance", path, data, "--scoring", "log_loss", "--quiet"]) != 0
    assert "not a loss of a regression model" in capsys.readouterr().err


def test_evaluate_importance_in_the_text_json_and_report(saved, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    _, path, data, _ = saved
    report = tmp_path / "r.html"
    assert main(["evaluate", path, data, "--importance", "--report", str(report),
                 "--target-unit", "metres", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "permutation importance: increase of the mean crps" in out
    html = report.read_text()
    assert 'id="importance"' in html and "increase of mean crps" in html
    assert html.index(">a<") < html.index(">c<")  # most important first, in the table
    assert main(["evaluate", path, data, "--importance", "--json", "--quiet"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["importance"]["importances"][0]["feature"] == "a"
