"""The paper's own implementation beside ours on taddy.fig2 and taddy.fig1 (issue 46, item 3).

Taddy et al. (2015) fit their forests with scikit-learn: RF is ``RandomForestRegressor``, and
a BF is ``DecisionTreeRegressor`` trees each fit on iid Exp(1) ``sample_weight`` (Algorithm
1), all with ``min_samples_leaf=3`` (footnote 7). This script fits both on the data of the
committed runs and sets them beside our numbers, read from the committed item JSONs
(``benchmarks/results/papers/taddy.fig2.json``, ``taddy.fig1.json``):

``fig2``
    Friedman's function with 10 inputs, 100 training rows, RMSE against f(x) on 1,000 test
    rows, the repeats of the committed run (the same seeded data, ``rng([seed, rep])``), 100
    trees: the BF's gain over RF, which the paper puts at "about 1%".
``fig1``
    The motorcycle data: total variation and largest jump over 500 times of the BF mean of
    100 scikit-learn trees, against CART's.

Writes ``benchmarks/results/issue46/taddy_sklearn.md``::

    PYTHONPATH=. python -m benchmarks.papers.taddy_sklearn
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree import DecisionTreeRegressor

from benchmarks.forest_models import friedman

from . import taddy_data as data
from .core import RESULTS

OUT = Path(__file__).resolve().parents[1] / "results" / "issue46" / "taddy_sklearn.md"
MIN_LEAF = 3
TREES = 100


def sklearn_bf(X: np.ndarray, y: np.ndarray, trees: int, seed: int) -> list:
    """A BF of scikit-learn trees: each CART on iid Exp(1) row weights (Algorithm 1)."""
    rng = np.random.default_rng(seed)
    return [DecisionTreeRegressor(min_samples_leaf=MIN_LEAF, random_state=seed + t)
            .fit(X, y, sample_weight=rng.exponential(size=len(y))) for t in range(trees)]


def _mean(forest: list, X: np.ndarray) -> np.ndarray:
    return np.mean([t.predict(X) for t in forest], axis=0)


def fig2() -> list[str]:
    rec = json.loads((RESULTS / "taddy.fig2.json").read_text())
    seed, repeats = rec["seed"], rec["ours"]["sizes"]["repeats"]
    ours = {m: rec["ours"]["scores"][m]["folds"] for m in ("BF", "RF")}
    sk = {"BF": [], "RF": []}
    for rep in range(repeats):
        rng = np.random.default_rng([seed, rep])
        X, y, _ = friedman(100, 10, rng)
        X_te, _, f_te = friedman(1000, 10, rng)
        rf = RandomForestRegressor(n_estimators=TREES, min_samples_leaf=MIN_LEAF,
                                   random_state=seed + rep).fit(X, y)
        preds = {"RF": rf.predict(X_te), "BF": _mean(sklearn_bf(X, y, TREES, seed + rep), X_te)}
        for m, p in preds.items():
            sk[m].append(float(np.sqrt(np.mean((p - f_te) ** 2))))
    lines = [f"## taddy.fig2: Friedman, 10 inputs, n = 100, {repeats} repeats (the committed "
             "run's data), RMSE against f(x)", "",
             "| implementation | RF | BF | BF vs RF | repeats with BF below RF |",
             "|---|---|---|---|---|"]
    for name, s in (("scikit-learn (the paper's)", sk), ("ours (taddy.fig2.json)", ours)):
        rf, bf = np.mean(s["RF"]), np.mean(s["BF"])
        wins = int(np.sum(np.array(s["BF"]) < np.array(s["RF"])))
        lines.append(f"| {name} | {rf:.3f} | {bf:.3f} | {100 * (bf / rf - 1):+.1f}% | "
                     f"{wins} of {repeats} |")
    gaps = 100 * (np.array(sk["BF"]) / np.array(sk["RF"]) - 1)
    lines += ["", f"scikit-learn's per-repeat BF vs RF gap: median {np.median(gaps):+.1f}%, "
              f"quartiles {np.quantile(gaps, 0.25):+.1f}% to {np.quantile(gaps, 0.75):+.1f}%."]
    return lines


def fig1() -> list[str]:
    rec = json.loads((RESULTS / "taddy.fig1.json").read_text())
    X, y = data.mcycle()
    grid = np.linspace(X.min(), X.max(), 500)[:, None]
    cart = DecisionTreeRegressor(min_samples_leaf=MIN_LEAF, random_state=0).fit(X, y)
    fits = {"CART": cart.predict(grid),
            "BF": _mean(sklearn_bf(X, y, TREES, rec["seed"]), grid)}
    lines = ["## taddy.fig1: motorcycle data, 500 times, min leaf 3", "",
             "| implementation | model | total variation (g) | largest jump (g) |",
             "|---|---|---|---|"]
    for m, f in fits.items():
        lines.append(f"| scikit-learn (the paper's) | {m} | {np.abs(np.diff(f)).sum():.0f} | "
                     f"{np.abs(np.diff(f)).max():.0f} |")
    for m in ("CART", "BF"):
        lines.append(f"| ours (taddy.fig1.json) | {m} | {rec['ours']['total_variation'][m]:.0f} "
                     f"| {rec['ours']['largest_jump'][m]:.0f} |")
    return lines


def main() -> None:
    lines = ["# The paper's implementation (scikit-learn) beside ours: taddy.fig2, taddy.fig1",
             "", "Made by `PYTHONPATH=. python -m benchmarks.papers.taddy_sklearn` "
             f"(min_samples_leaf={MIN_LEAF}, {TREES} trees; BF = scikit-learn CARTs on iid "
             "Exp(1) sample weights).", "", *fig2(), "", *fig1(), ""]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
