"""Thesis Ch. 4 (PG-BART): the hypercube-D tables 4.1-4.2 and the trace plots, Figs. 4.2-4.4.

Lakshminarayanan (2016), *Decision trees and forests: a probabilistic perspective*, Ch. 4
(Lakshminarayanan, Roy & Teh, AISTATS 2015). Sec. 4.4.1: for each of the ``2^D`` vertices
of ``[-1, 1]^D``, 10 rows ``x = v + N(0, 0.1^2 I)``, one value ``f ~ N(0, 3^2)`` per
vertex, labels ``y = f + N(0, 0.01^2)``; BART with one tree (M = 1), ``alpha_s = 0.95``,
``beta_s`` = 1.0, 0.5, 0.4, 0.3, 0.25 for D = 2, 3, 4, 5, 7 (footnote 6), the other
hyperparameters at Chipman et al.'s defaults, C = 10 particles; 2000 iterations, the ESS of
the log-likelihood over the last 1000 (R-CODA; ours: Geyer's initial monotone sequence,
:func:`ebf.bayestrees.diagnostics.chain_ess`).

Every (D, seed) draws a new data set (:func:`ebf.bayestrees.diagnostics.hypercube`, the
thesis' generator) and a new chain per sampler; the chains are those of
``benchmarks/bench_bart_hypercube.py`` (:func:`~benchmarks.bench_bart_hypercube.chain`) and
are shared by the three items of one run. Test MSE is against the vertex values on 10 fresh
rows per vertex. Tables 4.3-4.5 (real data sets) are the item ``bart.table4_3_5`` of
:mod:`benchmarks.papers.thesis_bart_real`, listed here.
"""

from __future__ import annotations

import functools
import statistics
from pathlib import Path

import numpy as np

from benchmarks.bench_bart_hypercube import BETA, SAMPLERS, THESIS_ESS, THESIS_ESS_S, chain

from .core import Item, Verdict
from .thesis_bart_real import ITEMS as REAL_ITEMS

PAPER = "Lakshminarayanan (2016), PhD thesis, Ch. 4 (PG-BART)"
DATA = ("hypercube-D (thesis Sec. 4.4.1), regenerated with the thesis' recipe: 10 rows per "
        "vertex to fit, 10 to test, one data set per seed; full budget: the thesis' 2000 "
        "iterations (1000 burn-in) at every D = 2, 3, 4, 5, 7, 20 seeds per D (the thesis "
        "ran one chain per D), each chain timed alone on a shared 2-core machine")
DIMS = (2, 3, 4, 5, 7)
TRACE_DIMS = (2, 3, 4)
#: A draw fits the true tree when its test MSE against the vertex values is below this:
#: ~1% of the vertex values' variance (3^2); the true tree's is ~0.001.
GOOD_MSE = 0.1

SIZES = {
    "smoke": {"dims": (2, 4), "n_seeds": 1, "n_iter": 60, "burn_in": 30},
    "quick": {"dims": DIMS, "n_seeds": 10, "n_iter": 2000, "burn_in": 1000},
    "full": {"dims": DIMS, "n_seeds": 20, "n_iter": 2000, "burn_in": 1000},
}


@functools.lru_cache(maxsize=2)
def _chains(budget: str, seed: int) -> tuple[dict, ...]:
    """Every chain of a budget (dims x seeds x samplers) with its traces, run once."""
    size = SIZES[budget]
    for sampler in SAMPLERS:  # compile the kernels before any chain is timed
        chain(2, 0, sampler, 3, 1)
    return tuple(chain(d, seed + s, sampler, size["n_iter"], size["burn_in"], traces=True)
                 for d in size["dims"] for s in range(size["n_seeds"]) for sampler in SAMPLERS)


def _first_good(run: dict) -> int | None:
    """The first iteration whose draw has test MSE below :data:`GOOD_MSE`, or None."""
    hit = np.flatnonzero(np.asarray(run["trace_test_mse"]) < GOOD_MSE)
    return int(hit[0]) if hit.size else None


def _table(budget: str, seed: int) -> dict:
    """Per D and sampler: medians over seeds of ESS, ESS/s, leaves, log-likelihood, test MSE,
    the ESS quartiles and how many chains reached the true tree's fit and when."""
    runs = _chains(budget, seed)
    size = SIZES[budget]
    rows = {}
    for d in size["dims"]:
        row: dict = {"beta_s": BETA[d], "true_leaves": 2 ** d}
        for sampler in SAMPLERS:
            mine = [r for r in runs if r["D"] == d and r["sampler"] == sampler]
            cell = {k: statistics.median(r[k] for r in mine)
                    for k in ("ess", "ess_per_s", "leaves", "loglik", "test_mse", "seconds")}
            for k in ("ess", "ess_per_s"):  # the spread over seeds beside the median
                vals = [r[k] for r in mine]
                cell[f"{k}_q25"], cell[f"{k}_q75"] = (float(q) for q in np.percentile(
                    vals, [25, 75]))
                cell[f"{k}_min"], cell[f"{k}_max"] = float(min(vals)), float(max(vals))
            first = [_first_good(r) for r in mine]
            cell["reached_good_fit"] = sum(f is not None for f in first)
            cell["first_good_median"] = statistics.median(
                size["n_iter"] if f is None else f for f in first)
            row[sampler] = cell
        rows[str(d)] = row
    return {"n_seeds": size["n_seeds"], "seeds": [seed, seed + size["n_seeds"] - 1],
            "n_iter": size["n_iter"], "burn_in": size["burn_in"], "n_particles": 10,
            "good_mse": GOOD_MSE, "by_D": rows}


def _run_table(budget: str, seed: int, out_dir: Path) -> dict:
    """Tables 4.1 and 4.2 share the chains and the summary (:func:`_table`)."""
    return _table(budget, seed)


def _per_sampler(thesis: dict) -> dict:
    """A thesis table (D -> (CGM, GrowPrune, PG)) keyed by D and sampler name."""
    return {str(d): dict(zip(SAMPLERS, v, strict=True)) for d, v in thesis.items()}


# ---------------------------------------------------------------------- Table 4.1 (ESS)


def _check_ess(ours: dict) -> Verdict:
    rows = ours["by_D"]
    ratios = {d: rows[d]["pg"]["ess"] / THESIS_ESS[int(d)][2] for d in rows}
    deep = [d for d in rows if int(d) >= 4]
    beats = all(rows[d]["pg"]["ess"] > max(rows[d]["cgm"]["ess"], rows[d]["growprune"]["ess"])
                for d in deep)
    holds = min(ratios.values()) >= 0.5 and beats
    detail = ("PG median ESS / thesis: " + ", ".join(f"D={d} {r:.2f}" for d, r in ratios.items())
              + f"; PG above CGM and GrowPrune at every D >= 4: {beats}")
    return Verdict(holds, detail, min(ratios.values()))


def _headline_ess(ours: dict) -> str:
    rows = ours["by_D"]
    return "PG median (min-max) ESS " + ", ".join(
        f"D={d} {rows[d]['pg']['ess']:.0f} ({rows[d]['pg'].get('ess_min', float('nan')):.0f}-"
        f"{rows[d]['pg'].get('ess_max', float('nan')):.0f})" for d in rows)


# ------------------------------------------------------------------- Table 4.2 (ESS/s)


def _pg_over_cgm(rows: dict, d: str) -> float:
    return rows[d]["pg"]["ess_per_s"] / rows[d]["cgm"]["ess_per_s"]


def _check_ess_s(ours: dict) -> Verdict:
    rows = ours["by_D"]
    deep = [d for d in rows if int(d) >= 4]
    ours_r = {d: _pg_over_cgm(rows, d) for d in deep}
    thesis_r = {d: THESIS_ESS_S[int(d)][2] / THESIS_ESS_S[int(d)][0] for d in deep}
    holds = all(r >= 2.0 for r in ours_r.values())
    detail = "PG/CGM ESS/s (ours vs thesis): " + ", ".join(
        f"D={d} {ours_r[d]:.2f} vs {thesis_r[d]:.1f}" for d in deep)
    return Verdict(holds, detail, min(ours_r[d] / thesis_r[d] for d in deep))


def _headline_ess_s(ours: dict) -> str:
    rows = ours["by_D"]
    return "PG/CGM ESS/s " + ", ".join(f"D={d} {_pg_over_cgm(rows, d):.2f}" for d in rows)


# -------------------------------------------------------- Figs. 4.2-4.4 (trace plots)


def _run_traces(budget: str, seed: int, out_dir: Path) -> dict:
    table = _table(budget, seed)
    dims = [d for d in TRACE_DIMS if str(d) in table["by_D"]]
    runs = [r for r in _chains(budget, seed) if r["D"] in dims and r["seed"] == seed]
    fig = draw_traces(runs, dims, GOOD_MSE, out_dir / "bart.traces.png")
    keep = ("leaves", "loglik", "test_mse", "reached_good_fit", "first_good_median")
    by_d = {str(d): {s: {k: table["by_D"][str(d)][s][k] for k in keep} for s in SAMPLERS}
            | {"true_leaves": 2 ** d} for d in dims}
    return {"n_seeds": table["n_seeds"], "n_iter": table["n_iter"],
            "burn_in": table["burn_in"], "good_mse": GOOD_MSE, "by_D": by_d,
            "figures": [fig.name]}


def draw_traces(runs: list[dict], dims: list[int], good_mse: float, path: Path) -> Path:
    """Figs. 4.2-4.4: per D a row of leaves, log-likelihood and test MSE against the
    iteration, one line per sampler (one seed); the true tree's leaves dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(dims), 3, figsize=(12, 3 * len(dims)), squeeze=False)
    for row, d in zip(axes, dims, strict=True):
        for r in (r for r in runs if r["D"] == d):
            for ax, key in zip(row, ("trace_leaves", "trace_loglik", "trace_test_mse"),
                               strict=True):
                ax.plot(r[key], lw=0.8, label=r["sampler"])
        row[0].axhline(2 ** d, color="k", ls="--", lw=0.8)
        row[2].axhline(good_mse, color="k", ls="--", lw=0.8)
        row[2].set_yscale("log")
        for ax, name in zip(row, ("leaves", "log-likelihood", "test MSE"), strict=True):
            ax.set_title(f"hypercube-{d}: {name}", fontsize=9)
            ax.set_xlabel("iteration", fontsize=8)
        row[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _check_traces(ours: dict) -> Verdict:
    rows, n = ours["by_D"], ours["n_seeds"]
    every = all(rows[d]["pg"]["reached_good_fit"] == n for d in rows)
    sooner = all(rows[d]["pg"]["first_good_median"] <= rows[d]["cgm"]["first_good_median"]
                 for d in rows)
    detail = "; ".join(
        f"D={d}: PG {rows[d]['pg']['reached_good_fit']}/{n} chains reach it (median iteration "
        f"{rows[d]['pg']['first_good_median']:.0f}, {rows[d]['pg']['leaves']:.1f} leaves), "
        f"CGM {rows[d]['cgm']['reached_good_fit']}/{n} ({rows[d]['cgm']['first_good_median']:.0f}"
        f", {rows[d]['cgm']['leaves']:.1f} leaves); 2^D = {rows[d]['true_leaves']}"
        for d in rows)
    return Verdict(every and sooner, detail, None)


def _headline_traces(ours: dict) -> str:
    rows, n = ours["by_D"], ours["n_seeds"]
    return "PG chains reaching the true fit: " + ", ".join(
        f"D={d} {rows[d]['pg']['reached_good_fit']}/{n} (CGM {rows[d]['cgm']['reached_good_fit']}"
        f"/{n})" for d in rows)


_THESIS_PROTOCOL = ("M = 1, alpha_s = 0.95, beta_s per D (footnote 6), C = 10, 2000 "
                    "iterations, ESS of the log-likelihood over the last 1000")

ITEMS = [
    Item(key="bart.table4_1", paper=PAPER, where="Ch. 4, Sec. 4.4.2, Table 4.1",
         title="ESS of CGM, GrowPrune and PG on hypercube-D",
         paper_numbers=_per_sampler(THESIS_ESS),
         paper_headline="PG ESS 259 / 667 / 687 / 667 / 423 at D = 2 / 3 / 4 / 5 / 7",
         data=DATA, metric=f"median over seeds of the ESS ({_THESIS_PROTOCOL})",
         claim=("PG's median ESS is at least 0.5x the thesis' at every D, and above CGM's and "
                "GrowPrune's at every D >= 4."),
         tolerance="0.5x the thesis' PG ESS at every D (the thesis gives one chain per D)",
         run=_run_table, check=_check_ess, headline=_headline_ess,
         substitutes=("ESS by Geyer's initial monotone sequence instead of R-CODA's "
                      "spectrum0.ar (medians within 40% on these traces, issue 13)",)),
    Item(key="bart.table4_2", paper=PAPER, where="Ch. 4, Sec. 4.4.2, Table 4.2",
         title="ESS per second of CGM, GrowPrune and PG on hypercube-D",
         paper_numbers=_per_sampler(THESIS_ESS_S),
         paper_headline="PG/CGM ESS/s 5.6 / 12.9 / 10.1 at D = 4 / 5 / 7",
         data=DATA, metric=f"median over seeds of ESS / fit seconds ({_THESIS_PROTOCOL})",
         claim="PG's ESS/s is at least 2x CGM's at every D >= 4.",
         tolerance=("PG/CGM >= 2 (the thesis: 5.6-12.9); absolute ESS/s is not compared: the "
                    "thesis timed Python, ours are numba kernels on a shared 2-core machine"),
         run=_run_table, check=_check_ess_s, headline=_headline_ess_s,
         substitutes=("ESS by Geyer's initial monotone sequence instead of R-CODA",
                      "wall time of our numba samplers instead of the thesis' Python")),
    Item(key="bart.traces", paper=PAPER, where="Ch. 4, Sec. 4.4.1, Figs. 4.2-4.4",
         title="Trace plots of leaves and test MSE on hypercube-2, -3, -4",
         paper_numbers={"figures": "Figs. 4.2, 4.3, 4.4: hypercube-2, -3, -4",
                        "claim": ("PG converges much faster to the posterior in terms of "
                                  "number of leaves as well as the test MSE"),
                        "true_leaves": {"2": 4, "3": 8, "4": 16}},
         paper_headline="PG reaches the true tree (2^D leaves, low test MSE) faster than CGM",
         data=DATA, metric=(f"per chain, the first iteration whose draw has test MSE < "
                            f"{GOOD_MSE} (the true tree: ~0.001); mean leaves after burn-in"),
         claim=(f"At D = 2, 3 and 4 every PG chain reaches the true tree's fit (a draw with "
                f"test MSE < {GOOD_MSE}), no later than CGM's in the median over seeds."),
         tolerance=(f"test MSE < {GOOD_MSE}, ~1% of the vertex values' variance; a chain "
                    "that never reaches it counts as n_iter"),
         run=_run_traces, check=_check_traces, headline=_headline_traces),
    *REAL_ITEMS,  # Tables 4.3-4.5 (real data sets): benchmarks/papers/thesis_bart_real.py
]

#: Why the claims that do not hold fail, each number from a committed file: the items' full
#: JSONs, the audit of our sampler against Alg. 4.2 (benchmarks/results/issue46/
#: pgbart_audit.md, with pgbart_ess*.md from benchmarks/papers/pgbart_mixing.py) and the
#: authors' code on our data sets (benchmarks/results/issue46/pgbart_authors.md, made by
#: ``python -m benchmarks.papers.pgbart_authors --source <pgbart checkout> --dims 4 --seeds 5``).
CAUSES: dict[str, str] = {
    "bart.table4_1": (
        "PG's ESS spreads over two orders of magnitude between chains of one D (full, 20 "
        "seeds: D = 4 6-939, D = 5 4-839, D = 7 3-803; medians 256, 57, 34) and the thesis "
        "reports one chain per D (687, 667, 423): its numbers lie inside our ranges at every "
        "D but above our upper quartiles at D = 5 and 7 (185, 196). The authors' code spreads "
        "the same on our data sets (pgbart_authors.md, D = 4, seeds 0-4, 2000 iterations: its "
        "PG's ESS 89-613, median 153; ours on the same data sets 57-766, median 267), so the "
        "thesis' 687 is above all five of its own chains there; it was not run at D = 5, 7 "
        "(pure Python: 69-153 s per D = 4 chain here, and Tables 4.1-4.2 imply ~3x and ~12x "
        "that at D = 5, 7). The audit (pgbart_audit.md) finds our conditional SMC to be Alg. "
        "4.2 step by step; adaptive resampling (ess_threshold = 0.5, not the thesis') raises "
        "the medians at D = 5, 7 to 149, 226 (pgbart_ess0.5.md), still below 0.5x at D = 5. "
        "PG above CGM and GrowPrune at every D >= 4 holds (256 vs 8.1 / 7.9 at D = 4)."),
    "bart.traces": (
        "PG reaches the true tree's fit first at D = 2 (20 of 20 chains, median iteration 3; "
        "CGM 20 of 20, 34), but settles in smaller, poorer trees from D = 3 on: D = 3 10 of 20 "
        "(CGM 18 of 20), D = 4 1 of 20 (CGM 13 of 20; PG's median leaves after burn-in 12.6 "
        "of 16, CGM 18.8). The authors' code does the same on our data sets "
        "(pgbart_authors.md, D = 4, seeds 0-4: its PG 0 of 5 chains reach the fit, 7.6-17.3 "
        "leaves, test MSE 0.18-8.5; its CGM 5 of 5, first at iterations 680-1760), so the "
        "shortfall is the algorithm's (Alg. 4.2 with the prior as proposal), not our "
        "implementation's; the thesis' Figs. 4.2-4.4 show one chain each. Ancestor sampling "
        "or a proposal that looks at the data go beyond the thesis (pgbart_audit.md)."),
    "bart.table4_3_5": (
        "Table 4.4 holds: PG's mean ESS is the highest on every data set (houses 9.2 vs CGM "
        "7.2 / GrowPrune 6.8, friedman90 9.9 vs 3.8 / 9.7, friedman384 6.7 vs 3.5 / 3.4). "
        "Table 4.5 fails in two cells. On houses it rests on the samplers' relative cost, "
        "which is the implementation's: our PG takes 2.4x our CGM's CPU time (8.3 vs 3.5 s a "
        "chain) where the thesis' CGM took 2.1x its PG's (ESS / ESS/s: 9,637 vs 4,588 s), so "
        "PG's 1.3x ESS is 0.53x the ESS/s (1.11 vs 2.10). On friedman90 PG and GrowPrune tie "
        "(ESS 9.9 vs 9.7, ESS/s 1.10 vs 1.16; each 3.4-22 over the three training sets). The "
        "budget is a quarter of the thesis' (500 iterations, ESS over 250 draws: every "
        "sampler's ESS is 3-22, near this estimator's floor: 2.7 is its least on the "
        "hypercube chains, bart.table4_1), so close "
        "cells are inside the spread between training sets; MSD and CTslices are stand-ins "
        "of their dimension only (Friedman #1 with 90 and 384 features)."),
}
