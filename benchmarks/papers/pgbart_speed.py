"""Fit time of ``BARTRegressor`` before and after a change to PG-BART (issue 46, item 4).

Friedman #1 with ``--rows`` rows (20k), ``BARTRegressor(sampler=...)`` at a small budget,
fitted by the code of two source trees (``--before``, ``--after``: directories holding an
``ebf/`` package, e.g. ``git archive <commit> | tar -x -C DIR``), each in its own process,
alternating before / after ``--repeats`` times (the machine is shared: paired runs). Each
process compiles (or loads) the kernels on a tiny fit first, then times one fit; it also
prints a digest of the predictions, so the table says whether the two trees give the same
model for the same seed. Writes ``benchmarks/results/issue46/<--out>.md``::

    PYTHONPATH=. python -m benchmarks.papers.pgbart_speed --before /tmp/before --after .
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.papers.pgbart_mixing import save

_CHILD = """
import hashlib, json, sys, time
import numpy as np
from ebf.bayestrees import BARTRegressor
rows, sampler, n_trees, n_iter = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                  int(sys.argv[4]))
rng = np.random.default_rng(0)
X = rng.random((rows, 5))
y = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
     + 5 * X[:, 4] + rng.normal(size=rows))
kw = dict(sampler=sampler, n_trees=n_trees, n_iter=n_iter, burn_in=n_iter // 2,
          random_state=0)
BARTRegressor(**(kw | dict(n_iter=3, burn_in=1))).fit(X[:200], y[:200])
t0, c0 = time.perf_counter(), time.process_time()
model = BARTRegressor(**kw).fit(X, y)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
digest = hashlib.sha1(model.predict(X[:1000]).tobytes()).hexdigest()[:12]
print(json.dumps({"seconds": seconds, "cpu": cpu, "digest": digest}))
"""


def _run(tree: str, a: argparse.Namespace, sampler: str) -> dict:
    env = os.environ | {"PYTHONPATH": str(Path(tree).resolve())}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(a.rows), sampler,
                          str(a.n_trees), str(a.n_iter)], env=env, check=True,
                         capture_output=True, text=True, cwd=Path(tree).resolve())
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True)
    p.add_argument("--after", default=".")
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--n-trees", type=int, default=50)
    p.add_argument("--n-iter", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--samplers", nargs="+", default=["pg", "cgm"])
    p.add_argument("--out", default="pgbart_speed")
    a = p.parse_args(argv)
    lines = []
    for sampler in a.samplers:
        got: dict = {"before": [], "after": []}
        for _ in range(a.repeats):
            for side in ("before", "after"):
                got[side].append(_run(getattr(a, side), a, sampler))
        same = {r["digest"] for r in got["before"] + got["after"]}
        for clock in ("seconds", "cpu"):
            t = {s: [r[clock] for r in got[s]] for s in got}
            ratio = statistics.median(t["after"]) / statistics.median(t["before"])
            lines.append(f"| {sampler} | {'wall' if clock == 'seconds' else 'CPU'} | "
                         + " | ".join(f"{min(t[s]):.2f} / {statistics.median(t[s]):.2f} / "
                                      f"{max(t[s]):.2f}" for s in ("before", "after"))
                         + f" | {ratio:.3f} | {'yes' if len(same) == 1 else 'NO'} |")
        print(lines[-1], flush=True)
    text = "\n".join([
        "# BARTRegressor fit time before / after (issue 46, item 4)", "",
        f"Friedman #1, {a.rows} rows, {a.n_trees} trees, {a.n_iter} iterations, seed 0, "
        f"default options; {a.repeats} paired alternating runs, one process each. Seconds "
        "(wall and the process' CPU) min / median / max.", "",
        "| sampler | clock | before | after | after / before (median) | same predictions |",
        "|---|---|---|---|---|---|", *lines, ""])
    return save(a.out, text)


if __name__ == "__main__":
    main()
