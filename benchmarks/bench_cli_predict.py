"""``ebf predict`` end to end: rows per second of a saved model, a cluster per command or a
running one.

Issue 44's CLI serving targets. ``ebf make-data friedman`` writes ``--rows`` training rows
and as many test rows (the next seed); ``ebf train --branch BRANCH`` (other flags at their
defaults) saves the model. Then, alternating in every repeat:

``own cluster``
    ``ebf predict MODEL TEST --out ...`` as a user runs it: the command starts its local
    cluster, predicts, writes Parquet and stops (wall time of the whole process);
``running cluster``
    the same command with ``--scheduler`` pointed at a ``dask scheduler`` and
    ``--workers`` ``dask worker`` processes (one thread each) started once for the bench;
``evaluate``
    ``ebf evaluate MODEL TEST`` on the running cluster (the issue: at most 1.3x predict).

Rows per second are test rows over wall seconds; min/median/max of ``--repeats``. Writes
``benchmarks/results/issue44/cli_predict_<branch>_<rows>.md`` and ``.json``.

Run from the repository root (the ``ebf`` command on PATH)::

    PYTHONPATH=. python benchmarks/bench_cli_predict.py --rows 300000 --branch mondrian
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import machine_info, write_json

RESULTS = Path(__file__).resolve().parent / "results" / "issue44"


def _run(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, text=True)
    return time.perf_counter() - t0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster(workers: int, cwd: Path) -> tuple[str, list[subprocess.Popen]]:
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ)
    procs = [subprocess.Popen(["dask", "scheduler", "--port", str(port),
                               "--dashboard-address", ":0"], cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    time.sleep(2.0)
    procs += [subprocess.Popen(["dask", "worker", address, "--nthreads", "1",
                                "--dashboard-address", ":0"], cwd=cwd, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for _ in range(workers)]
    time.sleep(4.0)
    return address, procs


def run(args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix="ebf-bench-cli-"))
    out: dict = {"config": vars(args), "machine": machine_info()}
    try:
        for name, seed in (("train", 0), ("test", 1)):
            _run(["ebf", "make-data", "friedman", "--rows", str(args.rows), "--seed",
                  str(seed), "--out", f"data/{name}"], work)
        out["train_s"] = _run(["ebf", "train", "data/train", "--target", "y", "--branch",
                               args.branch, "--out", "model", "--quiet"], work)
        out["model_bytes"] = sum(f.stat().st_size for f in (work / "model").rglob("*")
                                 if f.is_file())
        address, procs = _cluster(args.workers, work)
        times: dict[str, list[float]] = {"own cluster": [], "running cluster": [],
                                         "evaluate": []}
        try:
            for r in range(args.repeats):
                base = ["ebf", "predict", "model", "data/test", "--overwrite", "--quiet"]
                times["own cluster"].append(_run(base + ["--out", f"pred{r}a"], work))
                times["running cluster"].append(_run(
                    base + ["--out", f"pred{r}b", "--scheduler", address], work))
                times["evaluate"].append(_run(
                    ["ebf", "evaluate", "model", "data/test", "--target", "y", "--quiet",
                     "--scheduler", address], work))
        finally:
            for p in procs[::-1]:
                p.terminate()
            for p in procs:
                p.wait(timeout=30)
        out["times"] = times
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def report(out: dict) -> str:
    c, t = out["config"], out["times"]
    lines = [f"# `ebf predict` of a {c['rows']:,}-row `{c['branch']}` model ({c['rows']:,} "
             f"rows predicted; {c['workers']} workers on the running cluster)", "",
             f"train {out['train_s']:.1f} s; model {out['model_bytes'] / 2**20:.0f} MiB", "",
             "| command | min s | median s | max s | rows/s (median) |", "|---|---|---|---|---|"]
    for name, ts in t.items():
        med = statistics.median(ts)
        lines.append(f"| {name} | {min(ts):.2f} | {med:.2f} | {max(ts):.2f} | "
                     f"{c['rows'] / med:,.0f} |")
    ratio = statistics.median(t["evaluate"]) / statistics.median(t["running cluster"])
    lines += ["", f"evaluate / predict on the running cluster (medians): {ratio:.2f}x"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument("--branch", default="mondrian")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    out = run(args)
    text = report(out)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = args.out or f"cli_predict_{args.branch}_{args.rows}"
    (RESULTS / f"{stem}.md").write_text(text)
    write_json(out, RESULTS / f"{stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
