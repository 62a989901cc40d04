"""Benchmark the distributed EBF (``ebf.dask``) on a local two-worker Dask cluster.

Taddy et al. (2015), Sec. 4-5: the trunk is grown on all the data, the rows are moved to
their branch, and every branch forest is fit where its rows are. Per size (rows of the
heteroskedastic Friedman #1 data from ``ebf make-data``, 10 features, as Parquet), on a
``LocalCluster`` of ``--workers`` single-threaded worker processes with a memory limit
(``cluster.connect``):

``fit``
    :class:`~ebf.dask.DaskEmpiricalBayesianForestRegressor` with Mondrian branches, fit
    straight from the Parquet files into a model stage (``fit(..., stage=)``: every branch
    task writes its shard, the driver never holds a branch); seconds per phase from
    ``fit_timings_`` (summary, encode, quantile bin edges, trunk, row moving, branch fits),
    seconds per trunk level
    (from the ``ebf.dask`` log), and every branch task's compute time and worker from the
    scheduler's task stream.
``read-and-histogram pass``
    One full pass with the fit's own kernels, timed alone (median of ``--repeats``): read
    the Parquet files, encode, bin and histogram the root node of every partition, sum
    the histograms by the same reduction tree. The trunk costs a few such passes.
``save``
    The head written and the model moved into place, in a directory kept under
    ``--data-dir``, compact by default (the predict-only Mondrian form, compacted on the
    workers; ``--no-compact`` keeps the full model): bytes on disk, bytes per training row
    per tree, files, shard sizes. The driver then drops the estimator.
``predict``
    ``pipelines.predict.predict_to_parquet(model_dir, data, out, strategy=--strategy)``: mean,
    std, 5/50/95% quantiles and branch of every row, written to Parquet, the model opened
    from its directory (the driver reads the manifest and the head only); the strategy
    ``ebf.dask.sharded.choose_strategy`` picks for this model and these workers is recorded.
Predict and evaluate read held-out rows (the same generator, the next seed, as many rows);
the fit uses ``predict_only`` when the model is saved compact, so the branches are compacted
on the workers and neither they nor the driver hold the online state.
``evaluate``
    ``pipelines.report.evaluate.evaluate(model_dir, data, strategy=--strategy)``: RMSE, NLPD and the
    coverage of the central intervals, streamed through the workers. The workers' caches
    of loaded shards are cleared before predict and before evaluate, so each phase pays
    for its own loading.
``memory``
    RSS of the worker processes and of the driver (``/proc/self/status``), sampled in one
    thread every ``--interval`` seconds, and the kernel's high-water mark (``VmHWM``) of
    every process per phase (reset at every phase change), so a spike between samples
    still counts; bytes the workers spilled to disk; worker processes seen (more than
    ``--workers`` means one died and was restarted) and the phase each loss happened in.
    The driver's peak during predict and evaluate should not grow with the model.
``trunk subtraction`` (``--trunk-subtraction``, instead of all the above)
    The trunk alone (``--trunk-max-leaves``, 32 by default), grown with and without sibling
    subtraction, from the cluster's histogram source and from the single-process one on
    the same rows: histogram bytes per level and paired growth times
    (``trunk_subtraction.py``).
``local``
    On ``--compare-rows`` rows: the single-process
    :class:`~ebf.EmpiricalBayesianForestRegressor` with the saved model's parameters (one
    thread, data in pandas), fit and predict time, and whether its predictions of every row
    equal the Dask ones read back from the Parquet output (the Dask fit is designed to give
    the identical model, and the compact form the same predictions bit for bit).

Targets (the issue): the largest size trains and predicts with no worker dying and no
unbounded spilling; ``trunk / read-and-histogram pass <= 3``; ``fit / critical path <= 1.5``
with the critical path ``trunk + row moving + the largest branch task``. With only two
workers the branches cannot all run at once, so the report also gives the two-worker
bound ``trunk + row moving + max(largest branch, branch work / workers)``. The model: at
most 40 bytes per training row per tree compact, files O(branches), and the driver's peak
RSS during predict and evaluate independent of the model's size.

Trunk size: by default ``branch_memory`` is a quarter of the worker memory limit (the
paper's rule, Sec. 4.2: branches "slightly less than the memory available on each
machine", here with room for the moved rows of the other branches and for the fitted
forests the worker keeps until the driver gathers them) and the trunk keeps the paper's
5 leaves unless a branch would exceed that budget (the trunk is then regrown with twice
the leaves).

Trees: 10 Mondrian trees per branch at every size (``--n-estimators``, one value or one
per size). A phase that fails (out of memory, a worker lost for good) is recorded with its
error in the JSON, and the phases after it that need its output are skipped.

The machine is shared: the load averages at start and end and a CPU probe (a fixed loop
on every worker at once, against the driver alone) are stored with every size, so ratios
against the single-process run can be read against the cores the workers really had.

Writes ``benchmarks/results/bench_dask.json`` (machine, versions, load averages at start
and end, one entry per size, a summary) and prints a table per size and a summary.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_dask.py --quick
    PYTHONPATH=. python benchmarks/bench_dask.py --sizes 1000000 10000000
    PYTHONPATH=. python benchmarks/bench_dask.py --sizes 1e6 --no-compact --strategy sharded
    PYTHONPATH=. python benchmarks/bench_dask.py --trunk-subtraction --sizes 1e6 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from benchmarks.common import run_parts
from benchmarks.dask_phases import ensure_data, run_size
from benchmarks.dask_report import print_summary, summary_rows
from benchmarks.trunk_subtraction import run_trunk_subtraction

RESULTS = Path(__file__).resolve().parent / "results" / "bench_dask.json"

# ---------------------------------------------------------------- main


def _rows(text: str) -> int:
    """``1000000``, ``1_000_000`` or ``1e6``."""
    value = float(text.replace("_", ""))
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a number of rows: {text!r}")
    return int(value)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="100k rows only, for a smoke run")
    p.add_argument("--sizes", type=_rows, nargs="+", help="rows per run (1e6 1e7)")
    p.add_argument("--n-estimators", type=int, nargs="+", default=None,
                   help="Mondrian trees per branch: one value, or one per size (10; "
                        "10 at every size)")
    p.add_argument("--min-samples-leaf", type=int, default=5, help="branch trees (5)")
    p.add_argument("--trunk-max-leaves", type=int, default=None,
                   help="fix the trunk's leaves (default: the paper's 5, raised by "
                        "--branch-memory)")
    p.add_argument("--branch-memory", default=None,
                   help="memory budget of one branch (default: a quarter of --memory-limit)")
    p.add_argument("--workers", type=int, default=2, help="worker processes, 1 thread each (2)")
    p.add_argument("--memory-limit", default="4GB", help="memory limit per worker (4GB)")
    p.add_argument("--compact", action=argparse.BooleanOptionalAction, default=True,
                   help="save the predict-only compact model (default), or the full one")
    p.add_argument("--strategy", choices=("auto", "broadcast", "sharded"), default="auto",
                   help="how the workers get the saved model to predict and evaluate "
                        "(auto: ebf.dask.sharded.choose_strategy)")
    p.add_argument("--partition-rows", type=int, default=None,
                   help="rows per Parquet file (default: 16 files, 10k..1M rows each)")
    p.add_argument("--data-dir", type=Path, default=Path("/tmp/ebf-bench-data"),
                   help="where the data, predictions and model are written")
    p.add_argument("--compare-rows", type=int, default=None,
                   help="size on which the single-process EBF is compared (1M; quick 100k)")
    p.add_argument("--check-rows", type=int, default=10_000,
                   help="rows sampled for the identical-predictions check (all are compared too)")
    p.add_argument("--repeats", type=int, default=3,
                   help="read-and-histogram passes, or paired trunk growths (3)")
    p.add_argument("--trunk-subtraction", action="store_true",
                   help="only the trunk, with and without sibling subtraction, per size "
                        "(histogram bytes per level, paired times; 1e6 rows by default)")
    p.add_argument("--interval", type=float, default=0.5, help="memory sampling seconds (0.5)")
    p.add_argument("--keep-predictions", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, default=None,
                   help=f"JSON report ({RESULTS}; bench_dask_trunk.json for the trunk part)")
    cfg = p.parse_args(argv)
    if cfg.sizes is None:
        cfg.sizes = ([100_000] if cfg.quick else
                     [1_000_000] if cfg.trunk_subtraction else [1_000_000, 10_000_000])
    if cfg.output is None:
        trunk_only = RESULTS.with_name("bench_dask_trunk.json")
        cfg.output = trunk_only if cfg.trunk_subtraction else RESULTS
    if cfg.compare_rows is None:
        cfg.compare_rows = 100_000 if cfg.quick else 1_000_000
    if cfg.n_estimators is None:
        cfg.n_estimators = [10]
    if len(cfg.n_estimators) == 1:
        cfg.n_estimators = cfg.n_estimators * len(cfg.sizes)
    if len(cfg.n_estimators) != len(cfg.sizes):
        p.error("--n-estimators takes one value or one per size")
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    Path(cfg.data_dir).mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    print(f"load average at start: {load_start}", flush=True)
    results: dict[str, dict] = {}

    def sized(rows: int, trees: int):
        def run(c: argparse.Namespace) -> dict[str, Any]:
            compare = rows == c.compare_rows and not any(
                "local" in r for r in results.values())
            results[f"{rows}x{trees}"] = run_size(c, rows, trees, compare)
            return results[f"{rows}x{trees}"]
        return run

    def summary(c: argparse.Namespace) -> dict[str, Any]:
        rows = summary_rows(results)
        print_summary(rows)
        extra = {}
        for name in ("distributed", "pyarrow", "psutil"):
            try:
                extra[name] = importlib_metadata.version(name)
            except importlib_metadata.PackageNotFoundError:
                extra[name] = "not installed"
        end = os.getloadavg()
        print(f"\nload average at start {load_start}, at end {end}")
        return {"rows": rows, "loadavg_start": load_start, "loadavg_end": end,
                "more_versions": extra}

    if cfg.trunk_subtraction:
        runners = {f"trunk_subtraction_{n}": (
            lambda c, n=n: run_trunk_subtraction(c, n, ensure_data)) for n in cfg.sizes}
        cfg.parts = list(runners)
        return run_parts("bench_dask", cfg, runners)
    runners = {f"rows_{n}_trees_{t}": sized(n, t)
               for n, t in zip(cfg.sizes, cfg.n_estimators, strict=True)}
    if len(runners) != len(cfg.sizes):
        raise SystemExit("each (size, n_estimators) pair may appear once")
    runners["summary"] = summary
    cfg.parts = list(runners)
    return run_parts("bench_dask", cfg, runners)


if __name__ == "__main__":
    sys.exit(main())
