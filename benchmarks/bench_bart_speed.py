"""Benchmark issue 43 item 4: BART branches fast enough to fit every row.

The Friedman task of ``bench_peers.py`` (Friedman #1, 10 features, N(0, 1) noise, 20,000
training and 10,000 test rows, seed 0) and two models as ``bench_peers.py`` builds them:

``BART``
    one :class:`ebf.bayestrees.BARTRegressor`, 50 trees, 300 iterations (100 burn-in);
``EBF-bart``
    ``EmpiricalBayesianForestRegressor(branch="bart")`` of ``bench_peers`` (50 trees x 300
    iterations per branch, calibrated as by default: every branch cross-fitted whole),

each fit on all training rows and on the 5,000 rows ``bench_peers`` gives EBF-bart
(``--bart-rows``). Per fit: wall and CPU seconds, and the test RMSE of the predictive mean.
Target: each fit on all rows in at most 60 s on 2 cores.

Before / after in the same run: ``--baseline REV`` exports that git revision of the library
(``git archive``) to a temporary directory, and both versions are measured in fresh
processes (numba compiled by a warm-up fit first), the baseline first. Writes
``benchmarks/results/issue43/bart_speed.json`` and ``bart_speed.md``. Run from the
repository root::

    PYTHONPATH=. python benchmarks/bench_bart_speed.py --baseline 842eb87
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results" / "issue43"
MODELS = ("BART", "EBF-bart")
COLUMNS = [("code", "code", "s"), ("model", "model", "s"), ("n_fit", "rows", ",d"),
           ("fit_seconds", "fit s", ".1f"), ("cpu_seconds", "CPU s", ".1f"),
           ("rmse", "test RMSE", ".4f")]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default=None,
                   help="git revision measured before this tree (none: this tree only)")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--rows", nargs="+", type=int, default=[0, 5_000],
                   help="training rows per fit (0: all), the subset as bench_peers takes it")
    p.add_argument("--friedman-train", type=int, default=20_000)
    p.add_argument("--friedman-test", type=int, default=10_000)
    p.add_argument("--trees", type=int, default=50)
    p.add_argument("--iter", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # JSON path: one version
    return p.parse_args(argv)


def _peer_cfg(cfg: argparse.Namespace) -> argparse.Namespace:
    """The options ``bench_peers`` reads to build the task and EBF-bart."""
    return argparse.Namespace(
        seed=cfg.seed, friedman_train=cfg.friedman_train, friedman_test=cfg.friedman_test,
        rows=0, max_rows=0, cal_fraction=0.1, n_jobs=-1, trees=50, mondrian_trees=10,
        bart_trees=cfg.trees, bart_iter=cfg.iter)


def _model(name: str, cfg: argparse.Namespace, n_iter: int) -> Any:
    from benchmarks.peers_models import make_ours
    from ebf.bayestrees import BARTRegressor

    peer = _peer_cfg(cfg)
    peer.bart_iter = n_iter
    if name == "EBF-bart":
        return make_ours("EBF-bart", peer)
    return BARTRegressor(n_trees=cfg.trees, n_iter=n_iter, burn_in=n_iter // 3,
                         random_state=cfg.seed, n_jobs=-1)


def measure(cfg: argparse.Namespace) -> list[dict[str, Any]]:
    """Every model on every row count, with the library on ``sys.path`` (one version)."""
    from benchmarks.bench_peers import load_task
    from benchmarks.peers_models import capped

    task = load_task("friedman", _peer_cfg(cfg))
    for name in cfg.models:  # compile numba (and load its cache) before any timing
        for _ in range(2):
            _model(name, cfg, 20).fit(task.X_train[:2000], task.y_train[:2000])
    rows = []
    for n in cfg.rows:
        keep = capped(np.arange(task.y_train.size), n, cfg.seed)
        X, y = task.X_train[keep], task.y_train[keep]
        for name in cfg.models:
            model = _model(name, cfg, cfg.iter)
            wall, cpu = time.perf_counter(), time.process_time()
            model.fit(X, y)
            model.predict(X[:1])
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            err = model.predict(task.X_test) - task.y_test
            rows.append({"model": name, "n_fit": int(keep.size), "fit_seconds": wall,
                         "cpu_seconds": cpu, "rmse": float(np.sqrt(np.mean(err**2)))})
            print(f"  {name} on {keep.size:,} rows: {wall:.1f} s (CPU {cpu:.1f} s), RMSE "
                  f"{rows[-1]['rmse']:.4f}", flush=True)
    return rows


def _export(rev: str, into: Path) -> Path:
    """The library at git revision ``rev`` in ``into`` (``git archive``)."""
    archive = into / "src.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "archive", rev], cwd=ROOT, stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "src", filter="data")
    return into / "src"


def _run_version(code: str, src: Path, argv: list[str], tmp: Path) -> list[dict[str, Any]]:
    """:func:`measure` in a fresh process whose ``ebf`` is the one in ``src``."""
    out = tmp / f"{code}.json"
    env = {**os.environ, "PYTHONPATH": str(src)}
    print(f"{code} ({src}):", flush=True)
    subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv, "--worker",
                    str(out)], env=env, cwd=src, check=True)
    return [{"code": code, **row} for row in json.loads(out.read_text())]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = parse_args(argv)
    if cfg.worker:
        Path(cfg.worker).write_text(json.dumps(measure(cfg)))
        return 0
    from benchmarks.common import write_rows

    passed = [a for i, a in enumerate(argv) if a != "--baseline"
              and (i == 0 or argv[i - 1] != "--baseline")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if cfg.baseline:
            rows += _run_version(f"before ({cfg.baseline})", _export(cfg.baseline, tmp),
                                 passed, tmp)
        rows += _run_version("after", ROOT, passed, tmp)
    write_rows(cfg.out, "bart_speed", cfg,
               f"BART and EBF-bart on Friedman #1 ({cfg.friedman_train:,} train / "
               f"{cfg.friedman_test:,} test rows), {cfg.trees} trees x {cfg.iter} iterations",
               COLUMNS, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
