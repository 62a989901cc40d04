"""Benchmark issue 31: ebf's predictive distributions side by side with the probabilistic
tools a user would pick instead.

Tasks (regression unless said; every split seeded by ``--seed``):

``chronological`` / ``shuffled``
    The flight delays as in ``bench_calibration.py``: a seeded ``--rows`` subset of the
    273,853 flights (``0``: all) in time order, first 80% train, last 20% test (a drift to
    absorb); or shuffled first (no drift).
``friedman``
    Friedman #1, 10 features (5 spurious), N(0, 1) noise (homoscedastic),
    ``--friedman-train`` / ``--friedman-test`` rows.
``friedman-hetero``
    The same mean, with noise N(0, (0.5 + 2.5 x_1)^2): its sd grows from 0.5 to 3 with the
    first feature, which also enters the mean (heteroscedastic).
``housing`` / ``wine``
    California housing (20,640 blocks, value in $1,000) and white wine quality (4,898
    wines), vendored, a seeded 80% / 20% split. The wine quality is an integer score (3 to
    9): an integer-valued target (:func:`basics.discrete.integer_values`), scored by the RPS
    too, its NLPD not comparable.
``price``
    A simulated price whose noise grows with its level: ``--price-rows`` rows, 8 features
    uniform on [0, 1] (the last 3 spurious), ``log(price) = 6 + 2 x_1 + 1.5 sin(pi x_2 x_3) +
    2 (x_4 - 0.5)^2 + x_5 + N(0, 0.5^2)``, ``price = exp(log price)`` (a median of about
    4,600, from a few hundred to over 100,000): log-normal noise, heteroscedastic and skewed
    on the price scale; a seeded 80% / 20% split.
``magic04`` (classification)
    MAGIC gamma telescope (19,020 events, 10 features, gamma vs hadron), the stratified
    70% / 30% split of the thesis benchmarks; scored by log loss, Brier score, expected
    calibration error (15 equal-width bins of the top-label confidence) and accuracy.

``--max-rows`` keeps a seeded subset of housing, wine and magic04 (``--quick`` does).

Models (``--models``; :mod:`benchmarks.peers_models` fits them): ours, ``EBF-default``
(``EmpiricalBayesianForestRegressor(random_state=seed)`` exactly as a user gets it, calibrated
by its own fit: one row), ``EmpiricalBayesianForestRegressor`` with ``branch="bayesian"``
(``--trees`` per branch), ``"mondrian"`` (``--mondrian-trees``) and ``"bart"``
(``--bart-trees`` trees, ``--bart-iter`` iterations, fit on at most ``--bart-rows`` rows),
``BayesianForestRegressor`` (BF,
``--trees``) and ``SubsampleForestRegressor`` (SSF, 5 sub-samples of ``--trees`` trees, as
the EBF's 5 trunk leaves by default), each raw (all training rows) and ``+recal`` (the fit
rows, then ``recalibrate`` on the calibration rows), and on ``chronological`` ``+rolling``
(the ``+recal`` model predicting the test rows day by day, its map refit after each day on
the outcomes of the last ``--window-days`` days, :func:`ebf.calibration.rolling_recalibration`;
``benchmarks/rolling_calibration.py`` compares the alternatives). Peers: CatBoost
(``RMSEWithUncertainty``, ``--catboost-iterations``, Gaussian with the virtual ensembles'
total variance), NGBoost (Normal and Laplace, ``--ngboost-iterations``, at most
``--ngboost-rows`` rows; run by ``benchmarks/peer_ngboost.py`` in the environment of
``--peer-python``, as its scikit-learn pin conflicts with ours), quantile-forest
(``--qrf-trees`` trees, quantiles 1%..99%) and LightGBM (objective ``quantile`` at
5%..95% and an L2 model for the mean, ``--lgbm-iterations``), each raw and conformalized
on the calibration rows of our ``+recal`` (``+CPS``: crepes' conformal predictive system
normalised by the peer's std; ``+CQR``: every level's quantile shifted by the calibration
residuals'). The calibration rows (:func:`ebf.calibration.calibration_split`, 10%): the most
recent for ``chronological``, a seeded holdout elsewhere. Classification: our EBF
(bayesian, mondrian) and BF classifiers, CatBoost and LightGBM classifiers.

Scores (:func:`benchmarks.predictive.regression_scores`): RMSE of the point prediction (the
predictive distribution's mean for ours and the density peers, recalibrated or conformal in
the ``+recal`` / ``+CPS`` rows; the mean model of the quantile peers: quantile-forest's mean,
LightGBM's L2 model); NLPD (``n/a`` without a
density: the step CDF of a CPS, the quantile peers); CRPS (exact: ours and Gaussians in
closed form or by :mod:`basics`' quadrature, the Laplace in closed form, a CPS's step
CDF exactly, a quantile peer's piecewise-linear CDF through its quantiles exactly,
:class:`benchmarks.predictive.QuantileGrid`); the interval score of the central 90%
interval; the largest coverage gap of the central intervals at 10%..90% and of the one-sided
quantiles at 5%..95%; the PIT's Kolmogorov-Smirnov distance from uniform (a quantile peer's
PIT interpolated on its quantile grid); with a density, the test rows whose log density is
below -30 (``rows < -30``) and the lowest log density (``min log p``); on an integer-valued
target the ranked probability score (RPS: the CRPS of the predictive discretised to the
integers, from every model's CDF, :mod:`basics.discrete`), where NLPD is marked not
comparable; fit / calibrate / predict seconds.

Writes ``benchmarks/results/peers/peers.json`` (rewritten after every task) and
``peers.md`` (a table per task, the best value per column in bold, and the targets of
:mod:`benchmarks.peers_report`: issue 31's of ebf's best configuration, and issue 43's of
``EBF-default`` per task and over the tasks). Run from the repository root, with the
``bench`` extra and NGBoost in an environment of its own::

    python -m benchmarks.bench_peers --quick --peer-python /path/to/ngboost-env/bin/python
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from basics import atomic
from basics.discrete import is_integer_target
from benchmarks.common import parse_with_sizes, print_table, run_parts, versions
from benchmarks.peers_models import (
    CLASSIFIERS,
    OURS,
    PEER_RUNNERS,
    PEERS,
    PeerTask,
    run_ours,
    warm_up,
)
from benchmarks.peers_report import columns_of, default_targets, markdown, targets

RESULTS = Path(__file__).resolve().parent / "results" / "peers" / "peers.json"
TASKS = ("chronological", "shuffled", "friedman", "friedman-hetero", "housing", "price",
         "wine", "magic04")
MODELS = OURS + PEERS
FULL = dict(rows=100_000, friedman_train=20_000, friedman_test=10_000, price_rows=20_000,
            max_rows=0, trees=50,
            mondrian_trees=10, bart_trees=50, bart_iter=300, bart_rows=0,
            catboost_iterations=1000, qrf_trees=100, lgbm_iterations=100,
            ngboost_iterations=500, ngboost_rows=10_000)
QUICK = dict(rows=3_000, friedman_train=1_500, friedman_test=500, price_rows=2_000,
             max_rows=2_000, trees=5,
             mondrian_trees=3, bart_trees=5, bart_iter=30, bart_rows=1_000,
             catboost_iterations=50, qrf_trees=10, lgbm_iterations=20, ngboost_iterations=50,
             ngboost_rows=0)
TEST_FRACTION = 0.2
PEER_PACKAGES = ("catboost", "lightgbm", "quantile-forest", "crepes", "scoringrules")


# ---------------------------------------------------------------- tasks


def _seeded_subset(n: int, cap: int, seed: int) -> np.ndarray:
    if not cap or n <= cap:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, 7]).choice(n, cap, replace=False))


def _split_80_20(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, ...]:
    order = np.random.default_rng([seed, 2]).permutation(y.size)
    cut = int(round((1.0 - TEST_FRACTION) * y.size))
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]


def simulated_prices(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of the ``price`` task (module docstring): features and prices."""
    rng = np.random.default_rng([seed, 11])
    X = rng.random((n, 8))
    log_price = (6.0 + 2.0 * X[:, 0] + 1.5 * np.sin(np.pi * X[:, 1] * X[:, 2])
                 + 2.0 * (X[:, 3] - 0.5) ** 2 + X[:, 4] + 0.5 * rng.normal(size=n))
    return X, np.exp(log_price)


def load_task(name: str, cfg: argparse.Namespace) -> PeerTask:
    """The rows of task ``name`` and its calibration split (module docstring)."""
    from benchmarks import bench_calibration
    from ebf.calibration import calibration_split

    periods = None
    if name in ("chronological", "shuffled", "friedman"):
        t = bench_calibration.load_task(name, cfg)
        parts, description = (t.X_train, t.y_train, t.X_test, t.y_test), t.description
        if name == "chronological":
            from benchmarks.rolling_calibration import periods as departures

            periods = departures(t.X_test, "day")
    elif name == "friedman-hetero":
        from benchmarks.forest_models import friedman

        rng = np.random.default_rng([cfg.seed, 5])
        n = cfg.friedman_train + cfg.friedman_test
        X, _, f = friedman(n, 10, rng)
        y = f + (0.5 + 2.5 * X[:, 0]) * rng.normal(size=n)
        parts = (X[:cfg.friedman_train], y[:cfg.friedman_train], X[cfg.friedman_train:],
                 y[cfg.friedman_train:])
        description = (f"Friedman #1, p = 10, noise sd 0.5 + 2.5 x_1, {cfg.friedman_train:,} "
                       f"train / {cfg.friedman_test:,} test rows")
    elif name == "price":
        X, y = simulated_prices(cfg.price_rows, cfg.seed)
        parts = _split_80_20(X, y, cfg.seed)
        description = (f"simulated prices, log-normal noise (sd 0.5 in log price), 8 features "
                       f"(3 spurious), {y.size:,} rows, seeded 80% / 20%")
    elif name in ("housing", "wine"):
        from benchmarks.papers import taddy_data

        X, y = getattr(taddy_data, name)()
        X = np.asarray(X, dtype=np.float64)
        keep = _seeded_subset(y.size, cfg.max_rows, cfg.seed)
        parts = _split_80_20(X[keep], y[keep], cfg.seed)
        what = "California housing" if name == "housing" else "white wine quality"
        description = f"{what}, {keep.size:,} rows, seeded 80% / 20%"
    elif name == "magic04":
        from benchmarks.papers import thesis_data

        X_tr, X_te, y_tr, y_te = thesis_data.load("magic04", cfg.seed)
        tr = _seeded_subset(y_tr.size, cfg.max_rows, cfg.seed)
        te = _seeded_subset(y_te.size, cfg.max_rows and cfg.max_rows // 2, cfg.seed)
        parts = (X_tr[tr], y_tr[tr], X_te[te], y_te[te])
        description = (f"MAGIC gamma telescope, {tr.size:,} train / {te.size:,} test events "
                       "(stratified 70% / 30%), gamma vs hadron")
    else:
        raise ValueError(f"unknown task {name!r}; choose from {TASKS}")
    X_train, y_train, X_test, y_test = parts
    cal_method = "recent" if name == "chronological" else "holdout"
    fit_rows, cal_rows = calibration_split(y_train.size, method=cal_method,
                                           fraction=cfg.cal_fraction, random_state=cfg.seed)
    kind = "classification" if name == "magic04" else "regression"
    return PeerTask(name, kind, X_train, y_train, X_test, y_test, description, fit_rows,
                    cal_rows, cal_method, periods)


# ---------------------------------------------------------------- one task


def run_task(name: str, cfg: argparse.Namespace) -> dict[str, Any]:
    """Every selected model on task ``name``: ours first, then the peers."""
    task = load_task(name, cfg)
    print(f"\n{name}: {task.description}; fit {task.fit_rows.size:,} + calibrate "
          f"{task.cal_rows.size:,} ({task.cal_method}), test {task.y_test.size:,} ...",
          flush=True)
    models = [m for m in cfg.models if task.kind == "regression" or m in CLASSIFIERS]
    rows: list[dict[str, Any]] = []
    for model in models:
        print(f"  {model} ...", flush=True)
        rows += run_ours(model, task, cfg) if model in OURS else PEER_RUNNERS[model](task, cfg)
    integer = task.kind == "regression" and is_integer_target(task.y_test)
    out = {"description": task.description, "kind": task.kind,
           "n_train": int(task.y_train.size), "n_fit": int(task.fit_rows.size),
           "n_cal": int(task.cal_rows.size), "n_test": int(task.y_test.size),
           "cal_method": task.cal_method, "integer_target": integer, "rows": rows}
    print_table(f"{name}: {task.description}", columns_of(out), rows)
    out["targets"] = targets(name, out)
    out["default_targets"] = default_targets(name, out)
    for line in out["targets"] + out["default_targets"]["lines"]:
        print(f"  {line}")
    return out


# ---------------------------------------------------------------- options


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--rows", type=int,
                   help="flights kept, a seeded random subset (100k; quick 3k; 0 = all)")
    p.add_argument("--friedman-train", type=int, help="Friedman training rows (20k)")
    p.add_argument("--friedman-test", type=int, help="Friedman test rows (10k)")
    p.add_argument("--price-rows", type=int, help="rows of the price task (20k; quick 2k)")
    p.add_argument("--max-rows", type=int,
                   help="seeded subset of housing / wine / magic04 (all; quick 2k)")
    p.add_argument("--cal-fraction", type=float, default=0.1,
                   help="fraction of the training rows that calibrate (0.1)")
    p.add_argument("--trees", type=int, help="CART trees per EBF branch, BF, SSF part (50)")
    p.add_argument("--mondrian-trees", type=int, help="Mondrian trees per EBF branch (10)")
    p.add_argument("--bart-trees", type=int, help="BART trees per EBF branch (50)")
    p.add_argument("--bart-iter", type=int,
                   help="BART iterations per branch, the first third burn-in (300)")
    p.add_argument("--bart-rows", type=int,
                   help="rows the EBF-bart is fit on at most, a seeded subset (0 = all)")
    p.add_argument("--window-days", type=float, default=14.0,
                   help="days of outcomes the rolling recalibration refits its map on (14)")
    p.add_argument("--catboost-iterations", type=int, help="CatBoost iterations (1000)")
    p.add_argument("--qrf-trees", type=int, help="quantile-forest trees (100)")
    p.add_argument("--lgbm-iterations", type=int, help="LightGBM iterations per model (100)")
    p.add_argument("--ngboost-iterations", type=int, help="NGBoost iterations (500)")
    p.add_argument("--ngboost-rows", type=int,
                   help="rows NGBoost is fit on at most, a seeded subset (10k; 0 = all)")
    p.add_argument("--n-jobs", type=int, default=-1,
                   help="threads of ours, CatBoost and quantile-forest (all)")
    p.add_argument("--peer-threads", type=int, default=1,
                   help="OpenMP threads of LightGBM (1: on a shared machine 2 were slower)")
    p.add_argument("--peer-python", default=os.environ.get("NGBOOST_PYTHON"),
                   help="python of an environment with the ngboost-peer extra (default: "
                        "$NGBOOST_PYTHON); without it NGBoost is skipped")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, default=RESULTS)
    cfg = parse_with_sizes(p, argv, QUICK, FULL)
    cfg.parts = cfg.tasks
    cfg.command = " ".join(["python -m benchmarks.bench_peers",
                            *(sys.argv[1:] if argv is None else argv)])
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    cfg.output.parent.mkdir(parents=True, exist_ok=True)
    cfg.peer_versions = versions(PEER_PACKAGES)
    warm_up(cfg, cfg.models)
    status = run_parts("bench_peers", cfg,
                       {name: lambda c, name=name: run_task(name, c) for name in TASKS})
    report = json.loads(cfg.output.read_text())
    table = cfg.output.with_suffix(".md")
    atomic.write_text(table, markdown(report))
    print(f"wrote {table}")
    return status


if __name__ == "__main__":
    sys.exit(main())
