"""Table 3 of the Mondrian regression paper (Sec. 5.3): Bayesian optimisation with a Mondrian
forest surrogate on grids, one item per row, each by :func:`mondrian.bayesopt.maximize_on_grid`
(10 trees, ``min_samples_split = 2``, UCB = mean + std, the paper's settings).

- ``mf.table3_branin`` / ``mf.table3_hartmann6``: the functions at random points of their
  unit-scaled domains, their maximisers among them (``benchmarks/bench_bayesopt.py``);
  3 grids x 5 runs and 200 evaluations as the paper.
- ``mf.table3_svm``: HPOlib's structured-SVM grid is not obtainable; its stand-in is
  ``benchmarks/data/svm_digits_grid.csv`` (validation error of an RBF SVM on scikit-learn's
  digits over 14 C x 10 gamma x 10 PCA sizes = 1,400 points, HPOlib's count; made by
  :mod:`benchmarks.papers.make_svm_grid`), maximised as minus the error, 15 runs of 100
  evaluations.
- ``mf.table3_lda``: the online-LDA grid of Snoek et al. (2012) is not obtainable; its
  stand-in is ``benchmarks/data/lda_synthetic_grid.csv`` (the same 6 kappa x 6 tau0 x 8
  batch sizes = 288 points, perplexity of scikit-learn's online LDA on a synthetic corpus;
  made by :mod:`benchmarks.papers.make_lda_grid`), maximised as minus the perplexity, 15
  runs of 50 evaluations.

The grids' log-scale dimensions are log-transformed and every dimension scaled to [0, 1], as
the paper does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_bayesopt import FUNCTIONS, make_grid

from .core import Item, Verdict, relative

PAPER = ("Lakshminarayanan, Roy & Teh (2016), Mondrian forests for large-scale regression "
         "when uncertainty matters")
DATA = Path(__file__).resolve().parents[1] / "data"
SVM_GRID = DATA / "svm_digits_grid.csv"
LDA_GRID = DATA / "lda_synthetic_grid.csv"
#: Branin / Hartmann-6: (grid points, grids, runs per grid) per budget. The paper: 250,000
#: points, 3 x 5; ``full`` keeps its 3 x 5 runs and 200 evaluations on 50,000-point grids,
#: the largest that fits our share of the 2 cores (one evaluation refits the forest and
#: predicts every grid point: about 0.4 CPU seconds at 250,000 points, 40 CPU minutes for
#: the two functions' 6,000 evaluations).
SIZES = {"smoke": (2_000, 1, 1), "quick": (20_000, 3, 5), "full": (50_000, 3, 5)}
#: Runs on the one stand-in grid of SVM and LDA per budget (the paper: 15).
GRID_RUNS = {"smoke": 2, "quick": 15, "full": 15}
#: Evaluations per problem (the paper's Table 3) and at the smoke budget.
EVALS = {"Branin": 200, "Hartmann6": 200, "SVM": 100, "LDA": 50}
SMOKE_EVALS = 20
#: The paper's MF column, (mean, std) of the best value found.
PAPER_MF = {"Branin": (-0.400, 0.005), "Hartmann6": (3.247, 0.109)}
#: Largest gap of the mean best to the SVM stand-in's optimum, points of validation error.
SVM_GAP = 0.5
#: The printed SVM and LDA rows look exchanged: in Eggensperger et al. (2013), Table 2, the
#: source of the SMAC column, LDA on the grid has SMAC 1269.6 +- 2.9 (perplexity, 50
#: evaluations) and SVM on the grid 24.1 +- 0.1 (% error, 100 evaluations).
SWAP_NOTE = ("the printed values of the SVM-grid and LDA-grid rows look exchanged: the SMAC "
             "column is taken from Eggensperger et al. (2013), where the LDA grid's values "
             "are perplexities near 1266-1270 and the SVM grid's errors near 24.1%; either "
             "way the stand-in grids' values are not comparable")


def _unit(X: np.ndarray) -> np.ndarray:
    return (X - X.min(0)) / (X.max(0) - X.min(0))


def svm_grid() -> tuple[np.ndarray, np.ndarray]:
    """The stand-in SVM grid scaled to [0, 1] per dimension, and minus its validation error."""
    data = np.loadtxt(SVM_GRID, delimiter=",", skiprows=1)
    X = data[:, :3].copy()
    X[:, 2] = np.log2(X[:, 2])  # the PCA size varies on a log scale too
    return _unit(X), -data[:, 3]


def lda_grid() -> tuple[np.ndarray, np.ndarray]:
    """The stand-in LDA grid (kappa; log tau0; log batch size) scaled to [0, 1] per
    dimension, and minus its held-out perplexity."""
    data = np.loadtxt(LDA_GRID, delimiter=",", skiprows=1)
    X = data[:, :3].copy()
    X[:, 1:] = np.log2(X[:, 1:])
    return _unit(X), -data[:, 3]


def lookup(X: np.ndarray, values: np.ndarray):
    """The objective of a grid known only at its points: a table lookup of the rows."""
    index = {row.tobytes(): i for i, row in enumerate(X)}
    return lambda rows: values[[index[row.tobytes()] for row in rows]]


def _grids(name: str, budget: str) -> list[tuple[np.ndarray, Any, int]]:
    """(grid, objective, runs) of each grid of problem ``name`` at ``budget``."""
    if name in FUNCTIONS:
        f, dim = FUNCTIONS[name]
        n, grids, runs = SIZES[budget]
        return [(make_grid(name, n, dim, 1000 + g), f, runs) for g in range(grids)]
    X, v = svm_grid() if name == "SVM" else lda_grid()
    return [(X, lookup(X, v), GRID_RUNS[budget])]


def _run_problem(name: str, budget: str, seed: int) -> dict:
    from mondrian.bayesopt import maximize_on_grid

    evals = SMOKE_EVALS if budget == "smoke" else EVALS[name]
    best, oracle, seeds = [], [], []
    grids = _grids(name, budget)
    for g, (X, objective, runs) in enumerate(grids):
        for r in range(runs):
            seeds.append(seed + 100 * g + r)
            res = maximize_on_grid(objective, X, evals, random_state=seeds[-1])
            best.append(float(res["best"]))
        oracle.append(float(np.max(objective(X))))
    return {"oracle": float(np.mean(oracle)), "mean": float(np.mean(best)),
            "std": float(np.std(best)), "median": float(np.median(best)),
            "worst": float(min(best)), "best": best, "seeds": seeds, "evals": evals,
            "grid_points": int(grids[0][0].shape[0]), "grids": len(grids), "runs": len(best),
            "runs_at_optimum": int(sum(b >= o for b, o in zip(
                best, np.repeat(oracle, [runs for _, _, runs in grids]), strict=True)))}


def _summary(r: dict) -> str:
    return (f"{r['mean']:.3f} +- {r['std']:.3f} over {r['runs']} runs (median {r['median']:.3f}, "
            f"worst {r['worst']:.3f}; grid optimum {r['oracle']:.3f}, reached in "
            f"{r['runs_at_optimum']} runs)")


def _function_check(name: str):
    def check(ours: dict) -> Verdict:
        mean, std = PAPER_MF[name]
        floor = mean - std
        return Verdict(ours["mean"] >= floor,
                       f"{_summary(ours)}; floor {floor:.3f} (the paper's MF {mean} - {std})",
                       relative(ours["mean"], mean))
    return check


def _svm_check(ours: dict) -> Verdict:
    gap = ours["oracle"] - ours["mean"]
    return Verdict(gap <= SVM_GAP, f"{_summary(ours)}; gap to the optimum {gap:.3f} points",
                   None)


def _lda_check(ours: dict) -> Verdict:
    return Verdict(ours["runs_at_optimum"] == ours["runs"], _summary(ours), None)


def _headline(ours: dict) -> str:
    return (f"{ours['mean']:.3f} +- {ours['std']:.3f} (oracle {ours['oracle']:.3f}, "
            f"{ours['runs_at_optimum']} of {ours['runs']} runs at it)")


def _runner(name: str):
    return lambda budget, seed, out_dir: _run_problem(name, budget, seed)


#: The fields every row shares.
COMMON: dict[str, Any] = dict(
    paper=PAPER, where="Sec. 5.3, Table 3", headline=_headline,
    metric="best value found after the paper's evaluation budget, mean +- std over runs")

FUNCTION_DATA = ("{f} at random points of [0, 1]^{d} (its maximisers added), 3 grids x 5 runs "
                 "(seeds s + 100 grid + run), 200 evaluations; full: 50,000-point grids (the "
                 "paper: 250,000; the largest that fits our share of the 2 cores)")

TABLE3_BRANIN = Item(
    **COMMON, key="mf.table3_branin", run=_runner("Branin"),
    title="Bayesian optimisation on a Branin grid: best value found by the MF surrogate (UCB)",
    paper_numbers={"Branin (2, 200)": {"oracle": -0.398, "MF": "-0.400 +- 0.005",
                                       "SMAC": "-0.655 +- 0.27"}},
    paper_headline="MF -0.400 +- 0.005 (oracle -0.398; SMAC -0.655 +- 0.27)",
    data=FUNCTION_DATA.format(f="negated Branin", d=2),
    substitutes=("50,000-point grids at the full budget (the paper: 250,000)",),
    claim=("MF's mean best value over 15 runs of 200 evaluations is at least -0.405, the "
           "paper's MF mean minus its standard deviation (the paper: -0.400 +- 0.005 against "
           "the grid's optimum -0.398: 'MF finds maxima very close to the true maximum on "
           "the grid')."),
    tolerance="mean >= -0.400 - 0.005 (one of the paper's standard deviations)",
    check=_function_check("Branin"),
)

TABLE3_HARTMANN6 = Item(
    **COMMON, key="mf.table3_hartmann6", run=_runner("Hartmann6"),
    title="Bayesian optimisation on a Hartmann-6 grid: best value found by the MF surrogate",
    paper_numbers={"Hartmann (6, 200)": {"oracle": 3.322, "MF": "3.247 +- 0.109",
                                         "SMAC": "2.977 +- 0.11"}},
    paper_headline="MF 3.247 +- 0.109 (oracle 3.322; SMAC 2.977 +- 0.11)",
    data=FUNCTION_DATA.format(f="Hartmann-6", d=6),
    substitutes=("50,000-point grids at the full budget (the paper: 250,000)",),
    claim=("MF's mean best value over 15 runs of 200 evaluations is at least 3.138, the "
           "paper's MF mean minus its standard deviation (the paper: 3.247 +- 0.109 against "
           "the grid's optimum 3.322, SMAC 2.977)."),
    tolerance="mean >= 3.247 - 0.109 (one of the paper's standard deviations)",
    check=_function_check("Hartmann6"),
)

TABLE3_SVM = Item(
    **COMMON, key="mf.table3_svm", run=_runner("SVM"),
    title="Bayesian optimisation on an SVM hyper-parameter grid (stand-in): best value found",
    paper_numbers={"SVM-grid (3, 100)": {"oracle": -1266.2, "MF": "-1266.36 +- 0.52",
                                         "SMAC": "-1269.6 +- 2.9"},
                   "note": SWAP_NOTE},
    paper_headline="MF -1266.36 +- 0.52 (oracle -1266.2; SMAC -1269.6 +- 2.9)",
    data=("a 1,400-point grid (14 C x 10 gamma x 10 PCA sizes) of an RBF SVM's validation "
          "error (%) on scikit-learn's digits, vendored; 15 runs (seeds s..s+14) of 100 "
          "evaluations"),
    substitutes=("SVM-grid: an RBF-SVM grid on scikit-learn's digits for HPOlib's structured-"
                 "SVM grid (not obtainable), the same size and dimension",),
    claim=("MF's mean best value over 15 runs of 100 evaluations is within 0.5 points of "
           "validation error of the stand-in grid's optimum (the paper: -1266.36 +- 0.52 "
           "against the oracle -1266.2, 'very close to the true maximum on the grid')."),
    tolerance="gap <= 0.5 points of error (ours: the stand-in's units are not the paper's)",
    check=_svm_check,
    differs=("the stand-in grid (an RBF SVM on digits, error in %) is not HPOlib's structured-"
             "SVM grid: its values and its difficulty are not the paper's, so a gap on it "
             "says nothing about the paper's -1266.36 against -1266.2."),
)

TABLE3_LDA = Item(
    **COMMON, key="mf.table3_lda", run=_runner("LDA"),
    title="Bayesian optimisation on an online-LDA hyper-parameter grid (stand-in): best value",
    paper_numbers={"LDA-grid (3, 50)": {"oracle": -24.1, "MF": "-24.1 +- 0",
                                        "SMAC": "-24.1 +- 0.1"},
                   "grid": "Snoek et al. (2012): online LDA on Wikipedia, kappa x tau0 x "
                           "batch size, 288 points",
                   "note": SWAP_NOTE},
    paper_headline="MF -24.1 +- 0 = the oracle -24.1 ('both MF and SMAC identify the optimum')",
    data=("a 288-point grid (kappa 0.5-1.0 x tau0 1-1024 x batch size 1-16384, Snoek et al.'s) "
          "of scikit-learn's online-LDA held-out perplexity on a synthetic LDA corpus (10 "
          "topics, 500 words, 8,192 + 1,000 documents), vendored; 15 runs (seeds s..s+14) of "
          "50 evaluations"),
    substitutes=("LDA-grid: Snoek et al.'s grid of online-LDA settings run with scikit-learn's "
                 "LatentDirichletAllocation on a synthetic corpus drawn from an LDA model, for "
                 "the original grid on Wikipedia (not obtainable)",),
    claim=("MF finds the optimum of the stand-in grid in every one of 15 runs of 50 "
           "evaluations (the paper: -24.1 +- 0, the oracle -24.1: 'both MF and SMAC "
           "identify the optimum for LDA-grid')."),
    tolerance="every run's best equals the grid's optimum (the paper's +- 0)",
    check=_lda_check,
    differs=("the stand-in grid (scikit-learn's online LDA on a synthetic corpus) has Snoek et "
             "al.'s 288 settings but not their Wikipedia perplexities: how peaked its optimum "
             "is, and so how easily 50 evaluations find it, is not the paper's."),
)

ITEMS = [TABLE3_BRANIN, TABLE3_HARTMANN6, TABLE3_SVM, TABLE3_LDA]
