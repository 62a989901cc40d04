"""One scoring core (:mod:`basics.scores`): every score record is computed identically by the
evaluation job (``ebf evaluate``), the registry comparison (``ebf registry compare``), the
retrain gate's metrics and the benchmark scorer on the same predictions; and every scorer
lists every record of its task."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from basics.class_calibration import fit_candidate
from basics.metrics import class_rows
from basics.scores import SCORES, ClassRows, scores_of, values
from benchmarks.predictive import RESULT_NAMES, Mixture, classification_scores, regression_scores
from ebf import EmpiricalBayesianForestClassifier, EmpiricalBayesianForestRegressor
from ebf.artifact import save
from pipelines.registry.retrain import DEFAULT_TOLERANCES, _metrics
from pipelines.report.compare import compare, format_comparison_table
from pipelines.report.evaluate import evaluate, format_evaluation
from pipelines.report.tables import classifier_table, regression_table
from tests.ebf.dask.test_dask import FEATURES, make_frame


def _binary(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(label=np.where(df["label"] == "high", "high", "other"))


@pytest.fixture(scope="module")
def setting(tmp_path_factory) -> dict:
    fit, cal = make_frame(1200, seed=21), make_frame(400, seed=22)
    test = _binary(make_frame(900, seed=23))
    root = tmp_path_factory.mktemp("scores")
    reg = EmpiricalBayesianForestRegressor(n_estimators=3, trunk_max_leaves=3, random_state=5)
    reg.fit(fit[FEATURES], fit["y"]).recalibrate(cal[FEATURES], cal["y"])
    clf = EmpiricalBayesianForestClassifier(n_estimators=3, trunk_max_leaves=3, random_state=6)
    clf.fit(fit[FEATURES], _binary(fit)["label"])
    codes = pd.Index(clf.classes_).get_indexer(_binary(cal)["label"])
    # a map every scorer must apply (the chooser would keep these probabilities as they are)
    clf.set_class_calibration(fit_candidate("dirichlet", clf.predict_proba(cal[FEATURES]), codes))
    for i, rows in enumerate(np.array_split(np.arange(len(test)), 3)):
        (root / "test").mkdir(exist_ok=True)
        test.iloc[rows].to_parquet(root / "test" / f"part.{i}.parquet", index=False)
    return {"reg": (reg, save(reg, root / "reg"), "y"),
            "clf": (clf, save(clf, root / "clf"), "label"),
            "data": str(root / "test"), "test": test}


@pytest.mark.parametrize("kind", ["reg", "clf"])
def test_every_score_is_the_same_in_every_scorer(setting, dask_client, kind):
    model, path, target = setting[kind]
    test = setting["test"]
    evaluated = evaluate(path, setting["data"], target=target, client=dask_client)
    compared = compare([path], setting["data"], target=target, client=dask_client)[0]
    gated = _metrics(evaluated)
    X, y = test[FEATURES], test[target].to_numpy()
    task = evaluated["task"]
    if kind == "reg":
        bench = regression_scores(y, Mixture(model.predict_distribution(X)))
        bench = {name: bench[RESULT_NAMES.get(name, name)] for name in SCORES
                 if SCORES[name].task == task}
    else:
        proba = model.predict_proba(X)
        codes = pd.Index(model.classes_).get_indexer(y)
        bench = classification_scores(codes, proba)
        # the records on the rows of the benchmark's class_rows, for every class count
        assert values(ClassRows(*class_rows(proba, model.classes_, y)[:2],
                                proba.max(axis=1))) == {
            k: bench[k] for k in ("log_loss", "accuracy", "ece")}
    names = [s.name for s in scores_of(task)]
    assert set(gated) == {"n", *names}
    for name in names:
        want = evaluated[name]
        assert isinstance(want, float), name
        assert compared[name] == want, name  # the same tasks and sums
        assert gated[name] == want, name
        assert bench[name] == pytest.approx(want, rel=1e-12, abs=1e-15), name


def test_every_scorer_shows_every_record(setting, dask_client):
    """The text of ``ebf evaluate`` and ``registry compare``, the report's summary tables and
    the gate's tolerances all come from the records."""
    for kind in ("reg", "clf"):
        _, path, target = setting[kind]
        result = evaluate(path, setting["data"], target=target, client=dask_client)
        text = format_evaluation(result)
        table = format_comparison_table(["v0001"], [result])
        html = (regression_table if kind == "reg" else classifier_table)(
            {"m": result}, *([None] if kind == "reg" else []))
        for s in scores_of(result["task"]):
            assert s.label in text and f"{result[s.name]:{s.fmt}}" in text, s.name
            assert s.label in table.splitlines()[0], s.name
            assert f"<th>{s.label}<small>" in html.replace("&#x27;", "'"), s.name
            assert f"<td>{result[s.name]:{s.fmt}}</td>" in html, s.name
    assert DEFAULT_TOLERANCES == {s.name: s.tolerance for s in SCORES.values()
                                  if s.tolerance is not None}


def test_an_integer_target_is_scored_by_the_rps_and_its_nlpd_flagged(tmp_path, dask_client):
    """``ebf evaluate`` of an integer target: the RPS of the model as it predicts and of its
    own mixture (basics.discrete on the same predictions), in the text and the HTML table,
    and the NLPD kept but flagged; the in-process scorer (the retrain gate's) agrees."""
    from basics.discrete import mixture_rps
    from pipelines.scoring.tasks import evaluate_model

    fit, cal = make_frame(900, seed=31, integer_target=True), make_frame(300, seed=32)
    test = make_frame(600, seed=33, integer_target=True)
    reg = EmpiricalBayesianForestRegressor(n_estimators=3, trunk_max_leaves=3, random_state=5)
    reg.fit(fit[FEATURES], fit["y"]).recalibrate(cal[FEATURES], cal["y"])
    path = save(reg, tmp_path / "reg")
    test.iloc[:300].to_parquet(tmp_path / "a.parquet", index=False)
    test.iloc[300:].to_parquet(tmp_path / "b.parquet", index=False)
    data = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
    result = evaluate(path, data, target="y", client=dask_client)
    assert result["integer_target"] and not result["nlpd_comparable"]
    X, y = test[FEATURES], test["y"].to_numpy()
    dist = reg.predict_distribution(X)
    assert result["rps"] == pytest.approx(mixture_rps(dist, y)[:, 0].mean(), rel=1e-10)
    own = mixture_rps(reg.predict_distribution(X, recalibrated=False), y)[:, 0].mean()
    assert result["uncalibrated"]["rps"] == pytest.approx(own, rel=1e-10)
    assert 0 < result["rps"] and isinstance(result["nlpd"], float)
    text = format_evaluation(result)
    assert f"RPS: {result['rps']:.4f}" in text and "NLPD, of a continuous density, is not " \
        "comparable" in text
    assert "RPS" in format_comparison_table(["v0001"], [result]).splitlines()[0]
    compared = compare([path], data, target="y", client=dask_client)[0]
    assert compared["rps"] == result["rps"] and compared["integer_target"]
    assert _metrics(result)["rps"] == result["rps"]
    assert f"<td>{result['rps']:.4f}</td>" in regression_table({"m": result}, None)
    gated = evaluate_model(reg, data, target="y", features=FEATURES, client=dask_client)
    assert gated["rps"] == pytest.approx(result["rps"], rel=1e-12)
    sharded = evaluate(path, data, target="y", client=dask_client, strategy="sharded")
    assert sharded["rps"] == pytest.approx(result["rps"], rel=1e-10)
    assert sharded["uncalibrated"]["rps"] == pytest.approx(own, rel=1e-10)
    # a continuous target: no RPS, the NLPD comparable
    continuous = make_frame(300, seed=34)
    continuous.to_parquet(tmp_path / "c.parquet", index=False)
    plain = evaluate(path, str(tmp_path / "c.parquet"), target="y", client=dask_client)
    assert "rps" not in plain and plain["nlpd_comparable"] and not plain["integer_target"]
    assert ", RPS:" not in format_evaluation(plain) and "integer-valued" not in format_evaluation(
        plain)
