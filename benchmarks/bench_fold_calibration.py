"""Benchmark issue 42: calibrated out of the box (``calibrate="auto"``) against no map and
against a 10% holdout map, on the regression tasks of ``bench_peers.py``.

For every task and model (BF, EBF and SSF with their defaults, ``--trees`` trees): test
RMSE, CRPS, the largest coverage gap of the central intervals at 10%..90% and of the
one-sided quantiles at 5%..95%, and fit seconds, for ``calibrate="none"`` (all rows, no
map), ``"holdout"`` (90% / 10%) and ``"auto"`` (all rows, cross-fitted calibration groups),
plus ``"crossfit"``: the same map learnt from K = 5 whole-model cross-fits (K more fits),
the reference the groups approximate.

Classification (``--class-tasks``): magic04 (gamma vs hadron), the shuffled flights delayed
by more than 15 minutes, and satimage (6 classes): test log loss, ECE (15 bins of the
top-class probability) and accuracy of the BF, EBF and SSF classifiers with ``"none"``,
``"holdout"`` and ``"auto"``.

Writes ``benchmarks/results/issue42/fold_calibration.{json,md}`` (and ``class_*`` for the
classifiers).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from basics import calibration as cal
from basics.metrics import coverage, crps, one_sided_coverage
from basics.pit import PITMap, RecalibratedDistribution
from benchmarks import bench_peers
from benchmarks.common import markdown_table, print_table, write_json

OUT = Path(__file__).parent / "results" / "issue42"
LEVELS = np.arange(1, 10) / 10
ONE_SIDED = np.arange(1, 20) / 20
COLUMNS = [("task", "task", "s"), ("model", "model", "s"), ("calibrate", "calibrate", "s"),
           ("rmse", "RMSE", ".4g"), ("crps", "CRPS", ".4g"), ("central", "central gap", ".3f"),
           ("one_sided", "one-sided gap", ".3f"), ("fit_s", "fit s", ".1f")]


def models(trees: int) -> dict[str, Any]:
    from ebf import (
        BayesianForestRegressor,
        EmpiricalBayesianForestRegressor,
        SubsampleForestRegressor,
    )

    return {"BF": lambda **k: BayesianForestRegressor(n_estimators=trees, **k),
            "EBF": lambda **k: EmpiricalBayesianForestRegressor(n_estimators=trees, **k),
            "SSF": lambda **k: SubsampleForestRegressor(n_estimators=trees, **k)}


def scores(dist: Any, y: np.ndarray) -> dict[str, float]:
    return {"rmse": float(np.sqrt(np.mean((dist.mean - y) ** 2))), "crps": crps(y, dist),
            "central": float(np.max(np.abs(coverage(y, dist, LEVELS) - LEVELS))),
            "one_sided": float(np.max(np.abs(one_sided_coverage(y, dist, ONE_SIDED)
                                              - ONE_SIDED)))}


def crossfit_map(make: Any, X: np.ndarray, y: np.ndarray, seed: int) -> PITMap:
    """The map of K whole-model cross-fits (each on the rows outside a fold)."""
    folds = cal.row_folds(np.arange(y.size), seed)
    u = np.empty(y.size)
    for k in range(cal.N_FOLDS):
        out = folds == k
        m = make(random_state=seed + 1 + k, calibrate="none").fit(X[~out], y[~out])
        u[out] = np.clip(m.predict_distribution(X[out]).cdf(y[out]), 0, 1)
    return PITMap.fit(u)


def run(task_name: str, cfg: argparse.Namespace) -> list[dict]:
    task = bench_peers.load_task(task_name, cfg)
    X, y, Xt, yt = task.X_train, task.y_train, task.X_test, task.y_test
    rows = []
    for name, make in models(cfg.trees).items():
        if cfg.models and name not in cfg.models:
            continue
        fitted = {}
        for method in ("none", "holdout", "auto"):
            t0 = time.perf_counter()
            m = make(random_state=cfg.seed, calibrate=method).fit(X, y)
            fit_s = time.perf_counter() - t0
            fitted[method] = m
            rows.append({"task": task_name, "model": name, "calibrate": method,
                         **scores(m.predict_distribution(Xt), yt), "fit_s": fit_s,
                         "provenance": getattr(m, "calibration_", None)})
            print(rows[-1], flush=True)
        if cfg.crossfit:
            t0 = time.perf_counter()
            M = crossfit_map(make, X, y, cfg.seed)
            fit_s = time.perf_counter() - t0 + rows[-3]["fit_s"]
            base = fitted["none"].predict_distribution(Xt)
            rows.append({"task": task_name, "model": name, "calibrate": "crossfit",
                         **scores(RecalibratedDistribution(base, M), yt), "fit_s": fit_s})
            print(rows[-1], flush=True)
    return rows


CLASS_COLUMNS = [("task", "task", "s"), ("model", "model", "s"), ("calibrate", "calibrate", "s"),
                 ("log_loss", "log loss", ".4f"), ("ece", "ECE", ".4f"),
                 ("accuracy", "accuracy", ".4f"), ("map", "map", "s"), ("fit_s", "fit s", ".1f")]


def class_task(name: str, cfg: argparse.Namespace) -> tuple:
    """``(X_train, y_train, X_test, y_test)`` of a classification task."""
    if name == "flights15":
        from benchmarks import bench_calibration

        t = bench_calibration.load_task("shuffled", cfg)
        return t.X_train, (t.y_train > 15).astype(int), t.X_test, (t.y_test > 15).astype(int)
    from benchmarks.papers import thesis_data

    X_tr, X_te, y_tr, y_te = thesis_data.load(name, cfg.seed)
    return X_tr, y_tr, X_te, y_te


def run_class(task_name: str, cfg: argparse.Namespace) -> list[dict]:
    from basics.metrics import expected_calibration_error
    from ebf import (
        BayesianForestClassifier,
        EmpiricalBayesianForestClassifier,
        SubsampleForestClassifier,
    )

    X, y, Xt, yt = class_task(task_name, cfg)
    makers = {"BF": BayesianForestClassifier, "EBF": EmpiricalBayesianForestClassifier,
              "SSF": SubsampleForestClassifier}
    rows = []
    for name, cls in makers.items():
        if cfg.models and name not in cfg.models:
            continue
        for method in ("none", "holdout", "auto"):
            t0 = time.perf_counter()
            m = cls(n_estimators=cfg.trees, random_state=cfg.seed, calibrate=method).fit(X, y)
            fit_s = time.perf_counter() - t0
            proba = m.predict_proba(Xt)
            codes = np.searchsorted(m.classes_, yt)
            p_true = np.clip(proba[np.arange(yt.size), codes], 1e-15, 1)
            cal_map = getattr(m, "class_calibration_", None)
            rows.append({"task": task_name, "model": name, "calibrate": method,
                         "log_loss": float(-np.mean(np.log(p_true))),
                         "ece": expected_calibration_error(proba, codes),
                         "accuracy": float(np.mean(m.classes_[proba.argmax(1)] == yt)),
                         "map": None if cal_map is None else cal_map.method, "fit_s": fit_s})
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="*", default=["housing", "wine", "friedman",
                                                   "friedman-hetero", "shuffled"])
    p.add_argument("--models", nargs="*", default=[])
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--crossfit", action="store_true")
    p.add_argument("--class-tasks", nargs="*", default=[])
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    cfg = bench_peers.parse_args([])
    cfg.trees, cfg.models, cfg.crossfit = args.trees, args.models, args.crossfit
    class_rows = []
    for t in args.class_tasks:
        class_rows += run_class(t, cfg)
        args.out.mkdir(parents=True, exist_ok=True)
        write_json({"rows": class_rows}, args.out / "class_calibration.json")
        (args.out / "class_calibration.md").write_text(markdown_table(CLASS_COLUMNS, class_rows)
                                                       + "\n")
    if class_rows:
        print_table("classifiers: calibrate none / holdout / auto", CLASS_COLUMNS, class_rows)
    rows = []
    for t in args.tasks:
        rows += run(t, cfg)
        args.out.mkdir(parents=True, exist_ok=True)
        write_json({"rows": rows}, args.out / "fold_calibration.json")
        (args.out / "fold_calibration.md").write_text(markdown_table(COLUMNS, rows) + "\n")
    print_table("calibrate: none / holdout / auto", COLUMNS, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
