"""Benchmark issue 31, item 3: how close ``ebf``'s mean comes to gradient boosting, by option.

Five regression data sets, seeded splits:

``chronological`` / ``shuffled``
    ``--rows`` of the flights in time order, first 80% train, last 20% test / the same rows
    shuffled (:func:`benchmarks.bench_calibration.load_task`).
``friedman``
    Friedman #1, 10 features, N(0, 1) noise, 20,000 train / 10,000 test rows.
``housing`` / ``wine``
    California housing (target in $1,000) and white wine quality
    (:mod:`benchmarks.papers.taddy_data`), the seeded 80/20 split of ``bench_peers.py``.

Configurations of ours, all fit on the same training rows: BF (a Bayesian forest, 100
trees), the EBF with Bayesian branches (100 trees; default options, then ``max_features``
1/3 and 1/2, then ``min_samples_leaf`` 20), with Mondrian branches (10 trees) and with BART
branches (50 trees, 300 sweeps of particle Gibbs). Peers: CatBoost (1,000 iterations,
default depth and rate), LightGBM (500 iterations, rate 0.05) and scikit-learn's
HistGradientBoosting (early stopping), squared loss. Scores: test RMSE, its ratio to the
best peer's, CRPS and NLPD of ours, fit seconds. Writes
``benchmarks/results/issue31/accuracy.{json,md}``::

    PYTHONPATH=. python -m benchmarks.accuracy [--tasks ...] [--configs ...] [--quick]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import parse_with_sizes, timed, write_rows

OUT = Path(__file__).resolve().parent / "results" / "issue31"
TASKS = ("chronological", "shuffled", "friedman", "housing", "wine")
OURS = {
    "BF": ("bf", {}),
    "EBF bayesian": ("ebf", {}),
    "EBF bayesian, max_features 1/3": ("ebf", {"max_features": 1 / 3}),
    "EBF bayesian, max_features 1/2": ("ebf", {"max_features": 0.5}),
    "EBF bayesian, leaf 20": ("ebf", {"min_samples_leaf": 20}),
    "EBF mondrian": ("ebf", {"branch": "mondrian"}),
    "EBF bart": ("ebf", {"branch": "bart"}),
}
PEERS = ("CatBoost", "LightGBM", "HistGradientBoosting")
COLUMNS = [("task", "data", "s"), ("model", "model", "s"), ("rmse", "RMSE", ".4g"),
           ("rmse_ratio", "RMSE / best peer", ".3f"), ("crps", "CRPS", ".4g"),
           ("nlpd", "NLPD", ".4f"), ("fit_seconds", "fit s", ".1f")]


def load(name: str, cfg: argparse.Namespace) -> tuple[np.ndarray, ...]:
    """``(X_train, y_train, X_test, y_test)`` of data set ``name``: the rows of
    :func:`benchmarks.bench_peers.load_task` (the same splits as the peers benchmark)."""
    from benchmarks.bench_peers import load_task

    task = load_task(name, argparse.Namespace(**vars(cfg), max_rows=0, cal_fraction=0.1))
    return task.X_train, task.y_train, task.X_test, task.y_test


def ours(name: str, cfg: argparse.Namespace) -> Any:
    from ebf import BayesianForestRegressor, EmpiricalBayesianForestRegressor

    kind, params = OURS[name]
    if kind == "bf":
        return BayesianForestRegressor(n_estimators=cfg.n_estimators, random_state=cfg.seed,
                                       n_jobs=2)
    branch = params.get("branch", "bayesian")
    trees = {"bayesian": cfg.n_estimators, "mondrian": 10, "bart": 50}[branch]
    extra = {"branch_params": {"n_iter": cfg.bart_iter, "burn_in": cfg.bart_iter // 3}} \
        if branch == "bart" else {}
    return EmpiricalBayesianForestRegressor(n_estimators=trees, random_state=cfg.seed, n_jobs=2,
                                            **params, **extra)


def peer(name: str, cfg: argparse.Namespace) -> Any:
    if name == "CatBoost":
        from catboost import CatBoostRegressor

        return CatBoostRegressor(iterations=cfg.boost_iter, random_seed=cfg.seed, verbose=0,
                                 thread_count=2, allow_writing_files=False)
    if name == "LightGBM":
        from lightgbm import LGBMRegressor

        return LGBMRegressor(n_estimators=cfg.boost_iter // 2, learning_rate=0.05,
                             random_state=cfg.seed, n_jobs=2, verbose=-1)
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(max_iter=cfg.boost_iter, early_stopping=True,
                                         random_state=cfg.seed)


def run_task(task: str, cfg: argparse.Namespace) -> list[dict]:
    from basics import metrics

    X, y, Xt, yt = load(task, cfg)
    rows = []
    for name in cfg.peers:
        model, fit_s = timed(lambda name=name: peer(name, cfg).fit(X, y))
        rows.append({"task": task, "model": name, "rmse": metrics.rmse(yt, model.predict(Xt)),
                     "fit_seconds": fit_s})
    best = min((r["rmse"] for r in rows), default=None)
    for name in cfg.configs:
        model, fit_s = timed(lambda name=name: ours(name, cfg).fit(X, y))
        dist = model.predict_distribution(Xt)
        rows.append({"task": task, "model": name, "rmse": metrics.rmse(yt, dist.mean),
                     "crps": metrics.crps(yt, dist), "nlpd": metrics.nlpd(yt, dist),
                     "fit_seconds": fit_s})
    for r in rows:
        r["rmse_ratio"] = None if best is None else r["rmse"] / best
        print(task, r["model"], {k: round(v, 4) for k, v in r.items() if isinstance(v, float)},
              flush=True)
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    p.add_argument("--configs", nargs="+", default=list(OURS), choices=list(OURS))
    p.add_argument("--peers", nargs="+", default=list(PEERS), choices=PEERS)
    p.add_argument("--rows", type=int, default=None, help="flights kept (0: all)")
    p.add_argument("--friedman-train", type=int, default=None)
    p.add_argument("--friedman-test", type=int, default=None)
    p.add_argument("--n-estimators", type=int, default=None, help="CART trees")
    p.add_argument("--bart-iter", type=int, default=None, help="particle Gibbs sweeps")
    p.add_argument("--boost-iter", type=int, default=None, help="CatBoost iterations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    p.add_argument("--output", type=Path, default=OUT)
    return parse_with_sizes(
        p, argv,
        dict(rows=3000, friedman_train=1000, friedman_test=500, n_estimators=5, bart_iter=12,
             boost_iter=50),
        dict(rows=100_000, friedman_train=20_000, friedman_test=10_000, n_estimators=100,
             bart_iter=300, boost_iter=1000))


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    rows: list[dict] = []
    for task in cfg.tasks:
        rows += run_task(task, cfg)
        write_rows(cfg.output, "accuracy", cfg, "Accuracy of the mean: ebf's options against "
                   "gradient boosting", COLUMNS, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
