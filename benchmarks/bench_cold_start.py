"""``ebf demo`` on a fresh checkout (every numba kernel compiled) and again (loaded from the cache).

For each git revision given, each repeat exports the revision into a new temporary directory
(``git archive``: no ``__pycache__``, so nothing compiled, as a fresh clone), runs ``python
-m pipelines demo`` there twice (cold, then warm) with ``PYTHONPATH`` on that directory, and
reads the demo's own phase timings from its ``results.json``. The revisions alternate within
each repeat (in turn first), so machine load falls on both alike. Writes a Markdown table
(min / median / max over the repeats) to ``benchmarks/results/issue44/cold_start.md`` and the
runs as JSON beside it.

Columns: ``wall`` (the command, cluster start and shutdown included), the demo's ``total``,
``warm-up`` (the kernels compiled or loaded on the workers before the first fit), ``train``
(both models), ``predict + score`` (both models) and ``importance``. The compilation a cold
run pays is its wall time minus the warm run's.

With ``--kernels``, each revision's fresh export instead runs the demo once in one process
(``EBF_LOCAL_PROCESSES=0``: the workers are threads, so every compilation happens there)
under a listener of numba's ``numba:compile`` events, and the table gives, per kernel, the
signatures compiled and the compiler's CPU seconds (the thread's CPU time, without that of
the kernels it compiled on the way: robust to a busy machine), to
``benchmarks/results/issue44/cold_start_kernels.md``.

Examples
--------
Before and after a change, three repeats on all the flights::

    python benchmarks/bench_cold_start.py --refs 9d55e19 HEAD --repeats 3
    python benchmarks/bench_cold_start.py --refs 9d55e19 HEAD --kernels --rows 20000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "issue44"
PHASES = ("warm_up", "train", "predict", "importance")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--refs", nargs="+", default=["HEAD"],
                   help="git revisions to compare (default: HEAD)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rows", type=int, default=None, help="demo --rows (default: all flights)")
    p.add_argument("--python", default=sys.executable, help="the interpreter (its venv)")
    p.add_argument("--kernels", action="store_true",
                   help="per-kernel compilation of one in-process demo per revision instead")
    p.add_argument("--out", default=None,
                   help="default: benchmarks/results/issue44/cold_start.md (--kernels: "
                   "cold_start_kernels.md)")
    return p.parse_args(argv)


#: Run in the exported tree: the demo in this process, every compilation recorded.
_LISTEN = """
import json, sys, threading, time
from numba.core import event
records, local = [], threading.local()

class Listener(event.Listener):
    def on_start(self, ev):
        local.stack = getattr(local, "stack", [])
        local.stack.append([time.thread_time(), 0.0])

    def on_end(self, ev):
        t0, inner = local.stack.pop()
        cpu = time.thread_time() - t0
        if local.stack:
            local.stack[-1][1] += cpu
        f = ev.data["dispatcher"].py_func
        records.append({"kernel": f"{f.__module__}.{f.__qualname__}",
                        "signature": str(ev.data["args"]), "cpu": cpu - inner})

event.register("numba:compile", Listener())
from pipelines.cli import main
status = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(records, out)
sys.exit(status)
"""


def _export(ref: str, where: Path) -> str:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref], check=True,
                            capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return commit


def _demo(cfg: argparse.Namespace, tree: Path) -> dict:
    out = tree / "demo-out"
    cmd = [cfg.python, "-m", "pipelines", "demo", "--out", str(out)]
    if cfg.rows:
        cmd += ["--rows", str(cfg.rows)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    timings = json.loads((out / "results.json").read_text())["timings"]
    return {"wall": wall, "load": load, **timings}


def _kernels(cfg: argparse.Namespace, tree: Path) -> list[dict]:
    log = tree / "compiled.json"
    cmd = [cfg.python, "-c", _LISTEN, str(log), "demo", "--out", str(tree / "demo-out")]
    if cfg.rows:
        cmd += ["--rows", str(cfg.rows)]
    env = {**os.environ, "PYTHONPATH": str(tree), "EBF_LOCAL_PROCESSES": "0"}
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the in-process demo failed:\n{done.stderr[-3000:]}")
    return json.loads(log.read_text())


def _kernel_table(by_commit: dict[str, list[dict]]) -> str:
    """Our kernels (numba's own overloads summed into one row), per revision."""
    lines = []
    for commit, records in by_commit.items():
        rows: dict[str, list] = {}
        for r in records:
            name = r["kernel"] if not r["kernel"].startswith("numba.") else "numba internals"
            row = rows.setdefault(name, [set(), 0.0])
            row[0].add(r["signature"])
            row[1] += r["cpu"]
        total = sum(cpu for _, cpu in rows.values())
        n_sigs = sum(len(sigs) for sigs, _ in rows.values())
        lines += [f"## {commit}: {total:.1f} s of compiler CPU, {len(records)} compilations, "
                  f"{n_sigs} signatures, {len(rows)} kernels", "",
                  "| kernel | signatures | compiler CPU [s] |", "|---|---|---|"]
        for name, (sigs, cpu) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"| {name} | {len(sigs)} | {cpu:.2f} |")
        lines.append("")
    return "\n".join(lines)


def _stats(values: list[float]) -> str:
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def _table(runs: list[dict]) -> str:
    cols = ("wall", "total", *PHASES)
    head = ["revision", "run", *("predict + score" if c == "predict" else c.replace("_", "-")
                                 for c in cols), "load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for commit in dict.fromkeys(r["commit"] for r in runs):
        for state in ("cold", "warm"):
            rs = [r for r in runs if r["commit"] == commit and r["state"] == state]
            if rs:
                cells = [commit, f"{state} (x{len(rs)})", *(_stats([r[c] for r in rs])
                                                           for c in cols),
                         _stats([r["load"] for r in rs])]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.kernels:
        by_commit = {}
        for ref in cfg.refs:
            with tempfile.TemporaryDirectory(prefix="ebf-cold-") as tmp:
                commit = _export(ref, Path(tmp))
                by_commit[commit] = _kernels(cfg, Path(tmp))
        text = (f"# Kernels compiled by a cold ebf demo (rows: {cfg.rows or 'all'}), in one "
                f"process\n\n{_kernel_table(by_commit)}")
        _write(Path(cfg.out or OUT / "cold_start_kernels.md"), text, by_commit)
        return 0
    runs = []
    for rep in range(cfg.repeats):
        refs = cfg.refs if rep % 2 == 0 else cfg.refs[::-1]
        for ref in refs:
            with tempfile.TemporaryDirectory(prefix="ebf-cold-") as tmp:
                commit = _export(ref, Path(tmp))
                for state in ("cold", "warm"):
                    run = {"commit": commit, "state": state, "repeat": rep,
                           **_demo(cfg, Path(tmp))}
                    runs.append(run)
                    print(f"{commit} {state}: wall {run['wall']:.1f}s, "
                          + ", ".join(f"{p} {run[p]:.1f}s" for p in PHASES)
                          + f" (load {run['load']:.1f})", flush=True)
    table = _table(runs)
    text = (f"# ebf demo, cold (fresh checkout) and warm\n\n{cfg.repeats} repeats, "
            f"rows: {cfg.rows or 'all'}; seconds, min / median / max; load: the 1-minute "
            f"load average when each run started ({os.cpu_count()} cores).\n\n{table}\n")
    _write(Path(cfg.out or OUT / "cold_start.md"), text, runs)
    return 0


def _write(out: Path, text: str, data: object) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1))
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
