"""The ``ebf`` command line with every flag at its default, at a given row count.

Issue 44, items 5 and 6: the default model size follows the data (a 1M-row model is not as
large as a 10M-row one) and ``ebf make-data`` writes partitions that use the cluster. For
each row count ``N`` and each checkout of the code, the commands a new user runs::

    ebf make-data friedman --rows N --out train             (seed 0)
    ebf make-data friedman --rows P --out predict --seed 1   (P = --predict-rows, default N)
    ebf make-data friedman --rows E --out score --seed 2     (E = --eval-rows)
    ebf train train --target y --out model
    ebf predict model predict --out predictions
    ebf evaluate model score --json scores.json             (accuracy on held-out rows)

each command a process of its own that starts its own local cluster (end to end, as a user
sees it). Reported per row count and checkout: the train wall time, the model's bytes on
disk, the leaf size the size plan chose, ``ebf predict``'s rows per second (rows over the
command's wall time, cluster start included), the driver's peak RSS (``VmHWM`` of the
command's process, polled while it runs) during train and predict, the input files, and
RMSE / CRPS / NLPD of ``ebf evaluate`` on the held-out rows. Timings are min / median /
max over ``--repeats`` (the data are made once, the model trained once per repeat).

``--code LABEL=ROOT`` (repeatable) runs every command with ``ROOT`` first on ``PYTHONPATH``
(a checkout of the code, e.g. ``git archive <commit> | tar -x -C /tmp/before``); the
checkouts alternate within every repeat, so that all see the same machine load. Each
checkout makes its data with its own ``make-data`` defaults. Default: this checkout alone.

Writes ``benchmarks/results/issue44/default_size.json`` and ``default_size.md``.

``--leaves 5 10 20 40 80`` measures instead what the leaf size of a bootstrap forest costs
and buys, in one process (the evidence behind :func:`pipelines.sizing.rows_leaf`): for each
``--rows`` count (rows of one branch) and leaf size, one ``BayesianForestRegressor`` of 100
trees on that many Friedman rows; its saved bytes, its ``predict_summary`` rows per CPU
second (one thread) and RMSE / CRPS / NLPD on 20,000 held-out rows
(``leaf_sweep.json`` / ``.md``).

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_default_size.py --rows 100000 1000000
    PYTHONPATH=. python benchmarks/bench_default_size.py --rows 1000000 --repeats 3 \\
        --code before=/tmp/before --code after=.
    PYTHONPATH=. python benchmarks/bench_default_size.py --rows 20000 200000 \\
        --leaves 5 10 20 40 80
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "issue44"
#: How often the driver's peak RSS is read while a command runs.
POLL_SECONDS = 0.1


def run(argv: Sequence[str], code: Path, log: Path) -> tuple[float, int]:
    """Run ``python -m pipelines argv`` with ``code`` on ``PYTHONPATH``: wall seconds and the
    process's peak RSS in bytes; raises if it fails (its output is in ``log``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(code), *filter(None, [os.environ.get("PYTHONPATH")])])}
    peak = 0
    t0 = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"$ ebf {' '.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen([sys.executable, "-m", "pipelines", *argv], env=env,
                                stdout=out, stderr=subprocess.STDOUT, cwd=code)
        while proc.poll() is None:
            peak = max(peak, _peak_rss(proc.pid))
            time.sleep(POLL_SECONDS)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"ebf {' '.join(argv)} failed ({proc.returncode}); see {log}")
    return seconds, peak


def _peak_rss(pid: int) -> int:
    """``VmHWM`` of a running process, in bytes (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def make_data(code: Path, out: Path, rows: int, seed: int, log: Path) -> int:
    """The dataset at ``out`` (made once, with ``code``'s defaults): its file count."""
    if not out.exists():
        run(["make-data", "friedman", "--rows", str(rows), "--out", str(out),
             "--seed", str(seed), "--quiet"], code, log)
    return len(list(out.glob("*.parquet")))


def one_run(label: str, code: Path, rows: int, cfg: argparse.Namespace,
            repeat: int) -> dict:
    """Train, predict and score once with the checkout ``code``."""
    work = Path(cfg.workdir) / label / str(rows)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "commands.log"
    files = make_data(code, work / "train", rows, 0, log)
    predict_rows = cfg.predict_rows or rows
    make_data(code, work / "predict", predict_rows, 1, log)
    model, preds = work / "model", work / "predictions"
    for path in (model, preds):
        shutil.rmtree(path, ignore_errors=True)
    train_s, train_rss = run(["train", str(work / "train"), "--target", "y", "--out",
                              str(model), *cfg.train_args], code, log)
    predict_s, predict_rss = run(["predict", str(model), str(work / "predict"), "--out",
                                  str(preds)], code, log)
    row = {"code": label, "rows": rows, "repeat": repeat, "files": files,
           "train_s": train_s, "model_mb": dir_bytes(model) / 1e6,
           "leaf": _leaf_size(model), "predict_rows": predict_rows, "predict_s": predict_s,
           "predict_rows_s": predict_rows / predict_s, "train_rss_mb": train_rss / 1e6,
           "predict_rss_mb": predict_rss / 1e6}
    if cfg.eval_rows and repeat == 0:
        make_data(code, work / "score", cfg.eval_rows, 2, log)
        scores = work / "scores.json"
        scores.unlink(missing_ok=True)
        run(["evaluate", str(model), str(work / "score"), "--json", str(scores), "--quiet"],
            code, log)
        result = json.loads(scores.read_text())
        row.update({k: result[k] for k in ("rmse", "crps", "nlpd")})
    print(json.dumps(row), flush=True)
    return row


def _leaf_size(model: Path) -> int | None:
    """``min_samples_leaf`` of a saved model (its manifest's parameters)."""
    text = (model / "manifest.json").read_text()
    found = re.search(r'"min_samples_leaf":\s*(\d+)', text)
    return int(found.group(1)) if found else None


def spread(values: Sequence[float]) -> str:
    """``min / median / max`` (one value alone)."""
    if len(values) == 1:
        return f"{values[0]:,.1f}"
    return " / ".join(f"{v:,.1f}" for v in (min(values), statistics.median(values),
                                            max(values)))


def table(rows: list[dict]) -> str:
    """One line per checkout and row count; timings as min / median / max."""
    head = ("| code | rows | files | train s | model MB | leaf | predict rows/s | "
            "driver RSS MB (train / predict, max) | RMSE | CRPS | NLPD |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["rows"], r["code"]), []).append(r)
    for (n, label), rs in sorted(groups.items()):
        first = rs[0]
        acc = [f"{first[k]:.4f}" if k in first else "-" for k in ("rmse", "crps", "nlpd")]
        lines.append(
            f"| {label} | {n:,} | {first['files']} | {spread([r['train_s'] for r in rs])} | "
            f"{first['model_mb']:,.0f} | {first['leaf']} | "
            f"{spread([r['predict_rows_s'] for r in rs])} | "
            f"{max(r['train_rss_mb'] for r in rs):,.0f} / "
            f"{max(r['predict_rss_mb'] for r in rs):,.0f} | {' | '.join(acc)} |")
    return "\n".join(lines)


def leaf_sweep(n_rows: int, leaves: Sequence[int], seed: int = 0) -> list[dict]:
    """One 100-tree bootstrap forest per leaf size on ``n_rows`` Friedman rows: bytes,
    predict rows per CPU second and scores on 20,000 held-out rows."""
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    from benchmarks.common import scores, summary
    from ebf import BayesianForestRegressor
    from pipelines.make_data import friedman_partition

    train = friedman_partition(0, n_rows, random_state=seed)
    test = friedman_partition(0, 20_000, random_state=seed + 1)
    X, y = train.drop(columns="y").to_numpy(), train["y"].to_numpy()
    Xt, yt = test.drop(columns="y").to_numpy(), test["y"].to_numpy()
    out = []
    for leaf in leaves:
        forest = BayesianForestRegressor(n_estimators=100, min_samples_leaf=leaf,
                                         random_state=seed, n_jobs=1).fit(X, y)
        forest.predict_summary(Xt[:100], (0.05, 0.5, 0.95))  # compiled
        t0 = time.process_time()
        forest.predict_summary(Xt, (0.05, 0.5, 0.95))
        cpu = time.process_time() - t0
        s = summary(scores(forest.predict_distribution(Xt), yt))
        row = {"rows": n_rows, "leaf": leaf, "model_mb": forest.forest_.nbytes / 1e6,
               "predict_rows_cpu_s": len(yt) / cpu,
               **{k: s[k] for k in ("rmse", "crps", "nlpd")}}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def leaf_table(rows: list[dict]) -> str:
    """One line per row count and leaf size, CRPS relative to the smallest leaf."""
    lines = ["| rows | leaf | model MB (100 trees) | predict rows / CPU s | RMSE | CRPS | "
             "CRPS vs smallest leaf | NLPD |", "|" + "---|" * 8]
    for r in rows:
        first = min((x for x in rows if x["rows"] == r["rows"]), key=lambda x: x["leaf"])
        lines.append(f"| {r['rows']:,} | {r['leaf']} | {r['model_mb']:,.1f} | "
                     f"{r['predict_rows_cpu_s']:,.0f} | {r['rmse']:.4f} | {r['crps']:.4f} | "
                     f"{r['crps'] / first['crps'] - 1:+.1%} | {r['nlpd']:.4f} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--predict-rows", type=int, default=None,
                        help="rows ebf predict reads (default: as many as the training rows)")
    parser.add_argument("--eval-rows", type=int, default=100_000,
                        help="held-out rows ebf evaluate scores (0: no accuracy)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--code", action="append", default=[], metavar="LABEL=ROOT",
                        help="a checkout to run (repeatable; default: this one)")
    parser.add_argument("--train-args", nargs=argparse.REMAINDER, default=[],
                        help="extra ebf train arguments (last on the line)")
    parser.add_argument("--leaves", type=int, nargs="+", default=None,
                        help="measure these leaf sizes in one process instead (--rows: rows "
                        "of one branch)")
    parser.add_argument("--workdir", default="/tmp/bench_default_size")
    parser.add_argument("--out", default=str(RESULTS))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.leaves:
        rows = [r for n in cfg.rows for r in leaf_sweep(n, cfg.leaves)]
        (out / "leaf_sweep.json").write_text(json.dumps({"config": vars(cfg), "rows": rows},
                                                        indent=1))
        text = ("# Leaf size of a 100-tree bootstrap forest: model size, predict speed, "
                f"accuracy\n\n{leaf_table(rows)}\n")
        (out / "leaf_sweep.md").write_text(text)
        print(text)
        return 0
    codes = [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in cfg.code]
    codes = codes or [("this", ROOT)]
    rows = [one_run(label, code, n, cfg, repeat)
            for n in cfg.rows for repeat in range(cfg.repeats) for label, code in codes]
    (out / "default_size.json").write_text(json.dumps(
        {"config": vars(cfg), "cpus": os.cpu_count(), "rows": rows}, indent=1))
    title = ("# ebf with default flags: train, model size, predict speed, driver memory\n\n"
             f"{os.cpu_count()} CPUs; predict rows/s = rows / wall time of ebf predict (its "
             "cluster start included); train s and predict rows/s as min / median / max over "
             f"{cfg.repeats} run(s); RMSE / CRPS / NLPD of ebf evaluate on "
             f"{cfg.eval_rows:,} held-out rows.\n")
    text = f"{title}\n{table(rows)}\n"
    (out / "default_size.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
