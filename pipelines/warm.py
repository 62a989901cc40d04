"""Compile (or load from numba's on-disk cache) the kernels of every model family at once.

Every kernel is compiled with ``cache=True`` (:data:`basics.jit.JIT`), so a machine compiles
each one once and later processes load it from ``__pycache__``. On a fresh checkout the first
process to call a kernel pays its compilation (about 170 kernels, a minute or more in all),
and processes that start together each pay it again. :func:`warm_kernels` pays it once, up
front, in one process: a tiny fit, prediction, recalibration, save and load, and scoring of
every family and task, with the array types the library passes its kernels. The test suite
calls it in the controller before its worker processes start, so that they load the kernels
instead of each compiling them (and a test's time is its own, not the compiler's); the
demo's workers call it before the first fit.
"""

from __future__ import annotations

import logging
import multiprocessing
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from basics.metrics import CALIBRATION_LEVELS

__all__ = ["FAMILIES", "warm_kernels", "warm_regressor"]

logger = logging.getLogger(__name__)


def _data(n: int = 240, d: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.random((n, d))
    y = X[:, 0] + 0.1 * rng.standard_normal(n)
    classes = (X[:, 1] > 0.5).astype(np.int64)
    return X, y, classes


def _with_missing(X: np.ndarray) -> np.ndarray:
    X = X.copy()
    X[::7, 0] = np.nan
    return X


def warm_regressor(model, X: np.ndarray, y: np.ndarray) -> None:
    """Fit a regressor on the first three quarters of ``X, y``, recalibrate it on the rest,
    predict every summary, score it as ``ebf evaluate`` does (its own mixture under every
    map) and load it back: the kernels of a regressor's whole life."""
    from pipelines.scoring.job import EvaluationJob

    half = len(X) * 3 // 4
    model.fit(X[:half], y[:half])
    model.predict(X[:20], return_std=True)
    if hasattr(model, "apply"):
        model.apply(X[:20])
    model.recalibrate(X[half:], y[half:])
    model.predict(X[:20], return_std=True)
    model.predict_summary(X[:20])
    dist = model.predict_distribution(X[:20], recalibrated=False)
    EvaluationJob(CALIBRATION_LEVELS, None, model.recalibration_).rows(dist, y[:20])
    _round_trip(model, X)


def _classifier(model, X: np.ndarray, classes: np.ndarray) -> None:
    model.fit(X, classes)
    model.predict_proba(X[:20])
    _round_trip(model, X)


def _round_trip(model, X: np.ndarray) -> None:
    """Save and load (the structure checks of a load are kernels too), then predict."""
    from ebf import load, save

    with tempfile.TemporaryDirectory() as tmp:
        save(model, f"{tmp}/model")
        loaded = load(f"{tmp}/model")
    (loaded.predict_proba if hasattr(loaded, "predict_proba") else loaded.predict)(X[:5])


def _forests() -> None:
    from ebf import (
        BayesianForestClassifier,
        BayesianForestRegressor,
        EmpiricalBayesianForestClassifier,
        EmpiricalBayesianForestRegressor,
        SubsampleForestRegressor,
        Trunk,
    )

    X, y, classes = _data()
    Xm = _with_missing(X)
    # the ensembles below take no branch=: they warm the default learner's kernels
    # (ebf.learners.DEFAULT_BRANCH), those of every fit that does not choose one
    warm_regressor(BayesianForestRegressor(n_estimators=2, random_state=0), Xm, y)
    _classifier(BayesianForestClassifier(n_estimators=2, random_state=0), Xm, classes)
    ebf = EmpiricalBayesianForestRegressor(n_estimators=2, trunk_max_leaves=2, random_state=0)
    warm_regressor(ebf, Xm, y)
    ebf.compact().predict_summary(Xm[:20])
    _classifier(EmpiricalBayesianForestClassifier(n_estimators=2, trunk_max_leaves=2,
                                                  random_state=0), Xm, classes)
    warm_regressor(SubsampleForestRegressor(n_estimators=2, n_subsamples=2, random_state=0), X, y)
    Trunk(max_leaves=3).fit(Xm, y).apply(Xm)


def _mondrian() -> None:
    from ebf import EmpiricalBayesianForestRegressor
    from mondrian import (
        MondrianForestClassifier,
        MondrianForestRegressor,
        MondrianKernelClassifier,
        MondrianKernelRegressor,
    )

    X, y, classes = _data()
    for posterior in ("exact", "empirical"):
        reg = MondrianForestRegressor(n_estimators=2, posterior=posterior, random_state=0)
        warm_regressor(reg, X, y)
        reg.partial_fit(X[:40], y[:40])
        reg.compact().predict_summary(X[:20])
    clf = MondrianForestClassifier(n_estimators=2, random_state=0)
    _classifier(clf, X, classes)
    clf.partial_fit(X[:40], classes[:40])
    ebf = EmpiricalBayesianForestRegressor(n_estimators=2, branch="mondrian",
                                           trunk_max_leaves=2, random_state=0)
    warm_regressor(ebf, X, y)
    ebf.compact().predict_summary(X[:20])
    kernel = MondrianKernelRegressor(n_mondrians=3, random_state=0).fit(X, y)
    kernel.predict(X[:20])
    kernel.partial_fit(X[:40], y[:40])
    MondrianKernelClassifier(n_mondrians=3, random_state=0).fit(X, classes).predict_proba(X[:5])


def _bayesian_trees() -> None:
    from ebf import BARTRegressor, SMCTreeClassifier, SMCTreeRegressor

    X, y, classes = _data(200)
    for proposal in ("prior", "optimal", "empirical"):
        warm_regressor(SMCTreeRegressor(n_particles=4, n_islands=1, proposal=proposal,
                                        random_state=0), X, y)
    _classifier(SMCTreeClassifier(n_particles=4, n_islands=1, random_state=0), X, classes)
    for sampler in ("pg", "cgm", "growprune"):
        warm_regressor(BARTRegressor(n_trees=2, n_iter=4, burn_in=1, sampler=sampler,
                                     random_state=0), X, y)


#: The families :func:`warm_kernels` runs, by name, the slowest to compile first.
FAMILIES: dict[str, Callable[[], None]] = {
    "bayesian trees": _bayesian_trees,
    "mondrian": _mondrian,
    "forests": _forests,
}


def _warm_one(name: str) -> float:
    t0 = time.perf_counter()
    FAMILIES[name]()
    seconds = time.perf_counter() - t0
    logger.info("kernels of %s ready in %.1f s", name, seconds)
    return seconds


def warm_kernels(families: tuple[str, ...] | None = None, *,
                 processes: int = 1) -> dict[str, float]:
    """Compile or load every numba kernel that fitting, predicting, recalibrating, saving,
    loading and scoring the given families use.

    Parameters
    ----------
    families : tuple of str, optional
        Names from :data:`FAMILIES`; all of them by default.
    processes : int, default=1
        With more than one, the families compile in that many fresh processes at once (the
        compiler is single-threaded; the cache files they write are the same either way),
        the slowest first.

    Returns
    -------
    dict
        Seconds per family: mostly compilation the first time on a machine, loading from
        the cache after.

    Examples
    --------
    >>> seconds = warm_kernels(("forests",))  # doctest: +SKIP
    """
    names = tuple(FAMILIES) if families is None else families
    unknown = sorted(set(names) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown families {unknown}: choose from {sorted(FAMILIES)}")
    if processes <= 1 or len(names) <= 1:
        return {name: _warm_one(name) for name in names}
    order = sorted(names, key=list(FAMILIES).index)
    context = multiprocessing.get_context("spawn")  # never fork a process that has threads
    with ProcessPoolExecutor(min(processes, len(order)), mp_context=context) as pool:
        return dict(zip(order, pool.map(_warm_one, order), strict=True))
