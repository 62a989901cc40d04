"""``ebf train`` / ``ebf retrain`` ``--mlflow-uri``: one MLflow run per job, read back from a
local file store (:mod:`pipelines.tracking`, :mod:`pipelines.cli.tracking`).

The runs hold what ``--json`` prints, never anything else: each test compares the run read
back with ``MlflowClient`` against the command's own JSON. A tracking server that does not
answer costs the run, never the model (exit status 3); missing MLflow or a store that cannot
work fail before any work.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import socket
import sys

import numpy as np
import pandas as pd
import pytest

from pipelines.cli import build_parser, main
from pipelines.cli.config import with_config
from pipelines.cli.failures import TRACKING_FAILED
from pipelines.registry.retrain import EXIT_KEPT
from pipelines.registry.store import Registry
from pipelines.tracking import (
    INSTALL,
    SUMMARY_ARTIFACT,
    RunContent,
    Tracker,
    TrackingError,
    log_run,
    metric_key,
    retrain_run,
    train_run,
)

FAST = ["--n-estimators", "2", "--trunk-leaves", "2", "--quiet", "--n-workers", "1"]


def _data(path, n: int, seed: int):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.random((n, 3)), columns=["a", "b", "c"])
    frame["y"] = 3 * frame["a"] + np.sin(6 * frame["c"]) + rng.normal(0, 0.2, n)
    path.mkdir()
    half = n // 2
    for i, part in enumerate((frame.iloc[:half], frame.iloc[half:])):
        part.to_parquet(path / f"part-{i}.parquet", index=False)
    return str(path)


@pytest.fixture(autouse=True)
def no_telemetry(monkeypatch):
    """MLflow's usage telemetry stays off (it is off under pytest too: belt and braces)."""
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")


@pytest.fixture
def cli(monkeypatch):
    """In-process threads for the local cluster; MLflow 3 opens a file store only when
    asked (MLFLOW_ALLOW_FILE_STORE); an unanswered server is given up at once."""
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")


def _run(argv, capsys) -> tuple[int, dict, str]:
    status = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return status, json.loads(out), err


def _runs(uri: str, experiment: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id])


def _summary(uri: str, run) -> dict:
    from mlflow import MlflowClient

    path = MlflowClient(uri).download_artifacts(run.info.run_id, SUMMARY_ARTIFACT)
    with open(path) as f:
        return json.load(f)


def _closed_port() -> str:
    """A local address nothing listens on: connections to it are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _valid_key(key: str) -> bool:
    """MLflow's rule for parameter and metric names on every system."""
    return (re.fullmatch(r"[/\w.\- ]+", key) is not None and posixpath.normpath(key) == key
            and not key.startswith(("/", "..")) and len(key) <= 250)


def test_train_logs_one_run_with_what_json_reports(tmp_path, cli, capsys):
    pytest.importorskip("mlflow")
    data, out = _data(tmp_path / "data", 600, 0), tmp_path / "model"
    uri = (tmp_path / "mlruns").as_uri()
    status, body, err = _run(["train", data, "--target", "y", *FAST, "--out", str(out),
                              "--mlflow-uri", uri, "--mlflow-experiment", "friedman"], capsys)
    assert status == 0, err
    (run,) = _runs(uri, "friedman")
    assert run.info.status == "FINISHED" and run.info.run_name == "train model"
    assert body["mlflow"] == {"tracking_uri": uri, "experiment": "friedman", "logged": True,
                              "experiment_id": run.info.experiment_id,
                              "run_id": run.info.run_id}
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    assert tags["ebf.model_url"] == body["model_url"] == str(out)
    assert body["model"] == str(out)  # the --out, not the metadata's kind
    assert tags["ebf.model_hash"] == body["model_hash"] and tags["ebf.command"] == "train"
    assert tags["ebf.class"] == body["class"] == "EmpiricalBayesianForestRegressor"
    assert {k: params[k] for k in ("n_estimators", "trunk_max_leaves", "random_state",
                                   "target", "task", "rows", "n_features", "data",
                                   "calibration/method")} == {
        "n_estimators": "2", "trunk_max_leaves": "2", "random_state": "0", "target": "y",
        "task": "regression", "rows": str(body["rows"]), "n_features": "3", "data": data,
        "calibration/method": "auto"}
    expected = {"branches": body["branches"],
                **{f"seconds/{k}": v for k, v in body["timings"].items()},
                **{f"calibration/ebf/{k}": v for k, v in body["calibration"]["ebf"].items()}}
    assert metrics == pytest.approx(expected, rel=1e-12)
    assert all(_valid_key(k) for k in [*params, *metrics])
    # the summary is the JSON the command printed (but the run's own id); no model files
    assert _summary(uri, run) == {k: v for k, v in body.items() if k != "mlflow"}
    from mlflow import MlflowClient

    assert [a.path for a in MlflowClient(uri).list_artifacts(run.info.run_id)] == [
        SUMMARY_ARTIFACT]
    # the text report names the run
    assert main(["train", data, "--target", "y", *FAST, "--out", str(out), "--overwrite",
                 "--mlflow-uri", uri, "--mlflow-experiment", "friedman"]) == 0
    second = next(r for r in _runs(uri, "friedman") if r.info.run_id != run.info.run_id)
    assert f"MLflow: logged as run {second.info.run_id} of experiment 'friedman'" in (
        capsys.readouterr().out)


def test_an_unanswered_server_costs_the_run_not_the_model(tmp_path, cli, capsys):
    pytest.importorskip("mlflow")
    from ebf.artifact import load

    data, out = _data(tmp_path / "data", 600, 0), tmp_path / "model"
    server = _closed_port()
    status, body, err = _run(["train", data, "--target", "y", *FAST, "--out", str(out),
                              "--mlflow-uri", server], capsys)
    assert status == TRACKING_FAILED == 3
    assert load(out).predict(pd.DataFrame({"a": [0.5], "b": [0.5], "c": [0.5]})).shape == (1,)
    assert body["model_hash"] and body["mlflow"]["tracking_uri"] == server
    assert "MLflow could not log the run" in body["mlflow"]["error"]
    line = err.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, err
    assert line.startswith("ebf train: error: MLflow could not log the run at " + server)
    assert f"the model is written ({out}), only its MLflow run is missing" in line


def test_retrain_runs_once_per_version(tmp_path, cli, capsys):
    pytest.importorskip("mlflow")
    windows = [_data(tmp_path / name, 1500, i) for i, name in enumerate(("jan", "feb"))]
    reg_url, uri = str(tmp_path / "registry"), (tmp_path / "mlruns").as_uri()
    tracked = ["--mlflow-uri", uri]
    status, first, err = _run(["retrain", reg_url, windows[0], "--target", "y", *FAST,
                               *tracked], capsys)
    assert status == 0, err
    (run,) = _runs(uri, "ebf")
    reg = Registry(reg_url)
    assert first["model_url"] == reg.model_path(1)
    assert {k: run.data.tags[k] for k in ("ebf.decision", "ebf.action", "ebf.registry_version",
                                          "ebf.model_url", "ebf.registry")} == {
        "ebf.decision": "trained", "ebf.action": "train", "ebf.registry_version": "1",
        "ebf.model_url": reg.model_path(1), "ebf.registry": reg.url}
    assert run.data.tags["ebf.model_hash"] == reg.record(1)["model_hash"]
    scores = first["record"]["metrics"]["challenger"]
    assert {k: v for k, v in run.data.metrics.items() if k.startswith("challenger/")} == (
        pytest.approx({f"challenger/{k}": v for k, v in scores.items()}, rel=1e-12))
    assert run.data.params["train_options/n_estimators"] == "2"
    assert run.data.params["drift_correction"] == "holm"

    # the server is down: version 2 is written all the same, the exit status says 3
    down = ["--mlflow-uri", _closed_port()]
    status, second, err = _run(["retrain", reg_url, windows[1], *FAST, *down], capsys)
    assert status == TRACKING_FAILED and second["version"] == 2 and not second["reused"]
    assert reg.versions() == [1, 2] and "error" in second["mlflow"]
    assert "logs the version it made without retraining" in err
    assert len(_runs(uri, "ebf")) == 1

    # the re-run on the same inputs trains nothing and logs version 2
    status, again, err = _run(["retrain", reg_url, windows[1], *FAST, *tracked], capsys)
    assert status == (EXIT_KEPT if second["decision"] == "kept" else 0), err
    assert again["reused"] and again["mlflow"]["logged"] and reg.versions() == [1, 2]
    run2 = next(r for r in _runs(uri, "ebf") if r.info.run_id == again["mlflow"]["run_id"])
    record = second["record"]
    assert run2.data.tags["ebf.decision"] == second["decision"] == record["decision"]
    assert run2.data.tags["ebf.action"] == record["action"] in ("update", "refit")
    drift = record["drift"]
    metrics = run2.data.metrics
    assert metrics["drift/share_pvalue"] == pytest.approx(drift["share_pvalue"], rel=1e-12)
    assert metrics["drift/failing_splits"] == len(drift["failing"])
    tested = [s["probability"] for s in drift["splits"] if s["status"] == "counted"]
    assert metrics["drift/min_split_probability"] == pytest.approx(min(tested), rel=1e-12)
    for who in ("champion", "challenger"):
        for name, value in record["metrics"][who].items():
            assert metrics[f"{who}/{name}"] == pytest.approx(value, rel=1e-12)
    for name, check in record["gate"]["checks"].items():
        assert metrics[f"gate/{name}/limit"] == pytest.approx(check["limit"], rel=1e-12)
    assert _summary(uri, run2)["record"] == record

    # and once logged, never twice
    status, third, _ = _run(["retrain", reg_url, windows[1], *FAST, *tracked], capsys)
    assert third["mlflow"]["logged"] is False
    assert third["mlflow"]["run_id"] == run2.info.run_id and len(_runs(uri, "ebf")) == 2


def _no_work(monkeypatch):
    """Fail the test if a command gets as far as its Dask job."""
    def job(*args, **kwargs):
        raise AssertionError("the job started before the tracking options were checked")

    monkeypatch.setattr("pipelines.cli.models.job", job)
    monkeypatch.setattr("pipelines.cli.retrain.job", job)


def _commands(tmp_path, uri: str) -> dict[str, list[str]]:
    data = _data(tmp_path / "data", 100, 0)
    return {"train": ["train", data, "--target", "y", "--out", str(tmp_path / "model"),
                      "--mlflow-uri", uri, "--quiet"],
            "retrain": ["retrain", str(tmp_path / "reg"), data, "--target", "y",
                        "--mlflow-uri", uri, "--quiet"]}


@pytest.mark.parametrize("command", ["train", "retrain"])
def test_without_mlflow_the_command_fails_before_any_work(tmp_path, command, monkeypatch,
                                                          capsys):
    _no_work(monkeypatch)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    argv = _commands(tmp_path, (tmp_path / "mlruns").as_uri())[command]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and INSTALL in err and "--mlflow-uri" in err, err
    assert sorted(os.listdir(tmp_path)) == ["data"]  # no model, registry or store


@pytest.mark.parametrize("command", ["train", "retrain"])
@pytest.mark.parametrize("uri, message", [
    ("nosuch://host/x", "MLflow cannot open the tracking store 'nosuch://host/x'"),
    ("{tmp}/data/mlruns", "it is inside the training data"),
    ("{tmp}/data", "refusing to write the MLflow tracking store"),
])
def test_a_store_that_cannot_work_fails_before_any_work(tmp_path, command, uri, message, cli,
                                                        monkeypatch, capsys):
    pytest.importorskip("mlflow")
    _no_work(monkeypatch)
    argv = _commands(tmp_path, uri.format(tmp=tmp_path))[command]
    message = message.replace("the training data", "the training data" if command == "train"
                              else "the new data")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert sorted(os.listdir(tmp_path)) == ["data"]
    assert sorted(os.listdir(tmp_path / "data")) == ["part-0.parquet", "part-1.parquet"]


def test_the_experiment_needs_the_uri_and_the_config_file_sets_both(tmp_path, monkeypatch,
                                                                    capsys):
    _no_work(monkeypatch)
    data = _data(tmp_path / "data", 100, 0)
    assert main(["train", data, "--target", "y", "--out", str(tmp_path / "m"),
                 "--mlflow-experiment", "x", "--quiet"]) == 2
    assert "give --mlflow-uri URI too" in capsys.readouterr().err
    config = tmp_path / "ebf.toml"
    config.write_text('[all]\nmlflow-uri = "http://mlflow:5000"\n'
                      '[retrain]\nmlflow-experiment = "nightly"\n')
    parser = build_parser()
    for command, experiment in (("train", None), ("retrain", "nightly")):
        argv = {"train": ["train", "d", "--target", "y", "--out", "m"],
                "retrain": ["retrain", "reg", "d"]}[command]
        args = parser.parse_args(with_config(parser, [*argv, "--config", str(config)]))
        assert (args.mlflow_uri, args.mlflow_experiment) == ("http://mlflow:5000", experiment)
    # [all] reaches only the commands that take the option
    argv = with_config(parser, ["predict", "m", "d", "--out", "p", "--config", str(config)])
    assert "--mlflow-uri" not in argv


def test_registering_needs_the_uri_and_a_name_before_any_work(tmp_path, monkeypatch, capsys):
    _no_work(monkeypatch)
    data = _data(tmp_path / "data", 100, 0)
    base = ["retrain", str(tmp_path / "reg"), data, "--target", "y", "--quiet"]
    assert main([*base, "--mlflow-register", "nightly"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--mlflow-register needs an MLflow tracking " \
        "store: give --mlflow-uri URI too" in err, err
    assert main([*base, "--mlflow-register", " ", "--mlflow-uri", "http://mlflow:5000"]) == 2
    assert "the registered model's name is empty" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["data"]
    # train logs runs only: registering is the retrain flow's (its champion)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", data, "--target", "y", "--out", "m",
                                   "--mlflow-register", "x"])


# --------------------------------------------------------------------- what a run holds


def _record(**extra):
    return {"decision": "kept", "action": "refit", "reason": "split x1 fails",
            "metrics": {"champion": {"n": 10, "rmse": 1.0, "nlpd": 2.0},
                        "challenger": {"n": 10, "rmse": 1.1, "nlpd": float("nan")}},
            "gate": {"checks": {"rmse": {"limit": 1.01, "ok": False}}},
            "drift": {"decision": "refit", "failing": ["", "L"], "share_pvalue": 0.5,
                      "share_statistic": 1.2, "replicated_gain": None, "n_rows": 90,
                      "splits": [{"status": "counted", "probability": 0.01},
                                 {"status": "counted", "probability": 0.002},
                                 {"status": "too few rows", "probability": None}]},
            "timings": {"fit": 3.0}, "seconds": 4.0, "key": "k1", "model_hash": "h1",
            "name": "ebf", "lineage": {"parent": 1, "new_data": {"path": "feb", "rows": 100},
                                       "holdout": {"fraction": 0.1}, "code_version": "0.1",
                                       "params": {"target": "y", "task": "regression",
                                                  "features": ["a", "b"],
                                                  "train_options": {"branch": "mondrian",
                                                                    "trunk_leaves": None}}},
            **extra}


def test_run_contents_are_valid_mlflow_keys_and_leave_out_what_is_not_a_number():
    run = retrain_run({"version": 2, "decision": "kept", "action": "refit",
                       "model_url": "/reg/models/ebf/v0002/model", "record": _record()},
                      registry="/reg/models/ebf",
                      options={"tolerance": {"rmse": 0.01}, "holdout": None})
    assert run.name == "ebf v2"
    assert run.metrics == {
        "champion/n": 10.0, "champion/rmse": 1.0, "champion/nlpd": 2.0, "challenger/n": 10.0,
        "challenger/rmse": 1.1, "gate/rmse/limit": 1.01, "drift/min_split_probability": 0.002,
        "drift/tested_splits": 2.0, "drift/failing_splits": 2.0, "drift/share_statistic": 1.2,
        "drift/share_pvalue": 0.5, "drift/n_rows": 90.0, "seconds/fit": 3.0,
        "seconds/total": 4.0}
    assert run.params["train_options/branch"] == "mondrian"
    assert "train_options/trunk_leaves" not in run.params and "holdout" not in run.params
    assert run.params["tolerance/rmse"] == "0.01" and run.params["parent"] == "1"
    assert run.tags["ebf.decision"] == "kept" and run.tags["ebf.drift"] == "refit"
    assert run.same == {"ebf.key": "k1", "ebf.registry": "/reg/models/ebf",
                        "ebf.model_hash": "h1"}
    assert all(_valid_key(k) for k in [*run.params, *run.metrics])
    assert all(isinstance(v, str) for v in [*run.params.values(), *run.tags.values()])
    # version 1: no champion, gate or drift
    first = retrain_run({"version": 1, "decision": "trained", "action": "train",
                         "model_url": "m", "record": _record(gate=None, drift=None, metrics={
                             "champion": None, "challenger": {"n": 5, "rmse": 2.0}})},
                        registry="r")
    assert first.metrics == {"challenger/n": 5.0, "challenger/rmse": 2.0, "seconds/fit": 3.0,
                             "seconds/total": 4.0}
    assert "ebf.drift" not in first.tags
    # a training run with its baseline
    trained = train_run({
        "model_url": "s3://b/models/ebf", "model_hash": "h", "class": "C", "branches": 4,
        "data": "s3://b/data", "target": "y", "task": "regression", "rows": 9,
        "n_partitions": 2, "features": ["a", "b"], "ebf_version": "0.1",
        "params": {"branch": "mondrian", "branch_params": {"lifetime": None, "k": 2}},
        "timings": {"fit": 2.0, "bin_edges": 0.5},
        "calibration": {"method": "recent", "fraction": 0.1, "seconds": 0.25,
                        "ebf": {"knots": 6, "max_deviation": 0.04},
                        "ssf": {"knots": 5, "max_deviation": 0.05}},
        "baseline": {"model_url": "s3://b/models/ssf", "subsamples": 4,
                     "timings": {"fit": 1.0}}})
    assert trained.name == "train ebf" and trained.same == {}
    assert trained.params == {"data": "s3://b/data", "target": "y", "task": "regression",
                              "rows": "9", "n_partitions": "2", "n_features": "2",
                              "ebf_version": "0.1", "branch": "mondrian",
                              "branch_params/k": "2", "calibration/method": "recent",
                              "calibration/fraction": "0.1"}
    assert trained.metrics == {"branches": 4.0, "seconds/fit": 2.0, "seconds/bin_edges": 0.5,
                               "calibration/seconds": 0.25, "calibration/ebf/knots": 6.0,
                               "calibration/ebf/max_deviation": 0.04,
                               "calibration/ssf/knots": 5.0,
                               "calibration/ssf/max_deviation": 0.05,
                               "baseline/subsamples": 4.0, "baseline/seconds/fit": 1.0}
    assert trained.tags == {"ebf.command": "train", "ebf.model_url": "s3://b/models/ebf",
                            "ebf.model_hash": "h", "ebf.class": "C",
                            "ebf.baseline_url": "s3://b/models/ssf"}
    assert metric_key("seconds", "baseline trunk") == "seconds/baseline trunk"
    assert metric_key("a:b", "", ".") == "a_b/_/_"
    assert all(_valid_key(metric_key(*parts)) for parts in
               (("x", ".."), ("é", "q(0.5)"), ("", ""), ("a/b",)))


class _FailingClient:
    """An MLflow client whose server fails while the run is logged."""

    def __init__(self):
        self.ended = []

    def get_experiment_by_name(self, name):
        return type("E", (), {"experiment_id": "7", "lifecycle_stage": "active"})()

    def create_run(self, experiment_id, run_name=None):
        return type("R", (), {"info": type("I", (), {"run_id": "r1"})()})()

    def log_batch(self, run_id, metrics=(), params=(), tags=()):
        raise ConnectionError("the server went away\n(while logging)")

    def set_terminated(self, run_id, status):
        self.ended.append((run_id, status))


def test_a_run_half_logged_is_marked_failed_and_reported_on_one_line():
    pytest.importorskip("mlflow")
    client = _FailingClient()
    content = train_run({"model_url": "/m", "model_hash": "h", "class": "C", "branches": 2,
                         "timings": {"fit": 1.0}, "features": [], "baseline": None})
    assert isinstance(content, RunContent) and content.same == {}
    with pytest.raises(TrackingError, match=r"^MLflow could not log the run at http://x: the "
                       r"server went away \(while logging\)$"):
        log_run(Tracker("http://x", "ebf", client), content)
    assert client.ended == [("r1", "FAILED")]
