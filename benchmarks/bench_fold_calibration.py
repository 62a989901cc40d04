"""Benchmark issue 42: calibrated out of the box (``calibrate="auto"``) against no map and
against a 10% holdout map, on the regression tasks of ``bench_peers.py``.

For every task and model (BF, EBF and SSF with their defaults, ``--trees`` trees): test
RMSE, CRPS, the largest coverage gap of the central intervals at 10%..90% and of the
one-sided quantiles at 5%..95%, and fit seconds, for ``calibrate="none"`` (all rows, no
map), ``"holdout"`` (90% / 10%) and ``"auto"`` (all rows, cross-fitted calibration groups),
plus ``"crossfit"``: the same map learnt from K = 5 whole-model cross-fits (K more fits),
the reference the groups approximate.

Writes ``benchmarks/results/issue42/fold_calibration.{json,md}``.
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=["housing", "wine", "friedman",
                                                   "friedman-hetero", "shuffled"])
    p.add_argument("--models", nargs="*", default=[])
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--crossfit", action="store_true")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    cfg = bench_peers.parse_args([])
    cfg.trees, cfg.models, cfg.crossfit = args.trees, args.models, args.crossfit
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
