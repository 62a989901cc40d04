"""Benchmark issue 31, item 2: the whole predictive distribution calibrated under drift.

The chronological flights of ``ebf demo`` (:func:`benchmarks.bench_calibration.load_task`,
``--rows`` of the 273,853 flights kept in time order; the first 80% train, the last 20%, the
calmer autumn months, test). The model is fit on the first 90% of the training rows and
recalibrated on the last 10% (``calibration_split(..., "recent")``); then the test rows are
scored in time order by :func:`ebf.calibration.rolling_recalibration`, as a scheduled job
would score them:

``static``
    The map learnt on the calibration rows, never updated.
``window <period>``
    After each period (a day, an ISO week or a month of departures), the map is refit on the
    PIT values of the most recent periods holding as many rows as the calibration set
    (``--window-days``, 14 by default, at the calibration rows' daily rate; or
    ``--window`` rows).
``aci <period>``
    After each period, every knot of the map moves by adaptive conformal inference (Gibbs &
    Candes 2021, eq. (2)) over the period's rows, step 0.005.
``window+shift day``
    A location term before the map: the predictive mixture is shifted by the median of
    ``y - median(F)`` over the window (an online residual-median shift), and the map is fit
    on the PIT values of the shifted mixture. The issue asks whether the map needs one.

Models: the EBF with Bayesian branches (``--n-estimators`` trees) and with Mondrian branches
(10 trees), ``trunk_max_leaves=8`` as in ``ebf demo``. Scores of the test rows, pooled
over periods: CRPS, NLPD, 90% interval score, the largest central gap (10%..90%), the largest
one-sided gap (5%..95%), the one-sided gaps at 5%, 50% and 95%, the PIT's distance from
uniform. Writes ``benchmarks/results/issue31/rolling.{json,md}``::

    PYTHONPATH=. python -m benchmarks.rolling_calibration [--rows 100000] [--window-days 14]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from basics.mixture import GaussianMixture
from basics.pit import PITMap, RecalibratedDistribution
from benchmarks.bench_calibration import load_task
from benchmarks.common import parse_with_sizes, write_rows

OUT = Path(__file__).resolve().parent / "results" / "issue31"
UPDATES = ("static", "window day", "window week", "window month", "aci day", "aci month",
           "window+shift day")
COLUMNS = [("model", "model", "s"), ("update", "update", "s"),
           ("window", "window rows", ",d"), ("crps", "CRPS", ".3f"),
           ("nlpd", "NLPD", ".4f"), ("interval_score", "IS 90%", ".2f"),
           ("max_central_gap", "max central gap", ".3f"),
           ("max_one_sided_gap", "max one-sided gap", ".3f"),
           ("below_5", "one-sided 5%", "+.3f"), ("below_50", "50%", "+.3f"),
           ("below_95", "95%", "+.3f"), ("pit_distance", "PIT distance", ".3f"),
           ("seconds", "s", ".1f")]
#: Feature columns of the flights (pipelines.datasets.FLIGHT_FEATURES).
DAY_OF_MONTH, MONTH = 6, 7


def periods(X: np.ndarray, kind: str) -> np.ndarray:
    """A period label per row: the day, ISO week or month of departure (2013)."""
    if kind == "month":
        return X[:, MONTH].astype(np.int64)
    dates = pd.to_datetime(pd.DataFrame({"year": 2013, "month": X[:, MONTH].astype(int),
                                         "day": X[:, DAY_OF_MONTH].astype(int)}))
    if kind == "day":
        return dates.dt.day_of_year.to_numpy()
    return dates.dt.isocalendar().week.to_numpy(dtype=np.int64)


def window_rows(X_cal: np.ndarray, days: float) -> int:
    """Rows of ``days`` days of departures at the calibration rows' daily rate."""
    return int(round(X_cal.shape[0] * days / np.unique(periods(X_cal, "day")).size))


def _pooled(parts: list[tuple[slice, Any]], y: np.ndarray) -> dict[str, Any]:
    """:func:`benchmarks.predictive.regression_scores` of the periods' distributions pooled,
    and the one-sided gaps at 5%, 50% and 95%."""
    from benchmarks.predictive import Mixture, Pooled, regression_scores

    out = regression_scores(y, Pooled([Mixture(dist) for _, dist in parts]))
    one = out["one_sided_gaps"]
    return {**out, "below_5": one[0], "below_50": one[9], "below_95": one[-1]}


def _shifted(gm: GaussianMixture, shift: float) -> GaussianMixture:
    return GaussianMixture(gm.weights, gm.means + shift, gm.variances)


def shifted_window(model: Any, cal: tuple, X: np.ndarray, y: np.ndarray,
                   labels: np.ndarray, window: int) -> list[tuple[slice, Any]]:
    """``window+shift``: a residual-median shift of the mixture, then a window-refit map."""
    from ebf.calibration import period_blocks

    def median_residual(Xp: np.ndarray, yp: np.ndarray) -> np.ndarray:
        base = model.predict_distribution(Xp, recalibrated=False)
        return base, yp - base.quantile(np.array([0.5]))[:, 0]

    base, resid = median_residual(*cal)
    shift = float(np.median(resid))
    history = [(resid, _shifted(base, shift).cdf(cal[1]))]
    out = []
    for rows in period_blocks(labels):
        pit_map = PITMap.fit(np.clip(np.concatenate([u for _, u in history]), 0.0, 1.0))
        base, resid = median_residual(X[rows], y[rows])
        moved = _shifted(base, shift)
        out.append((rows, RecalibratedDistribution(moved, pit_map)))
        history.append((resid, moved.cdf(y[rows])))
        while len(history) > 1 and sum(r.size for r, _ in history[1:]) >= window:
            history.pop(0)
        shift = float(np.median(np.concatenate([r for r, _ in history])))
    return out


def run_model(name: str, cfg: argparse.Namespace) -> list[dict]:
    from ebf import EmpiricalBayesianForestRegressor
    from ebf.calibration import calibration_split, rolling_recalibration

    task = load_task("chronological", cfg)
    fit, cal = calibration_split(task.y_train.size, "recent", 0.1)
    trees = cfg.n_estimators if name == "bayesian" else 10
    model = EmpiricalBayesianForestRegressor(branch=name, n_estimators=trees,
                                             trunk_max_leaves=8, random_state=cfg.seed,
                                             n_jobs=2)
    model.fit(task.X_train[fit], task.y_train[fit])
    history = (task.X_train[cal], task.y_train[cal])
    window = cfg.window or window_rows(history[0], cfg.window_days)
    X, y = task.X_test, task.y_test
    rows = []
    for update in cfg.updates:
        t0 = time.perf_counter()
        kind, _, per = update.partition(" ")
        if kind == "static":
            model.recalibrate(*history)
            parts = [(slice(0, y.size), model.predict_distribution(X))]
        elif kind == "window+shift":
            parts = shifted_window(model, history, X, y, periods(X, per), window)
        else:
            if kind == "aci":
                model.recalibrate(*history)
            parts = list(rolling_recalibration(
                model, X, y, periods(X, per), update=kind, window=window,
                history=history if kind == "window" else None))
        rows.append({"model": f"EBF {name}", "update": update, "window": window,
                     **_pooled(parts, y),
                     "seconds": time.perf_counter() - t0})
        print(rows[-1]["model"], update, {k: round(v, 4) for k, v in rows[-1].items()
                                          if isinstance(v, float)}, flush=True)
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=None, help="flights kept (0: all 273,853)")
    p.add_argument("--n-estimators", type=int, default=None, help="Bayesian branch trees")
    p.add_argument("--models", nargs="+", default=["bayesian", "mondrian"])
    p.add_argument("--updates", nargs="+", default=list(UPDATES), choices=UPDATES)
    p.add_argument("--window", type=int, default=None,
                   help="rows of the refit window (default: --window-days of rows)")
    p.add_argument("--window-days", type=float, default=14.0,
                   help="the window as days of departures, at the calibration rows' daily "
                        "rate (default 14)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    p.add_argument("--output", type=Path, default=OUT)
    return parse_with_sizes(p, argv, dict(rows=6000, n_estimators=5),
                            dict(rows=100_000, n_estimators=100))


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    rows = [r for name in cfg.models for r in run_model(name, cfg)]
    write_rows(cfg.output, "rolling", cfg,
               f"Rolling recalibration, chronological flights ({cfg.rows:,} rows)", COLUMNS,
               rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
