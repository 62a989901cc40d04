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
``save``
    ``ebf.save`` of the fitted model to a directory kept under ``--data-dir``, compact by
    default (the predict-only Mondrian form; ``--no-compact`` saves the full model): bytes
    on disk, bytes per training row per tree, files, shard sizes. The model and the
    estimator are then dropped from the driver, which from here on never holds a branch.
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
import json
import math
import os
import shutil
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from dask import delayed
from dask.utils import format_bytes, parse_bytes
from distributed import get_task_stream

from benchmarks.common import median_time, ratio, run_parts
from benchmarks.dask_probes import (
    FEATURES,
    N_FEATURES,
    QUANTILES,
    TARGET,
    MemoryWatch,
    Progress,
    TrunkLevelLog,
    branch_tasks,
    cpu_probe,
    proc_status_bytes,
    release_driver_memory,
    task_summary,
    warm_up,
    worker_spill,
)
from benchmarks.dask_report import (
    BYTES_PER_ROW_TREE_TARGET,
    CRITICAL_RATIO_TARGET,
    TRUNK_RATIO_TARGET,
    print_size,
    print_summary,
    summary_rows,
)
from benchmarks.trunk_subtraction import run_trunk_subtraction
from cluster import connect
from ebf import EmpiricalBayesianForestRegressor, binning
from ebf.dask import DaskEmpiricalBayesianForestRegressor
from ebf.dask.histograms import _bin_partition, _partition_histogram, tree_reduce
from ebf.dask.inputs import _encode_partition, check_inputs
from ebf.dask.sharded import cache_peak_bytes, choose_strategy, clear_cache
from ebf.model import load, save
from ebf.reader import open_model
from ebf.trunk import TrunkArrays
from pipelines.io import read_dataset, read_parquet_metadata
from pipelines.make_data import METADATA_KEY, make_friedman
from pipelines.predict import predict_to_parquet
from pipelines.report.evaluate import evaluate

RESULTS = Path(__file__).resolve().parent / "results" / "bench_dask.json"
PRED_COLUMNS = ["mean", "std", "q05", "q50", "q95", "branch"]

# ---------------------------------------------------------------- data


def partition_rows_for(rows: int, requested: int | None) -> int:
    """Rows per Parquet file: ``requested``, else 16 files (8 per worker), 10k..1M rows."""
    if requested:
        return int(requested)
    return int(min(1_000_000, max(10_000, math.ceil(rows / 16))))


def ensure_data(client: Any, cfg: argparse.Namespace, rows: int,
                seed: int | None = None) -> tuple[Path, dict]:
    """The Friedman Parquet dataset of ``rows`` rows in ``cfg.data_dir``, made if needed
    (``seed``: ``cfg.seed`` for the training rows, another for held-out rows).

    An existing directory is reused when its stored generator parameters match.
    """
    seed = cfg.seed if seed is None else seed
    part_rows = partition_rows_for(rows, cfg.partition_rows)
    path = Path(cfg.data_dir) / f"friedman-{rows}-p{part_rows}-f{N_FEATURES}-s{seed}"
    want = {"generator": "friedman1", "task": "regression", "rows": rows,
            "partition_rows": part_rows, "n_features": N_FEATURES, "random_state": seed}
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
                         random_state=seed, client=client, overwrite=True)
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


class PhaseFailed(RuntimeError):
    """A phase of one size failed; its error is in the size's ``failed`` entry."""


def _attempt(out: dict[str, Any], phase: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; an exception is recorded in ``out["failed"]``, raised as PhaseFailed."""
    try:
        return fn(*args)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        print(f"  {phase} FAILED: {error}", flush=True)
        out.setdefault("failed", []).append({
            "phase": phase, "error": error[:2000],
            "traceback": traceback.format_exc(limit=12)[-6000:]})
        raise PhaseFailed(phase) from exc


def fit_phase(cfg: argparse.Namespace, client: Any, watch: MemoryWatch, path: Path, rows: int,
              n_estimators: int, branch_memory: int | None) -> tuple[Any, dict[str, Any]]:
    """Fit the Dask EBF on the Parquet files; the estimator and what was measured."""
    ddf = read_dataset(path, FEATURES + [TARGET])
    est = DaskEmpiricalBayesianForestRegressor(
        n_estimators=n_estimators, branch="mondrian", trunk_max_leaves=cfg.trunk_max_leaves,
        min_samples_leaf=cfg.min_samples_leaf, random_state=cfg.seed,
        branch_memory=branch_memory, client=client,
        predict_only=cfg.compact,  # compact branches on the workers: never the online state
    )
    print("  fit:", flush=True)
    t0, wall0 = time.perf_counter(), time.time()
    with TrunkLevelLog() as levels, get_task_stream(client=client) as stream:
        est.fit(ddf[FEATURES], ddf[TARGET], progress=Progress(watch, t0))
    fit_wall = time.perf_counter() - t0
    watch.phase = "after-fit"
    timings = dict(est.fit_timings_)
    branches = branch_tasks(stream.data, wall0)
    sizes = np.asarray(est.branch_sizes_, dtype=np.int64)
    for b in branches:
        b["rows"] = int(sizes[b["branch"]])
    largest = max(branches, key=lambda b: b["seconds"]) if branches else None
    return est, {
        "wall_seconds": fit_wall,
        "timings": timings,
        "trunk_levels": levels.levels,
        "trunk_regrown": levels.regrown,
        "n_partitions": est.n_partitions_,
        "max_branch_rows": est.max_branch_rows_,
        "trunk_max_leaves": est.to_local().trunk_max_leaves,
        "n_branches": int(sizes.size),
        "branch_rows": sizes.tolist(),
        "branch_tasks": branches,
        "largest_branch_task": largest,
        "branch_work_seconds": sum(b["seconds"] for b in branches),
        # from the last branch task's end to fit's return: the fitted branches are
        # gathered to the driver only once all are done, then assembled
        "after_last_branch_seconds": (fit_wall - max(b["stop"] for b in branches)
                                      if branches else None),
        "task_summary": task_summary(stream.data),
        "seconds": timings["fit"],
        "rows_per_second": rows / timings["fit"],
    }


def read_hist_phase(cfg: argparse.Namespace, client: Any, path: Path, model: Any,
                    rows: int) -> dict[str, Any]:
    """The median of ``--repeats`` read-and-histogram passes."""
    counted: list[float] = []
    pass_s, pass_all = median_time(
        lambda: counted.append(read_histogram_pass(client, path, model)), cfg.repeats)
    if any(c != rows for c in counted):
        raise RuntimeError(f"the read-and-histogram pass counted {counted} rows, not {rows}")
    return {"median_seconds": pass_s, "seconds": pass_all}


def _targets(cfg: argparse.Namespace, fit: dict[str, Any], pass_s: float) -> dict[str, Any]:
    timings, largest = fit["timings"], fit["largest_branch_task"]
    trunk = timings.get("trunk", 0.0)
    route = timings.get("route", 0.0)
    crit = trunk + route + (largest["seconds"] if largest else 0.0)
    bound = trunk + route + max(largest["seconds"] if largest else 0.0,
                                fit["branch_work_seconds"] / cfg.workers)
    return {
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


def save_phase(cfg: argparse.Namespace, model: Any, model_dir: Path, rows: int,
               n_estimators: int) -> dict[str, Any]:
    """Save the model (compact unless ``--no-compact``); its size, files and shards."""
    print(f"  save -> {model_dir} ({'compact' if cfg.compact else 'full'}) ...", flush=True)
    t0 = time.perf_counter()
    save(model, model_dir, overwrite=True, compact=cfg.compact)
    seconds = time.perf_counter() - t0
    files = [f for f in model_dir.rglob("*") if f.is_file()]
    size = sum(f.stat().st_size for f in files)
    reader = open_model(model_dir)
    shards = reader.part_bytes
    print(f"    {seconds:.1f}s, {format_bytes(size)} in {len(files)} files", flush=True)
    return {
        "path": str(model_dir),
        "compact": cfg.compact,
        "format_version": reader.format_version,
        "bytes_on_disk": size,
        "bytes_per_row": size / rows,
        "bytes_per_row_per_tree": size / rows / n_estimators,
        "bytes_per_row_per_tree_target": BYTES_PER_ROW_TREE_TARGET,
        "files": len(files),
        "n_shards": len(shards),
        "head_bytes": int(reader.manifest["head"]["bytes"]) if "head" in reader.manifest
        else None,
        "shard_bytes": shards,
        "largest_shard_bytes": max(shards, default=None),
        "seconds": seconds,
        "rows_per_second": rows / seconds,
    }


def drop_model(watch: MemoryWatch, refs: list[weakref.ref]) -> dict[str, Any]:
    """After the caller dropped its references: collect, trim, check nothing holds them."""
    watch.phase = "drop"
    before = proc_status_bytes("self", "VmRSS")
    release_driver_memory()
    after = proc_status_bytes("self", "VmRSS")
    alive = [type(r()).__name__ for r in refs if r() is not None]
    if alive:
        print(f"  WARNING: the driver still holds {alive} after dropping them", flush=True)
    return {"driver_rss_before_bytes": before, "driver_rss_after_bytes": after,
            "still_referenced": alive}


def predict_phase(cfg: argparse.Namespace, client: Any, watch: MemoryWatch, model_dir: Path,
                  path: Path, pred_dir: Path, rows: int) -> dict[str, Any]:
    """``predict_to_parquet`` of every row, from the saved model."""
    chosen = choose_strategy(open_model(model_dir), client)
    used = chosen if cfg.strategy == "auto" else cfg.strategy
    print(f"  predict -> Parquet (strategy {cfg.strategy}: {used}; choose_strategy picks "
          f"{chosen}) ...", flush=True)
    shutil.rmtree(pred_dir, ignore_errors=True)
    client.run(clear_cache)
    watch.phase = "predict"
    t0 = time.perf_counter()
    with get_task_stream(client=client) as stream:
        res = predict_to_parquet(model_dir, path, pred_dir, quantiles=QUANTILES,
                                 overwrite=True, client=client, strategy=cfg.strategy)
    seconds = time.perf_counter() - t0
    watch.phase = "after-predict"
    if res.rows != rows:
        raise RuntimeError(f"predict_to_parquet wrote {res.rows} rows, not {rows}")
    tasks = task_summary(stream.data)
    print(f"    {seconds:.1f}s ({rows / seconds:,.0f} rows/s)", flush=True)
    return {"seconds": seconds, "rows_per_second": rows / seconds, "path": str(pred_dir),
            "files": res.files, "strategy_requested": cfg.strategy, "strategy_chosen": chosen,
            "strategy_used": used, "task_summary": tasks,
            "compute_seconds": sum(t["compute_seconds"] for t in tasks.values()),
            "worker_cache_peak_bytes": client.run(cache_peak_bytes)}


def evaluate_phase(cfg: argparse.Namespace, client: Any, watch: MemoryWatch, model_dir: Path,
                   path: Path, rows: int) -> dict[str, Any]:
    """``evaluate`` of the saved model on every row: RMSE, NLPD, interval coverage."""
    print("  evaluate ...", flush=True)
    client.run(clear_cache)
    watch.phase = "evaluate"
    t0 = time.perf_counter()
    res = evaluate(model_dir, path, target=TARGET, client=client, strategy=cfg.strategy)
    seconds = time.perf_counter() - t0
    watch.phase = "after-evaluate"
    if res["n"] != rows:
        raise RuntimeError(f"evaluate scored {res['n']} rows, not {rows}")
    print(f"    {seconds:.1f}s ({rows / seconds:,.0f} rows/s): RMSE {res['rmse']:.4f}, NLPD "
          f"{res['nlpd']:.4f}, max calibration gap {res['max_calibration_gap']:.3f}",
          flush=True)
    return {"seconds": seconds, "rows_per_second": rows / seconds, "n": res["n"],
            "rmse": res["rmse"], "nlpd": res["nlpd"], "coverage": res["coverage"],
            "max_calibration_gap": res["max_calibration_gap"],
            "worker_cache_peak_bytes": client.run(cache_peak_bytes)}


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
    kind = "compact" if cfg.compact else "full"
    model_dir = Path(cfg.data_dir) / f"model-{rows}x{n_estimators}-{kind}"
    pred_dir = Path(cfg.data_dir) / f"predictions-{rows}x{n_estimators}"
    client = connect(n_workers=cfg.workers, threads_per_worker=1, memory_limit=cfg.memory_limit,
                     dashboard_address=":0")
    watch = None
    try:
        path, data_info = ensure_data(client, cfg, rows)
        out["data"] = {"path": str(path), **data_info}
        # predict and evaluate held-out rows of the same size (the training rows would make
        # NLPD and coverage look worse than they are: in-sample leaves are over-confident)
        test_path, test_info = ensure_data(client, cfg, rows, seed=cfg.seed + 1)
        out["test_data"] = {"path": str(test_path), **test_info}
        addresses = sorted(client.scheduler_info()["workers"])
        watch = MemoryWatch(client, cfg.interval).start()
        watch.phase = "warm-up"
        out["warm_up_seconds"] = warm_up(client)
        print(f"  warm-up (kernels loaded in every process): {out['warm_up_seconds']:.1f}s",
              flush=True)
        out["cpu_probe_start"] = cpu_probe(client)
        try:
            est, out["fit"] = _attempt(out, "fit", fit_phase,
                                       cfg, client, watch, path, rows, n_estimators, branch_memory)
            model = est.to_local()

            # one full read-and-histogram pass, timed alone
            watch.phase = "read-hist-pass"
            out["read_hist_pass"] = _attempt(out, "read-hist-pass", read_hist_phase,
                                             cfg, client, path, model, rows)
            out["targets"] = _targets(cfg, out["fit"], out["read_hist_pass"]["median_seconds"])

            watch.phase = "save"
            out["model"] = _attempt(out, "save", save_phase,
                                    cfg, model, model_dir, rows, n_estimators)
            # the driver keeps nothing of the model from here on
            refs = [weakref.ref(model), weakref.ref(est)]
            del model, est
            out["drop"] = drop_model(watch, refs)
            try:
                out["predict"] = _attempt(out, "predict", predict_phase, cfg, client, watch,
                                          model_dir, test_path, pred_dir, rows)
            finally:  # evaluate needs the saved model, not the predictions
                out["evaluate"] = _attempt(out, "evaluate", evaluate_phase,
                                           cfg, client, watch, model_dir, test_path, rows)
        except PhaseFailed:
            pass
        try:
            _attempt(out, "workers", workers_and_memory,
                     cfg, client, watch, addresses, limit, out)
        except PhaseFailed:
            pass
        if compare and "predict" in out:
            watch.phase = "local"
            try:
                out["local"] = _attempt(out, "local", run_local,
                                        cfg, path, test_path, model_dir, pred_dir, out)
            except PhaseFailed:
                pass
        if not cfg.keep_predictions:
            shutil.rmtree(pred_dir, ignore_errors=True)
    finally:
        if watch is not None and watch._thread.is_alive():
            watch.stop()
        client.close()
    if watch is not None and "memory" in out:  # with the local phase, now the watch stopped
        out["memory"]["sampled_peaks_bytes"] = watch.peaks
        out["memory"]["phase_hwm_bytes"] = watch.hwm
        out["memory"]["phase_peaks_bytes"] = watch.phase_peaks()
    out["loadavg_end"] = os.getloadavg()
    print_size(out)
    return out


def workers_and_memory(cfg: argparse.Namespace, client: Any, watch: MemoryWatch,
                       addresses: list[str], limit: int, out: dict[str, Any]) -> None:
    """Workers alive and lost, peak memory per phase, spilling: into ``out``."""
    watch.phase = "end"
    out["cpu_probe_end"] = cpu_probe(client)
    spill = client.run(worker_spill)
    alive = sorted(client.scheduler_info()["workers"])
    watch.phase = "end-sampled"  # closes "end": its kernel peaks are read
    peak = watch.peak_per_worker()
    out["workers"] = {
        "expected": cfg.workers,
        "alive_at_end": len(alive),
        "same_addresses": alive == addresses,
        "processes_seen": len(watch.worker_pids),
        "died": len(watch.worker_pids) - cfg.workers,
        "lost_per_phase": watch.lost,
    }
    out["memory"] = {
        "limit_per_worker_bytes": limit,
        "peak_rss_per_worker_bytes": peak,
        "peak_rss_worker_bytes": max(peak.values(), default=None),
        "kernel_peaks_exact": watch.hwm_exact,
        "interval_seconds": watch.interval,
        "spill": spill,
        "spilled_to_disk_bytes": sum(s["disk_write_bytes"] for s in spill.values()),
        "spilled_disk_max_bytes": watch.spilled_disk_max,
    }


def run_local(cfg: argparse.Namespace, path: Path, test_path: Path, model_dir: Path,
              pred_dir: Path, out: dict[str, Any]) -> dict[str, Any]:
    """The single-process EBF with the saved model's parameters, fit on the same rows and
    predicting the same held-out rows."""
    print("  local (single process, 1 thread):", flush=True)
    dask_model = load(model_dir)
    t0 = time.perf_counter()
    df = pd.read_parquet(path)
    read_s = time.perf_counter() - t0
    X, y = df[FEATURES], df[TARGET]
    local = EmpiricalBayesianForestRegressor(**dask_model.get_params())
    t0 = time.perf_counter()
    local.fit(X, y)
    fit_s = time.perf_counter() - t0
    print(f"    fit {fit_s:.1f}s", flush=True)
    X = pd.read_parquet(test_path)[FEATURES]
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
