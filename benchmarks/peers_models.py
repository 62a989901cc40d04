"""The models of ``bench_peers.py``: ours and the probabilistic peers, fit and scored.

Every runner takes a :class:`PeerTask` (train / test rows, the fit / calibration split) and
the options, and returns one row of scores (:func:`benchmarks.predictive.regression_scores`
or :func:`~benchmarks.predictive.classification_scores`) per variant, with its fit /
calibrate / predict seconds:

- ``EBF-default``: ``EmpiricalBayesianForestRegressor(random_state=seed)`` exactly as a user
  gets it (no other argument; it calibrates itself by default), fit on all training rows:
  one row;
- ours raw (all training rows) and ``+recal`` (fit rows, then ``recalibrate`` on the
  calibration rows); on a task with periods (the chronological flights) also ``+rolling``:
  the recalibrated model predicting the test rows month by month, its map updated with
  each month's outcomes before the next (:func:`ebf.calibration.rolling_recalibration`);
- density peers (CatBoost, NGBoost) raw and ``+CPS``: fit on the fit rows, then crepes'
  conformal predictive system on the calibration rows, normalised by the peer's std;
- quantile peers (quantile-forest, LightGBM) raw and ``+CQR``: fit on the fit rows, every
  level's quantile shifted by the calibration residuals' quantile
  (:func:`benchmarks.predictive.conformal_quantile_shifts`).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import timed
from benchmarks.predictive import (
    Mixture,
    Parametric,
    Pooled,
    QuantileGrid,
    StepDistribution,
    classification_scores,
    conformal_quantile_shifts,
    fit_cps,
    regression_scores,
)

log = logging.getLogger("bench_peers")

#: The model a user gets with no argument but the seed (the issue's targets are its).
DEFAULT = "EBF-default"
#: The default with one branch option fixed, one row each like it: the leaf prior of the
#: default before it was learnt (10 pseudo-rows), none (issue 43's heteroscedastic target
#: compares the learnt prior with it), and empirical leaves instead of Gaussian ones.
DEFAULT_WITH = {"EBF-prior10": {"leaf_prior_rows": 10.0},
                "EBF-noprior": {"leaf_prior_rows": None},
                "EBF-empirical": {"leaf_model": "empirical"}}
ONE_ROW = (DEFAULT, *DEFAULT_WITH)
OURS = (*ONE_ROW, "EBF-bayesian", "EBF-mondrian", "EBF-bart", "BF", "SSF")
PEERS = ("CatBoost", "NGBoost", "QRF", "LightGBM")
#: The models of a classification task (BART and the SSF have no classifier here).
CLASSIFIERS = ("EBF-bayesian", "EBF-mondrian", "BF", "CatBoost", "LightGBM")
#: Quantile levels of the quantile peers: quantile-forest predicts any, so a fine grid;
#: LightGBM one model per level.
QRF_LEVELS = np.round(np.arange(1, 100) / 100, 2)
LGBM_LEVELS = np.round(np.arange(1, 20) / 20, 2)
#: NGBoost's families: the Normal and the heavier-tailed Laplace. (Its Student-t, whose df
#: it learns per row, diverged to NaN gradients on Friedman #1 at the default settings.)
NGBOOST_FAMILIES = ("normal", "laplace")


@dataclass
class PeerTask:
    """The rows of one task, its calibration split and, for rolling recalibration, the
    period (month) of every test row."""

    name: str
    kind: str  # "regression" or "classification"
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    description: str
    fit_rows: np.ndarray
    cal_rows: np.ndarray
    cal_method: str
    periods: np.ndarray | None = None

    def part(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.X_train[rows], self.y_train[rows]


def _row(method: str, base: str, variant: str, scores: dict, fit_s: float, cal_s: float,
         pred_s: float, **extra: Any) -> dict[str, Any]:
    return {"method": method, "model": base, "ours": base in OURS, "variant": variant,
            **scores, "fit_seconds": fit_s, "calibrate_seconds": cal_s,
            "predict_seconds": pred_s, **extra}


# ---------------------------------------------------------------- ours


def make_ours(name: str, cfg: argparse.Namespace, kind: str = "regression") -> Any:
    """A fresh model of ours (:data:`OURS`) for a regression or classification task."""
    import ebf

    reg = kind == "regression"
    if name in ONE_ROW:
        if not reg:
            raise ValueError(f"{name} is a regressor; classification tasks run "
                             f"{CLASSIFIERS}.")
        if name in DEFAULT_WITH:
            return ebf.EmpiricalBayesianForestRegressor(random_state=cfg.seed,
                                                        branch_params=DEFAULT_WITH[name])
        return ebf.EmpiricalBayesianForestRegressor(random_state=cfg.seed)
    common = dict(random_state=cfg.seed, n_jobs=cfg.n_jobs)
    if name.startswith("EBF-"):
        branch = name[4:]
        trees = {"bayesian": cfg.trees, "mondrian": cfg.mondrian_trees,
                 "bart": cfg.bart_trees}[branch]
        params = ({"n_iter": cfg.bart_iter, "burn_in": cfg.bart_iter // 3}
                  if branch == "bart" else None)
        cls = (ebf.EmpiricalBayesianForestRegressor if reg
               else ebf.EmpiricalBayesianForestClassifier)
        return cls(branch=branch, n_estimators=trees, branch_params=params, **common)
    if name == "BF":
        cls = ebf.BayesianForestRegressor if reg else ebf.BayesianForestClassifier
        return cls(n_estimators=cfg.trees, **common)
    if name == "SSF":
        return ebf.SubsampleForestRegressor(n_estimators=cfg.trees, **common)
    raise ValueError(f"unknown model {name!r}; ours are {OURS}")


def capped(rows: np.ndarray, cap: int, seed: int) -> np.ndarray:
    """``rows``, or a seeded subset of ``cap`` of them, in their order (0: no cap)."""
    if not cap or rows.size <= cap:
        return rows
    keep = np.random.default_rng([seed, 31]).choice(rows.size, cap, replace=False)
    return rows[np.sort(keep)]


def _cap(name: str, cfg: argparse.Namespace) -> int:
    """The row cap of model ``name``: ``--bart-rows`` for EBF-bart, ``--ngboost-rows`` for
    NGBoost, none otherwise."""
    return {"EBF-bart": cfg.bart_rows, "NGBoost": cfg.ngboost_rows}.get(name, 0)


def _fit(model: Any, X: np.ndarray, y: np.ndarray) -> float:
    def fit() -> None:
        model.fit(X, y)
        model.predict(X[:1])  # lazy posteriors (Mondrian) belong to the fit time
    return timed(fit)[1]


def run_ours(name: str, task: PeerTask, cfg: argparse.Namespace) -> list[dict[str, Any]]:
    """``name`` raw, ``+recal`` and (with periods) ``+rolling``; classification: raw;
    :data:`ONE_ROW`: one row, as a user fits it (its own calibration is in its fit time)."""
    from ebf.calibration import rolling_recalibration

    all_rows = capped(np.arange(task.y_train.size), _cap(name, cfg), cfg.seed)
    extra = {"n_fit": int(all_rows.size)}
    model = make_ours(name, cfg, task.kind)
    fit_s = _fit(model, *task.part(all_rows))
    if task.kind == "classification":
        proba, pred_s = timed(lambda: model.predict_proba(task.X_test))
        return [_row(name, name, "raw", classification_scores(task.y_test, proba), fit_s,
                     0.0, pred_s, **extra)]
    dist, pred_s = timed(lambda: Mixture(model.predict_distribution(task.X_test)))
    variant = "default" if name in ONE_ROW else "raw"
    if name in ONE_ROW:  # the leaf prior strength every branch chose
        extra["leaf_prior_rows"] = [getattr(b, "leaf_prior_rows_", None)
                                    for b in model.branches_]
    rows = [_row(name, name, variant, regression_scores(task.y_test, dist), fit_s, 0.0,
                 pred_s, **extra)]
    if name in ONE_ROW:
        return rows
    fit_rows = capped(task.fit_rows, _cap(name, cfg), cfg.seed)
    model = make_ours(name, cfg, task.kind)
    fit_s = _fit(model, *task.part(fit_rows))
    cal_s = timed(lambda: model.recalibrate(*task.part(task.cal_rows)))[1]
    dist, pred_s = timed(lambda: Mixture(model.predict_distribution(task.X_test)))
    extra = {"n_fit": int(fit_rows.size)}
    rows.append(_row(f"{name}+recal", name, "recal", regression_scores(task.y_test, dist),
                     fit_s, cal_s, pred_s, **extra))
    if task.periods is not None:
        from benchmarks.rolling_calibration import window_rows

        history = task.part(task.cal_rows)
        window = window_rows(history[0], cfg.window_days)

        def rolling() -> Pooled:
            return Pooled([Mixture(d) for _, d in rolling_recalibration(
                model, task.X_test, task.y_test, task.periods, history=history,
                window=window)])
        dist, pred_s = timed(rolling)
        rows.append(_row(f"{name}+rolling", name, "rolling",
                         regression_scores(task.y_test, dist), fit_s, cal_s, pred_s, **extra))
    return rows


def warm_up(cfg: argparse.Namespace, models: list[str]) -> None:
    """Compile (or load from numba's cache) the kernels of every selected model of ours: a
    fit, a recalibration, a prediction and the scores, so that the first task's times do
    not include them."""
    rng = np.random.default_rng(0)
    X, y = rng.random((400, 3)), rng.normal(size=400)
    small = argparse.Namespace(**{**vars(cfg), "trees": 2, "mondrian_trees": 2,
                                  "bart_trees": 2, "bart_iter": 6})
    for name in (m for m in models if m in OURS):
        model = make_ours(name, small).fit(X[:300], y[:300]).recalibrate(X[300:], y[300:])
        regression_scores(y[:50], Mixture(model.predict_distribution(X[:50])))
        regression_scores(np.round(y[:50]), Mixture(model.predict_distribution(X[:50])))
        if name in CLASSIFIERS:
            make_ours(name, small, "classification").fit(X[:300], y[:300] > 0).predict_proba(
                X[:50])


# ---------------------------------------------------------------- peers


def _classifier_rows(name: str, model: Any, task: PeerTask) -> list[dict[str, Any]]:
    """A peer classifier fit on all the training rows and scored on the test rows."""
    fit_s = timed(lambda: model.fit(task.X_train, task.y_train))[1]
    proba, pred_s = timed(lambda: model.predict_proba(task.X_test))
    return [_row(name, name, "raw", classification_scores(task.y_test, proba), fit_s, 0.0,
                 pred_s, n_fit=int(task.y_train.size))]


def _density_rows(name: str, task: PeerTask, raw: tuple[Any, float, float],
                  fitted: tuple[Any, Any, float, float, float],
                  n_fit: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """Rows of a density peer: ``raw = (test distribution, fit s, predict s)`` of the model
    fit on all training rows, ``fitted = (test distribution, calibration-rows distribution,
    fit s, calibration-rows predict s, test predict s)`` of the model fit on the fit rows,
    conformalized by crepes' CPS normalised by its std; ``n_fit``: the rows of the two
    fits (default all training rows and the fit rows)."""
    n_raw, n_fitted = n_fit or (task.y_train.size, task.fit_rows.size)
    dist, fit_s, pred_s = raw
    rows = [_row(name, name, "raw", regression_scores(task.y_test, dist), fit_s, 0.0, pred_s,
                 n_fit=int(n_raw))]
    test, cal, fit_s, cal_pred_s, pred_s = fitted
    cps, cps_s = timed(lambda: fit_cps(task.y_train[task.cal_rows], cal.mean, cal.std))
    step = StepDistribution(test.mean, test.std, cps.alphas)
    rows.append(_row(f"{name}+CPS", name, "CPS", regression_scores(task.y_test, step), fit_s,
                     cal_pred_s + cps_s, pred_s, n_fit=int(n_fitted)))
    return rows


def run_catboost(task: PeerTask, cfg: argparse.Namespace) -> list[dict[str, Any]]:
    """CatBoost with ``RMSEWithUncertainty``: its predictive Gaussian from the virtual
    ensembles (mean, and the total variance: knowledge + data uncertainty); or the
    classifier's probabilities."""
    import catboost

    common = dict(iterations=cfg.catboost_iterations, random_seed=cfg.seed, verbose=0,
                  thread_count=cfg.n_jobs, allow_writing_files=False)
    if task.kind == "classification":
        return _classifier_rows("CatBoost", catboost.CatBoostClassifier(**common), task)

    def fit(rows: np.ndarray) -> tuple[Any, float]:
        model = catboost.CatBoostRegressor(loss_function="RMSEWithUncertainty",
                                           posterior_sampling=True, **common)
        return model, timed(lambda: model.fit(*task.part(rows)))[1]

    def predict(model: Any, X: np.ndarray) -> tuple[Mixture, float]:
        def run() -> Mixture:
            p = model.virtual_ensembles_predict(X, prediction_type="TotalUncertainty",
                                                virtual_ensembles_count=10)
            return Mixture((p[:, 0], np.sqrt(p[:, 1] + p[:, 2])))
        return timed(run)

    raw, raw_fit_s = fit(np.arange(task.y_train.size))
    raw_test, raw_pred_s = predict(raw, task.X_test)
    model, fit_s = fit(task.fit_rows)
    cal, cal_s = predict(model, task.X_train[task.cal_rows])
    test, pred_s = predict(model, task.X_test)
    return _density_rows("CatBoost", task, (raw_test, raw_fit_s, raw_pred_s),
                         (test, cal, fit_s, cal_s, pred_s))


def run_ngboost(task: PeerTask, cfg: argparse.Namespace) -> list[dict[str, Any]]:
    """NGBoost's :data:`NGBOOST_FAMILIES`, run by ``benchmarks/peer_ngboost.py`` with the
    python of ``cfg.peer_python`` (an environment with the ``ngboost-peer`` extra)."""
    if not cfg.peer_python:
        log.warning("no --peer-python: NGBoost skipped")
        return []
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "data.npz", Path(tmp) / "out.npz"
        cap = _cap("NGBoost", cfg)
        raw_rows = capped(np.arange(task.y_train.size), cap, cfg.seed)
        fit_rows = capped(task.fit_rows, cap, cfg.seed)
        np.savez(inp, X_train=task.X_train, y_train=task.y_train, X_test=task.X_test,
                 raw_rows=raw_rows, fit_rows=fit_rows, cal_rows=task.cal_rows)
        cmd = [cfg.peer_python, str(Path(__file__).with_name("peer_ngboost.py")),
               "--data", str(inp), "--out", str(out), "--dists", *NGBOOST_FAMILIES,
               "--n-estimators", str(cfg.ngboost_iterations), "--seed", str(cfg.seed)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"NGBoost peer failed ({done.returncode}):\n{done.stderr}")
        d = dict(np.load(out))
    rows = []
    for family in NGBOOST_FAMILIES:
        def dist(prefix: str, family: str = family) -> Any:
            loc, scale = d[f"{prefix}_loc"], d[f"{prefix}_scale"]
            if family == "normal":
                return Mixture((loc, scale))
            return Parametric(family, loc, scale, d.get(f"{prefix}_df"))

        def seconds(key: str, family: str = family) -> float:
            return float(d[f"{family}_{key}_seconds"])

        name = f"NGBoost-{family}"
        for r in _density_rows(
                name, task, (dist(f"{family}_raw_test"), seconds("raw_fit"),
                             seconds("raw_test")),
                (dist(f"{family}_fit_test"), dist(f"{family}_fit_cal"), seconds("fit_fit"),
                 seconds("fit_cal"), seconds("fit_test")), (raw_rows.size, fit_rows.size)):
            rows.append({**r, "model": "NGBoost"})
    return rows


# ---------------------------------------------------------------- quantile peers


def _quantile_rows(name: str, task: PeerTask, levels: np.ndarray,
                   fit: Callable[[np.ndarray], Any],
                   predict: Callable[[Any, np.ndarray], tuple[np.ndarray, np.ndarray]],
                   ) -> list[dict[str, Any]]:
    """Rows of a quantile peer: ``fit(rows) -> model``, ``predict(model, X) -> (quantiles
    at levels, point prediction)``; raw on all training rows, ``+CQR`` fit on the fit rows
    and shifted by :func:`~benchmarks.predictive.conformal_quantile_shifts`."""
    raw, fit_s = timed(lambda: fit(np.arange(task.y_train.size)))
    (q, point), pred_s = timed(lambda: predict(raw, task.X_test))
    rows = [_row(name, name, "raw", regression_scores(task.y_test, QuantileGrid(levels, q),
                                                      point), fit_s, 0.0, pred_s,
                 n_fit=int(task.y_train.size))]
    model, fit_s = timed(lambda: fit(task.fit_rows))

    def calibrate() -> np.ndarray:
        q_cal = predict(model, task.X_train[task.cal_rows])[0]
        return conformal_quantile_shifts(levels, q_cal, task.y_train[task.cal_rows])

    shifts, cal_s = timed(calibrate)
    (q, point), pred_s = timed(lambda: predict(model, task.X_test))
    rows.append(_row(f"{name}+CQR", name, "CQR", regression_scores(
        task.y_test, QuantileGrid(levels, q + shifts), point), fit_s, cal_s, pred_s,
        n_fit=int(task.fit_rows.size)))
    return rows


def run_qrf(task: PeerTask, cfg: argparse.Namespace) -> list[dict[str, Any]]:
    """quantile-forest's ``RandomForestQuantileRegressor`` at :data:`QRF_LEVELS`; its mean
    prediction is the point."""
    from quantile_forest import RandomForestQuantileRegressor

    def fit(rows: np.ndarray) -> Any:
        return RandomForestQuantileRegressor(n_estimators=cfg.qrf_trees, n_jobs=cfg.n_jobs,
                                             random_state=cfg.seed).fit(*task.part(rows))

    def predict(model: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(model.predict(X, quantiles=QRF_LEVELS.tolist())),
                np.asarray(model.predict(X, quantiles="mean")))

    return _quantile_rows("QRF", task, QRF_LEVELS, fit, predict)


def run_lightgbm(task: PeerTask, cfg: argparse.Namespace) -> list[dict[str, Any]]:
    """LightGBM, objective ``quantile``, one model per level of :data:`LGBM_LEVELS` and an
    L2 model for the mean; or the classifier. ``cfg.peer_threads`` OpenMP threads."""
    import lightgbm as lgb

    common = dict(n_estimators=cfg.lgbm_iterations, random_state=cfg.seed,
                  n_jobs=cfg.peer_threads, verbose=-1)
    if task.kind == "classification":
        return _classifier_rows("LightGBM", lgb.LGBMClassifier(**common), task)

    def fit(rows: np.ndarray) -> list[Any]:
        X, y = task.part(rows)
        models = [lgb.LGBMRegressor(objective="quantile", alpha=float(a), **common).fit(X, y)
                  for a in LGBM_LEVELS]
        return models + [lgb.LGBMRegressor(**common).fit(X, y)]

    def predict(models: list[Any], X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.column_stack([m.predict(X) for m in models[:-1]]), models[-1].predict(X))

    return _quantile_rows("LightGBM", task, LGBM_LEVELS, fit, predict)


PEER_RUNNERS: dict[str, Callable[[PeerTask, argparse.Namespace], list[dict]]] = {
    "CatBoost": run_catboost, "NGBoost": run_ngboost, "QRF": run_qrf,
    "LightGBM": run_lightgbm}
