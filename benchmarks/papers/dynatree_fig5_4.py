"""Evidence for ``mfc.fig5_4``: dynamic trees (the authors' R package dynaTree) on the
thesis' classification streams, written to ``benchmarks/results/issue46/dynatree_fig5_4.json``.

Run it with::

    python -m benchmarks.papers.dynatree_fig5_4 --budget quick

It writes each data set's stream (:func:`benchmarks.papers.thesis_mf.stream`: the same rows,
rescaling and order as MF sees) for every seed of the budget to a temporary folder, runs
``dynatree_fig5_4.R`` beside this file on it with ``Rscript`` and gathers dynaTree's
accuracy after the mini-batches :data:`~benchmarks.papers.thesis_mf_online.DYNATREE_BATCHES`.
R and dynaTree are not Python dependencies: without them the script says so and stops.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import write_json

from .thesis_mf import DATASETS, SIZES, stream
from .thesis_mf_online import DYNATREE, DYNATREE_BATCHES

SCRIPT = Path(__file__).with_suffix(".R")


def _r_versions() -> dict[str, str]:
    out = subprocess.run(
        ["Rscript", "-e", 'cat(R.version.string, "\\n", '
                          'as.character(packageVersion("dynaTree")), sep = "")'],
        check=True, capture_output=True, text=True).stdout.splitlines()
    return {"R": out[0], "dynaTree": out[1]}


def run(budget: str, seed: int, out: Path) -> dict:
    """dynaTree's curves for the budget's seeds ``seed ..``, one seed after the other, the
    record written to ``out`` after each: ``{"runs": {seed: {data set: [{batches, n,
    accuracy, seconds}]}}}`` with the versions and settings."""
    if shutil.which("Rscript") is None:
        raise SystemExit("Rscript not found: install R and the dynaTree package first")
    seeds = list(range(seed, seed + SIZES[budget]["seeds"]))
    batches = [b for b in DYNATREE_BATCHES if budget != "smoke" or b in (10, 100)]
    record = {"budget": budget, "seeds": seeds, "batches": batches, "versions": _r_versions(),
              "settings": {"N (particles)": 100, "R (passes)": 2, "model": "class",
                           "other": "package defaults", "function": "dynaTrees"},
              "command": f"python -m benchmarks.papers.dynatree_fig5_4 --budget {budget}",
              "runs": {}}
    for s in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "fractions.txt").write_text("\n".join(map(str, batches)) + "\n")
            for ds in DATASETS:
                X, y, X_te, y_te = stream(ds, budget, s)
                for part, (A, b) in {"train": (X, y), "test": (X_te, y_te)}.items():
                    np.savetxt(folder / f"{ds}_s{s}_{part}.csv", np.column_stack([A, b]),
                               delimiter=",", fmt="%.17g")
            subprocess.run(["Rscript", str(SCRIPT), str(folder)], check=True)
            record["runs"][str(s)] = {}
            for ds in DATASETS:
                with open(folder / f"{ds}_s{s}_dynatree.csv") as f:
                    record["runs"][str(s)][ds] = [
                        {"batches": int(r["batches"]), "n": int(r["n"]),
                         "accuracy": float(r["accuracy"]), "seconds": float(r["seconds"])}
                        for r in csv.DictReader(f)]
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(record, out)  # a seed at a time: an interrupted run keeps those done
        print(f"seed {s}: " + "; ".join(f"{ds} {rows[-1]['accuracy']:.3f}" for ds, rows
                                        in record["runs"][str(s)].items()), flush=True)
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.papers.dynatree_fig5_4",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", choices=tuple(SIZES), default="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DYNATREE)
    args = parser.parse_args(argv)
    run(args.budget, args.seed, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
