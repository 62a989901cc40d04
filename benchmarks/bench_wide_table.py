"""``ebf train`` on a wide table (600 rows x 10,000 float columns, one Parquet file), before
and after a change (issue 45, item 2).

For each git revision given, the revision is exported once into a temporary directory
(``git archive``) and its numba kernels are compiled by a small warm-up run (600 rows x 20
columns, which every revision trains). Each repeat then runs ``python -m pipelines train
DATA --target y`` with ``PYTHONPATH`` on each export in turn, the revisions alternating
(in turn first) so that machine load falls on both alike, each run stopped after
``--timeout`` seconds: a run that did not finish counts as more than the timeout. Writes a
Markdown table (min / median / max wall seconds over the repeats, and the last lines the
command printed) to ``benchmarks/results/issue45/wide_table.md`` and the runs as JSON
beside it.

Examples
--------
The fix of the Dask graph against its parent, three repeats of the default ``ebf train``
(long: the default 100 trees per branch on 10,000 columns), and a cheaper setting::

    python benchmarks/bench_wide_table.py --refs eea28ee~1 HEAD --repeats 3
    python benchmarks/bench_wide_table.py --refs eea28ee~1 HEAD --timeout 600 \\
        --train-options "--n-estimators 5 --calibrate none"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "issue45"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--refs", nargs="+", default=["HEAD"], help="git revisions to compare")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rows", type=int, default=600)
    p.add_argument("--columns", type=int, default=10_000)
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds after which a run is stopped and counted as not finished")
    p.add_argument("--train-options", default="",
                   help="more options of ebf train, quoted, e.g. \"--n-estimators 5\"")
    p.add_argument("--out", type=Path, default=OUT / "wide_table.md")
    return p.parse_args(argv)


def write_table(path: Path, rows: int, columns: int, seed: int = 0) -> None:
    """``rows`` x ``columns`` standard normal floats ``x0..`` and ``y = 2 x0 + x1 + noise``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, columns))
    y = 2 * X[:, 0] + X[:, 1] + 0.1 * rng.standard_normal(rows)
    pq.write_table(pa.table([*X.T, y], names=[*(f"x{i}" for i in range(columns)), "y"]), path)


def export(ref: str, into: Path) -> Path:
    """The tree of ``ref`` in a new directory under ``into``."""
    where = into / ref.replace("/", "_").replace("~", "-")
    where.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def train(root: Path, data: Path, out: Path, options: list[str], timeout: float) -> dict:
    """One ``ebf train`` with ``PYTHONPATH`` on ``root``: wall seconds (None if stopped),
    status and the last lines it printed."""
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    argv = [sys.executable, "-m", "pipelines", "train", str(data), "--target", "y", "--out",
            str(out), "--overwrite", *options]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as stop:
        tail = (stop.stderr or b"").decode(errors="replace") if isinstance(
            stop.stderr, bytes) else (stop.stderr or "")
        return {"seconds": None, "status": None, "tail": tail.strip().splitlines()[-3:]}
    return {"seconds": time.perf_counter() - t0, "status": proc.returncode,
            "tail": (proc.stdout + proc.stderr).strip().splitlines()[-3:]}


def summary(runs: list[dict], timeout: float) -> str:
    done = [r["seconds"] for r in runs if r["seconds"] is not None and r["status"] == 0]
    if len(done) < len(runs):
        return f"{len(runs) - len(done)} of {len(runs)} did not finish in {timeout:g} s"
    return " / ".join(f"{v:.1f}" for v in (min(done), statistics.median(done), max(done)))


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    options = shlex.split(cfg.train_options)
    runs: dict[str, list[dict]] = {ref: [] for ref in cfg.refs}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data, small = tmp / "wide.parquet", tmp / "small.parquet"
        write_table(data, cfg.rows, cfg.columns)
        write_table(small, cfg.rows, 20)
        roots = {ref: export(ref, tmp) for ref in cfg.refs}
        for root in roots.values():  # numba's kernels compiled before any timing
            train(root, small, tmp / "warm", ["--n-estimators", "1", "--quiet"], cfg.timeout)
        for repeat in range(cfg.repeats):
            order = cfg.refs[repeat % len(cfg.refs):] + cfg.refs[:repeat % len(cfg.refs)]
            for ref in order:
                run = train(roots[ref], data, tmp / "model", options, cfg.timeout)
                runs[ref].append(run)
                print(ref, run, flush=True)
    lines = [f"# ebf train on {cfg.rows} rows x {cfg.columns} columns", "",
             f"Options: `{cfg.train_options or '(defaults)'}`; {cfg.repeats} repeat(s), "
             f"stopped after {cfg.timeout:g} s.", "",
             "| revision | wall seconds (min / median / max) | last line |", "|---|---|---|"]
    for ref, rs in runs.items():
        last = rs[-1]["tail"][-1] if rs and rs[-1]["tail"] else ""
        lines.append(f"| {ref} | {summary(rs, cfg.timeout)} | {last[:160]} |")
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    cfg.out.write_text("\n".join(lines) + "\n")
    cfg.out.with_suffix(".json").write_text(json.dumps(runs, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
