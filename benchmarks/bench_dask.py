"""Benchmark the distributed EBF (``ebf.dask``) on a local two-worker Dask cluster.

Taddy et al. (2015), Sec. 4-5: the trunk is grown on all the data, the rows are moved to
their branch, and every branch forest is fit where its rows are. Per size (rows of the
heteroskedastic Friedman #1 data from ``ebf make-data``, 10 features, as Parquet), on a
``LocalCluster`` of ``--workers`` single-threaded worker processes with a memory limit
(``cluster.connect``):

``fit``
    :class:`~ebf.dask.DaskEmpiricalBayesianForestRegressor` with Mondrian branches, fit
    straight from the Parquet files; seconds per phase from ``fit_timings_`` (summary,
    encode, quantile bin edges, trunk, row moving, branch fits), seconds per trunk level
    (from the ``ebf.dask`` log), and every branch task's compute time and worker from the
    scheduler's task stream.
``read-and-histogram pass``
    One full pass with the fit's own kernels, timed alone (median of ``--repeats``): read
    the Parquet files, encode, bin and histogram the root node of every partition, sum
    the histograms by the same reduction tree. The trunk costs a few such passes.
``predict``
    ``predict_frame`` (mean, std, 5/50/95% quantiles, branch) of every row, written to
    Parquet by ``pipelines.io.write_parquet_atomic``.
``memory``
    RSS of the worker processes sampled every ``--interval`` seconds (peak per phase) and
    their kernel high-water mark (``VmHWM``); bytes the workers spilled to disk; worker
    processes seen (more than ``--workers`` means one died and was restarted).
``model``
    Size on disk of ``ebf.model.save`` of the fitted model.
``trunk subtraction`` (``--trunk-subtraction``, instead of all the above)
    The trunk alone (``--trunk-max-leaves``, 32 by default), grown with and without sibling
    subtraction, from the cluster's histogram source and from the single-process one on
    the same rows: histogram bytes per level and paired growth times
    (``trunk_subtraction.py``).
``local``
    On ``--compare-rows`` rows: the single-process
    :class:`~ebf.EmpiricalBayesianForestRegressor` with the same parameters (one thread,
    data in pandas), fit and predict time, and whether its predictions of every row equal
    the Dask ones read back from the Parquet output (the Dask fit is designed to give the
    identical model).

Targets (the issue): the largest size trains and predicts with no worker dying and no
unbounded spilling; ``trunk / read-and-histogram pass <= 3``; ``fit / critical path <= 1.5``
with the critical path ``trunk + row moving + the largest branch task``. With only two
workers the branches cannot all run at once, so the report also gives the two-worker
bound ``trunk + row moving + max(largest branch, branch work / workers)``.

Trunk size: by default ``branch_memory`` is a quarter of the worker memory limit (the
paper's rule, Sec. 4.2: branches "slightly less than the memory available on each
machine", here with room for the moved rows of the other branches and for the fitted
forests the worker keeps until the driver gathers them) and the trunk keeps the paper's
5 leaves unless a branch would exceed that budget (the trunk is then regrown with twice
the leaves).

Trees: 10 per branch, 2 above 1M rows (``--n-estimators``, one value or one per size). A
Mondrian branch keeps its training rows and one leaf list per tree, so the saved model
measures about ``96 + 104 * trees`` bytes per row (1136 at 10 trees, 304 at 2), and
``predict_frame`` loads the whole model into every worker (and the driver gathers it):
10 trees at 10M rows would be an 11 GB model against an 8 GB worker limit.

The machine is shared: the load averages at start and end and a CPU probe (a fixed loop
on every worker at once, against the driver alone) are stored with every size, so ratios
against the single-process run can be read against the cores the workers really had.

Writes ``benchmarks/results/bench_dask.json`` (machine, versions, load averages at start
and end, one entry per size, a summary) and prints a table per size and a summary.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_dask.py --quick
    PYTHONPATH=. python benchmarks/bench_dask.py --sizes 1000000 10000000
    PYTHONPATH=. python benchmarks/bench_dask.py --sizes 1e6 1e6 1e7 --n-estimators 10 2 2
    PYTHONPATH=. python benchmarks/bench_dask.py --trunk-subtraction --sizes 1e6 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from dask import delayed
from dask.utils import format_bytes, parse_bytes
from distributed import get_task_stream

from benchmarks.common import median_time, print_table, ratio, run_parts
from benchmarks.dask_probes import (
    FEATURES,
    GB,
    N_FEATURES,
    QUANTILES,
    TARGET,
    MemoryWatch,
    Progress,
    TrunkLevelLog,
    branch_tasks,
    cpu_probe,
    release_driver_memory,
    task_summary,
    warm_up,
    worker_spill,
)
from benchmarks.trunk_subtraction import run_trunk_subtraction
from cluster import connect
from ebf import EmpiricalBayesianForestRegressor, binning
from ebf.dask import DaskEmpiricalBayesianForestRegressor
from ebf.dask.histograms import _bin_partition, _partition_histogram, tree_reduce
from ebf.dask.inputs import _encode_partition, check_inputs
from ebf.model import save
from ebf.trunk import TrunkArrays
from pipelines.io import read_dataset, read_parquet_metadata, write_parquet_atomic
from pipelines.make_data import METADATA_KEY, make_friedman

RESULTS = Path(__file__).resolve().parent / "results" / "bench_dask.json"
PRED_COLUMNS = ["mean", "std", "q05", "q50", "q95", "branch"]
TRUNK_RATIO_TARGET = 3.0
CRITICAL_RATIO_TARGET = 1.5
#: Default trees per branch above LARGE_ROWS rows: a Mondrian branch keeps its rows and a
#: leaf list per tree, so the model grows with rows x trees, and every worker holds the
#: whole model while predicting (see the module docstring).
LARGE_ROWS, LARGE_TREES = 1_000_000, 2

# ---------------------------------------------------------------- data


def partition_rows_for(rows: int, requested: int | None) -> int:
    """Rows per Parquet file: ``requested``, else 16 files (8 per worker), 10k..1M rows."""
    if requested:
        return int(requested)
    return int(min(1_000_000, max(10_000, math.ceil(rows / 16))))


def ensure_data(client: Any, cfg: argparse.Namespace, rows: int) -> tuple[Path, dict]:
    """The Friedman Parquet dataset of ``rows`` rows in ``cfg.data_dir``, made if needed.

    An existing directory is reused when its stored generator parameters match.
    """
    part_rows = partition_rows_for(rows, cfg.partition_rows)
    path = Path(cfg.data_dir) / f"friedman-{rows}-p{part_rows}-f{N_FEATURES}-s{cfg.seed}"
    want = {"generator": "friedman1", "task": "regression", "rows": rows,
            "partition_rows": part_rows, "n_features": N_FEATURES, "random_state": cfg.seed}
    if path.exists():
        try:
            have = json.loads(read_parquet_metadata(path)[METADATA_KEY])
        except (OSError, KeyError, ValueError):
            have = {}
        if all(have.get(k) == v for k, v in want.items()):
            print(f"  data: reusing {path} ({have['n_partitions']} files)", flush=True)
            return path, {**have, "generated_seconds": None}
        print(f"  data: {path} has other parameters, regenerating", flush=True)
    t0 = time.perf_counter()
    info = make_friedman(path, rows, n_features=N_FEATURES, partition_rows=part_rows,
                         random_state=cfg.seed, client=client, overwrite=True)
    seconds = time.perf_counter() - t0
    print(f"  data: wrote {path} ({info.n_partitions} files) in {seconds:.1f}s", flush=True)
    return path, {**json.loads(info.metadata[METADATA_KEY]), "generated_seconds": seconds}


# ---------------------------------------------------------------- the read-and-histogram pass


def _root_histogram(part: pd.DataFrame, encoder: Any, layout: Any, edges: list[np.ndarray],
                    n_bins: int) -> np.ndarray:
    """Encode, bin and histogram the root node of one partition (the fit's own kernels)."""
    enc = _encode_partition(part, encoder, layout, None)
    binned = _bin_partition(enc, edges, "regression", None)
    root = TrunkArrays.root(binned[1].shape[1])
    return _partition_histogram(binned, root, np.zeros(1, np.int64), n_bins)


def read_histogram_pass(client: Any, path: Path, model: Any) -> float:
    """One pass: read the Parquet files, encode, bin, root histograms, tree-summed.

    Returns the number of rows the summed histogram counts (a check that every row was
    read).
    """
    ddf = read_dataset(path, FEATURES + [TARGET])
    frame, layout = check_inputs(ddf[FEATURES], ddf[TARGET], None, "regression")
    edges = model.trunk_.bin_edges_
    n_bins = binning.n_bins_of(edges)
    tasks = [delayed(_root_histogram)(p, model.encoder_, layout, edges, n_bins)
             for p in frame.to_delayed()]
    total = tree_reduce(client, client.compute(tasks), prefix="bench-hist-sum").result()
    return float(total[0, 0, :, 0].sum())


# ---------------------------------------------------------------- one size


def _model_bytes(model: Any, where: Path) -> tuple[int, float]:
    target = Path(tempfile.mkdtemp(dir=where, prefix="bench-model-")) / "model"
    try:
        t0 = time.perf_counter()
        save(model, target)
        seconds = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    finally:
        shutil.rmtree(target.parent, ignore_errors=True)
    return size, seconds


def _gb(value: float | None) -> float | None:
    return None if value is None else value / GB


def run_size(cfg: argparse.Namespace, rows: int, n_estimators: int,
             compare: bool) -> dict[str, Any]:
    print(f"\n=== {rows:,} rows x {N_FEATURES} features, {n_estimators} Mondrian trees per "
          f"branch, {cfg.workers} workers x 1 thread, {cfg.memory_limit} per worker ===",
          flush=True)
    release_driver_memory()
    out: dict[str, Any] = {"rows": rows, "n_estimators": n_estimators,
                           "loadavg_start": os.getloadavg()}
    limit = parse_bytes(cfg.memory_limit)
    branch_memory = cfg.branch_memory or (None if cfg.trunk_max_leaves else limit // 4)
    out["branch_memory"] = branch_memory
    client = connect(n_workers=cfg.workers, threads_per_worker=1, memory_limit=cfg.memory_limit,
                     dashboard_address=":0")
    watch = None
    try:
        path, data_info = ensure_data(client, cfg, rows)
        out["data"] = {"path": str(path), **data_info}
        addresses = sorted(client.scheduler_info()["workers"])
        watch = MemoryWatch(client, cfg.interval).start()
        watch.phase = "warm-up"
        out["warm_up_seconds"] = warm_up(client)
        print(f"  warm-up (kernels loaded in every process): {out['warm_up_seconds']:.1f}s",
              flush=True)
        out["cpu_probe_start"] = cpu_probe(client)

        # ---- fit
        ddf = read_dataset(path, FEATURES + [TARGET])
        est = DaskEmpiricalBayesianForestRegressor(
            n_estimators=n_estimators, branch="mondrian", trunk_max_leaves=cfg.trunk_max_leaves,
            min_samples_leaf=cfg.min_samples_leaf, random_state=cfg.seed,
            branch_memory=branch_memory, client=client,
        )
        print("  fit:", flush=True)
        t0, wall0 = time.perf_counter(), time.time()
        with TrunkLevelLog() as levels, get_task_stream(client=client) as stream:
            est.fit(ddf[FEATURES], ddf[TARGET], progress=Progress(watch, t0))
        fit_wall = time.perf_counter() - t0
        watch.phase = "after-fit"
        timings = dict(est.fit_timings_)
        model = est.to_local()
        branches = branch_tasks(stream.data, wall0)
        sizes = np.asarray(model.branch_sizes_, dtype=np.int64)
        for b in branches:
            b["rows"] = int(sizes[b["branch"]])
        largest = max(branches, key=lambda b: b["seconds"]) if branches else None
        branch_work = sum(b["seconds"] for b in branches)
        out["fit"] = {
            "wall_seconds": fit_wall,
            "timings": timings,
            "trunk_levels": levels.levels,
            "trunk_regrown": levels.regrown,
            "n_partitions": est.n_partitions_,
            "max_branch_rows": est.max_branch_rows_,
            "trunk_max_leaves": model.trunk_max_leaves,
            "n_branches": int(sizes.size),
            "branch_rows": sizes.tolist(),
            "branch_tasks": branches,
            "largest_branch_task": largest,
            "branch_work_seconds": branch_work,
            # from the last branch task's end to fit's return: the fitted branches are
            # gathered to the driver only once all are done, then assembled
            "after_last_branch_seconds": (fit_wall - max(b["stop"] for b in branches)
                                          if branches else None),
            "task_summary": task_summary(stream.data),
            "rows_per_second": rows / timings["fit"],
        }

        # ---- one full read-and-histogram pass, timed alone
        watch.phase = "read-hist-pass"
        counted = []
        pass_s, pass_all = median_time(
            lambda: counted.append(read_histogram_pass(client, path, model)), cfg.repeats)
        if any(c != rows for c in counted):
            raise RuntimeError(f"the read-and-histogram pass counted {counted} rows, not {rows}")
        out["read_hist_pass"] = {"median_seconds": pass_s, "seconds": pass_all}

        # ---- predict every row to Parquet
        watch.phase = "predict"
        pred_dir = Path(cfg.data_dir) / f"predictions-{rows}x{n_estimators}"
        print("  predict -> Parquet ...", flush=True)
        t0 = time.perf_counter()
        with get_task_stream(client=client) as stream:
            frame = est.predict_frame(read_dataset(path, FEATURES), quantiles=QUANTILES)
            write_parquet_atomic(frame, pred_dir, metadata={"ebf.benchmark": "bench_dask"},
                                 overwrite=True)
        predict_s = time.perf_counter() - t0
        tasks = task_summary(stream.data)
        out["predict"] = {"seconds": predict_s, "rows_per_second": rows / predict_s,
                          "path": str(pred_dir), "task_summary": tasks,
                          "compute_seconds": sum(t["compute_seconds"] for t in tasks.values())}
        print(f"    {predict_s:.1f}s", flush=True)

        # ---- workers, memory, spilling
        watch.phase = "end"
        out["cpu_probe_end"] = cpu_probe(client)
        spill = client.run(worker_spill)
        alive = sorted(client.scheduler_info()["workers"])
        hwm = watch.high_water_marks()
        watch.stop()
        out["workers"] = {
            "expected": cfg.workers,
            "alive_at_end": len(alive),
            "same_addresses": alive == addresses,
            "processes_seen": len(watch.worker_pids),
            "died": len(watch.worker_pids) - cfg.workers,
        }
        out["memory"] = {
            "limit_per_worker_bytes": limit,
            "peak_rss_per_worker_bytes": hwm,
            "peak_rss_worker_bytes": max((v for v in hwm.values() if v), default=None),
            "sampled_peaks_bytes": watch.peaks,
            "samples": watch.samples,
            "interval_seconds": watch.interval,
            "spill": spill,
            "spilled_to_disk_bytes": sum(s["disk_write_bytes"] for s in spill.values()),
            "spilled_disk_max_bytes": watch.spilled_disk_max,
        }

        # ---- model size on disk
        size, save_s = _model_bytes(model, Path(cfg.data_dir))
        out["model"] = {"bytes_on_disk": size, "bytes_per_row": size / rows,
                        "save_seconds": save_s}

        # ---- the two targets
        trunk = timings.get("trunk", 0.0)
        route = timings.get("route", 0.0)
        crit = trunk + route + (largest["seconds"] if largest else 0.0)
        bound = trunk + route + max(largest["seconds"] if largest else 0.0,
                                    branch_work / cfg.workers)
        out["targets"] = {
            "trunk_seconds": trunk,
            "read_hist_pass_seconds": pass_s,
            "trunk_over_pass": ratio(trunk, pass_s),
            "trunk_and_quantiles_over_pass": ratio(trunk + timings.get("bin_edges", 0.0), pass_s),
            "trunk_target": TRUNK_RATIO_TARGET,
            "critical_path_seconds": crit,
            "fit_over_critical_path": ratio(timings["fit"], crit),
            "critical_target": CRITICAL_RATIO_TARGET,
            "two_worker_bound_seconds": bound,
            "fit_over_two_worker_bound": ratio(timings["fit"], bound),
        }

        # ---- the single-process EBF on the same rows
        if compare:
            watch.phase = "local"
            out["local"] = run_local(cfg, path, model, pred_dir, out)
        if not cfg.keep_predictions:
            shutil.rmtree(pred_dir, ignore_errors=True)
    finally:
        if watch is not None and watch._thread.is_alive():
            watch.stop()
        client.close()
    out["loadavg_end"] = os.getloadavg()
    print_size(out)
    return out


def run_local(cfg: argparse.Namespace, path: Path, dask_model: Any, pred_dir: Path,
              out: dict[str, Any]) -> dict[str, Any]:
    """The single-process EBF with the Dask model's parameters on the same rows."""
    print("  local (single process, 1 thread):", flush=True)
    t0 = time.perf_counter()
    df = pd.read_parquet(path)
    read_s = time.perf_counter() - t0
    X, y = df[FEATURES], df[TARGET]
    local = EmpiricalBayesianForestRegressor(**dask_model.get_params())
    t0 = time.perf_counter()
    local.fit(X, y)
    fit_s = time.perf_counter() - t0
    print(f"    fit {fit_s:.1f}s", flush=True)
    t0 = time.perf_counter()
    mean, std = local.predict(X, return_std=True)
    q = local.predict_quantiles(X, QUANTILES)
    branch = local.apply(X)
    predict_s = time.perf_counter() - t0
    print(f"    predict {predict_s:.1f}s", flush=True)
    ours = np.column_stack([mean, std, q, branch])
    theirs = pd.read_parquet(pred_dir, columns=PRED_COLUMNS).to_numpy(dtype=np.float64)
    rng = np.random.default_rng(cfg.seed)
    sample = np.sort(rng.choice(len(df), size=min(cfg.check_rows, len(df)), replace=False))
    same_trunk = bool(np.array_equal(local.trunk_.trunk_.threshold,
                                     dask_model.trunk_.trunk_.threshold, equal_nan=True))
    dask_fit, dask_pred = out["fit"]["timings"]["fit"], out["predict"]["seconds"]
    return {
        "read_seconds": read_s,
        "fit_seconds": fit_s,
        "predict_seconds": predict_s,
        "fit_rows_per_second": len(df) / fit_s,
        "predict_rows_per_second": len(df) / predict_s,
        "dask_over_local_fit": ratio(dask_fit, fit_s),
        "dask_over_local_predict": ratio(dask_pred, predict_s),
        "same_trunk": same_trunk,
        "same_branch_sizes": bool(np.array_equal(local.branch_sizes_, dask_model.branch_sizes_)),
        "sample_rows": int(sample.size),
        "sample_identical": bool(np.array_equal(ours[sample], theirs[sample])),
        "all_rows_identical": bool(np.array_equal(ours, theirs)),
        "max_abs_difference": float(np.max(np.abs(ours - theirs))),
    }


# ---------------------------------------------------------------- printing


def _label(rows: int) -> str:
    return f"{rows / 1e6:g}M" if rows >= 1_000_000 else f"{rows / 1e3:g}k"


def print_size(r: dict[str, Any]) -> None:
    fit, t = r["fit"], r["fit"]["timings"]
    total = t["fit"]
    largest = fit["largest_branch_task"]
    rows = [{"phase": name, "seconds": t.get(key), "share": ratio(t.get(key), total)}
            for name, key in (("schema", "schema"), ("summary pass", "summary"),
                              ("encode pass", "encode"), ("quantiles (bin edges)", "bin_edges"),
                              ("trunk", "trunk"))]
    for lv in fit["trunk_levels"]:
        rows.append({"phase": f"  level {lv['level']} ({lv['open_nodes']} open)",
                     "seconds": lv["seconds"], "share": ratio(lv["seconds"], total)})
    rows += [{"phase": "row moving", "seconds": t.get("route"),
              "share": ratio(t.get("route"), total)},
             {"phase": "branch fits", "seconds": t.get("branches"),
              "share": ratio(t.get("branches"), total)}]
    if largest:
        rows.append({"phase": f"  largest task (branch {largest['branch']}, "
                              f"{largest['rows']:,} rows)", "seconds": largest["seconds"]})
        rows.append({"phase": f"  all {fit['n_branches']} branch tasks (sum)",
                     "seconds": fit["branch_work_seconds"]})
    known = sum(t.get(k, 0.0) for k in ("schema", "summary", "encode", "bin_edges", "trunk",
                                          "route", "branches"))
    rows += [{"phase": "other (assembly)", "seconds": total - known,
              "share": ratio(total - known, total)},
             {"phase": "fit total", "seconds": total, "share": 1.0},
             {"phase": "read-and-histogram pass", "seconds": r["read_hist_pass"]["median_seconds"]},
             {"phase": "predict -> Parquet", "seconds": r["predict"]["seconds"]},
             {"phase": "model save", "seconds": r["model"]["save_seconds"]}]
    print_table(f"{_label(r['rows'])} rows: phases ({fit['n_partitions']} partitions, "
                f"{fit['n_branches']} branches, {r['n_estimators']} trees per branch)",
                [("phase", "phase", "s"), ("seconds", "seconds", ".2f"),
                 ("share", "of fit", ".1%")], rows)
    print_table(f"{_label(r['rows'])} rows: branch tasks", [
        ("branch", "branch", "d"), ("rows", "rows", ",d"), ("seconds", "seconds", ".2f"),
        ("worker", "worker", "s")], fit["branch_tasks"])
    tg, mem, w = r["targets"], r["memory"], r["workers"]
    probes = [r["cpu_probe_start"], r["cpu_probe_end"]]
    print(f"\n  effective cores for the {w['expected']} workers (CPU probe, start / end): "
          + " / ".join(f"{p['effective_cores']:.2f}" for p in probes)
          + f"; load average {r['loadavg_start'][0]:.2f} / {r['loadavg_end'][0]:.2f}")
    if largest:
        print(f"  branch tasks ran {min(b['start'] for b in fit['branch_tasks']):.2f}s .. "
              f"{max(b['stop'] for b in fit['branch_tasks']):.2f}s into the fit; fit returned "
              f"{fit['after_last_branch_seconds']:.2f}s after the last one (gathering the "
              "fitted branches to the driver, assembly)")
    print(f"  predict: {r['predict']['compute_seconds']:.1f}s of task compute time in "
          f"{r['predict']['seconds']:.1f}s wall on {w['expected']} workers")
    print(f"  fit {fit['rows_per_second']:,.0f} rows/s, predict "
          f"{r['predict']['rows_per_second']:,.0f} rows/s")
    print(f"  trunk / read-and-histogram pass = {tg['trunk_seconds']:.2f} / "
          f"{tg['read_hist_pass_seconds']:.2f} = {tg['trunk_over_pass']:.2f}x "
          f"(target <= {TRUNK_RATIO_TARGET:g}x; with quantiles "
          f"{tg['trunk_and_quantiles_over_pass']:.2f}x)")
    print(f"  fit / critical path = {total:.2f} / {tg['critical_path_seconds']:.2f} = "
          f"{tg['fit_over_critical_path']:.2f}x (target <= {CRITICAL_RATIO_TARGET:g}x); "
          f"/ two-worker bound {tg['two_worker_bound_seconds']:.2f} = "
          f"{tg['fit_over_two_worker_bound']:.2f}x")
    peak = mem["peak_rss_worker_bytes"]
    print(f"  peak worker RSS {format_bytes(peak) if peak else '-'} of "
          f"{format_bytes(mem['limit_per_worker_bytes'])}; spilled to disk "
          f"{format_bytes(mem['spilled_to_disk_bytes'])}; workers alive {w['alive_at_end']}/"
          f"{w['expected']}, processes seen {w['processes_seen']}")
    print(f"  model on disk {format_bytes(r['model']['bytes_on_disk'])} "
          f"({r['model']['bytes_per_row']:.0f} bytes/row)")
    print_table(f"{_label(r['rows'])} rows: peak RSS per phase (sampled every "
                f"{mem['interval_seconds']:g}s)", [
        ("phase", "phase", "s"), ("worker_max", "one worker GB", ".2f"),
        ("workers_total", "all workers GB", ".2f"), ("driver", "driver GB", ".2f")],
        [{"phase": k, **{f: _gb(v) for f, v in p.items()}}
         for k, p in mem["sampled_peaks_bytes"].items()])
    if "local" in r:
        loc = r["local"]
        print_table(f"{_label(r['rows'])} rows: Dask ({r['workers']['expected']} workers) vs "
                    "single-process EBF (1 thread)", [
            ("what", "", "s"), ("dask", "dask s", ".2f"), ("local", "local s", ".2f"),
            ("ratio", "dask/local", ".2f")], [
            {"what": "fit", "dask": total, "local": loc["fit_seconds"],
             "ratio": loc["dask_over_local_fit"]},
            {"what": "predict", "dask": r["predict"]["seconds"],
             "local": loc["predict_seconds"], "ratio": loc["dask_over_local_predict"]}])
        print(f"  predictions identical: sample of {loc['sample_rows']:,} rows "
              f"{loc['sample_identical']}, all rows {loc['all_rows_identical']} (max |diff| "
              f"{loc['max_abs_difference']:.3g}); same trunk {loc['same_trunk']}, same branch "
              f"sizes {loc['same_branch_sizes']}")


def summary_rows(results: dict[str, dict]) -> list[dict[str, Any]]:
    rows = []
    for r in results.values():
        n = r["rows"]
        tg, mem = r["targets"], r["memory"]
        rows.append({
            "rows": _label(n), "trees": r["n_estimators"], "branches": r["fit"]["n_branches"],
            "fit_s": r["fit"]["timings"]["fit"], "fit_rps": r["fit"]["rows_per_second"],
            "predict_s": r["predict"]["seconds"], "predict_rps": r["predict"]["rows_per_second"],
            "trunk_ratio": tg["trunk_over_pass"], "crit_ratio": tg["fit_over_critical_path"],
            "bound_ratio": tg["fit_over_two_worker_bound"],
            "peak_gb": _gb(mem["peak_rss_worker_bytes"]),
            "spill_gb": _gb(mem["spilled_to_disk_bytes"]),
            "alive": f"{r['workers']['alive_at_end']}/{r['workers']['expected']}",
            "model_gb": _gb(r["model"]["bytes_on_disk"]),
        })
    return rows


def print_summary(rows: list[dict[str, Any]]) -> None:
    print_table(f"summary (targets: trunk/pass <= {TRUNK_RATIO_TARGET:g}, fit/critical path "
                f"<= {CRITICAL_RATIO_TARGET:g}; no worker dies, no unbounded spilling)", [
        ("rows", "rows", "s"), ("trees", "trees", "d"), ("branches", "branches", "d"),
        ("fit_s", "fit s", ".1f"), ("fit_rps", "fit rows/s", ",.0f"),
        ("predict_s", "predict s", ".1f"), ("predict_rps", "pred rows/s", ",.0f"),
        ("trunk_ratio", "trunk/pass", ".2f"), ("crit_ratio", "fit/crit", ".2f"),
        ("bound_ratio", "fit/2w-bound", ".2f"), ("peak_gb", "peak worker GB", ".2f"),
        ("spill_gb", "spilled GB", ".2f"), ("alive", "workers", "s"),
        ("model_gb", "model GB", ".2f")], rows)


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
                        f"{LARGE_TREES} above {LARGE_ROWS:,} rows)")
    p.add_argument("--min-samples-leaf", type=int, default=5, help="branch trees (5)")
    p.add_argument("--trunk-max-leaves", type=int, default=None,
                   help="fix the trunk's leaves (default: the paper's 5, raised by "
                        "--branch-memory)")
    p.add_argument("--branch-memory", default=None,
                   help="memory budget of one branch (default: a quarter of --memory-limit)")
    p.add_argument("--workers", type=int, default=2, help="worker processes, 1 thread each (2)")
    p.add_argument("--memory-limit", default="8GB", help="memory limit per worker (8GB)")
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
        cfg.n_estimators = [10 if n <= LARGE_ROWS else LARGE_TREES for n in cfg.sizes]
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
