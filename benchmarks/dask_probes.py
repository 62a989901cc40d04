"""Instruments of ``bench_dask.py``: worker memory and spilling, trunk levels and branch
tasks from the logs and the task stream, the CPU the workers really get, warm-up.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import numpy as np
import pandas as pd
import psutil
from dask.utils import key_split

from ebf import EmpiricalBayesianForestRegressor
from ebf.dask import DaskEmpiricalBayesianForestRegressor

GB = 1e9
#: The generated data set: ``make_friedman`` columns.
N_FEATURES = 10
FEATURES = [f"x{j}" for j in range(N_FEATURES)]
TARGET = "y"
QUANTILES = (0.05, 0.5, 0.95)


# ---------------------------------------------------------------- memory


def _is_worker_cmdline(cmdline: list[str]) -> bool:
    return any("spawn_main" in part or "forkserver" in part for part in cmdline)


def proc_status_bytes(pid: int | str, field: str) -> int | None:
    """``field`` (``VmRSS``, ``VmHWM``) of ``/proc/<pid>/status`` in bytes (Linux; else None)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            line = next((x for x in f if x.startswith(field + ":")), None)
    except OSError:
        return None
    return None if line is None else int(line.split()[1]) * 1024


def reset_peak_rss(pid: int | str) -> bool:
    """Reset the kernel's peak RSS (``VmHWM``) of ``pid`` to its current RSS (Linux >= 4.0)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


class MemoryWatch:
    """Samples the RSS of the Dask worker processes (children of this process) and of this
    process (the driver, from ``/proc/self/status``) every ``interval`` seconds, in one
    thread, keeping the peaks per phase (``self.phase = name`` starts a phase).

    Sampling from the driver does not wait on the workers' event loops, so it keeps going
    while a task holds a worker's GIL. A sample can miss a short spike, so every phase
    change also reads the kernel's high-water mark (``VmHWM``) of the driver and of every
    worker, then resets it (``/proc/<pid>/clear_refs``): ``hwm`` holds the exact peak of
    every process per phase where the kernel allows the reset (``hwm_exact``). Every 4th
    sample also reads the scheduler's view of bytes spilled to disk. ``lost`` lists, per
    phase, the worker processes alive when it started and gone when it ended (died, killed
    by the nanny, restarted).
    """

    def __init__(self, client: Any, interval: float) -> None:
        self.client = client
        self.interval = float(interval)
        self._phase = "setup"
        self.peaks: dict[str, dict[str, int]] = {}
        self.hwm: dict[str, dict[str, Any]] = {}
        self.hwm_exact = True
        self.lost: dict[str, list[int]] = {}
        self.worker_pids: set[int] = set()
        self.spilled_disk_max = 0
        self.samples = 0
        self._me = psutil.Process()
        self._procs: dict[int, psutil.Process | None] = {}
        self._started_with: set[int] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, name: str) -> None:
        with self._lock:
            if name == self._phase:
                return
            self._end_phase()
            self._phase = name

    def _end_phase(self) -> None:
        """The last sample and the kernel peaks of the current phase, then reset them."""
        self._sample()
        workers = self.workers()
        per_worker = {p.pid: proc_status_bytes(p.pid, "VmHWM") for p in workers}
        entry = self.hwm.setdefault(self._phase, {"driver": 0, "worker_max": 0,
                                                  "per_worker": {}})
        entry["driver"] = max(entry["driver"], proc_status_bytes("self", "VmHWM") or 0)
        for pid, value in per_worker.items():
            old = entry["per_worker"].get(pid) or 0
            entry["per_worker"][pid] = max(old, value or 0)
        entry["worker_max"] = max(entry["per_worker"].values(), default=0)
        alive = {p.pid for p in workers}
        gone = sorted(self._started_with - alive)
        if gone:
            self.lost.setdefault(self._phase, []).extend(gone)
        for pid in ["self", *alive]:
            self.hwm_exact &= reset_peak_rss(pid)
        self._started_with = alive

    def start(self) -> MemoryWatch:
        with self._lock:
            self._started_with = {p.pid for p in self.workers()}
            for pid in ["self", *self._started_with]:
                self.hwm_exact &= reset_peak_rss(pid)
            self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            self._end_phase()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with self._lock:
                    self._sample()
            except Exception as exc:  # noqa: BLE001 - a failed sample must not end the run
                print(f"  memory sample failed: {exc!r}", flush=True)

    def workers(self) -> list[psutil.Process]:
        """The live worker processes (spawned children of this process)."""
        out = []
        for child in self._me.children(recursive=True):
            if child.pid not in self._procs:
                try:
                    worker = _is_worker_cmdline(child.cmdline())
                except psutil.Error:
                    continue
                self._procs[child.pid] = child if worker else None
            proc = self._procs[child.pid]
            if proc is not None and proc.is_running():
                out.append(proc)
        return out

    def _sample(self) -> None:
        rss = {}
        for proc in self.workers():
            try:
                rss[proc.pid] = proc.memory_info().rss
            except psutil.Error:
                continue
        self.worker_pids.update(rss)
        peak = self.peaks.setdefault(self._phase, {"worker_max": 0, "workers_total": 0,
                                                   "driver": 0})
        peak["worker_max"] = max(peak["worker_max"], max(rss.values(), default=0))
        peak["workers_total"] = max(peak["workers_total"], sum(rss.values()))
        driver = proc_status_bytes("self", "VmRSS") or self._me.memory_info().rss
        peak["driver"] = max(peak["driver"], driver)
        if self.samples % 4 == 0:
            try:
                info = self.client.scheduler_info()["workers"]
                disk = sum(int(w.get("metrics", {}).get("spilled_bytes", {}).get("disk", 0))
                           for w in info.values())
                self.spilled_disk_max = max(self.spilled_disk_max, disk)
            except Exception:  # noqa: BLE001 - the scheduler may be closing
                pass
        self.samples += 1

    def phase_peaks(self) -> dict[str, dict[str, int]]:
        """Per phase, the larger of the sampled peak and the kernel's high-water mark."""
        out = {}
        for name, sampled in self.peaks.items():
            kernel = self.hwm.get(name, {})
            out[name] = {"worker_max": max(sampled["worker_max"], kernel.get("worker_max", 0)),
                         "workers_total": sampled["workers_total"],
                         "driver": max(sampled["driver"], kernel.get("driver", 0))}
        return out

    def peak_per_worker(self) -> dict[int, int]:
        """Peak RSS of every worker process over the whole run (the phases' kernel marks)."""
        out: dict[int, int] = {}
        for entry in self.hwm.values():
            for pid, value in entry["per_worker"].items():
                out[pid] = max(out.get(pid, 0), value or 0)
        return out


def worker_spill(dask_worker: Any = None) -> dict[str, float]:
    """Bytes this worker wrote to its spill directory since it started, and spilled now."""
    data = dask_worker.data
    metrics = getattr(data, "cumulative_metrics", {})
    written = sum(v for (label, unit), v in metrics.items()
                  if label == "disk-write" and unit == "bytes")
    count = sum(v for (label, unit), v in metrics.items()
                if label == "disk-write" and unit == "count")
    total = getattr(data, "spilled_total", None)
    return {"disk_write_bytes": float(written), "disk_write_count": float(count),
            "spilled_now_bytes": float(total.disk) if total is not None else 0.0}


# ---------------------------------------------------------------- fit instrumentation


class TrunkLevelLog(logging.Handler):
    """Collects the per-level records ``ebf.dask`` logs while the trunk grows."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.levels: list[dict[str, Any]] = []
        self.regrown: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = str(record.msg)
        if record.name == "ebf.dask.histograms" and msg.startswith("trunk level"):
            call, n_open, n_parts, seconds = record.args
            self.levels.append({"level": int(call), "open_nodes": int(n_open),
                                "partitions": int(n_parts), "seconds": float(seconds)})
        elif record.name == "ebf.dask.histograms" and msg.startswith("largest branch"):
            self.regrown.append(record.getMessage())

    def __enter__(self) -> TrunkLevelLog:
        logger = logging.getLogger("ebf.dask")
        self._level = logger.level
        logger.setLevel(logging.INFO)
        logger.addHandler(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        logger = logging.getLogger("ebf.dask")
        logger.removeHandler(self)
        logger.setLevel(self._level)


def _compute_seconds(task: dict) -> float:
    return sum(s["stop"] - s["start"] for s in task.get("startstops", ())
               if s.get("action") == "compute")


def branch_tasks(stream: list[dict], t0: float) -> list[dict[str, Any]]:
    """Branch tasks (keys ``ebf-branch-<b>-<token>``) from the task stream: compute seconds,
    worker, and start / stop in seconds after ``t0`` (a ``time.time()``)."""
    out = []
    for task in stream:
        key = str(task.get("key"))
        if not key.startswith("ebf-branch-"):
            continue
        compute = [s for s in task.get("startstops", ()) if s.get("action") == "compute"]
        out.append({"branch": int(key.split("-")[2]), "seconds": _compute_seconds(task),
                    "worker": task.get("worker"),
                    "start": min((s["start"] for s in compute), default=t0) - t0,
                    "stop": max((s["stop"] for s in compute), default=t0) - t0,
                    "transfer_seconds": sum(s["stop"] - s["start"]
                                            for s in task.get("startstops", ())
                                            if s.get("action") == "transfer")})
    return sorted(out, key=lambda t: t["branch"])


def task_summary(stream: list[dict]) -> dict[str, dict[str, float]]:
    """Tasks and compute seconds per task name prefix (where the workers spent the fit)."""
    out: dict[str, dict[str, float]] = {}
    for task in stream:
        name = key_split(task.get("key"))
        entry = out.setdefault(name, {"tasks": 0, "compute_seconds": 0.0})
        entry["tasks"] += 1
        entry["compute_seconds"] += _compute_seconds(task)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["compute_seconds"]))


class Progress:
    """``fit(progress=...)``: tags the memory samples with the phase, prints transitions."""

    def __init__(self, watch: MemoryWatch, t0: float) -> None:
        self.watch, self.t0, self.phase = watch, t0, None

    def __call__(self, phase: str, done: int, total: int) -> None:
        self.watch.phase = f"fit:{phase}"
        if phase != self.phase or phase == "trunk":
            what = f"{done} leaves" if phase == "trunk" else f"{done}/{total}"
            print(f"    [{time.perf_counter() - self.t0:7.1f}s] {phase}: {what}", flush=True)
            self.phase = phase


# ---------------------------------------------------------------- machine state


def _spin(n: int = 4_000_000) -> float:
    """Seconds of a fixed pure-Python loop (CPU only, no memory traffic)."""
    t0 = time.perf_counter()
    total = 0
    for i in range(n):
        total += i & 7
    return time.perf_counter() - t0


def cpu_probe(client: Any) -> dict[str, float]:
    """How many cores the workers really get now (the machine is shared).

    The same loop runs in the driver alone (workers idle), then on every worker at once;
    ``effective_cores = workers * alone / mean(concurrent)`` is about the number of workers
    on an idle machine and lower when other processes compete for the cores.
    """
    alone = min(_spin() for _ in range(2))
    concurrent = list(client.run(_spin).values())
    mean = float(np.mean(concurrent))
    return {"alone_seconds": alone, "concurrent_seconds": concurrent,
            "effective_cores": len(concurrent) * alone / mean, "loadavg": os.getloadavg()}


def release_driver_memory() -> None:
    """Collect garbage and return freed heap pages to the OS (glibc), between sizes."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


# ---------------------------------------------------------------- warm-up


def _warm_data(rows: int = 20_000) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    df = pd.DataFrame(rng.random((rows, N_FEATURES)), columns=FEATURES)
    df[TARGET] = 10 * df["x0"] + rng.normal(size=rows)
    return df


def _warm_local() -> None:
    """A tiny local fit and prediction: loads the numba kernels into this process."""
    df = _warm_data()
    X, y = df[FEATURES], df[TARGET]
    model = EmpiricalBayesianForestRegressor(n_estimators=2, branch="mondrian", random_state=0)
    model.fit(X, y).predict(X, return_std=True)
    model.predict_quantiles(X, QUANTILES)
    model.apply(X)


def warm_up(client: Any) -> float:
    """Load the kernels in every process before anything is timed; returns the seconds.

    The numba kernels are cached on disk, but loading them and the first calls still cost
    seconds in every fresh worker process. A tiny local fit runs on every worker and in the
    driver, then a tiny Dask fit and prediction (histograms, p2p shuffle, branch tasks).
    """
    import dask.dataframe as dd

    t0 = time.perf_counter()
    client.run(_warm_local)
    _warm_local()
    ddf = dd.from_pandas(_warm_data(), npartitions=4)
    est = DaskEmpiricalBayesianForestRegressor(n_estimators=2, branch="mondrian",
                                               random_state=0, client=client)
    est.fit(ddf[FEATURES], ddf[TARGET]).predict_frame(ddf[FEATURES]).compute()
    return time.perf_counter() - t0
