"""``pipelines.registry.retrain`` and ``ebf retrain``: version 1, update vs refit by the drift
check, the gate, lineage, idempotent re-runs, concurrent runs and killed runs."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from pipelines.cli import main
from pipelines.registry.retrain import DEFAULT_TOLERANCES, EXIT_KEPT, gate, retrain
from pipelines.registry.store import Registry, RegistryBusyError

OPTIONS = {"n_estimators": 3, "trunk_leaves": 3, "calibrate": "recent"}


def _window(root, name, n, seed, planted=False, files=2, shift=0.0):
    """Friedman-like rows: y depends on x0 through the root split; ``planted`` changes the
    relation where x1 > 0.5 so that x1 splits the root better; ``shift`` is added to y (no
    split moves, every prediction is off)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = 4 * (X[:, 0] > 0.5) + np.sin(6 * X[:, 2]) + 0.3 * rng.normal(size=n)
    if planted:
        y = np.where(X[:, 1] > 0.5, y + 8 * (X[:, 3] > 0.5) - 4 * (X[:, 0] > 0.5), y)
    df = pd.DataFrame(X, columns=["x0", "x1", "x2", "x3"]).assign(y=y + shift)
    path = os.path.join(root, name)
    os.makedirs(path)
    bounds = np.linspace(0, n, files + 1).astype(int)
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        df.iloc[a:b].to_parquet(os.path.join(path, f"part.{i}.parquet"), index=False)
    return path


@pytest.fixture
def windows(tmp_path):
    return {
        "jan": _window(tmp_path, "jan", 4000, 0),
        "feb": _window(tmp_path, "feb", 3000, 1),
        "mar": _window(tmp_path, "mar", 3000, 2, planted=True),
    }


def _listing(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


def test_version_1_update_refit_and_lineage(tmp_path, windows, dask_client):
    reg_url = str(tmp_path / "registry")
    first = retrain(reg_url, windows["jan"], target="y", train_options=OPTIONS,
                    client=dask_client)
    assert (first.version, first.decision, first.action, first.exit_code) == (1, "trained",
                                                                              "train", 0)
    reg = Registry(reg_url)
    assert reg.current() == 1
    lineage = first.record["lineage"]
    assert lineage["parent"] is None and lineage["code_version"]
    assert lineage["data"][0]["rows"] == 4000 and len(lineage["data"][0]["files"]) == 2
    assert lineage["params"]["target"] == "y"
    assert lineage["params"]["train_options"]["branch"] == "mondrian"
    assert first.record["metrics"]["challenger"]["n"] == 400  # the most recent 10%

    second = retrain(reg_url, windows["feb"], client=dask_client)
    assert second.version == 2 and second.action == "update", second.record["reason"]
    assert second.record["drift"]["decision"] == "update"
    assert second.record["drift"]["correction"] == "holm"  # the family-wise default
    assert second.record["lineage"]["parent"] == 1
    assert [d["rows"] for d in second.record["lineage"]["data"]] == [4000, 3000]
    checks = second.record["gate"]["checks"]
    assert set(checks) == {"rmse", "nlpd", "max_calibration_gap", "max_one_sided_gap"}
    assert (reg.current() == 2) == (second.decision == "promoted")
    assert second.exit_code == (0 if second.decision == "promoted" else EXIT_KEPT)
    from ebf.artifact import load

    updated = load(reg.model_path(2))
    # v1 was fit on January minus its holdout (400) and calibration slice (360); the update
    # adds those 760 rows and February minus its own holdout (300) and slice (270)
    assert updated.n_updates_ == 1 and updated.branch_sizes_.sum() == 4000 - 300 - 270 + 3000

    third = retrain(reg_url, windows["mar"], client=dask_client)
    assert third.action == "refit", third.record["reason"]
    assert third.record["drift"]["decision"] == "refit"
    refit = load(reg.model_path(3))
    assert refit.n_updates_ == 0
    # refit on everything the parent's lineage saw (February only if v2 was promoted) plus
    # the new window but its holdout and slice
    february = 3000 if second.decision == "promoted" else 0
    assert refit.branch_sizes_.sum() == 4000 + february + 3000 - 300 - 270


def test_a_retrain_touching_one_trunk_leaf_writes_only_that_leafs_shard(tmp_path, windows,
                                                                        dask_client):
    """The branches no new row reaches keep their shards: the same bytes and hashes, the
    files linked from the champion's version, neither loaded nor rewritten."""
    from ebf.artifact import load, open_model

    reg_url, hold = str(tmp_path / "registry"), windows["mar"]
    retrain(reg_url, windows["jan"], target="y", holdout_data=hold, client=dask_client,
            train_options={**OPTIONS, "calibrate": "none"})  # no held-out rows to carry
    reg = Registry(reg_url)
    champion = load(reg.model_path(1))
    rows = pd.read_parquet(windows["feb"])
    leaf = champion.apply(rows[["x0", "x1", "x2", "x3"]])
    touched = int(np.bincount(leaf).argmax())
    os.makedirs(tmp_path / "one-leaf")
    # too few rows for the drift check to test a split (it would see the root's split fail:
    # every row on one side)
    rows[leaf == touched].iloc[:20].to_parquet(tmp_path / "one-leaf" / "part.0.parquet",
                                               index=False)
    second = retrain(reg_url, str(tmp_path / "one-leaf"), holdout_data=hold,
                     performance_drift=False, client=dask_client)
    assert second.action == "update", str(second.record["drift"])
    before = open_model(reg.model_path(1)).manifest["shards"]
    after = open_model(reg.model_path(2)).manifest["shards"]
    assert len(before) == len(after) == champion.trunk_.n_leaves_ > 1
    for b, (old, new) in enumerate(zip(before, after, strict=True)):
        linked = os.path.samefile(os.path.join(reg.model_path(1), old["file"]),
                                  os.path.join(reg.model_path(2), new["file"]))
        assert (old["sha256"] == new["sha256"]) == linked == (b != touched), b
    updated = load(reg.model_path(2))
    assert updated.branch_updates_.tolist() == [int(b == touched) for b in range(len(after))]
    assert not [e for e in os.listdir(os.path.dirname(reg.model_path(1)) + "/..")
                if e.startswith(".")]  # the staged model is gone


def test_rerun_is_a_noop_and_a_busy_registry_fails_clearly(tmp_path, windows, dask_client):
    reg_url = str(tmp_path / "registry")
    retrain(reg_url, windows["jan"], target="y", train_options=OPTIONS, client=dask_client)
    again = retrain(reg_url, windows["jan"], target="y", train_options=OPTIONS,
                    client=dask_client)
    assert again.reused and again.version == 1
    reg = Registry(reg_url)
    assert reg.versions() == [1]
    # after version 1, target and train options are the recorded ones: not part of the key
    second = retrain(reg_url, windows["feb"], client=dask_client)
    again = retrain(reg_url, windows["feb"], target="y", train_options={"n_estimators": 7},
                    client=dask_client)
    assert again.reused and again.version == second.version == 2
    assert reg.versions() == [1, 2]
    before = _listing(reg_url)
    with reg.lock():
        with pytest.raises(RegistryBusyError, match="lock"):
            retrain(reg_url, windows["feb"], client=dask_client)
    assert _listing(reg_url) == before


@pytest.mark.parametrize("where", ["pipelines.registry.retrain.evaluate_model",
                                   "pipelines.registry.retrain._recalibrate", "ebf.artifact.save"])
def test_a_run_that_fails_leaves_the_registry_as_it_was(tmp_path, windows, dask_client,
                                                       monkeypatch, where):
    reg_url = str(tmp_path / "registry")
    retrain(reg_url, windows["jan"], target="y", train_options=OPTIONS, client=dask_client)
    before = _listing(reg_url)

    def boom(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(where, boom)
    with pytest.raises(KeyboardInterrupt):
        retrain(reg_url, windows["feb"], client=dask_client)
    assert _listing(reg_url) == before
    assert Registry(reg_url).current() == 1
    monkeypatch.undo()
    assert retrain(reg_url, windows["feb"], client=dask_client).version == 2


def test_kept_champion_writes_a_version_without_promoting(tmp_path, windows, dask_client):
    reg_url = str(tmp_path / "registry")
    retrain(reg_url, windows["jan"], target="y", train_options=OPTIONS, client=dask_client)
    # a gate no challenger can pass: 50% better RMSE required
    kept = retrain(reg_url, windows["feb"], tolerances={"rmse": -0.5}, client=dask_client)
    assert (kept.decision, kept.exit_code) == ("kept", EXIT_KEPT)
    reg = Registry(reg_url)
    assert reg.versions() == [1, 2] and reg.current() == 1
    assert not kept.record["gate"]["checks"]["rmse"]["ok"]


def test_schema_and_option_errors_before_any_work(tmp_path, windows, dask_client):
    reg_url = str(tmp_path / "registry")
    with pytest.raises(ValueError, match="needs the target column"):
        retrain(reg_url, windows["jan"], client=dask_client)
    with pytest.raises(ValueError, match="unknown train_options"):
        retrain(reg_url, windows["jan"], target="y", train_options={"trees": 3},
                client=dask_client)
    retrain(reg_url, windows["jan"], target="y", train_options=OPTIONS, client=dask_client)
    bad = tmp_path / "bad"
    os.makedirs(bad)
    pd.read_parquet(windows["feb"]).drop(columns="x2").to_parquet(bad / "p.parquet")
    with pytest.raises(ValueError, match="x2"):
        retrain(reg_url, str(bad), client=dask_client)
    with pytest.raises(ValueError, match="correction must be one of"):
        retrain(reg_url, windows["feb"], drift_correction="sidak", client=dask_client)
    assert Registry(reg_url).versions() == [1]


def test_gate_rules():
    champ = {"rmse": 10.0, "nlpd": 3.0, "max_calibration_gap": 0.05}
    ok, checks = gate(champ, {"rmse": 10.09, "nlpd": 3.009, "max_calibration_gap": 0.069},
                      {"rmse": 0.01, "nlpd": 0.01, "max_calibration_gap": 0.02})
    assert ok and all(c["ok"] for c in checks.values())
    ok, checks = gate(champ, {"rmse": 10.2, "nlpd": 2.0, "max_calibration_gap": 0.0},
                      {"rmse": 0.01, "nlpd": 0.01, "max_calibration_gap": 0.02})
    assert not ok and not checks["rmse"]["ok"] and checks["nlpd"]["ok"]
    # a challenger whose distribution sits too low is kept out even with central intervals
    # as good as the champion's
    ok, checks = gate({**champ, "max_one_sided_gap": 0.01},
                      {**champ, "max_one_sided_gap": 0.04}, DEFAULT_TOLERANCES)
    assert not ok and not checks["max_one_sided_gap"]["ok"] and checks["rmse"]["ok"]
    ok, checks = gate({"accuracy": 0.9, "log_loss": 0.3}, {"accuracy": 0.894, "log_loss": 0.3},
                      {"accuracy": 0.005, "log_loss": 0.01})
    assert not ok and not checks["accuracy"]["ok"]


def test_cli_exit_codes(tmp_path, windows, monkeypatch, capsys):
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    reg_url = str(tmp_path / "registry")
    base = ["retrain", reg_url, "--quiet", "--n-workers", "1"]
    assert main([*base[:2], windows["jan"], *base[2:], "--target", "y", "--n-estimators", "2",
                 "--trunk-leaves", "3"]) == 0
    out = capsys.readouterr().out
    assert "version 1: train, trained" in out
    assert not any(line.startswith("{") for line in out.splitlines())  # --json is for machines
    # zero tolerances: promoted only if no metric is worse than the champion's
    code = main([*base[:2], windows["feb"], *base[2:], "--tolerance-rmse", "0",
                 "--tolerance-nlpd", "0", "--tolerance-max-calibration-gap", "0"])
    assert code in (0, EXIT_KEPT)
    out = capsys.readouterr().out
    assert ("promoted" in out) == (code == 0)
    # a re-run reports the version it made and exits as it did
    assert main([*base[:2], windows["feb"], *base[2:], "--tolerance-rmse", "0",
                 "--tolerance-nlpd", "0", "--tolerance-max-calibration-gap", "0"]) == code
    assert "nothing to do" in capsys.readouterr().out
    # --json: the same result as one object, the version's whole record in it
    assert main([*base[:2], windows["feb"], *base[2:], "--tolerance-rmse", "0",
                 "--tolerance-nlpd", "0", "--tolerance-max-calibration-gap", "0",
                 "--json"]) == code
    obj = json.loads(capsys.readouterr().out)
    assert (obj["ebf_output"], obj["version"], obj["reused"]) == ("retraining", 2, True)
    assert obj["record"]["decision"] == obj["decision"]
    # both versions scored on the same data in one pass: each as `ebf evaluate` scores it
    assert main(["registry", "compare", reg_url, windows["mar"], "--quiet", "--n-workers", "1",
                 "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)
    assert [v["version"] for v in compared["versions"]] == [1, 2]
    for v in compared["versions"]:
        assert main(["evaluate", f"{reg_url}@{v['version']}", windows["mar"], "--quiet",
                     "--n-workers", "1", "--json"]) == 0
        alone = json.loads(capsys.readouterr().out)
        assert (v["n"], v["rmse"], v["nlpd"]) == (alone["n"], alone["rmse"], alone["nlpd"])
        for key in ("model", "model_hash", "model_info"):  # the same facts of the model
            assert v[key] == alone[key], key
    assert main(["registry", "compare", reg_url, windows["mar"], "--quiet", "--n-workers", "1",
                 "--versions", "2"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split()[:2] == ["version", "rows"] and table[2].startswith("v0002")


def test_the_decision_line_names_the_drift_test_that_fired(tmp_path, windows, monkeypatch,
                                                           capsys):
    """February is like January: no test fires. April's target is shifted by 1.5 (5 noise
    sds): every split holds, the holdout-score test fires and the model is refit; the
    record, the human output and --json say so. With --performance-drift off, April only
    updates."""
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    reg_url = str(tmp_path / "registry")
    april = _window(tmp_path, "apr", 3000, 3, shift=1.5)
    base = ["--quiet", "--n-workers", "1"]
    # Mondrian branches: the learner an update extends online (the default is refit)
    assert main(["retrain", reg_url, windows["jan"], *base, "--target", "y", "--branch",
                 "mondrian", "--n-estimators", "3", "--trunk-leaves", "3"]) == 0
    capsys.readouterr()
    assert main(["retrain", reg_url, windows["feb"], *base]) in (0, EXIT_KEPT)
    why = [line for line in capsys.readouterr().out.splitlines() if "why:" in line]
    assert why[0].startswith("  why: no test fired: every tested split holds"), why
    assert "holdout NLPD" in why[0]
    feb = Registry(reg_url).record(2)
    perf = feb["drift"]["performance"]
    assert not perf["fired"] and perf["score"] == "nlpd" and perf["correction"] == "holm"
    assert perf["n"] == 300 and perf["n_reference"] == 400  # the holdouts of Feb and Jan
    assert perf["tests"] == sum(s["status"] == "counted" for s in feb["drift"]["splits"]) + 1
    assert feb["metrics"]["champion"]["nlpd"] == pytest.approx(perf["mean"], rel=1e-12)

    assert main(["retrain", reg_url, april, *base]) in (0, EXIT_KEPT)
    out = capsys.readouterr().out
    assert "  why: the holdout-score test fired: every tested split holds" in out
    assert main(["retrain", reg_url, april, *base, "--json"]) in (0, EXIT_KEPT)  # a re-run
    record = json.loads(capsys.readouterr().out)["record"]
    assert record["action"] == "refit" and record["drift"]["decision"] == "refit"
    assert record["reason"].startswith("the holdout-score test fired")
    assert record["drift"]["failing"] == [] and record["drift"]["performance"]["fired"]
    assert record["drift"]["performance"]["difference"] > 1.0

    assert main(["retrain", reg_url, april, *base, "--performance-drift", "off", "--json"]) \
        in (0, EXIT_KEPT)
    record = json.loads(capsys.readouterr().out)["record"]
    assert record["action"] == "update" and record["drift"]["performance"] is None
    assert "holdout" not in record["reason"]


def test_the_holdout_score_needs_a_holdout_cut_alike():
    from pipelines.registry.retrain import _reference

    parent = {"metrics": {"challenger": {"n": 400, "nlpd": 1.25, "rmse": 0.9}},
              "lineage": {"holdout": {"fraction": 0.1}}}
    assert _reference(parent, 0.1, "nlpd") == (1.25, 400)
    assert _reference(parent, 0.2, "nlpd") == ("the champion's holdout was the most recent "
                                               "0.1 of its window, this run's is the most "
                                               "recent 0.2 of its window")
    assert "a separate dataset" in _reference(parent, None, "nlpd")
    assert _reference(parent, 0.1, "log_loss") == "the champion's record has no holdout log_loss"
    separate = {**parent, "lineage": {"holdout": {"data": {"path": "h"}}}}
    assert _reference(separate, None, "nlpd") == (1.25, 400)
