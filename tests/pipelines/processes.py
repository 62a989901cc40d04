"""A Dask scheduler and workers as separate processes, for the tests that need a real
cluster (``test_s3``, ``test_soak``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def process_cluster(folder: Path, env: dict, n_workers: int = 2) -> Iterator[str]:
    """Start a scheduler (its address in ``folder/scheduler.json``) and ``n_workers``
    single-threaded workers, each under a nanny, with environment ``env``; wait for them,
    yield the scheduler file, stop them all (SIGINT, then kill). Logs in
    ``folder/cluster.log``."""
    from distributed import Client

    address = folder / "scheduler.json"
    logs = open(folder / "cluster.log", "w")
    procs = [subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--scheduler-file",
         str(address), "--port", "0", "--dashboard-address", ":0"],
        env=env, stdout=logs, stderr=logs)]
    try:
        deadline = time.monotonic() + 60
        while not address.exists():
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.2)
        procs += [subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
             str(address), "--nthreads", "1", "--memory-limit", "3GB", "--no-dashboard"],
            env=env, stdout=logs, stderr=logs) for _ in range(n_workers)]
        with Client(scheduler_file=str(address), timeout=60) as client:
            client.wait_for_workers(n_workers, timeout=120)
        yield str(address)
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        logs.close()
