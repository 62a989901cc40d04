"""Benchmark issue 42 item 6: which branch learner should be the default?

The Empirical Bayesian Forest regressor as a user gets it,
``EmpiricalBayesianForestRegressor(branch=LEARNER, random_state=SEED)`` (each learner's
default ``n_estimators``, the default trunk and leaf sizes), fit with
:func:`ebf.calibration.fit_recalibrated` (``calibrate="holdout"``: 90% of the training
rows fit, a position-hashed 10% learn the PIT map), on

``friedman``
    Friedman (1991) #1 with 10 features (5 spurious) and N(0, 1) noise
    (:func:`benchmarks.forest_models.friedman`), ``--sizes`` training rows and ``--test``
    test rows;
``shuffled``
    the flight delays in a seeded random order, 80% / 20%
    (:func:`benchmarks.bench_calibration.load_task`; ``--flight-rows 0`` keeps all 273,853).

Scores on the test rows: RMSE of the predictive mean, CRPS, NLPD and the largest central
coverage gap, uncalibrated (``recalibrated=False``) and after the recalibration; fit
seconds (the fit on 90% of the rows plus the recalibration on the other 10%), predict
seconds (both distributions of the test rows) and the model's arrays in memory
(:func:`ebf.dask.cache.object_nbytes`). Writes ``benchmarks/results/issue42/
default_learner_<stem>.json`` and ``.md`` and prints the table. Run from the repository
root::

    PYTHONPATH=. python benchmarks/bench_default_learner.py --sizes 100000
    PYTHONPATH=. python benchmarks/bench_default_learner.py --tasks friedman --sizes 1000000 \\
        --stem 1m
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import scores, summary, timed, write_rows

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "issue42"
LEARNERS = ("bayesian", "mondrian", "random")
TASKS = ("friedman", "shuffled")
COLUMNS = (
    ("task", "task", ""), ("learner", "learner", ""), ("trees", "trees/branch", "d"),
    ("branches", "branches", "d"), ("rmse", "RMSE", ".3f"), ("crps_raw", "CRPS raw", ".4f"),
    ("crps", "CRPS recal", ".4f"), ("nlpd", "NLPD recal", ".3f"),
    ("max_gap_raw", "max gap raw", ".3f"), ("max_gap", "max gap recal", ".3f"),
    ("fit_seconds", "fit+cal [s]", ".1f"), ("predict_seconds", "predict [s]", ".1f"),
    ("model_mb", "model [MB]", ".0f"),
)


def _tasks(cfg: argparse.Namespace) -> list[tuple[str, Any]]:
    """``(label, Task)`` per task and size, in the order run."""
    from benchmarks.bench_calibration import Task, load_task
    from benchmarks.forest_models import friedman

    out = []
    for name in cfg.tasks:
        if name == "shuffled":
            flights = argparse.Namespace(seed=cfg.seed, rows=cfg.flight_rows)
            out.append(("shuffled flights", load_task("shuffled", flights)))
            continue
        for n in cfg.sizes:
            X, y, _ = friedman(n + cfg.test, 10, np.random.default_rng(cfg.seed))
            out.append((f"friedman {n // 1000}k",
                        Task("friedman", X[:n], y[:n], X[n:], y[n:], "Friedman #1")))
    return out


def run_one(label: str, task: Any, learner: str, cfg: argparse.Namespace) -> dict[str, Any]:
    """Fit, recalibrate and score the default EBF with branch learner ``learner``."""
    from ebf import EmpiricalBayesianForestRegressor
    from ebf.calibration import fit_recalibrated
    from ebf.dask.cache import object_nbytes

    model = EmpiricalBayesianForestRegressor(branch=learner, random_state=cfg.seed)

    def fit() -> None:
        fit_recalibrated(model, task.X_train, task.y_train, calibrate="holdout",
                         fraction=cfg.cal_fraction, random_state=cfg.seed)
        model.predict(task.X_test[:1])  # lazy posteriors (Mondrian) belong to the fit time

    fit_s = timed(fit)[1]
    t0 = time.perf_counter()
    recal = summary(scores(model.predict_distribution(task.X_test), task.y_test))
    raw = summary(scores(model.predict_distribution(task.X_test, recalibrated=False),
                         task.y_test))
    predict_s = time.perf_counter() - t0
    row = {"task": label, "learner": learner, "trees": model._n_trees(),
           "branches": int(model.trunk_.n_leaves_), "n_train": int(task.y_train.size),
           "n_test": int(task.y_test.size), "rmse": raw["rmse"], "crps_raw": raw["crps"],
           "crps": recal["crps"], "nlpd_raw": raw["nlpd"], "nlpd": recal["nlpd"],
           "max_gap_raw": raw["max_gap"], "max_gap": recal["max_gap"],
           "fit_seconds": fit_s, "predict_seconds": predict_s,
           "model_mb": object_nbytes(model) / 1e6}
    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()},
          flush=True)
    return row


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    p.add_argument("--learners", nargs="+", choices=LEARNERS, default=list(LEARNERS))
    p.add_argument("--sizes", nargs="+", type=int, default=[100_000],
                   help="Friedman training rows (100000)")
    p.add_argument("--test", type=int, default=50_000, help="Friedman test rows (50000)")
    p.add_argument("--flight-rows", type=int, default=0,
                   help="flights kept, a seeded random subset (0 = all 273,853)")
    p.add_argument("--cal-fraction", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stem", default="100k", help="default_learner_<stem>.json / .md")
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    cfg = p.parse_args(argv)
    cfg.command = " ".join(["bench_default_learner.py",
                            *(sys.argv[1:] if argv is None else argv)])
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from pipelines.warm import warm_kernels

    print("warm-up:", warm_kernels(("forests", "mondrian")), flush=True)
    rows = []
    for label, task in _tasks(cfg):
        for learner in cfg.learners:
            rows.append(run_one(label, task, learner, cfg))
            # rewritten after every model: an interrupted run keeps what it measured
            write_rows(cfg.out, f"default_learner_{cfg.stem}", cfg,
                       "Default EBF regressor by branch learner (issue 42)", COLUMNS, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
