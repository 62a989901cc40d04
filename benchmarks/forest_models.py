"""The models Taddy et al. (2015) compare, and their Friedman data, shared by the benchmarks.

``DT`` one CART tree (ours, ``weights="none"``); ``RF`` / ``BF`` ours with Poisson /
Exp(1) weights (Algorithm 1); ``ET`` scikit-learn's extremely randomized trees; ``SSF`` a
sub-sample forest (five sub-samples, Sec. 4); ``EBF`` a CART trunk with Bayesian-forest
branches (Sec. 4). CART-based models have ``min_samples_leaf`` rows per leaf (3 in the
paper's footnote 7). Used by ``bench_ebf.py`` and the paper items of
:mod:`benchmarks.papers.taddy`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

from ebf import (
    BayesianForestClassifier,
    BayesianForestRegressor,
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
)

#: The paper's CART-based models, in the order of its Table 1.
PAPER_MODELS = ("BF", "RF", "EBF", "ET", "SSF", "DT")

_CLASSES = {
    "regression": (BayesianForestRegressor, EmpiricalBayesianForestRegressor,
                   SubsampleForestRegressor, ExtraTreesRegressor),
    "classification": (BayesianForestClassifier, EmpiricalBayesianForestClassifier,
                       SubsampleForestClassifier, ExtraTreesClassifier),
}


def paper_model(name: str, n_estimators: int, seed: int, n_jobs: int | None = None,
                min_leaf: int = 3, *, task: str = "regression",
                trunk_min_leaf_rows: int | None = None, trunk_max_leaves: int | None = 5,
                n_subsamples: int = 5) -> Any:
    """A fresh instance of one of :data:`PAPER_MODELS` (Sec. 2.5 footnote 7, Sec. 4.1).

    Parameters
    ----------
    name : {"DT", "RF", "BF", "ET", "SSF", "EBF"}
    n_estimators : int
        Trees per forest (per branch for EBF).
    seed : int
    n_jobs : int, optional
        Threads over trees.
    min_leaf : int, default=3
        Minimum rows per leaf of every CART tree.
    task : {"regression", "classification"}, default="regression"
    trunk_min_leaf_rows, trunk_max_leaves : int, optional
        EBF's trunk size (the paper: five-leaf trunks, Sec. 4.1 footnote 11; minimum leaf
        sizes of Table 2).
    n_subsamples : int, default=5
        SSF's equally sized sub-samples (footnote 11).
    """
    if task not in _CLASSES:
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    forest, ebf, ssf, extra = _CLASSES[task]
    cart = dict(min_samples_leaf=min_leaf, random_state=seed, n_jobs=n_jobs)
    build = {
        "DT": lambda: forest(n_estimators=1, weights="none", **cart),
        "RF": lambda: forest(n_estimators=n_estimators, weights="poisson", **cart),
        "BF": lambda: forest(n_estimators=n_estimators, **cart),
        "ET": lambda: extra(n_estimators=n_estimators, **cart),
        "SSF": lambda: ssf(n_estimators=n_estimators, n_subsamples=n_subsamples, **cart),
        "EBF": lambda: ebf(n_estimators=n_estimators, trunk_max_leaves=trunk_max_leaves,
                           trunk_min_leaf_rows=trunk_min_leaf_rows, **cart),
    }
    if name not in build:
        raise ValueError(f"unknown model {name!r}; the paper's models are {PAPER_MODELS}")
    return build[name]()


def friedman(n: int, p: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Friedman (1991) eq. (5) with ``p - 5`` spurious features; returns X, y and f(X)."""
    X = rng.random((n, p))
    f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4])
    return X, f + rng.normal(size=n), f
