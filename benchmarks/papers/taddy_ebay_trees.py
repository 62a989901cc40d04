"""taddy.ebay's models at more trees per forest, on fewer rows (evidence for its cause).

The item fits 10 trees per forest (per EBF branch, per SSF sub-sample): an SSF prediction
then pools 32 forests (320 trees) and an EBF prediction one branch forest (10 trees). This
script fits the same three models on the same generator, ``--rows`` training rows (a fifth
of the item's), at ``--trees`` trees per forest (10 and 40), for ``--seeds`` seeds, and
writes the misclassification and the gaps to ``benchmarks/results/issue46/taddy_ebay_trees.md``::

    PYTHONPATH=. python -m benchmarks.papers.taddy_ebay_trees
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .taddy_ebay import CHUNKS, MODELS, _model, _xy

OUT = Path(__file__).resolve().parents[1] / "results" / "issue46" / "taddy_ebay_trees.md"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--test", type=int, default=100_000)
    parser.add_argument("--trees", type=int, nargs="+", default=[10, 40])
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args(argv)
    lines = ["# taddy.ebay's models by trees per forest", "",
             f"Made by `PYTHONPATH=. python -m benchmarks.papers.taddy_ebay_trees --rows "
             f"{args.rows} --trees {' '.join(map(str, args.trees))} --seeds {args.seeds}`: "
             f"Friedman #1 binary classification, {args.rows:,} training rows, {args.test:,} "
             f"test rows, EBF trunk of {CHUNKS} leaves, SSF on {CHUNKS} sub-samples.", "",
             "| trees per forest | seed | BF | EBF | SSF | EBF below SSF | EBF vs BF |",
             "|---|---|---|---|---|---|---|"]
    for trees in args.trees:
        for s in range(args.seeds):
            X, y = _xy(0, args.rows, s)
            X_te, y_te = _xy(1, args.test, s)
            m = {name: float(np.mean(_model(name, trees, s).fit(X, y).predict(X_te) != y_te))
                 for name in MODELS}
            lines.append(f"| {trees} | {s} | {m['BF']:.4f} | {m['EBF']:.4f} | {m['SSF']:.4f} | "
                         f"{100 * (m['SSF'] - m['EBF']) / m['SSF']:+.1f}% | "
                         f"{100 * (m['EBF'] / m['BF'] - 1):+.1f}% |")
            print(lines[-1], flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
