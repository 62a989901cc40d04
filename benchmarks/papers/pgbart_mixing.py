"""PG-BART mixing on hypercube-D (issue 46, item 4): ESS at D = 5, 7 and PG/CGM ESS/s at D >= 4.

The chains and the ESS are those of the items ``bart.table4_1`` / ``bart.table4_2``
(:func:`benchmarks.bench_bart_hypercube.chain`: the thesis' data recipe, M = 1,
alpha_s = 0.95, beta_s per D, C = 10, ESS of the log-likelihood after burn-in by
:func:`ebf.bayestrees.diagnostics.chain_ess`), run over ``--seeds`` seeds per D for each
sampler; ``--variant`` passes extra ``BARTRegressor`` options to PG only (e.g.
``ancestor_sampling=True``), so one command measures a change against the thesis' numbers.
Writes a markdown table (medians with min-max over seeds) to
``benchmarks/results/issue46/<--out>.md``. Run from the repository root::

    PYTHONPATH=. python -m benchmarks.papers.pgbart_mixing --seeds 20 --out pgbart_mixing
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.bench_bart_hypercube import THESIS_ESS, THESIS_ESS_S, chain

OUT = Path(__file__).resolve().parents[1] / "results" / "issue46"
SAMPLERS = ("cgm", "pg")


def spread(values: list[float], fmt: str) -> str:
    """``median (min-max)`` of ``values``, each number formatted by ``fmt``."""
    return (f"{statistics.median(values):{fmt}} "
            f"({min(values):{fmt}}-{max(values):{fmt}})")


def save(stem: str, text: str) -> str:
    """Write ``text`` to ``benchmarks/results/issue46/<stem>.md``; return it."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{stem}.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", type=int, nargs="+", default=[4, 5, 7])
    p.add_argument("--seeds", type=int, default=20, help="how many seeds (default 20)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--n-iter", type=int, default=2000)
    p.add_argument("--burn-in", type=int, default=1000)
    p.add_argument("--variant", default="{}",
                   help="JSON dict of extra BARTRegressor options for PG (default {})")
    p.add_argument("--out", default="pgbart_mixing")
    a = p.parse_args(argv)
    variant = json.loads(a.variant)
    for s in SAMPLERS:  # compile before timing
        chain(2, 0, s, 3, 1, **(variant if s == "pg" else {}))
    rows = []
    for d in a.dims:
        runs = {s: [chain(d, seed, s, a.n_iter, a.burn_in, **(variant if s == "pg" else {}))
                    for seed in range(a.first_seed, a.first_seed + a.seeds)] for s in SAMPLERS}
        ess = {s: [r["ess"] for r in runs[s]] for s in SAMPLERS}
        eps = {s: [r["ess_per_s"] for r in runs[s]] for s in SAMPLERS}
        ratio = statistics.median(eps["pg"]) / statistics.median(eps["cgm"])
        thesis_ratio = THESIS_ESS_S[d][2] / THESIS_ESS_S[d][0]
        rows.append(
            f"| {d} | {spread(ess['pg'], '.0f')} | {THESIS_ESS[d][2]:.0f} | "
            f"{statistics.median(ess['pg']) / THESIS_ESS[d][2]:.2f} | "
            f"{spread(ess['cgm'], '.1f')} | {spread(eps['pg'], '.0f')} | "
            f"{spread(eps['cgm'], '.0f')} | {ratio:.1f} | {thesis_ratio:.1f} | "
            f"{statistics.median(r['leaves'] for r in runs['pg']):.1f} / {2 ** d} | "
            f"{statistics.median(r['test_mse'] for r in runs['pg']):.3f} |")
        print(rows[-1], flush=True)
    text = "\n".join([
        f"# PG-BART mixing on hypercube-D ({a.out})", "",
        f"Seeds {a.first_seed}-{a.first_seed + a.seeds - 1}, {a.n_iter} iterations, ESS of "
        f"the log-likelihood over the last {a.n_iter - a.burn_in}; C = 10; PG options "
        f"{variant or 'default'}. Cells: "
        "median (min-max) over seeds; ESS/s by wall time on a shared machine.", "",
        "| D | PG ESS | thesis PG ESS | ours/thesis | CGM ESS | PG ESS/s | CGM ESS/s | "
        "PG/CGM ESS/s | thesis PG/CGM | PG leaves / 2^D | PG test MSE |",
        "|---|---|---|---|---|---|---|---|---|---|---|", *rows, ""])
    return save(a.out, text)


if __name__ == "__main__":
    main()
