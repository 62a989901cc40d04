"""Scoring in the prediction pass (``evaluate(..., predictions=...)``): the files are those of
``predict_to_parquet`` bit for bit, the scores those of a scores-only ``evaluate``, and the
metrics equal the metrics computed from the saved predictions, for EBF and SSF regressors
(recalibrated or not, Bayesian-CART and Mondrian branches) and classifiers, whole on every
worker or branch by branch, with rows whose target is missing. Per-row scores from the
scoring pass (``evaluate_model(..., row_scores=True)``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from basics.metrics import class_rows, expected_calibration_error
from ebf import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
)
from ebf.artifact import save
from pipelines.io import read_parquet_metadata
from pipelines.predict import predict_to_parquet
from pipelines.report.evaluate import evaluate, evaluate_model
from pipelines.schema import SchemaError
from tests.ebf.dask.test_dask import FEATURES, make_frame

MODELS = {
    "ebf_reg_recal": lambda: EmpiricalBayesianForestRegressor(
        n_estimators=3, trunk_max_leaves=4, random_state=0),
    "ebf_mondrian": lambda: EmpiricalBayesianForestRegressor(
        n_estimators=3, trunk_max_leaves=3, branch="mondrian", random_state=4,
        calibrate="none"),
    "ssf_reg_recal": lambda: SubsampleForestRegressor(n_estimators=3, n_subsamples=3,
                                                      random_state=2),
    "ebf_clf": lambda: EmpiricalBayesianForestClassifier(n_estimators=3, trunk_max_leaves=3,
                                                         random_state=1),
    "ssf_clf": lambda: SubsampleForestClassifier(n_estimators=2, n_subsamples=2,
                                                 random_state=3),
    "ebf_clf_recal": lambda: EmpiricalBayesianForestClassifier(
        n_estimators=3, trunk_max_leaves=3, branch="mondrian", random_state=6),
    "ssf_clf_recal": lambda: SubsampleForestClassifier(n_estimators=2, n_subsamples=2,
                                                       random_state=7),
}
QUANTILES = (0.05, 0.5, 0.95)


def _target(name: str) -> str:
    return "label" if "clf" in name else "y"


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    fit, cal = make_frame(1200, seed=3), make_frame(400, seed=4)
    root = tmp_path_factory.mktemp("one_pass")
    out = {}
    for name, make in MODELS.items():
        model = make().fit(fit[FEATURES], fit[_target(name)])
        if "recal" in name:
            model.recalibrate(cal[FEATURES], cal[_target(name)])
        out[name] = save(model, root / name)
    return out


@pytest.fixture(scope="module")
def test_data(tmp_path_factory) -> str:
    """Three files; some rows of each have no target."""
    df = make_frame(600, seed=11)
    df["id"] = np.arange(600) * 7
    rng = np.random.default_rng(5)
    missing = rng.random(600) < 0.1
    df.loc[missing, "y"] = np.nan
    df["label"] = df["label"].astype(object)
    df.loc[missing, "label"] = None
    root = tmp_path_factory.mktemp("one_pass_data")
    for i, rows in enumerate(np.array_split(np.arange(600), 3)):
        df.iloc[rows].to_parquet(root / f"part.{i}.parquet", index=False)
    return str(root)


@pytest.mark.parametrize("strategy", ["broadcast", "sharded"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_pass_writes_the_predictions_and_the_scores(saved, test_data, tmp_path,
                                                        dask_client, name, strategy):
    path, target = saved[name], _target(name)
    kept = ["id", target]
    alone = predict_to_parquet(path, test_data, tmp_path / "alone", keep_columns=kept,
                               quantiles=QUANTILES, strategy=strategy, client=dask_client)
    scores = evaluate(path, test_data, target=target, strategy=strategy, client=dask_client)
    calls = []
    both = evaluate(path, test_data, target=target, strategy=strategy, client=dask_client,
                    predictions=tmp_path / "both", keep_columns=kept, quantiles=QUANTILES,
                    progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (3, 3)

    # the files: predict_to_parquet's, bit for bit, with its metadata
    written = pd.read_parquet(tmp_path / "both")
    pd.testing.assert_frame_equal(written, pd.read_parquet(tmp_path / "alone"),
                                  check_exact=True)
    meta_both, meta_alone = (read_parquet_metadata(tmp_path / d) for d in ("both", "alone"))
    meta_both.pop("ebf.predicted_with"), meta_alone.pop("ebf.predicted_with")
    assert meta_both == meta_alone
    pred = both["predictions"]
    assert (pred.rows, pred.files, pred.columns) == (alone.rows, alone.files, alone.columns)
    assert pred.files == 3  # one per input file, whatever columns each job reads

    # the scores: those of a scores-only pass (sums over blocks of other widths: the last
    # bit may differ)
    assert both["n"] == scores["n"] == written[target].notna().sum()
    assert both["n_missing_target"] == scores["n_missing_target"] == written[target].isna().sum()
    for key in ("rmse", "nlpd", "crps", "max_calibration_gap", "accuracy", "log_loss", "ece"):
        if key in scores:
            assert both[key] == pytest.approx(scores[key], rel=1e-12, abs=1e-15), key
    if "pit_histogram" in scores:
        assert both["pit_histogram"] == scores["pit_histogram"]

    # and the metrics recomputed from the saved predictions
    rows = written[written[target].notna()]
    if "clf" in name:
        assert both["accuracy"] == pytest.approx((rows["predicted"] == rows[target]).mean(),
                                                 rel=1e-12)
        eps = np.finfo(np.float64).eps  # scikit-learn's clip
        proba = np.clip([rows.loc[i, f"proba_{c}"] for i, c in rows[target].items()],
                        eps, 1 - eps)
        assert both["log_loss"] == pytest.approx(-np.log(proba).mean(), rel=1e-9)
        _check_class_probabilities(path, test_data, written, rows, target, both)
    else:
        y = rows[target].to_numpy()
        assert both["rmse"] == pytest.approx(np.sqrt(np.mean((y - rows["mean"]) ** 2)),
                                             rel=1e-12)
        inside = ((rows["q05"] <= y) & (y <= rows["q95"])).mean()
        assert both["coverage"][0.9] == pytest.approx(inside, abs=1.5 / len(rows))
        assert both["calibrated"] == ("recal" in name)
    _check_branches(name, path, rows, target, scores, both)


def _check_class_probabilities(path, test_data, written, rows, target, result) -> None:
    """The written probabilities are the local model's (through its class calibration map,
    if it has one), whatever the strategy; the ECE is theirs."""
    from ebf.artifact import load

    model = load(path)
    data = pd.read_parquet(test_data)
    columns = [f"proba_{c}" for c in model.classes_]
    got = written.set_index("id").loc[data["id"], columns].to_numpy()
    np.testing.assert_allclose(got, model.predict_proba(data[FEATURES]), rtol=1e-12, atol=1e-15)
    codes = pd.Index(model.classes_).get_indexer(rows[target])
    assert result["ece"] == pytest.approx(
        expected_calibration_error(rows[columns].to_numpy(), codes), rel=1e-9)


def _check_branches(name, path, rows, target, *results) -> None:
    """An EBF's per-branch table: its training rows and shard sizes, and the rows and scores
    of the rows each branch predicted (the files' ``branch`` column)."""
    from ebf.artifact import load, open_model

    if not name.startswith("ebf"):  # a sub-sample forest pools its forests: no branches
        assert all("branches" not in r for r in results)
        return
    model, groups = load(path), rows.groupby("branch")
    for r in results:
        t = r["branches"].set_index("branch")
        assert t.index.tolist() == list(range(len(model.branches_)))
        assert t["training_rows"].tolist() == model.branch_rows_.tolist()
        assert t["bytes"].tolist() == open_model(path).part_bytes
        assert t["n"].tolist() == groups.size().reindex(t.index, fill_value=0).tolist()
        assert t["n"].sum() == r["n"]
        for b, g in groups:
            if "clf" in name:
                expected = (g["predicted"] == g[target]).mean()
                assert t.loc[b, "accuracy"] == pytest.approx(expected, rel=1e-12)
            else:
                y = g[target].to_numpy()
                assert t.loc[b, "rmse"] == pytest.approx(
                    np.sqrt(np.mean((y - g["mean"]) ** 2)), rel=1e-9)
                inside = ((g["q05"] <= y) & (y <= g["q95"])).mean()
                assert t.loc[b, "coverage_90"] == pytest.approx(inside, abs=1.5 / len(g))
        if "clf" not in name:  # the branches' rows add up to the whole
            assert (t["n"] * t["crps"]).sum() / t["n"].sum() == pytest.approx(r["crps"])
            assert (t["n"] * t["rmse"] ** 2).sum() / t["n"].sum() == pytest.approx(
                r["rmse"] ** 2)


def test_one_pass_checks_its_destination_before_any_work(saved, test_data, tmp_path,
                                                         dask_client):
    out = tmp_path / "pred"
    out.mkdir()
    (out / "mine.txt").write_text("not ebf's")
    with pytest.raises(FileExistsError):
        evaluate(saved["ebf_mondrian"], test_data, target="y", predictions=out,
                 overwrite=True, client=dask_client)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    with pytest.raises(SchemaError, match="'row_id'"):
        evaluate(saved["ebf_mondrian"], test_data, target="y", predictions=tmp_path / "p2",
                 keep_columns=["row_id"], client=dask_client)
    assert not (tmp_path / "p2").exists()


@pytest.mark.parametrize("gather", [True, False])
@pytest.mark.parametrize("name", ["ebf_reg_recal", "ebf_clf"])
def test_row_scores_come_from_the_same_pass(saved, test_data, dask_client, monkeypatch,
                                            name, gather):
    """``evaluate_model(..., row_scores=True)``: every scored row's -log p(y) as the model
    predicts (recalibrated) or its log loss, in the data's order, whose mean is the result's
    NLPD / log loss; the other scores are unchanged. Rows brought to the model, or the
    model sent to the workers."""
    from ebf.artifact import load
    from pipelines.scoring import tasks as scoring_tasks

    if not gather:
        monkeypatch.setattr(scoring_tasks, "small_frame", lambda *a, **k: None)
    model, target = load(saved[name]), _target(name)
    plain = evaluate_model(model, test_data, target=target, features=FEATURES,
                           client=dask_client)
    res = evaluate_model(model, test_data, target=target, features=FEATURES,
                         client=dask_client, row_scores=True)
    rows = pd.read_parquet(test_data)
    rows = rows[rows[target].notna()]
    if "clf" in name:
        want = class_rows(model.predict_proba(rows[FEATURES]), model.classes_, rows[target])[1]
        key = "log_loss"
    else:
        want = -model.predict_distribution(rows[FEATURES]).logpdf(rows[target].to_numpy())
        key = "nlpd"
    np.testing.assert_allclose(res["row_scores"], want, rtol=1e-9)
    assert res["row_scores"].mean() == pytest.approx(res[key], rel=1e-12)
    assert res["n"] == len(want) == plain["n"]
    for k, v in plain.items():
        if isinstance(v, float) and k != "seconds":
            assert res[k] == pytest.approx(v, rel=1e-12), k
    assert "row_scores" not in plain
