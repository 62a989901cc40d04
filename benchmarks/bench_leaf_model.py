"""Benchmark issue 43, item 1: the empirical leaf model against the Gaussian leaf.

On the six regression tasks of ``benchmarks/bench_peers.py`` (its ``load_task``, full sizes,
seed 0): ``EmpiricalBayesianForestRegressor(random_state=0)`` as a user gets it (Gaussian
leaves) and the same with ``branch_params={"leaf_model": "empirical", "leaf_knots": K}`` for
every ``K`` of ``--knots``. Per model: CRPS, NLPD, RMSE and the largest central coverage gap
(10%..90% intervals, from the PIT) of the recalibrated predictive on the test rows, scored
in blocks of rows; fit seconds (all training rows); predict seconds (``predict_summary`` of
the test rows: mean, std and quantiles in one pass); model size (bytes of the saved model
directory, :func:`ebf.artifact.save`). The default ``K`` is the smallest whose CRPS is within
0.2% of the largest ``K``'s on every task.

``--speed TASK``: instead, the predict cost of the default ``K`` against Gaussian leaves on
one task, the two models fit once and timed alternately ``--repeats`` times (the paths of
``benchmarks/bench_predict.py`` in one process: ``predict_summary``, ``predict(X,
return_std=True)`` plus ``predict_quantiles``, and the evaluation rows: log density, CRPS
and PIT of ``predict_distribution``), medians and their ratio, and the size of both models.

Writes ``benchmarks/results/issue43/leaf_model.json`` (after every task) and ``.md``
(``leaf_model_speed.json`` / ``.md`` for ``--speed``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "issue43" / "leaf_model.json"
TASKS = ("chronological", "shuffled", "friedman", "friedman-hetero", "housing", "wine")
KNOTS = (2, 4, 8, 16, 32)
CENTRAL = np.arange(1, 10) / 10
BLOCK = 2000
TOLERANCE = 0.002


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def score(model: Any, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """CRPS, NLPD, RMSE and the largest central coverage gap, in blocks of rows."""
    from basics.metrics import crps_rows

    crps, logpdf, pit, mean = [], [], [], []
    for start in range(0, y.size, BLOCK):
        sl = slice(start, start + BLOCK)
        dist = model.predict_distribution(X[sl])
        crps.append(crps_rows(dist, y[sl]))
        logpdf.append(dist.logpdf(y[sl]))
        pit.append(np.clip(dist.cdf(y[sl]), 0.0, 1.0))
        mean.append(dist.mean)
    pit_all = np.concatenate(pit)
    lp = np.concatenate(logpdf)
    cover = [np.mean((pit_all >= (1 - z) / 2) & (pit_all <= (1 + z) / 2)) - z for z in CENTRAL]
    return {"crps": float(np.concatenate(crps).mean()), "nlpd": float(-lp.mean()),
            "rmse": float(np.sqrt(np.mean((np.concatenate(mean) - y) ** 2))),
            "central_gap": float(np.max(np.abs(cover))), "rows_below_-30": int(np.sum(lp < -30))}


def run_model(task: Any, knots: int | None) -> dict[str, Any]:
    from ebf import EmpiricalBayesianForestRegressor
    from ebf.artifact import save

    params = {} if knots is None else {"branch_params": {"leaf_model": "empirical",
                                                         "leaf_knots": knots}}
    model = EmpiricalBayesianForestRegressor(random_state=0, **params)
    t0 = time.perf_counter()
    model.fit(task.X_train, task.y_train)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.predict_summary(task.X_test)
    predict_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        save(model, Path(tmp) / "model")
        size = _dir_bytes(Path(tmp) / "model")
    return {"model": "gaussian" if knots is None else f"empirical K={knots}", "knots": knots,
            **score(model, task.X_test, task.y_test), "fit_s": fit_s, "predict_s": predict_s,
            "size_bytes": size}


def _paths(model: Any, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    from basics.metrics import crps_rows

    def evaluate() -> None:
        for start in range(0, y.size, BLOCK):
            dist = model.predict_distribution(X[start:start + BLOCK])
            dist.logpdf(y[start:start + BLOCK])
            crps_rows(dist, y[start:start + BLOCK])
            dist.cdf(y[start:start + BLOCK])

    return {"summary": lambda: model.predict_summary(X),
            "calls": lambda: (model.predict(X, return_std=True),
                              model.predict_quantiles(X, (0.05, 0.5, 0.95))),
            "evaluate": evaluate}


def speed(task: Any, knots: int, repeats: int) -> dict[str, Any]:
    """Median seconds of every predict path, Gaussian and empirical leaves timed in turn."""
    from ebf import EmpiricalBayesianForestRegressor
    from ebf.artifact import save

    models = {"gaussian": EmpiricalBayesianForestRegressor(random_state=0),
              f"empirical K={knots}": EmpiricalBayesianForestRegressor(
                  random_state=0, branch_params={"leaf_model": "empirical",
                                                 "leaf_knots": knots})}
    out: dict[str, Any] = {}
    paths = {}
    for name, model in models.items():
        model.fit(task.X_train, task.y_train)
        model.predict_summary(task.X_test[:100])  # compile
        with tempfile.TemporaryDirectory() as tmp:
            save(model, Path(tmp) / "model")
            out[name] = {"size_bytes": _dir_bytes(Path(tmp) / "model"),
                         "forest_bytes": int(sum(b.forest_.nbytes for b in model.branches_
                                                 if hasattr(b, "forest_")))}
        paths[name] = _paths(model, task.X_test, task.y_test)
    for path in ("summary", "calls", "evaluate"):
        times: dict[str, list[float]] = {name: [] for name in models}
        for _ in range(repeats):
            for name in models:
                t0 = time.perf_counter()
                paths[name][path]()
                times[name].append(time.perf_counter() - t0)
        for name in models:
            out[name][f"{path}_s"] = float(np.median(times[name]))
    return out


def default_knots(results: dict[str, Any], knots: Sequence[int]) -> int | None:
    """The smallest ``K`` whose CRPS is within :data:`TOLERANCE` of the largest ``K``'s on
    every task."""
    top = max(knots)
    for k in sorted(knots):
        if all(_row(r, k)["crps"] <= (1 + TOLERANCE) * _row(r, top)["crps"]
               for r in results.values()):
            return k
    return None


def _row(task: dict[str, Any], knots: int | None) -> dict[str, Any]:
    return next(r for r in task["rows"] if r["knots"] == knots)


def report(results: dict[str, Any], knots: Sequence[int], command: str) -> str:
    k = default_knots(results, knots) if results else None
    lines = ["# Empirical leaves against Gaussian leaves (issue 43, item 1)", "",
             f"`{command}`; EmpiricalBayesianForestRegressor(random_state=0), Gaussian leaves "
             "or `branch_params={'leaf_model': 'empirical', 'leaf_knots': K}`; recalibrated "
             "predictive on the test rows. Ratios are to the Gaussian row.", "",
             f"Default K (smallest with CRPS within {TOLERANCE:.1%} of K={max(knots)} on every "
             f"task): **{k}**", ""]
    for name, task in results.items():
        lines += [f"## {name}: {task['description']}", "",
                  "| model | CRPS | NLPD | RMSE | central gap | rows lpd<-30 | fit s | "
                  "predict s | size MB | size x | predict x |", "|" + "---|" * 11]
        base = _row(task, None)
        for r in task["rows"]:
            lines.append(
                f"| {r['model']} | {r['crps']:.4f} | {r['nlpd']:.3f} | {r['rmse']:.4f} | "
                f"{r['central_gap']:.3f} | {r['rows_below_-30']} | {r['fit_s']:.1f} | "
                f"{r['predict_s']:.2f} | {r['size_bytes'] / 1e6:.2f} | "
                f"{r['size_bytes'] / base['size_bytes']:.2f} | "
                f"{r['predict_s'] / base['predict_s']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    p.add_argument("--knots", nargs="+", type=int, default=list(KNOTS))
    p.add_argument("--output", type=Path, default=RESULTS)
    p.add_argument("--speed", choices=TASKS)
    p.add_argument("--speed-knots", type=int, default=8)
    p.add_argument("--repeats", type=int, default=5)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks import bench_peers

    args = parse_args(argv)
    cfg = argparse.Namespace(**bench_peers.FULL, seed=0, cal_fraction=0.1)
    command = " ".join(["python -m benchmarks.bench_leaf_model",
                        *(sys.argv[1:] if argv is None else argv)])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if args.speed:
        task = bench_peers.load_task(args.speed, cfg)
        res = speed(task, args.speed_knots, args.repeats)
        out = args.output.with_name(args.output.stem + "_speed.json")
        out.write_text(json.dumps({"command": command, "task": args.speed,
                                   "description": task.description, "models": res}, indent=1))
        base = res["gaussian"]
        lines = [f"# Predict cost of empirical leaves: {args.speed} ({task.description})", "",
                 f"`{command}`; medians of {args.repeats} alternating repeats on the "
                 f"{task.y_test.size:,} test rows; ratio to Gaussian leaves.", "",
                 "| model | size MB | forest MB | summary s | calls s | evaluate s |",
                 "|---|---|---|---|---|---|"]
        for name, r in res.items():
            lines.append(f"| {name} | {r['size_bytes'] / 1e6:.1f} "
                         f"({r['size_bytes'] / base['size_bytes']:.2f}x) | "
                         f"{r['forest_bytes'] / 1e6:.1f} "
                         f"({r['forest_bytes'] / base['forest_bytes']:.2f}x) | " + " | ".join(
                             f"{r[k]:.2f} ({r[k] / base[k]:.2f}x)"
                             for k in ("summary_s", "calls_s", "evaluate_s")) + " |")
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        return 0
    results: dict[str, Any] = {}
    if args.output.exists():
        results = json.loads(args.output.read_text()).get("tasks", {})
    for name in args.tasks:
        task = bench_peers.load_task(name, cfg)
        print(f"{name}: {task.description}", flush=True)
        rows = []
        for k in [None, *args.knots]:
            rows.append(run_model(task, k))
            print("  ", {key: (round(v, 4) if isinstance(v, float) else v)
                         for key, v in rows[-1].items()}, flush=True)
        results[name] = {"description": task.description, "rows": rows}
        args.output.write_text(json.dumps({"command": command, "tasks": results}, indent=1))
        args.output.with_suffix(".md").write_text(report(results, args.knots, command))
    print(report(results, args.knots, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
