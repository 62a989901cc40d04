"""Hostile cases of issue 45's items 1 (bounded inputs), 4 (outputs checked together) and 6
(targets beyond ``MAX_ABS_TARGET`` in scores), run against a chosen checkout.

Each case runs ``python -m pipelines ...`` in its own subprocess and sandbox (``data/``, a
Parquet folder; ``m/``, a small saved model; ``reg/``, a registry of two versions; a user
file), with ``PYTHONPATH=--code``, a local cluster of threads, an address-space limit of
``--memory`` GiB (so a case that allocates without bound fails instead of taking the
machine) and a timeout. Outcome (the worst that applies):

- ``data lost``: a file that existed before changed or vanished;
- ``hang``: no exit within the timeout;
- ``crash``: a traceback, ``RecursionError``, ``MemoryError`` or "unexpected" on stderr, or
  death by a signal;
- ``silent``: exit 0 where the case must fail (an inf score, an impossible size, an output
  over another);
- ``unclear``: a failure of more than one line, or one naming neither the cause nor the fix;
- ``clear``: one line naming the cause and the fix, a documented status (1 or 2);
- ``ok``: exit 0 where success is right.

Run from the repository root::

    python -m benchmarks.probe_bounds45 --code /work/main --label before
    python -m benchmarks.probe_bounds45 --code . --label after

Each run writes ``benchmarks/results/issue45/bounds_<label>.json``; the table of every
label found there goes to ``benchmarks/results/issue45/bounds.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "issue45"
OUTCOMES = ["clear", "ok", "unclear", "crash", "hang", "silent", "data lost"]
TRAIN = ["train", "data", "--target", "y", "--trunk-leaves", "2", "--n-estimators", "2"]


def _deep(path: Path) -> None:
    path.write_bytes(b'{"version": 2, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}")


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _big_targets(root: Path, statistics: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(root / "data")
    y = table.column("y").to_numpy().copy()
    y[:5] = 1e160
    shutil.rmtree(root / "data")
    (root / "data").mkdir()
    pq.write_table(table.set_column(table.schema.get_field_index("y"), "y", pa.array(y)),
                   root / "data" / "a.parquet", write_statistics=statistics)


# (id, category, argv, setup(root) or None, should it succeed)
CASES = [
    ("registry-deep-record", "registry JSON", ["registry", "show", "reg@2"],
     lambda r: _deep(r / "reg/models/ebf/v0002/version.json"), False),
    ("registry-deep-pointer", "registry JSON", ["registry", "show", "reg"],
     lambda r: _deep(r / "reg/models/ebf/current.json"), False),
    ("registry-utf16-record", "registry JSON", ["registry", "show", "reg@2"],
     lambda r: (r / "reg/models/ebf/v0002/version.json").write_bytes(
         '{"version": 2}'.encode("utf-16")), False),
    ("registry-binary-pointer", "registry JSON", ["registry", "show", "reg"],
     lambda r: (r / "reg/models/ebf/current.json").write_bytes(b'{"version": 2\xff}'), False),
    ("registry-fifo-pointer", "registry JSON", ["registry", "show", "reg"],
     lambda r: _fifo(r / "reg/models/ebf/current.json"), False),
    ("registry-17MiB-record", "registry JSON", ["registry", "show", "reg@2"],
     lambda r: (r / "reg/models/ebf/v0002/version.json").write_bytes(
         b'{"version": 2, "pad": "' + b"x" * (17 << 20) + b'"}'), False),
    ("registry-2MiB-record", "registry JSON", ["registry", "show", "reg@2"],
     lambda r: (r / "reg/models/ebf/v0002/version.json").write_bytes(
         b'{"version": 2, "pad": "' + b"x" * (2 << 20) + b'"}'), True),
    ("make-data-rows-1e13", "data sizes", ["make-data", "friedman", "--rows", "1e13",
                                           "--out", "gen"], None, False),
    ("make-data-partition-1e9", "data sizes",
     ["make-data", "friedman", "--rows", "1e9", "--partition-rows", "1e9", "--out", "gen"],
     None, False),
    # (no case beyond the free disk: a checkout without the check fills the disk until
    # the timeout; tests/pipelines/test_bounded_inputs.py covers it with a patched
    # shutil.disk_usage)
    ("make-data-features-1e8", "data sizes",
     ["make-data", "friedman", "--rows", "1000", "--features", "100000000", "--out", "gen"],
     None, False),
    ("train-out-is-baseline", "outputs together",
     [*TRAIN, "--out", "o/m", "--baseline-out", "o/m"], None, False),
    ("train-baseline-in-out", "outputs together",
     [*TRAIN, "--out", "o/m", "--baseline-out", "o/m/ssf"], None, False),
    ("train-out-in-baseline", "outputs together",
     [*TRAIN, "--out", "o/m/ebf", "--baseline-out", "o/m"], None, False),
    ("evaluate-json-in-predictions", "outputs together",
     ["evaluate", "m", "data", "--predictions", "p", "--json", "p/e.json"], None, False),
    ("evaluate-predictions-is-figures", "outputs together",
     ["evaluate", "m", "data", "--predictions", "e_figures", "--report", "e.html"], None,
     False),
    ("retrain-registry-in-data", "outputs together", ["retrain", "data/reg", "data"], None,
     False),
    ("migrate-new-in-old", "outputs together", ["migrate-model", "m", "m/new"], None, False),
    ("evaluate-target-1e160", "target range", ["evaluate", "m", "data"],
     lambda r: _big_targets(r, True), False),
    ("evaluate-target-1e160-nostats", "target range", ["evaluate", "m", "data"],
     lambda r: _big_targets(r, False), False),
    ("compare-target-1e160", "target range", ["registry", "compare", "reg", "data"],
     lambda r: _big_targets(r, True), False),
    ("evaluate-control", "control", ["evaluate", "m", "data"], None, True),
]


def _fixtures(work: Path) -> Path:
    """``data/``, ``m/`` and ``reg/`` built once (with this checkout: the formats agree)."""
    import pandas as pd

    from ebf import EmpiricalBayesianForestRegressor
    from ebf.artifact import save
    from pipelines.registry.store import Registry

    base = work / "base"
    if base.exists():
        return base
    base.mkdir(parents=True)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.random((400, 3)), columns=["x0", "x1", "x2"])
    frame["y"] = 3 * frame["x0"] + rng.normal(0, 0.1, 400)
    (base / "data").mkdir()
    frame.to_parquet(base / "data" / "a.parquet")
    model = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                             trunk_max_leaves=2, random_state=0)
    save(model.fit(frame[["x0", "x1", "x2"]], frame["y"]), base / "m",
         metadata={"target": "y"})
    reg = Registry(base / "reg")
    with reg.lock():
        for _ in range(2):
            reg.publish(lambda url: shutil.copytree(base / "m", url), {"note": "x"}, True)
    (base / "notes.txt").write_text("mine")
    return base


def _checksums(root: Path) -> dict[str, str]:
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    out[path] = hashlib.sha256(f.read()).hexdigest()
            else:
                out[path] = "special"
    return out


def _limit(gib: float):
    def apply() -> None:
        size = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
        os.setsid()
    return apply


def run_case(case: tuple, base: Path, work: Path, code: Path, timeout: float,
             memory: float) -> dict:
    cid, category, argv, setup, succeed = case
    root = work / cid
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(base, root)
    if setup is not None:
        setup(root)
    before = _checksums(root)
    env = dict(os.environ, PYTHONPATH=str(code), EBF_LOCAL_PROCESSES="0",
               NUMBA_CACHE_DIR=str(work / "numba"), PYTHONDONTWRITEBYTECODE="1")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    t0 = time.perf_counter()
    quiet = [] if argv[:2] in (["registry", "show"], ["registry", "list"]) or \
        argv[0] == "migrate-model" else ["--quiet"]
    proc = subprocess.Popen([sys.executable, "-m", "pipelines", *argv, *quiet], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_limit(memory))
    try:
        _, err_bytes = proc.communicate(timeout=timeout)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        _, err_bytes = proc.communicate()
        status = None
    seconds = time.perf_counter() - t0
    err = err_bytes.decode(errors="replace").strip()
    after = _checksums(root)
    lost = [p for p, h in before.items() if after.get(p) != h]
    lines = err.splitlines()
    if lost:
        outcome = "data lost"
    elif status is None:
        outcome = "hang"
    elif status < 0 or any(w in err for w in ("Traceback", "RecursionError", "MemoryError",
                                               "unexpected")):
        outcome = "crash"
    elif status == 0:
        outcome = "ok" if succeed else "silent"
    elif len(lines) == 1 and status in (1, 2) and ";" in lines[0]:
        outcome = "clear"
    else:
        outcome = "unclear"
    shutil.rmtree(root, ignore_errors=True)
    return {"id": cid, "category": category, "status": status, "outcome": outcome,
            "seconds": round(seconds, 1), "line": lines[-1][:300] if lines else ""}


def write_table() -> Path:
    runs = {p.stem.removeprefix("bounds_"): json.loads(p.read_text())
            for p in sorted(RESULTS.glob("bounds_*.json"))}
    lines = ["# Issue 45: bounded inputs, outputs together, target range (probe_bounds45)", "",
             "Counts by category and outcome:", "",
             "| label | category | " + " | ".join(OUTCOMES) + " |",
             "|---|---|" + "---|" * len(OUTCOMES)]
    for label, cases in runs.items():
        for category in dict.fromkeys(c["category"] for c in cases):
            count = Counter(c["outcome"] for c in cases if c["category"] == category)
            lines.append(f"| {label} | {category} | "
                         + " | ".join(str(count.get(o, 0)) for o in OUTCOMES) + " |")
    lines += ["", "A data-size case counted clear may still have worked first: its seconds and "
              "line tell (out of memory under the probe's address-space limit after the "
              "tasks started, rather than a refusal before any work).",
              "", "Every case:", "", "| case | " + " | ".join(runs) + " |",
              "|---|" + "---|" * len(runs)]
    ids = list(dict.fromkeys(c["id"] for cases in runs.values() for c in cases))
    for cid in ids:
        cells = []
        for cases in runs.values():
            c = next((c for c in cases if c["id"] == cid), None)
            cells.append("-" if c is None else f"{c['outcome']} ({c['status']}, "
                         f"{c['seconds']}s): {c['line'][:140]}".replace("|", "/"))
        lines.append(f"| {cid} | " + " | ".join(cells) + " |")
    out = RESULTS / "bounds.md"
    out.write_text("\n".join(lines) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=ROOT)
    parser.add_argument("--label", default="after")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--memory", type=float, default=6.0, help="GiB of address space")
    parser.add_argument("--only", default=None, help="run the cases whose id contains this")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bounds45")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        base = _fixtures(args.work)
        results = []
        for case in CASES:
            if args.only and args.only not in case[0]:
                continue
            results.append(run_case(case, base, args.work, args.code.resolve(), args.timeout,
                                    args.memory))
            print(f"{results[-1]['id']:36s} {results[-1]['outcome']:8s} "
                  f"{results[-1]['status']} {results[-1]['seconds']}s", flush=True)
        (RESULTS / f"bounds_{args.label}.json").write_text(json.dumps(results, indent=1))
    print(write_table())


if __name__ == "__main__":
    main()
