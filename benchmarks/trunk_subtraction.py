"""The ``--trunk-subtraction`` part of ``bench_dask.py``: the trunk grown with and without
sibling subtraction (``ebf.grower.grow_trunk(subtract=...)``).

On the Friedman Parquet data of one size, encoded and binned on the cluster exactly as the
Dask fit does it (``ebf.dask.histograms``), the same trunk (``--trunk-max-leaves``, 32 by
default) is grown from the :class:`~ebf.dask.histograms.DaskHistogramSource` and, on the
gathered rows, from the single-process :class:`~ebf.grower.BinnedSource`:

* per level, the nodes the source is asked for and the histogram bytes it returns (what
  every partition sends up the reduction tree), direct and subtracting;
* the growth time, direct and subtracting called in turn within every repeat
  (``common.paired_times``), and the median of the per-repeat ratios;
* whether the four trunks have the same structure.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import median_ratio, paired_times, print_table
from benchmarks.dask_probes import FEATURES, TARGET
from cluster import connect
from ebf import binning
from ebf.config import MAX_BINS
from ebf.dask.histograms import DaskHistogramSource, sample_bin_edges
from ebf.dask.inputs import check_inputs, encode, summarize
from ebf.grower import BinnedSource, grow_trunk
from ebf.histogram import row_statistics
from ebf.trunk import TrunkArrays
from pipelines.io import read_dataset

MODES = {"direct": False, "subtract": True}


class CountingSource:
    """Wraps a histogram source; counts nodes asked for and bytes returned per level."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.levels: dict[int, dict[str, int]] = {}

    def __call__(self, trunk: TrunkArrays, open_nodes: np.ndarray) -> np.ndarray:
        hist = self.source(trunk, open_nodes)
        level = int(trunk.depth[open_nodes[0]])
        row = self.levels.setdefault(level, {"calls": 0, "nodes": 0, "bytes": 0})
        row["calls"] += 1
        row["nodes"] += len(open_nodes)
        row["bytes"] += int(np.asarray(hist).nbytes)
        return hist


def _same_structure(a: TrunkArrays, b: TrunkArrays) -> bool:
    return all(np.array_equal(getattr(a, name), getattr(b, name))
               for name in ("feature", "threshold_bin", "left", "right", "n_rows"))


def _compare(where: str, source: Any, edges: list[np.ndarray], leaves: int,
             repeats: int) -> tuple[dict[str, Any], dict[str, TrunkArrays]]:
    """Bytes per level (one counted growth per mode) and paired growth times."""
    trunks, levels = {}, {}
    for mode, subtract in MODES.items():
        counting = CountingSource(source)
        trunks[mode] = grow_trunk(counting, edges, max_leaves=leaves, subtract=subtract)
        levels[mode] = counting.levels
    times = paired_times({mode: (lambda s=subtract: grow_trunk(source, edges, max_leaves=leaves,
                                                               subtract=s))
                          for mode, subtract in MODES.items()}, repeats)
    rows = []
    for level in sorted(levels["direct"]):
        d, s = levels["direct"][level], levels["subtract"].get(level, {"nodes": 0, "bytes": 0})
        rows.append({"where": where, "level": level, "nodes_direct": d["nodes"],
                     "nodes_subtract": s["nodes"], "mb_direct": d["bytes"] / 1e6,
                     "mb_subtract": s["bytes"] / 1e6,
                     "bytes_ratio": s["bytes"] / d["bytes"] if d["bytes"] else None})
    total = {mode: sum(v["bytes"] for v in levels[mode].values()) for mode in MODES}
    out = {
        "levels": rows,
        "bytes_direct": total["direct"],
        "bytes_subtract": total["subtract"],
        "bytes_ratio": total["subtract"] / total["direct"],
        "seconds_direct": times["direct"],
        "seconds_subtract": times["subtract"],
        "median_seconds_direct": statistics.median(times["direct"]),
        "median_seconds_subtract": statistics.median(times["subtract"]),
        "time_ratio": median_ratio(times["subtract"], times["direct"]),
        "same_structure": _same_structure(trunks["direct"], trunks["subtract"]),
        "n_leaves": trunks["subtract"].n_leaves,
    }
    return out, trunks


def run_trunk_subtraction(cfg: argparse.Namespace, rows: int,
                          ensure_data: Callable[[Any, argparse.Namespace, int], tuple[Path, dict]]
                          ) -> dict[str, Any]:
    """The comparison on ``rows`` rows of the benchmark's Friedman data
    (``ensure_data(client, cfg, rows)`` makes or finds them)."""
    leaves = cfg.trunk_max_leaves or 32
    print(f"\n=== trunk subtraction: {rows:,} rows, {leaves} leaves, {cfg.workers} workers, "
          f"{cfg.repeats} paired repeats ===", flush=True)
    client = connect(n_workers=cfg.workers, threads_per_worker=1, memory_limit=cfg.memory_limit,
                     dashboard_address=":0")
    try:
        path, _ = ensure_data(client, cfg, rows)
        ddf = read_dataset(path, FEATURES + [TARGET])
        frame, layout = check_inputs(ddf[FEATURES], ddf[TARGET], None, "regression")
        data = encode(client, frame, layout, summarize(client, frame, layout))
        edges = sample_bin_edges(client, data, MAX_BINS)
        source = DaskHistogramSource(client, data, edges)
        try:
            dask_out, dask_trunks = _compare("dask", source, edges, leaves, cfg.repeats)
        finally:
            source.release()
        parts = client.gather(data.futures)
        A = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        local = BinnedSource(binning.bin_data(A, edges), row_statistics(y),
                             binning.n_bins_of(edges))
        local_out, local_trunks = _compare("local", local, edges, leaves, cfg.repeats)
    finally:
        client.close()
    out = {"rows": rows, "leaves": leaves, "n_partitions": len(data.futures),
           "dask": dask_out, "local": local_out,
           "local_equals_dask": _same_structure(local_trunks["subtract"],
                                                dask_trunks["subtract"])}
    print_trunk_subtraction(out)
    return out


def print_trunk_subtraction(r: dict[str, Any]) -> None:
    print_table(f"histogram bytes per level ({r['rows']:,} rows, {r['leaves']} leaves, "
                f"{r['n_partitions']} partitions; the same on the cluster and locally)", [
                    ("level", "level", "d"), ("nodes_direct", "nodes direct", "d"),
                    ("nodes_subtract", "nodes subtract", "d"), ("mb_direct", "MB direct", ".1f"),
                    ("mb_subtract", "MB subtract", ".1f"), ("bytes_ratio", "ratio", ".2f")],
                r["local"]["levels"])
    print_table("trunk growth, direct vs subtracting (median seconds, median paired ratio)", [
        ("where", "source", "s"), ("median_seconds_direct", "direct s", ".2f"),
        ("median_seconds_subtract", "subtract s", ".2f"), ("time_ratio", "time ratio", ".2f"),
        ("bytes_ratio", "bytes ratio", ".2f"), ("same_structure", "same trunk", "")],
        [{"where": w, **r[w]} for w in ("dask", "local")])
    print(f"local trunk equals the Dask trunk: {r['local_equals_dask']}")
