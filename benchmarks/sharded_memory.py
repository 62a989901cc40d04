"""Sharded prediction under a worker memory limit: wall time, rows/s, peak RSS per worker,
bytes spilled and the workers' "Pausing worker" messages.

    python -m benchmarks.sharded_memory MODEL DATA LIMIT

``MODEL`` a saved sharded model, ``DATA`` a Parquet dataset of its features, ``LIMIT`` the
memory limit of each of the 2 single-threaded workers of a LocalCluster (Dask's memory
management on). Prints one JSON line. Results: ``benchmarks/results/issue29/sharded_memory.md``.
"""

from __future__ import annotations

import json
import sys
import time


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _high_water() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))


def _reset_high_water() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def main(model: str, data: str, limit: str) -> dict:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from ebf.artifact import open_model
    from ebf.dask.sharded import predict_sharded

    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=limit,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        reader = open_model(model)
        X = dd.read_parquet(data, columns=list(reader.head().encoder.names_))
        idle = client.run(_rss)
        client.run(_reset_high_water)
        t0 = time.perf_counter()
        n = client.compute(predict_sharded(reader, X, (0.05, 0.5, 0.95))
                           .map_partitions(len).sum()).result()
        wall = time.perf_counter() - t0
        peaks = client.run(_high_water)
        paused = sum("Pausing worker" in msg for logs in client.get_worker_logs().values()
                     for _, msg in logs)
        spilled = sum(w.get("metrics", {}).get("spilled_bytes", {}).get("disk", 0)
                      for w in client.scheduler_info()["workers"].values())
    return {"rows": int(n), "wall": round(wall, 2), "rows_per_s": round(n / wall),
            "peak_GB": [round(v / 1e9, 3) for v in peaks.values()],
            "idle_GB": [round(v / 1e9, 3) for v in idle.values()],
            "paused_messages": paused, "spilled_bytes": spilled,
            "shard_MB": [b // 10**6 for b in reader.part_bytes]}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
