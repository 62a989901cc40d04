"""Compile (or load from numba's on-disk cache) the kernels of every model family at once.

Every kernel is compiled with ``cache=True`` (:data:`basics.jit.JIT`), so a machine compiles
each one once and later processes load it from ``__pycache__``. On a fresh checkout the first
process to call a kernel pays its compilation (about 170 kernels, a minute or more in all),
and processes that start together each pay it again. :func:`warm_kernels` pays it once, up
front, in one process: a tiny fit, prediction, recalibration, save and load, and scoring of
every family and task, with the array types the library passes its kernels. The test suite
calls it in the controller before its worker processes start, so that they load the kernels
instead of each compiling them (and a test's time is its own, not the compiler's).

:func:`warm_workers` does the same for the workers of a Dask cluster before a job (``ebf
demo``, the first ``ebf train`` on a machine, the notebooks): one ensemble learner's
kernels, compiled once and in parallel, its fit kernels on one worker while another
compiles the prediction and scoring kernels, then loaded by every worker.
"""

from __future__ import annotations

import logging
import multiprocessing
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from basics.metrics import CALIBRATION_LEVELS

__all__ = ["FAMILIES", "kernels_cached", "warm_ensembles", "warm_kernels", "warm_regressor",
           "warm_workers"]

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


#: Kernels whose entries in numba's on-disk cache tell whether a machine has compiled the
#: kernels of a fit and a prediction (:func:`kernels_cached`): the largest of each.
_SENTINELS = (("ebf._hist_tree", "_grow_kernel"), ("ebf._cart", "_forest_kernel"),
              ("basics.mixture_kernels", "summary_kernel"))

#: Rows of the warm-up data: enough that a continuous feature keeps more than
#: ``ebf.config.MAX_BINS`` distinct values in each of two branches (two-byte bin codes).
_WIDE_ROWS = 2_000


def kernels_cached() -> bool:
    """Whether numba's on-disk cache holds compiled code, fresh for the source files, of the
    largest kernels of a fit and a prediction (:data:`_SENTINELS`).

    False on a fresh checkout and after a kernel's source file changed: the next fit would
    compile. A guess from a few kernels (numba keeps one index per kernel), cheap enough
    to ask before every job.

    Examples
    --------
    >>> kernels_cached()  # doctest: +SKIP
    True
    """
    import importlib

    for module, name in _SENTINELS:
        try:
            kernel = getattr(importlib.import_module(module), name)
            # numba's own check: the index of the kernel's cache, empty if it is missing or
            # older than the source file (a private attribute, and a kernel renamed: both
            # read as cold)
            if not kernel._cache._cache_file._load_index():
                return False
        except (AttributeError, OSError):
            return False
    return True


def _regression_data(*, wide: bool) -> tuple[np.ndarray, np.ndarray]:
    """``wide``: continuous features, binned with two-byte codes as the flights' minutes of
    the day are; else two decimals (at most 101 values a feature: one-byte codes, as the
    255 quantile bins of a large continuous data set)."""
    rng = np.random.default_rng(0)
    X = rng.random((_WIDE_ROWS if wide else 400, 3))
    if not wide:
        X = np.round(X, 2)
    y = X[:, 0] + 0.1 * rng.standard_normal(len(X))
    return X, y


def warm_ensembles(branch: str | None = None, widths: Sequence[bool] = (True, False)) -> None:
    """Compile or load the kernels of an EBF and an SSF with ``branch`` learners (the
    default learner by default): fit, predict, recalibrate, summarise, score, save, load,
    compact; for each bin-code width in ``widths`` (True: two-byte codes; CART learners,
    the others do not bin).

    Examples
    --------
    >>> warm_ensembles("bayesian", widths=(True,))  # doctest: +SKIP
    """
    from ebf import EmpiricalBayesianForestRegressor, SubsampleForestRegressor
    from ebf.learners import DEFAULT_BRANCH

    branch = DEFAULT_BRANCH if branch is None else branch
    for wide in widths if _binned(branch) else widths[:1]:
        X, y = _regression_data(wide=wide)
        for model in (
            EmpiricalBayesianForestRegressor(n_estimators=2, branch=branch, trunk_max_leaves=2,
                                             random_state=0),
            SubsampleForestRegressor(n_estimators=2, n_subsamples=2, branch=branch,
                                     random_state=0),
        ):
            warm_regressor(model, X, y)
            model.compact().predict_summary(X[:50])


def _warm_piece(piece: tuple[str, bool], branch: str) -> float:
    """One part of :func:`warm_ensembles` that compiles apart from the others: ``("fit",
    wide)`` the fit kernels only, ``("predict", _)`` those of predicting, recalibrating,
    summarising, scoring and loading (on a model fit without the histogram kernels)."""
    from basics.tasks import REGRESSION
    from ebf import EmpiricalBayesianForestRegressor
    from ebf.learners import get_learner

    t0 = time.perf_counter()
    kind, wide = piece
    X, y = _regression_data(wide=wide)
    if kind == "fit":
        EmpiricalBayesianForestRegressor(n_estimators=2, branch=branch, trunk_max_leaves=2,
                                         calibrate="none", random_state=0).fit(X, y)
    else:
        cls = get_learner(branch).classes[REGRESSION]
        warm_regressor(cls(n_estimators=2, splitter="exact", random_state=0), X, y)
    return time.perf_counter() - t0


def _binned(branch: str) -> bool:
    """Whether ``branch`` learners are CART forests: histogram trees over bin codes by
    default (their kernels differ with the codes' width), scikit-learn's exact CART with
    ``splitter="exact"``."""
    from basics.tasks import REGRESSION
    from ebf.learners import get_learner

    return "splitter" in get_learner(branch).classes[REGRESSION]().get_params()


def _pieces(branch: str, widths: Sequence[bool]) -> list[tuple[str, bool]]:
    """The parts of :func:`warm_ensembles` that compile apart, the largest first; none if
    the learner's prediction kernels cannot be reached without its fit kernels (only CART
    learners fit by scikit-learn's exact splitter, which needs none of ours)."""
    if not _binned(branch):
        return []
    fits = [("fit", wide) for wide in widths]
    return [fits[0], ("predict", widths[0]), *fits[1:]]


def warm_workers(client: Any, branch: str | None = None, *,
                 widths: Sequence[bool] = (True, False), only_if_cold: bool = False,
                 progress: Callable[[str, int, int], None] | None = None) -> float:
    """Compile (the first time on a machine) or load the kernels of an EBF and an SSF with
    ``branch`` learners on every worker of ``client`` (:func:`warm_ensembles`).

    Compiling is split across the workers: one compiles the fit kernels while another
    compiles those of prediction and scoring (numba's compiler is single-threaded), and
    then every worker loads them all from the on-disk cache, which the workers of a local
    cluster share (on a cluster without a shared file system each worker compiles what it
    lacks, as before).

    Parameters
    ----------
    client : distributed.Client
    branch : str, optional
        The branch learner (:data:`ebf.learners.DEFAULT_BRANCH` by default).
    widths : sequence of bool, default=(True, False)
        Bin-code widths to compile for (True: two-byte codes, data with features of more
        than ``ebf.config.MAX_BINS`` distinct values; False: one-byte codes).
    only_if_cold : bool, default=False
        Do nothing if every worker finds the kernels in its cache (:func:`kernels_cached`).
    progress : callable ``progress(phase, done, total)``, optional
        Told ``("compile", 0, 0)`` if some worker lacks the kernels, else ``("warm-up", 0,
        0)``, before the work starts.

    Returns
    -------
    float
        Seconds spent (0.0 if nothing was done).

    Examples
    --------
    >>> from cluster import connect
    >>> with connect() as client:  # doctest: +SKIP
    ...     seconds = warm_workers(client)
    """
    from ebf.learners import DEFAULT_BRANCH

    branch = DEFAULT_BRANCH if branch is None else branch
    t0 = time.perf_counter()
    cold = not all(client.run(kernels_cached).values())
    if only_if_cold and not cold:
        return 0.0
    if progress is not None:
        progress("compile" if cold else "warm-up", 0, 0)
    workers = sorted(client.scheduler_info()["workers"])
    if cold and len(workers) > 1:
        pieces = _pieces(branch, widths)
        futures = [client.submit(_warm_piece, piece, branch, workers=[workers[i % len(workers)]],
                                 pure=False) for i, piece in enumerate(pieces)]
        for piece, seconds in zip(pieces, client.gather(futures), strict=True):
            logger.info("kernels of %s (%s) compiled in %.1f s", piece[0],
                        "two-byte codes" if piece[1] else "one-byte codes", seconds)
    client.run(warm_ensembles, branch, tuple(widths))
    return time.perf_counter() - t0
