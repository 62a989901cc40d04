"""Missing values: ebf's CART learners against scikit-learn's HistGradientBoosting (the peer
that learns where missing values go the same way) and against ebf on mean-imputed data.

    python -m benchmarks.missing_values [--rows N]

Two data sets, 70/30 split, seed 0: *informative* (y jumps by 5 where x1 is missing, 20% of
rows: only a model that learns the missing side fits it) and *Friedman #1 MCAR* (Friedman's
function of 10 features, noise 1, with 20% of x0, x1 and x3 missing completely at random).
Metrics: RMSE (every model), CRPS and NLPD (ebf's predictive mixtures), fit seconds. Prints a
Markdown table; results in ``benchmarks/results/issue30/missing_values.md``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _informative(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.random((n, 3))
    missing = rng.random(n) < 0.2
    X[missing, 1] = np.nan
    y = 3.0 * X[:, 0] + np.where(missing, 5.0, np.sin(6 * np.nan_to_num(X[:, 1])))
    return X, y + 0.1 * rng.normal(size=n)


def _friedman_mcar(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n, n_features=10, noise=1.0, random_state=int(rng.integers(2**31)))
    for f in (0, 1, 3):
        X[rng.random(n) < 0.2, f] = np.nan
    return X, y


def _models():
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline

    from ebf import BayesianForestRegressor, EmpiricalBayesianForestRegressor

    return {
        "ebf BF (missing values learnt)": lambda: BayesianForestRegressor(
            n_estimators=50, random_state=0),
        "ebf EBF, bayesian branches": lambda: EmpiricalBayesianForestRegressor(
            branch="bayesian", n_estimators=50, trunk_max_leaves=8, random_state=0),
        "ebf BF on mean-imputed data": lambda: make_pipeline(
            SimpleImputer(), BayesianForestRegressor(n_estimators=50, random_state=0)),
        "HistGradientBoosting": lambda: HistGradientBoostingRegressor(random_state=0),
    }


def run(rows: int) -> str:
    from basics.metrics import crps, nlpd

    lines = ["| data | model | RMSE | CRPS | NLPD | fit s |", "|---|---|---|---|---|---|"]
    for name, make in (("informative", _informative), ("Friedman #1 MCAR", _friedman_mcar)):
        X, y = make(rows, np.random.default_rng(0))
        cut = int(0.7 * rows)
        for label, model in _models().items():
            m = model()
            t0 = time.perf_counter()
            m.fit(X[:cut], y[:cut])
            fit = time.perf_counter() - t0
            rmse = float(np.sqrt(np.mean((m.predict(X[cut:]) - y[cut:]) ** 2)))
            dist = getattr(m, "predict_distribution", None)
            if dist is None and hasattr(m, "steps"):  # the imputer's pipeline
                est = m.steps[-1][1]
                dist = lambda Z, m=m, est=est: est.predict_distribution(  # noqa: E731
                    m.steps[0][1].transform(Z))
            c = n = "n/a (no distribution)"
            if dist is not None:
                d = dist(X[cut:])
                c, n = f"{crps(y[cut:], d):.4f}", f"{nlpd(y[cut:], d):.4f}"
            lines.append(f"| {name} | {label} | {rmse:.4f} | {c} | {n} | {fit:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    print(run(parser.parse_args().rows))


if __name__ == "__main__":
    main()
