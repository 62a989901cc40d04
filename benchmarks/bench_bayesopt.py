"""Benchmark issue 14: Bayesian optimisation on grids, the Mondrian regression paper's Table 3.

Protocol of the paper (Sec. 5.3): the Branin (2-D) and Hartmann6 (6-D) functions sampled at
``--grid`` random points (250,000 in the paper) of their domains, every dimension scaled to
[0, 1], the functions' maximisers among them (Table 3's oracle is the function's optimum,
which random points alone miss in 6-D: 3.18 on average over 3 grids, not 3.322); the
objective is maximised (Branin negated: optimum -0.398; Hartmann6's 3.322); ``--init``
random grid points (default: a tenth of ``--evals``,
``mondrian.bayesopt.default_initial_points``) are evaluated first, then each step
evaluates the unevaluated grid point of largest ``mean + std`` (UCB, the paper's footnote 9)
under the surrogate refit on all evaluations; ``--evals`` evaluations in all; the best value
found is reported, mean and std over ``--grids`` random grids x ``--repeats`` runs (3 x 5 in
the paper). Surrogates, the same protocol for each:

``MF``
    ``MondrianForestRegressor(n_estimators=10, min_samples_split=2)`` (ours, the paper's).
``RF`` / ``ET``
    scikit-optimize's ``RandomForestRegressor`` / ``ExtraTreesRegressor`` (the std is the
    spread between trees: the SMAC-like baseline), ``n_estimators=10`` and
    ``min_samples_leaf=1`` (the same size as MF), the ``bench`` extra.
``GP``
    scikit-optimize's ``GaussianProcessRegressor`` with the Matern-5/2 kernel its
    ``Optimizer`` uses by default (normalised targets, noise fitted).

Writes ``benchmarks/results/issue14/bayesopt.json`` and ``bayesopt.md``. Run from the
repository root::

    PYTHONPATH=. python benchmarks/bench_bayesopt.py            # the paper's settings
    PYTHONPATH=. python benchmarks/bench_bayesopt.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import parse_with_sizes, write_rows

log = logging.getLogger("bench_bayesopt")

#: The Hartmann6 constants (Dixon & Szego 1978).
_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_H_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                 [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
_H_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                        [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])


def branin(U: np.ndarray) -> np.ndarray:
    """Negated Branin on the unit square (x1 in [-5, 10], x2 in [0, 15]); maximum -0.398."""
    x1, x2 = -5 + 15 * U[:, 0], 15 * U[:, 1]
    return -((x2 - 5.1 / (4 * np.pi**2) * x1**2 + 5 / np.pi * x1 - 6) ** 2
             + 10 * (1 - 1 / (8 * np.pi)) * np.cos(x1) + 10)


def hartmann6(U: np.ndarray) -> np.ndarray:
    """Hartmann6 on [0, 1]^6 (as a maximisation); maximum 3.322."""
    inner = np.einsum("ij,nij->ni", _H_A, (U[:, None, :] - _H_P[None]) ** 2)
    return np.exp(-inner) @ _H_ALPHA


FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], int]] = {
    "Branin": (branin, 2), "Hartmann6": (hartmann6, 6)}

#: The global maximisers, in the unit cube: Branin's three (x1 = -pi, pi, 9.42478 with x2 =
#: 12.275, 2.275, 2.475) and Hartmann6's one (Dixon & Szego 1978).
OPTIMA = {
    "Branin": np.array([[(5 - np.pi) / 15, 12.275 / 15], [(5 + np.pi) / 15, 2.275 / 15],
                        [14.42478 / 15, 2.475 / 15]]),
    "Hartmann6": np.array([[0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]]),
}


def make_grid(fname: str, n: int, dim: int, seed: int) -> np.ndarray:
    """``n`` uniform points of the unit cube, the function's maximisers among them (so the
    grid's optimum is the function's: Table 3's oracle column, -0.398 and 3.322)."""
    grid = np.random.default_rng(seed).random((n, dim))
    grid[: len(OPTIMA[fname])] = OPTIMA[fname]
    return grid


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small settings, for a smoke run")
    p.add_argument("--functions", nargs="+", default=list(FUNCTIONS))
    p.add_argument("--surrogates", nargs="+", default=["MF", "RF", "ET", "GP"])
    p.add_argument("--grid", type=int)
    p.add_argument("--evals", type=int)
    p.add_argument("--init", type=int, default=None,
                   help="random first evaluations (default: mondrian.bayesopt."
                        "default_initial_points, a tenth of --evals)")
    p.add_argument("--grids", type=int)
    p.add_argument("--repeats", type=int)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/issue14"))
    return parse_with_sizes(p, argv, quick=dict(grid=5000, evals=30, grids=1, repeats=2),
                            full=dict(grid=250_000, evals=200, grids=3, repeats=5))


def surrogate(name: str, seed: int) -> Any:
    """A fresh surrogate with ``fit`` and ``predict(X, return_std=True)``."""
    if name == "MF":
        from mondrian import MondrianForestRegressor

        return MondrianForestRegressor(n_estimators=10, min_samples_split=2, random_state=seed,
                                       noise="forest")  # the paper's model (App. B)
    from skopt.learning import (
        ExtraTreesRegressor,
        GaussianProcessRegressor,
        RandomForestRegressor,
    )

    if name == "RF":
        return RandomForestRegressor(n_estimators=10, min_samples_leaf=1, random_state=seed)
    if name == "ET":
        return ExtraTreesRegressor(n_estimators=10, min_samples_leaf=1, random_state=seed)
    if name == "GP":
        from skopt.learning.gaussian_process.kernels import ConstantKernel, Matern

        kernel = ConstantKernel(1.0, (0.01, 1000.0)) * Matern(
            length_scale=np.ones(1), length_scale_bounds=(0.01, 100), nu=2.5)
        return GaussianProcessRegressor(kernel=kernel, normalize_y=True, noise="gaussian",
                                        n_restarts_optimizer=2, random_state=seed)
    raise ValueError(f"unknown surrogate {name!r}; choose MF, RF, ET or GP")


def run_once(f: Callable, grid: np.ndarray, name: str, evals: int, n_init: int,
             seed: int) -> tuple[float, float]:
    """One BayesOpt run on the grid; returns (best value found, seconds in the surrogate)."""
    rng = np.random.default_rng(seed)
    values = f(grid)
    chosen = list(rng.choice(grid.shape[0], size=n_init, replace=False))
    open_ = np.ones(grid.shape[0], bool)
    open_[chosen] = False
    spent = 0.0
    while len(chosen) < evals:
        t0 = time.perf_counter()
        model = surrogate(name, seed + len(chosen))
        model.fit(grid[chosen], values[chosen])
        mean, std = model.predict(grid, return_std=True)
        ucb = np.where(open_, mean + std, -np.inf)
        spent += time.perf_counter() - t0
        best = int(np.argmax(ucb))
        chosen.append(best)
        open_[best] = False
    return float(values[chosen].max()), spent


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from mondrian.bayesopt import default_initial_points

    cfg = parse_args(argv)
    rows = []
    for fname in cfg.functions:
        f, dim = FUNCTIONS[fname]
        n_init = default_initial_points(cfg.evals, dim) if cfg.init is None else cfg.init
        grids = [make_grid(fname, cfg.grid, dim, 1000 + g) for g in range(cfg.grids)]
        oracle = float(np.mean([f(g).max() for g in grids]))
        for name in cfg.surrogates:
            best, seconds = [], []
            for g, grid in enumerate(grids):
                for r in range(cfg.repeats):
                    b, s = run_once(f, grid, name, cfg.evals, n_init, seed=100 * g + r)
                    best.append(b)
                    seconds.append(s)
                    log.info("%s %s grid %d run %d: best %.4f (%.1f s)", fname, name, g, r, b, s)
            rows.append({"function": fname, "surrogate": name, "oracle": oracle,
                         "mean": float(np.mean(best)), "std": float(np.std(best)),
                         "seconds": float(np.mean(seconds)), "best": best})
    columns = [("function", "function", "s"), ("surrogate", "surrogate", "s"),
               ("oracle", "grid optimum", ".3f"), ("mean", "best found (mean)", ".3f"),
               ("std", "std", ".3f"), ("seconds", "surrogate s per run", ".1f")]
    first = cfg.init or "a tenth"
    title = (f"BayesOpt on {cfg.grid:,}-point grids, {cfg.evals} evaluations ({first} random "
             f"first), {cfg.grids} grids x {cfg.repeats} runs")
    write_rows(cfg.out, "bayesopt", cfg, title, columns, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
