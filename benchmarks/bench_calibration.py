"""Benchmark issue 11: recalibrated predictive distributions against conformal peers.

Three tasks, each with train rows and later test rows:

``chronological``
    The demo's split of the flight delays (``pipelines.datasets.load_flight_delays``): the
    first 80% of the flights in time train, the last 20% test (calmer months than the
    training ones: the drift the recalibration has to absorb).
``shuffled``
    The same flights in a seeded random order, the same 80% / 20% split (no drift).
``friedman``
    Friedman (1991) #1 with 10 features (5 spurious) and N(0, 1) noise
    (:func:`benchmarks.forest_models.friedman`), ``--friedman-train`` / ``--friedman-test`` rows.

``--rows`` keeps a seeded random subset of the 273,853 flights (in time order for the
chronological task, so that its train and test still span the demo's months); ``0`` keeps
them all.

Methods, all on the same rows (the calibration rows are those of
:func:`ebf.calibration.calibration_split`: ``"recent"``, the last ``--cal-fraction`` of the
training rows in time, for the chronological task; a seeded ``"holdout"`` otherwise):

``EBF`` / ``SSF``
    Ours, as in ``ebf demo``: the Empirical Bayesian Forest with Mondrian branches
    (``--n-estimators`` trees per branch, ``trunk_max_leaves=8``) and the sub-sample forest
    baseline (as many sub-samples as the EBF has branches, the same trees), fit on all the
    training rows, uncalibrated.
``EBF+recal`` / ``SSF+recal``
    The same fit on the fit rows, then ``recalibrate`` on the calibration rows (a monotone
    map of the PIT, Kuleshov et al. 2018); every prediction comes from the recalibrated CDF.
``split-EBF`` / ``split-HGB``
    MAPIE's split conformal intervals (absolute residuals) around the mean of the EBF fit
    on the fit rows (before its recalibration) / of a ``HistGradientBoostingRegressor``.
``CQR-HGB``
    MAPIE's conformalized quantile regression, ``HistGradientBoostingRegressor(loss=
    "quantile")`` at the 19 quantiles the nine central intervals need (the median shared).
``CPS-EBF`` / ``CPS-HGB``
    crepes' conformal predictive system: a whole predictive CDF (the calibration residuals
    scaled by a difficulty), around the EBF mean scaled by the EBF std / around the HGB mean
    scaled by crepes' k-nearest-neighbour difficulty estimator.

Scores on the test rows: the largest |observed - nominal| coverage of the central
intervals at 10%, 20%, ..., 90%; NLPD and CRPS (``n/a`` for interval-only peers; crepes'
predictive distribution is a step function without a density, so NLPD is ``n/a`` for CPS,
and its CRPS is the exact CRPS of that step function, :func:`step_crps`); RMSE of the
point prediction; fit, calibration and prediction seconds. The issue's targets: max gap
<= 0.03 on the chronological task and <= 0.02 on the others; NLPD and CRPS of the
recalibrated model not worse than the uncalibrated one on the shuffled task, better on the
chronological one.

Writes ``benchmarks/results/issue11/calibration.json`` (rewritten after every task),
``calibration.md`` (the tables, markdown) and prints the tables. Run from the repository
root (the peers come with the ``bench`` extra)::

    PYTHONPATH=. python benchmarks/bench_calibration.py --quick
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import parse_with_sizes, print_table, run_parts, timed
from benchmarks.predictive import fit_cps, step_crps

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "issue11"
RESULTS = RESULTS_DIR / "calibration.json"
TASKS = ("chronological", "shuffled", "friedman")
METHODS = ("EBF", "EBF+recal", "SSF", "SSF+recal", "split-EBF", "split-HGB", "CQR-HGB",
           "CPS-EBF", "CPS-HGB")
LEVELS = np.round(np.arange(1, 10) / 10, 1)
CAL_METHOD = {"chronological": "recent", "shuffled": "holdout", "friedman": "holdout"}
GAP_TARGET = {"chronological": 0.03, "shuffled": 0.02, "friedman": 0.02}
#: How the recalibrated NLPD / CRPS must compare with the uncalibrated ones (issue 11).
SCORE_TARGET = {"chronological": "better", "shuffled": "not worse"}
FULL = dict(rows=100_000, friedman_train=20_000, friedman_test=10_000)
QUICK = dict(rows=4_000, friedman_train=2_000, friedman_test=1_000)
TEST_FRACTION = 0.2  # as ebf demo


# ---------------------------------------------------------------- tasks


@dataclass
class Task:
    """Train and test rows of one task and how its calibration rows are chosen."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    description: str

    @property
    def cal_method(self) -> str:
        return CAL_METHOD[self.name]


@lru_cache(maxsize=1)
def _flights() -> tuple[np.ndarray, np.ndarray]:
    from pipelines.datasets import load_flight_delays

    X, y = load_flight_delays()
    return X.to_numpy(), y.to_numpy()


def _split_80_20(name: str, X: np.ndarray, y: np.ndarray, description: str) -> Task:
    n_train = int(round((1.0 - TEST_FRACTION) * len(y)))
    return Task(name, X[:n_train], y[:n_train], X[n_train:], y[n_train:], description)


def load_task(name: str, cfg: argparse.Namespace) -> Task:
    """The rows of task ``name`` (see the module docstring)."""
    rng = np.random.default_rng(cfg.seed)
    if name == "friedman":
        from benchmarks.forest_models import friedman

        X, y, _ = friedman(cfg.friedman_train + cfg.friedman_test, 10, rng)
        return Task(name, X[:cfg.friedman_train], y[:cfg.friedman_train],
                    X[cfg.friedman_train:], y[cfg.friedman_train:],
                    f"Friedman #1, p = 10, N(0, 1) noise, {cfg.friedman_train:,} train / "
                    f"{cfg.friedman_test:,} test rows")
    X, y = _flights()
    n_total = len(y)
    if cfg.rows and cfg.rows < n_total:
        keep = np.sort(rng.choice(n_total, cfg.rows, replace=False))  # stays in time order
        X, y = X[keep], y[keep]
    what = f"{len(y):,} of {n_total:,} flights"
    if name == "chronological":
        return _split_80_20(name, X, y, f"{what} in time order, first 80% train, last 20% test")
    order = np.random.default_rng([cfg.seed, 1]).permutation(len(y))
    return _split_80_20(name, X[order], y[order], f"the same {what} shuffled, 80% / 20%")


# ---------------------------------------------------------------- scores


def coverage_gaps(y: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Observed minus nominal coverage of the intervals ``lower[:, j] <= y <= upper[:, j]``
    at :data:`LEVELS`."""
    inside = (lower <= y[:, None]) & (y[:, None] <= upper)
    return inside.mean(axis=0) - LEVELS


def _row(method: str, y: np.ndarray, point: np.ndarray, gaps: np.ndarray, times: dict,
         nlpd: float | None = None, crps: float | None = None, **extra: Any) -> dict[str, Any]:
    from basics.metrics import rmse

    return {"method": method, "max_gap": float(np.max(np.abs(gaps))),
            "nlpd": nlpd, "crps": crps, "rmse": rmse(y, point),
            "gaps": [float(g) for g in gaps], **times, **extra}


def score_distribution(method: str, model: Any, X: np.ndarray, y: np.ndarray,
                       times: dict[str, float]) -> dict[str, Any]:
    """Scores of one of our models' predictive distributions on the test rows."""
    from basics.metrics import calibration_table, crps, nlpd

    t0 = time.perf_counter()
    dist = model.predict_distribution(X)
    point = model.predict(X)
    times = {**times, "predict_seconds": time.perf_counter() - t0}
    gaps = calibration_table(y, dist, LEVELS)["observed_minus_nominal"].to_numpy()
    return _row(method, y, point, gaps, times, nlpd=nlpd(y, dist), crps=crps(y, dist),
                rmse_distribution_mean=float(np.sqrt(np.mean((np.asarray(dist.mean) - y) ** 2))))


# ---------------------------------------------------------------- ours


def _ours(name: str, cfg: argparse.Namespace, n_subsamples: int) -> Any:
    from ebf import EmpiricalBayesianForestRegressor, SubsampleForestRegressor

    common = dict(n_estimators=cfg.n_estimators, branch="mondrian", random_state=cfg.seed,
                  n_jobs=cfg.n_jobs)
    if name == "EBF":
        return EmpiricalBayesianForestRegressor(trunk_max_leaves=8, **common)
    return SubsampleForestRegressor(n_subsamples=n_subsamples, **common)


def warm_up(cfg: argparse.Namespace) -> None:
    """Compile (or load from numba's cache) the kernels of a fit, a recalibration and the
    scores, so that the first model's times do not include them."""
    from basics.metrics import calibration_table, crps

    rng = np.random.default_rng(0)
    X, y = rng.random((400, 3)), rng.normal(size=400)
    for name in ("EBF", "SSF"):
        model = _ours(name, argparse.Namespace(**{**vars(cfg), "n_estimators": 2}), 2)
        model.fit(X[:300], y[:300]).recalibrate(X[300:], y[300:])
        dist = model.predict_distribution(X[:50])
        calibration_table(y[:50], dist, LEVELS)
        crps(y[:50], dist)


def _fit(model: Any, X: np.ndarray, y: np.ndarray) -> float:
    def fit() -> None:
        model.fit(X, y)
        model.predict(X[:1])  # lazy posteriors (Mondrian) belong to the fit time
    return timed(fit)[1]


def run_ours(name: str, task: Task, fit_rows: np.ndarray, cal_rows: np.ndarray,
             cfg: argparse.Namespace, n_subsamples: int,
             before_recalibration: Callable[[Any, float], list[dict]] | None = None,
             ) -> tuple[list[dict], Any]:
    """``name`` uncalibrated (all training rows) and recalibrated (fit rows, then the
    calibration rows); ``before_recalibration(model, fit_seconds)`` scores the peers that
    use the model fit on the fit rows. Returns the rows and the uncalibrated model."""
    rows = []
    full = _ours(name, cfg, n_subsamples)
    if name in cfg.methods:
        fit_s = _fit(full, task.X_train, task.y_train)
        rows.append(score_distribution(name, full, task.X_test, task.y_test,
                                       {"fit_seconds": fit_s, "calibrate_seconds": 0.0}))
    elif name == "EBF":  # the SSF needs the EBF's number of branches
        _fit(full, task.X_train, task.y_train)
    recal_name = f"{name}+recal"
    if recal_name not in cfg.methods and before_recalibration is None:
        return rows, full
    model = _ours(name, cfg, n_subsamples)
    fit_s = _fit(model, task.X_train[fit_rows], task.y_train[fit_rows])
    if before_recalibration is not None:
        rows += before_recalibration(model, fit_s)
    if recal_name in cfg.methods:
        cal_s = timed(lambda: model.recalibrate(task.X_train[cal_rows],
                                                 task.y_train[cal_rows]))[1]
        rows.append(score_distribution(recal_name, model, task.X_test, task.y_test,
                                       {"fit_seconds": fit_s, "calibrate_seconds": cal_s}))
    return rows, full


# ---------------------------------------------------------------- peers


def split_conformal(method: str, base: Any, fit_s: float, task: Task,
                    cal_rows: np.ndarray) -> dict[str, Any]:
    """MAPIE's split conformal intervals at every level around the fitted ``base``."""
    from mapie.regression import SplitConformalRegressor

    scr = SplitConformalRegressor(estimator=base, confidence_level=list(LEVELS), prefit=True)
    cal_s = timed(lambda: scr.conformalize(task.X_train[cal_rows], task.y_train[cal_rows]))[1]
    (point, bounds), pred_s = timed(lambda: scr.predict_interval(task.X_test))
    gaps = coverage_gaps(task.y_test, bounds[:, 0, :], bounds[:, 1, :])
    return _row(method, task.y_test, point, gaps, {
        "fit_seconds": fit_s, "calibrate_seconds": cal_s, "predict_seconds": pred_s})


def cqr(task: Task, fit_rows: np.ndarray, cal_rows: np.ndarray,
        cfg: argparse.Namespace) -> dict[str, Any]:
    """MAPIE's CQR, one conformalizer per level over prefit HGB quantile models."""
    from mapie.regression import ConformalizedQuantileRegressor
    from sklearn.ensemble import HistGradientBoostingRegressor

    quantiles = np.round(np.concatenate([(1 - LEVELS) / 2, [0.5], (1 + LEVELS) / 2]), 3)
    X_fit, y_fit = task.X_train[fit_rows], task.y_train[fit_rows]
    models, fit_s = {}, 0.0
    for q in quantiles:
        hgb = HistGradientBoostingRegressor(loss="quantile", quantile=float(q),
                                            random_state=cfg.seed)
        fit_s += timed(lambda hgb=hgb: hgb.fit(X_fit, y_fit))[1]
        models[float(q)] = hgb
    lower, upper = np.empty((len(task.y_test), LEVELS.size)), np.empty((len(task.y_test),
                                                                        LEVELS.size))
    cal_s = pred_s = 0.0
    for j, level in enumerate(LEVELS):
        lo, hi = round((1 - level) / 2, 3), round((1 + level) / 2, 3)
        reg = ConformalizedQuantileRegressor([models[lo], models[hi], models[0.5]],
                                             confidence_level=float(level), prefit=True)
        cal_s += timed(lambda reg=reg: reg.conformalize(task.X_train[cal_rows],
                                                         task.y_train[cal_rows]))[1]
        (point, bounds), seconds = timed(lambda reg=reg: reg.predict_interval(task.X_test))
        pred_s += seconds
        lower[:, j], upper[:, j] = bounds[:, 0, 0], bounds[:, 1, 0]
    return _row("CQR-HGB", task.y_test, point, coverage_gaps(task.y_test, lower, upper), {
        "fit_seconds": fit_s, "calibrate_seconds": cal_s, "predict_seconds": pred_s},
        point_prediction="median")


def conformal_predictive_system(method: str, fit_s: float, task: Task, cal_rows: np.ndarray,
                                mean_std: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                                ) -> dict[str, Any]:
    """crepes' normalized conformal predictive system: residuals on the calibration rows
    scaled by the difficulty ``std`` of ``mean_std(X) -> (mean, std)``."""
    X_cal, y_cal = task.X_train[cal_rows], task.y_train[cal_rows]

    def calibrate() -> Any:
        return fit_cps(y_cal, *mean_std(X_cal))

    cps, cal_s = timed(calibrate)

    def predict() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        mean, std = mean_std(task.X_test)
        bounds = [cps.predict_int(mean, sigmas=std, confidence=float(lv)) for lv in LEVELS]
        return (mean, std, np.column_stack([b[:, 0] for b in bounds]),
                np.column_stack([b[:, 1] for b in bounds]))

    (mean, std, lower, upper), pred_s = timed(predict)
    return _row(method, task.y_test, mean, coverage_gaps(task.y_test, lower, upper), {
        "fit_seconds": fit_s, "calibrate_seconds": cal_s, "predict_seconds": pred_s},
        crps=step_crps(task.y_test, mean, std, cps.alphas))


def hgb_peers(task: Task, fit_rows: np.ndarray, cal_rows: np.ndarray,
              cfg: argparse.Namespace) -> list[dict[str, Any]]:
    """split-HGB, CPS-HGB and CQR-HGB, the selected ones, on ``cfg.peer_threads`` OpenMP
    threads."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(cfg.peer_threads, user_api="openmp"):
        return _hgb_peers(task, fit_rows, cal_rows, cfg)


def _hgb_peers(task: Task, fit_rows: np.ndarray, cal_rows: np.ndarray,
               cfg: argparse.Namespace) -> list[dict[str, Any]]:
    from sklearn.ensemble import HistGradientBoostingRegressor

    rows = []
    X_fit, y_fit = task.X_train[fit_rows], task.y_train[fit_rows]
    if {"split-HGB", "CPS-HGB"} & set(cfg.methods):
        hgb = HistGradientBoostingRegressor(random_state=cfg.seed)
        fit_s = timed(lambda: hgb.fit(X_fit, y_fit))[1]
        if "split-HGB" in cfg.methods:
            rows.append(split_conformal("split-HGB", hgb, fit_s, task, cal_rows))
        if "CPS-HGB" in cfg.methods:
            from crepes.extras import DifficultyEstimator

            de, de_s = timed(lambda: DifficultyEstimator().fit(X=X_fit, y=y_fit, scaler=True))
            rows.append(conformal_predictive_system(
                "CPS-HGB", fit_s + de_s, task, cal_rows,
                lambda X: (hgb.predict(X), de.apply(X))))
    if "CQR-HGB" in cfg.methods:
        rows.append(cqr(task, fit_rows, cal_rows, cfg))
    return rows


def ebf_peers(task: Task, cal_rows: np.ndarray, cfg: argparse.Namespace,
              ) -> Callable[[Any, float], list[dict]]:
    """The peers around the EBF fit on the fit rows (scored before its recalibration)."""
    def score(ebf: Any, fit_s: float) -> list[dict]:
        rows = []
        if "split-EBF" in cfg.methods:
            rows.append(split_conformal("split-EBF", ebf, fit_s, task, cal_rows))
        if "CPS-EBF" in cfg.methods:
            rows.append(conformal_predictive_system(
                "CPS-EBF", fit_s, task, cal_rows, lambda X: ebf.predict(X, return_std=True)))
        return rows
    return score


# ---------------------------------------------------------------- one task


def run_task(name: str, cfg: argparse.Namespace) -> dict[str, Any]:
    """Every selected method on task ``name``; the rows in :data:`METHODS` order."""
    from ebf.calibration import calibration_split

    task = load_task(name, cfg)
    fit_rows, cal_rows = calibration_split(len(task.y_train), method=task.cal_method,
                                           fraction=cfg.cal_fraction, random_state=cfg.seed)
    print(f"\n{name}: {task.description}; fit {len(fit_rows):,} + calibrate "
          f"{len(cal_rows):,} ({task.cal_method}) ...", flush=True)
    peers = {"split-EBF", "CPS-EBF"} & set(cfg.methods)
    rows, ebf = run_ours("EBF", task, fit_rows, cal_rows, cfg, 0,
                         ebf_peers(task, cal_rows, cfg) if peers else None)
    if {"SSF", "SSF+recal"} & set(cfg.methods):
        rows += run_ours("SSF", task, fit_rows, cal_rows, cfg, len(ebf.branches_))[0]
    rows += hgb_peers(task, fit_rows, cal_rows, cfg)
    rows.sort(key=lambda r: METHODS.index(r["method"]))
    print_table(f"{name}: {task.description}", TABLE_COLUMNS, rows)
    return {"description": task.description, "n_train": len(task.y_train),
            "n_fit": len(fit_rows), "n_cal": len(cal_rows), "n_test": len(task.y_test),
            "cal_method": task.cal_method, "cal_fraction": cfg.cal_fraction,
            "levels": LEVELS.tolist(), "rows": rows, "targets": targets(name, rows)}


def targets(name: str, rows: list[dict]) -> list[dict[str, Any]]:
    """The issue's targets for the recalibrated models of task ``name``."""
    by = {r["method"]: r for r in rows}
    out = []
    for model in ("EBF", "SSF"):
        recal = by.get(f"{model}+recal")
        if recal is None:
            continue
        out.append({"method": recal["method"], "check": f"max gap <= {GAP_TARGET[name]}",
                    "value": recal["max_gap"], "met": recal["max_gap"] <= GAP_TARGET[name]})
        if model not in by or name not in SCORE_TARGET:
            continue
        how = SCORE_TARGET[name]
        for score in ("nlpd", "crps"):
            new, old = recal[score], by[model][score]
            met = new < old if how == "better" else new <= old
            out.append({"method": recal["method"], "check": f"{score.upper()} {how} than "
                        f"{model} ({old:.4f})", "value": new, "met": bool(met)})
    return out


# ---------------------------------------------------------------- tables and options


TABLE_COLUMNS = [("method", "method", "s"), ("max_gap", "max|gap|", ".3f"),
                 ("nlpd", "NLPD", ".3f"), ("crps", "CRPS", ".3f"), ("rmse", "RMSE", ".3f"),
                 ("fit_seconds", "fit s", ".1f"), ("calibrate_seconds", "cal s", ".2f"),
                 ("predict_seconds", "predict s", ".1f")]


def markdown(report: dict[str, Any]) -> str:
    """The report's tables (scores, per-level gaps, targets) as markdown."""
    p = report["params"]
    lines = [f"# Issue 11: calibration benchmark ({report['started']})", "",
             f"`{p['command']}` on {report['machine']['usable_cpus']} cores; "
             f"{p['n_estimators']} Mondrian trees per EBF branch / SSF sub-sample, "
             f"calibration fraction {p['cal_fraction']}, seed {p['seed']}. "
             "NLPD/CRPS `n/a`: interval-only peer, or (CPS) a step CDF without a density."]
    for name in TASKS:
        part = report.get(name)
        if part is None:
            continue
        lines += ["", f"## {name}: {part['description']}", "",
                  f"Fit rows {part['n_fit']:,}, calibration rows {part['n_cal']:,} "
                  f"(`{part['cal_method']}`), test rows {part['n_test']:,}.", ""]
        lines += _md_table([h for _, h, _ in TABLE_COLUMNS],
                           [[_md_cell(r.get(k), spec) for k, _, spec in TABLE_COLUMNS]
                            for r in part["rows"]])
        lines += ["", "Observed - nominal coverage of the central intervals:", ""]
        lines += _md_table(["method"] + [f"{lv:.0%}" for lv in part["levels"]],
                           [[r["method"]] + [f"{g:+.3f}" for g in r["gaps"]]
                            for r in part["rows"]])
        if part["targets"]:
            lines += ["", "Targets:", ""]
            lines += [f"- {t['method']}: {t['check']}: {t['value']:.4f} "
                      f"{'met' if t['met'] else 'NOT met'}" for t in part["targets"]]
    return "\n".join(lines) + "\n"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header)] + [line(r) for r in rows]


def _md_cell(value: Any, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--parts", nargs="+", choices=TASKS, default=list(TASKS), help="tasks")
    p.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    p.add_argument("--rows", type=int,
                   help="flights kept, a seeded random subset (100k; quick 4k; 0 = all)")
    p.add_argument("--friedman-train", type=int, help="Friedman training rows (20k)")
    p.add_argument("--friedman-test", type=int, help="Friedman test rows (10k)")
    p.add_argument("--cal-fraction", type=float, default=0.1,
                   help="fraction of the training rows that calibrate (0.1)")
    p.add_argument("--n-estimators", type=int, default=10, help="trees per branch (10)")
    p.add_argument("--n-jobs", type=int, default=-1, help="threads of our models (all)")
    p.add_argument("--peer-threads", type=int, default=1,
                   help="OpenMP threads of the HistGradientBoosting peers (1: on a shared, "
                        "oversubscribed machine OpenMP's spinning barriers made 2 threads "
                        "4-10x slower than 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, default=RESULTS)
    cfg = parse_with_sizes(p, argv, QUICK, FULL)
    cfg.command = " ".join(["bench_calibration.py", *(sys.argv[1:] if argv is None else argv)])
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    # MAPIE's CQR calls logging.basicConfig(level=INFO) when it logs "The predictions are
    # ill-sorted" (crossing quantile models): a handler installed first keeps the root
    # logger at WARNING, so neither that message nor every library's INFO floods the tables.
    logging.basicConfig(level=logging.WARNING)
    warm_up(cfg)
    status = run_parts("bench_calibration", cfg,
                       {name: lambda c, name=name: run_task(name, c) for name in TASKS})
    report = json.loads(cfg.output.read_text())
    table = cfg.output.with_suffix(".md")
    table.write_text(markdown(report))
    print(f"wrote {table}")
    return status


if __name__ == "__main__":
    sys.exit(main())
