"""Benchmark issue 42: the fit-time cost of ``calibrate="auto"`` (the calibration groups)
against no calibration and against whole-model K-fold cross-fitting, paired runs.

For each model (BF and EBF regressors with 100 trees, EBF with Mondrian branches and their 10
trees, the BF classifier) on Friedman #1 (``--rows`` rows, 10 features): the median of
``--repeats`` alternating fits with ``calibrate="none"`` and ``"auto"``, and the cost of the
reference cross-fit (5 fits on 80% of the rows each, timed once). Prints ratios to
``"none"``; writes ``benchmarks/results/issue42/calibration_cost.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from basics import calibration as cal
from benchmarks.common import markdown_table, median_ratio, paired_times, print_table
from benchmarks.forest_models import friedman

OUT = Path(__file__).parent / "results" / "issue42" / "calibration_cost.md"
COLUMNS = [("model", "model", "s"), ("none_s", "none s", ".2f"), ("auto_s", "auto s", ".2f"),
           ("auto_ratio", "auto / none", ".2f"), ("crossfit_s", "cross-fit s", ".2f"),
           ("crossfit_ratio", "(none + cross-fit) / none", ".2f")]


def main(argv: list[str] | None = None) -> int:
    from ebf import (
        BayesianForestClassifier,
        BayesianForestRegressor,
        EmpiricalBayesianForestRegressor,
    )

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    X, y, _ = friedman(args.rows, 10, rng)
    labels = (y > np.median(y)).astype(int)
    models = {
        "BF regressor, 100 trees": (lambda **k: BayesianForestRegressor(**k), y),
        "EBF regressor, 100 trees": (lambda **k: EmpiricalBayesianForestRegressor(**k), y),
        "EBF, Mondrian branches, 10 trees": (
            lambda **k: EmpiricalBayesianForestRegressor(branch="mondrian", **k), y),
        "BF classifier, 100 trees": (lambda **k: BayesianForestClassifier(**k), labels),
    }
    rows = []
    for name, (make, target) in models.items():
        fns = {m: (lambda m=m, make=make, target=target: make(random_state=0, calibrate=m)
                   .fit(X, target))
               for m in ("none", "auto")}
        fns["none"]()  # compile and warm the caches
        times = paired_times(fns, args.repeats)
        folds = cal.row_folds(np.arange(target.size), 0)
        t0 = time.perf_counter()
        for k in range(cal.N_FOLDS):
            make(random_state=k, calibrate="none").fit(X[folds != k], target[folds != k])
        crossfit = time.perf_counter() - t0
        none = float(np.median(times["none"]))
        rows.append({"model": name, "none_s": none, "auto_s": float(np.median(times["auto"])),
                     "auto_ratio": median_ratio(times["auto"], times["none"]),
                     "crossfit_s": crossfit, "crossfit_ratio": (none + crossfit) / none})
        print(rows[-1], flush=True)
    print_table(f"fit seconds, Friedman #1, {args.rows:,} rows", COLUMNS, rows)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(f"Fit seconds on Friedman #1, {args.rows:,} rows x 10 features, median of "
                   f"{args.repeats} paired runs (2-core machine):\n\n"
                   + markdown_table(COLUMNS, rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
