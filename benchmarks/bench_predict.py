"""Per-partition prediction cost of saved EBF / SSF models: this checkout against another.

What ``ebf demo``'s predict phase does per Dask partition, timed in one process on the
demo's own models and test rows (``ebf demo --out DIR`` first), in CPU seconds of one thread
(``--n-jobs 1``, as a Dask worker thread predicts its partition):

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
each path's speed-up (the other checkout's seconds over this one's, paired by repeat), and
the cost of scoring against predicting (``evaluate / summary``, paired by repeat: issue 44
asks for at most 1.3).

``--cli`` also times the commands end to end, each with its own local cluster: ``ebf
predict`` (to a temporary directory) and ``ebf evaluate`` of every model on the demo's test
data, alternating, and their ratio. The tables (min / median / max of the repeats) are
written beside ``--output`` as Markdown (default ``benchmarks/results/issue44/fused.md``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "issue44" / "fused.json"
FEATURES = ["aircraft_age", "distance", "air_time", "dep_time", "arr_time", "day_of_week",
            "day_of_month", "month"]
QUANTILES = (0.05, 0.5, 0.95)


def measure(demo_dir: Path, rows: int, models: Sequence[str],
            n_jobs: int = 1) -> dict[str, dict[str, float]]:
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
        model.n_jobs = n_jobs  # a Dask worker thread predicts its partition on one thread

        def calls(X, y, model=model) -> None:
            model.predict(X, return_std=True)
            model.predict_quantiles(X, QUANTILES)
            if hasattr(model, "trunk_"):
                model.apply(X)

        job = EvaluationJob(np.asarray(DEFAULT_LEVELS), getattr(model, "classes_", None),
                            getattr(model, "recalibration_", None))

        def evaluate(X, y, model=model, job=job) -> None:
            job.rows(model.predict_distribution(X, recalibrated=False), y)

        paths = {"calls": calls, "evaluate": evaluate}
        if hasattr(model, "predict_summary"):
            paths["summary"] = lambda X, y, model=model: model.predict_summary(X, QUANTILES)
        for fn in paths.values():  # compile or load the kernels, lazy posteriors
            fn(X.iloc[:200], y[:200])
        times = {}
        for path, fn in paths.items():  # CPU seconds of one thread: robust to a busy machine
            t0 = time.process_time()
            fn(X, y)
            times[path] = time.process_time() - t0
        out[name] = times
    return out


def _run(root: Path, cfg: argparse.Namespace) -> dict[str, dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=str(root))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--demo-dir",
           str(cfg.demo_dir), "--rows", str(cfg.rows), "--n-jobs", str(cfg.n_jobs),
           "--models", *cfg.models]
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
    p.add_argument("--n-jobs", type=int, default=1, help="threads per model (1)")
    p.add_argument("--cli", action="store_true",
                   help="also time `ebf predict` and `ebf evaluate` end to end")
    p.add_argument("--output", type=Path, default=RESULTS)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _cli(root: Path, cfg: argparse.Namespace, name: str) -> dict[str, float]:
    """Wall seconds of ``ebf predict`` and ``ebf evaluate`` of model ``name`` on the demo's
    test data, each command in its own process and local cluster."""
    env = dict(os.environ, PYTHONPATH=str(root))
    model = str(cfg.demo_dir / "models" / name)
    data = str(cfg.demo_dir / "data" / "test")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        commands = {"cli_predict": ["predict", model, data, "--out", f"{tmp}/pred"],
                    "cli_evaluate": ["evaluate", model, data]}
        for path, args in commands.items():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pipelines", *args, "--quiet"], env=env,
                           cwd=root, check=True, capture_output=True)
            out[path] = time.perf_counter() - t0
    return out


def _spread(times: Sequence[float]) -> dict[str, float]:
    return {"min": min(times), "median": statistics.median(times), "max": max(times)}


def _ratios(run_list: list, name: str, num: str, den: str) -> list[float]:
    return [r[name][num] / r[name][den] for r in run_list if num in r[name] and den in r[name]]


def _rows(cfg: argparse.Namespace, runs: dict[str, list]) -> list[dict]:
    rows = []
    paths = ("calls", "summary", "evaluate", "cli_predict", "cli_evaluate")
    for name in cfg.models:
        for label, run_list in runs.items():
            for path in paths:
                times = [r[name][path] for r in run_list if path in r[name]]
                if times:
                    spread = _spread(times)
                    rows.append({"model": name, "code": label, "path": path, **spread,
                                 "rows_per_s": None if path.startswith("cli") else
                                 cfg.rows / spread["median"]})
            for num, den in (("evaluate", "summary"), ("cli_evaluate", "cli_predict")):
                ratio = _ratios(run_list, name, num, den)
                if ratio:
                    rows.append({"model": name, "code": label, "path": f"{num} / {den}",
                                 **{f"ratio_{k}": v for k, v in _spread(ratio).items()}})
        if "before" in runs:
            for path in paths[1:]:
                before = [r[name][path] for r in runs["before"] if path in r[name]]
                after = [r[name][path] for r in runs["after"] if path in r[name]]
                if before and len(before) == len(after):
                    speedup = [b / a for b, a in zip(before, after, strict=True)]
                    rows.append({"model": name, "code": "before/after", "path": path,
                                 **{f"ratio_{k}": v for k, v in _spread(speedup).items()}})
    return rows


COLUMNS = [("model", "model", "s"), ("code", "code", "s"), ("path", "path", "s"),
           ("min", "min [s]", ".3f"), ("median", "median [s]", ".3f"), ("max", "max [s]", ".3f"),
           ("rows_per_s", "rows/s", ",.0f"), ("ratio_min", "ratio min", ".2f"),
           ("ratio_median", "ratio median", ".2f"), ("ratio_max", "ratio max", ".2f")]


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.worker:
        print(json.dumps(measure(cfg.demo_dir, cfg.rows, cfg.models, cfg.n_jobs)))
        return 0
    from benchmarks.common import machine_info, markdown_table, print_table, versions, write_json

    roots = {"after": ROOT} | ({"before": cfg.before.resolve()} if cfg.before else {})
    runs: dict[str, list] = {label: [] for label in roots}
    for _ in range(cfg.repeats):
        for label, root in roots.items():
            run = _run(root, cfg)
            if cfg.cli:
                for name in cfg.models:
                    run[name].update(_cli(root, cfg, name))
            runs[label].append(run)
    rows = _rows(cfg, runs)
    title = (f"prediction and scoring per partition ({cfg.rows:,} test rows, CPU seconds, "
             f"{cfg.n_jobs} thread(s)){' and the CLI end to end (wall)' if cfg.cli else ''}: "
             f"min / median / max of {cfg.repeats}; ratios paired by repeat")
    print_table(title, COLUMNS, rows)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(cfg).items()}
    cfg.output.parent.mkdir(parents=True, exist_ok=True)
    write_json({"machine": machine_info(), "versions": versions(), "config": config,
                "rows": rows, "runs": runs}, cfg.output)
    cfg.output.with_suffix(".md").write_text(
        f"# {title}\n\n{markdown_table(COLUMNS, rows)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
