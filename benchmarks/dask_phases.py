"""The phases of ``bench_dask.py`` at one size: the data, the fit, the read-and-histogram
pass, save (the head: the workers wrote the branches as they fit them), predict and
evaluate on the cluster, and the same rows fit and predicted in one
process (``--compare-rows``); each phase times itself and records the memory it took.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
import traceback
import weakref
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from dask import delayed
from dask.utils import format_bytes, parse_bytes
from distributed import get_task_stream

from benchmarks.common import median_time, ratio
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
)
from cluster import connect
from ebf import EmpiricalBayesianForestRegressor, binning
from ebf.artifact import load, open_model, stage_model
from ebf.dask import DaskEmpiricalBayesianForestRegressor
from ebf.dask.cache import cache_peak_bytes, clear_cache
from ebf.dask.histograms import bin_partition, partition_histogram, tree_reduce
from ebf.dask.inputs import check_inputs, encode_partition
from ebf.dask.sharded import choose_strategy
from ebf.trunk import TrunkArrays
from pipelines.io import read_dataset, read_parquet_metadata
from pipelines.make_data import METADATA_KEY, make_friedman
from pipelines.predict import predict_to_parquet
from pipelines.report.evaluate import evaluate

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
    enc = encode_partition(part, encoder, layout, None)
    binned = bin_partition(enc, edges, "regression", None)
    root = TrunkArrays.root(binned[1].shape[1])
    return partition_histogram(binned, root, np.zeros(1, np.int64), n_bins)


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
              n_estimators: int, branch_memory: int | None,
              stage: Any) -> tuple[Any, dict[str, Any]]:
    """Fit the Dask EBF on the Parquet files, every branch written to ``stage`` by the
    worker that fit it; the estimator and what was measured."""
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
        est.fit(ddf[FEATURES], ddf[TARGET], progress=Progress(watch, t0), stage=stage)
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
        # from the last branch task's end to fit's return: the references to the branches
        # the workers wrote are gathered, and the model assembled
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


def _commit(stage: Any, stack: ExitStack, model: Any) -> None:
    """Write the staged model's head, then move it into place (closing its stage)."""
    stage.write(model)
    stack.close()


def save_phase(cfg: argparse.Namespace, model: Any, model_dir: Path, rows: int,
               n_estimators: int, write: Callable[[], Any]) -> dict[str, Any]:
    """``write()`` the model's head and move it into place (the workers wrote the branches,
    compact unless ``--no-compact``, as they were fit); its size, files and shards."""
    print(f"  save -> {model_dir} ({'compact' if cfg.compact else 'full'}) ...", flush=True)
    t0 = time.perf_counter()
    write()
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
            with ExitStack() as stack:
                stage = stack.enter_context(stage_model(model_dir, overwrite=True))
                est, out["fit"] = _attempt(out, "fit", fit_phase, cfg, client, watch, path, rows,
                                           n_estimators, branch_memory, stage)
                model = est.to_local()  # encoder and trunk; the branches are in the stage

                # one full read-and-histogram pass, timed alone
                watch.phase = "read-hist-pass"
                out["read_hist_pass"] = _attempt(out, "read-hist-pass", read_hist_phase,
                                                 cfg, client, path, model, rows)
                out["targets"] = _targets(cfg, out["fit"],
                                          out["read_hist_pass"]["median_seconds"])
                watch.phase = "save"
                out["model"] = _attempt(out, "save", save_phase, cfg, model, model_dir, rows,
                                        n_estimators, partial(_commit, stage, stack, model))
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
