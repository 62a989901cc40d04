"""Benchmark issue 47: an ebf model through MLflow (log, load, predict) against ``ebf predict``.

One EBF regressor (``--trees`` trees, Bayesian branches) fit on ``--train`` rows of Friedman
#1 (``ebf make-data friedman``) and saved; ``--rows`` new rows as Parquet. Two ways to
predict them, alternated ``--repeats`` times (the machine may be shared: min, median and
max are reported):

``ebf predict``
    the command in this process (``pipelines.cli.main``: a local Dask cluster of
    ``--workers`` threads started and stopped, the Parquet read, the predictions written).
``MLflow``
    ``ebf.mlflow.log_model`` of the saved model (in a new run), then
    ``mlflow.pyfunc.load_model("runs:/...")`` and ``predict`` of the same rows (read from
    the Parquet), each step timed. The pyfunc loads with ``suppress_warnings=True`` (the
    requirement check's first call maps every installed package to its modules: about 12 s
    once per process, timed apart as ``first load, requirement check``).

The frames must be equal bit for bit. ``--tracking-uri`` names a tracking server (default: a
file store in a temporary directory). Writes ``benchmarks/results/issue47/mlflow.json`` and
``mlflow.md``. Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_mlflow.py --tracking-uri http://127.0.0.1:5000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "issue47"


def _cell(values: list[float]) -> str:
    return (f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
            if values else "-")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=20_000)
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--trees", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--tracking-uri", default=None)
    args = p.parse_args(argv)

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("EBF_LOCAL_PROCESSES", "0")
    import mlflow

    import ebf
    import ebf.mlflow
    from pipelines.cli import main as ebf_main

    work = Path(tempfile.mkdtemp(prefix="bench-mlflow-"))
    if args.tracking_uri is None:
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        args.tracking_uri = (work / "mlruns").as_uri()
    mlflow.set_tracking_uri(args.tracking_uri)
    mlflow.set_experiment("bench-mlflow")

    for name, rows, seed in (("train", args.train, 0), ("test", args.rows, 1)):
        assert ebf_main(["make-data", "friedman", "--rows", str(rows), "--seed", str(seed),
                         "--out", str(work / name), "--quiet"]) == 0
    train = pd.read_parquet(work / "train")
    features = [c for c in train.columns if c != "y"]
    model = ebf.EmpiricalBayesianForestRegressor(n_estimators=args.trees, random_state=0)
    model.fit(train[features], train["y"])
    model_dir = str(ebf.save(model, work / "model"))
    X = pd.read_parquet(work / "test")[features]

    t0 = time.perf_counter()  # MLflow's requirement check, once per process
    from mlflow.utils.requirements_utils import warn_dependency_requirement_mismatches

    warn_dependency_requirement_mismatches(ebf.mlflow.get_default_pip_requirements())
    first_check = time.perf_counter() - t0

    times: dict[str, list[float]] = {k: [] for k in (
        "ebf predict", "MLflow total", "log_model", "load", "predict")}
    for i in range(args.repeats):
        t0 = time.perf_counter()
        out = work / f"pred{i}"
        assert ebf_main(["predict", model_dir, str(work / "test"), "--out", str(out),
                         "--quiet", "--n-workers", str(args.workers)]) == 0
        times["ebf predict"].append(time.perf_counter() - t0)
        expected = pd.read_parquet(out)

        t0 = time.perf_counter()
        with mlflow.start_run():
            info = ebf.mlflow.log_model(model_dir, name="friedman")
        t1 = time.perf_counter()
        pyfunc = mlflow.pyfunc.load_model(info.model_uri, suppress_warnings=True)
        t2 = time.perf_counter()
        got = pyfunc.predict(X)
        t3 = time.perf_counter()
        times["log_model"].append(t1 - t0)
        times["load"].append(t2 - t1)
        times["predict"].append(t3 - t2)
        times["MLflow total"].append(t3 - t0)
        pd.testing.assert_frame_equal(got.reset_index(drop=True), expected, check_exact=True)

    size = sum(f.stat().st_size for f in Path(model_dir).rglob("*") if f.is_file())
    result = {"rows": args.rows, "train": args.train, "trees": args.trees,
              "model_bytes": size, "tracking_uri": args.tracking_uri.split("://")[0],
              "first_load_requirement_check_s": first_check, "seconds": times,
              "equal": True}
    lines = [f"# An ebf model through MLflow vs ebf predict ({args.rows:,} rows)", "",
             f"EBF regressor, {args.trees} trees, fit on {args.train:,} Friedman rows "
             f"(model {size / 1e6:.1f} MB); tracking store: {result['tracking_uri']}; "
             f"median (min-max) of {args.repeats} alternated runs, seconds. The pyfunc's "
             "frame equals ebf predict's bit for bit.", "",
             "| path | seconds |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in times.items()]
    lines += [f"| first pyfunc load in a process: MLflow's requirement check | "
              f"{first_check:.2f} |", ""]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "mlflow.json").write_text(json.dumps(result, indent=1))
    (OUT / "mlflow.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
