"""Per-partition prediction cost of saved EBF / SSF models: this checkout against another.

What ``ebf demo``'s predict phase does per Dask partition, timed in one process on the
demo's own models and test rows (``ebf demo --out DIR`` first):

- ``calls``: ``predict(X, return_std=True)``, ``predict_quantiles(X)`` and (EBF) ``apply(X)``,
  the three calls the prediction task made before the one-pass summary;
- ``summary``: ``predict_summary(X)`` (mean, std, quantiles and branch ids in one pass), when
  the code has it;
- ``evaluate``: ``predict_distribution(X)`` then the evaluation job's rows (squared error,
  log density, CRPS, PIT, the 90% interval and median; recalibrated and raw when the model
  recalibrates): what ``ebf evaluate``'s task does per partition.

``--before ROOT`` runs the same measurements with another checkout of the code on
``PYTHONPATH`` (e.g. ``git worktree add /tmp/before <commit>``), alternating the two in
every repeat so that both see the same machine load; the table gives rows/s per path and
each path's speed-up (the other checkout's seconds over this one's, paired by repeat).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_predict.json"
FEATURES = ["aircraft_age", "distance", "air_time", "dep_time", "arr_time", "day_of_week",
            "day_of_month", "month"]
QUANTILES = (0.05, 0.5, 0.95)


def measure(demo_dir: Path, rows: int, models: Sequence[str]) -> dict[str, dict[str, float]]:
    """Seconds of every path for every model, on the first ``rows`` test rows."""
    import numpy as np
    import pandas as pd

    from ebf.artifact import load
    from pipelines.report.metrics import DEFAULT_LEVELS
    from pipelines.scoring.job import EvaluationJob

    files = sorted(glob.glob(str(demo_dir / "data" / "test" / "*.parquet")))
    test = pd.concat([pd.read_parquet(f) for f in files]).iloc[:rows]
    X, y = test[FEATURES], test["arr_delay"].to_numpy(dtype=np.float64)
    out: dict[str, dict[str, float]] = {}
    for name in models:
        loaded = load(demo_dir / "models" / name)
        model = getattr(loaded, "model", loaded)
        model.predict_quantiles(X.iloc[:200], QUANTILES)  # compile, lazy posteriors

        def calls(model=model) -> None:
            model.predict(X, return_std=True)
            model.predict_quantiles(X, QUANTILES)
            if hasattr(model, "trunk_"):
                model.apply(X)

        job = EvaluationJob(np.asarray(DEFAULT_LEVELS), getattr(model, "classes_", None),
                            getattr(model, "recalibration_", None))

        def evaluate(model=model, job=job) -> None:
            job.rows(model.predict_distribution(X, recalibrated=False), y)

        paths = {"calls": calls, "evaluate": evaluate}
        if hasattr(model, "predict_summary"):
            paths["summary"] = lambda model=model: model.predict_summary(X, QUANTILES)
        times = {}
        for path, fn in paths.items():
            t0 = time.perf_counter()
            fn()
            times[path] = time.perf_counter() - t0
        out[name] = times
    return out


def _run(root: Path, cfg: argparse.Namespace) -> dict[str, dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=str(root))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--demo-dir",
           str(cfg.demo_dir), "--rows", str(cfg.rows), "--models", *cfg.models]
    done = subprocess.run(cmd, env=env, cwd=root, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--demo-dir", type=Path, default=Path("ebf-demo"),
                   help="output directory of `ebf demo` (models/ and data/test)")
    p.add_argument("--before", type=Path, help="another checkout to compare with")
    p.add_argument("--rows", type=int, default=20_000, help="test rows (20,000)")
    p.add_argument("--repeats", type=int, default=3, help="repeats, alternating (3)")
    p.add_argument("--models", nargs="+", default=["ebf", "ssf"])
    p.add_argument("--output", type=Path, default=RESULTS)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.worker:
        print(json.dumps(measure(cfg.demo_dir, cfg.rows, cfg.models)))
        return 0
    from benchmarks.common import machine_info, print_table, versions, write_json

    roots = {"after": ROOT} | ({"before": cfg.before.resolve()} if cfg.before else {})
    runs: dict[str, list] = {label: [] for label in roots}
    for _ in range(cfg.repeats):
        for label, root in roots.items():
            runs[label].append(_run(root, cfg))
    rows = []
    for name in cfg.models:
        for label in roots:
            for path in ("calls", "summary", "evaluate"):
                times = [r[name][path] for r in runs[label] if path in r[name]]
                if times:
                    sec = statistics.median(times)
                    rows.append({"model": name, "code": label, "path": path, "seconds": sec,
                                 "rows_per_s": cfg.rows / sec})
    if cfg.before:
        for name in cfg.models:
            for path in ("summary", "evaluate"):
                before = [r[name][path] for r in runs["before"]]
                after = [r[name][path] for r in runs["after"]]
                rows.append({"model": name, "code": "before/after", "path": path,
                             "seconds": None, "rows_per_s": None,
                             "speedup": statistics.median(
                                 [b / a for b, a in zip(before, after, strict=True)])})
    print_table(f"prediction paths, {cfg.rows} rows, median of {cfg.repeats}", [
        ("model", "model", "s"), ("code", "code", "s"), ("path", "path", "s"),
        ("seconds", "seconds", ".3f"), ("rows_per_s", "rows/s", ",.0f"),
        ("speedup", "speed-up", ".2f")], rows)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(cfg).items()}
    write_json({"machine": machine_info(), "versions": versions(), "config": config,
                "rows": rows, "runs": runs}, cfg.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
