"""In-memory scoring of probabilistic regressors: fit, predict, score and format the tables.

For a predictive distribution already in this process (``ebf flights``, the benchmarks);
a saved model on a dataset on the cluster is :mod:`pipelines.report.evaluate`'s job (what
``ebf evaluate`` runs). The metrics themselves live in :mod:`basics.metrics` (RMSE, NLPD,
calibration table); this module only runs them on a predictive distribution, times the fit /
predict phases and formats the results as text (the paper's Table 1 and Table 2 layout: one
row per model).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from basics import metrics
from basics.metrics import CALIBRATION_LEVELS

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_LEVELS",
    "before_after",
    "evaluate_regression",
    "fit_and_evaluate",
    "fit_with_posterior",
    "forest_gaussian",
    "format_calibration",
    "format_report",
    "result_to_json",
]

#: Nominal coverages of the central prediction intervals in the calibration table
#: (paper Table 2: 10% to 90% in steps of 10%; :data:`basics.metrics.CALIBRATION_LEVELS`).
DEFAULT_LEVELS: tuple[float, ...] = CALIBRATION_LEVELS

#: A predictive distribution: a ``basics.mixture.GaussianMixture`` (anything with a
#: ``.mean`` attribute that :mod:`basics.metrics` accepts) or a Gaussian ``(mean, std)``.
Distribution = Any


def _mean_of(dist: Distribution) -> np.ndarray:
    if isinstance(dist, tuple):
        return np.asarray(dist[0], dtype=np.float64)
    return np.asarray(dist.mean, dtype=np.float64)


def evaluate_regression(
    y: np.ndarray | pd.Series,
    dist: Distribution,
    levels: Sequence[float] = DEFAULT_LEVELS,
    *,
    intervals: str = "gaussian",
) -> dict[str, Any]:
    """Score a predictive distribution: RMSE, NLPD and the calibration table.

    NLPD always uses the full predictive distribution. The calibration intervals follow
    the paper's protocol by default (Sec. 5.2: "Gaussian quantiles using predictive mean
    and variance"); ``intervals="mixture"`` uses the exact central intervals of the mixture
    instead (much slower: one root solve per row and level).

    Parameters
    ----------
    y : array-like of shape (n,)
        Observed targets.
    dist : GaussianMixture or tuple of (mean, std)
        Predictive distribution for each of the ``n`` points: a
        ``basics.mixture.GaussianMixture`` (from ``predict_distribution``), or a
        Gaussian given by two arrays ``(mean, std)`` (e.g. :func:`forest_gaussian`).
    levels : sequence of float, default=DEFAULT_LEVELS
        Nominal coverages of the central intervals of the calibration table.
    intervals : {"gaussian", "mixture"}, default="gaussian"
        How the calibration intervals of a mixture are computed: from the Gaussian with the
        mixture's mean and variance (the paper's protocol), or from the mixture itself.
        Irrelevant when ``dist`` is already a ``(mean, std)`` Gaussian.

    Returns
    -------
    dict
        ``n`` (int), ``rmse`` (float), ``nlpd`` (float, mean over the points),
        ``calibration`` (DataFrame with columns ``level``, ``observed``,
        ``observed_minus_nominal``), all computed by :mod:`basics.metrics`, and
        ``intervals`` (str).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0.0, 1.0, -1.0])
    >>> res = evaluate_regression(y, (np.zeros(3), np.ones(3)))  # doctest: +SKIP
    >>> round(res["rmse"], 3)  # doctest: +SKIP
    0.816
    """
    if intervals not in ("gaussian", "mixture"):
        raise ValueError(f"intervals must be 'gaussian' or 'mixture', got {intervals!r}")
    y = np.asarray(y, dtype=np.float64)
    mean = _mean_of(dist)
    if mean.shape != y.shape:
        raise ValueError(
            f"the distribution has {mean.shape[0]} points but y has {y.shape[0]}; "
            "predict on the same rows you score"
        )
    if isinstance(dist, tuple):
        nlpd = metrics.gaussian_nlpd(y, dist[0], dist[1])
        interval_dist = dist
    else:
        nlpd = metrics.nlpd(y, dist)
        interval_dist = (mean, np.asarray(dist.std)) if intervals == "gaussian" else dist
    return {
        "n": int(y.shape[0]),
        "rmse": float(metrics.rmse(y, mean)),
        "nlpd": float(nlpd),
        "calibration": metrics.calibration_table(y, interval_dist, list(levels)),
        "intervals": intervals,
    }


def forest_gaussian(forest: Any, X: np.ndarray | pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian predictive of a scikit-learn forest from its per-tree predictions.

    The paper's approximation for forests without a predictive distribution (Sec. 5.2):
    mean = average of the trees' predictions, variance = variance of the trees' predictions.

    Parameters
    ----------
    forest : fitted sklearn ``RandomForestRegressor`` / ``ExtraTreesRegressor``
        Any fitted ensemble with an ``estimators_`` list of single-output regression trees.
    X : array-like of shape (n, d)
        Inputs to predict.

    Returns
    -------
    mean, std : ndarray of shape (n,)

    Examples
    --------
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((50, 2)); y = X[:, 0]
    >>> rf = RandomForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    >>> mean, std = forest_gaussian(rf, X)
    >>> mean.shape, bool((std >= 0).all())
    ((50,), True)
    """
    Xa = np.asarray(X, dtype=np.float32)  # sklearn trees work in float32 internally
    per_tree = np.stack([tree.predict(Xa) for tree in forest.estimators_])
    return per_tree.mean(axis=0), per_tree.std(axis=0)


def fit_with_posterior(estimator: Any, X: Any, y: Any) -> Any:
    """Fit, then predict one row so that a lazily computed posterior is part of the fit.

    ``MondrianForestRegressor`` computes its posterior at the first prediction; timing
    ``fit`` alone would move that cost into the predict phase.

    Parameters
    ----------
    estimator : estimator
        Unfitted estimator with ``fit(X, y)`` and ``predict(X)``.
    X, y : array-like
        Training data.

    Returns
    -------
    estimator
        The fitted estimator.
    """
    estimator.fit(X, y)
    estimator.predict(X[:1])
    return estimator


def fit_and_evaluate(
    estimator: Any,
    X_train: Any,
    y_train: Any,
    X_test: Any,
    y_test: Any,
    *,
    fit: Callable[[Any, Any, Any], Any] | None = None,
    predict: Callable[[Any, Any], Distribution] | None = None,
    levels: Sequence[float] = DEFAULT_LEVELS,
    intervals: str = "gaussian",
) -> dict[str, Any]:
    """Fit an estimator, predict a distribution on the test rows and score it.

    Parameters
    ----------
    estimator : estimator
        Unfitted estimator with ``fit(X, y)``.
    X_train, y_train, X_test, y_test : array-like
        Training and test data.
    fit : callable, optional
        ``fit(estimator, X_train, y_train)``, timed as the fit phase; by default
        ``estimator.fit(X_train, y_train)``. Use :func:`fit_with_posterior` for estimators
        that compute their posterior lazily at the first prediction.
    predict : callable, optional
        ``predict(fitted_estimator, X_test) -> dist``; by default
        ``estimator.predict_distribution(X_test)``. Use ``forest_gaussian`` for scikit-learn
        forests.
    levels : sequence of float, default=DEFAULT_LEVELS
        Nominal coverages of the calibration table.
    intervals : {"gaussian", "mixture"}, default="gaussian"
        Calibration intervals, see :func:`evaluate_regression`.

    Returns
    -------
    dict
        The keys of :func:`evaluate_regression` plus ``fit_seconds`` and
        ``predict_seconds`` (wall clock).

    Examples
    --------
    >>> from sklearn.ensemble import ExtraTreesRegressor  # doctest: +SKIP
    >>> res = fit_and_evaluate(ExtraTreesRegressor(10), X_tr, y_tr, X_te, y_te,
    ...                        predict=forest_gaussian)  # doctest: +SKIP
    """
    if fit is None:

        def fit(model: Any, X: Any, y: Any) -> Any:
            return model.fit(X, y)

    if predict is None:

        def predict(model: Any, X: Any) -> Distribution:
            return model.predict_distribution(X)

    name = type(estimator).__name__
    t0 = time.perf_counter()
    fit(estimator, X_train, y_train)
    fit_seconds = time.perf_counter() - t0
    logger.info("%s: fit on %d rows in %.2fs", name, len(y_train), fit_seconds)
    t0 = time.perf_counter()
    dist = predict(estimator, X_test)
    predict_seconds = time.perf_counter() - t0
    logger.info("%s: predicted %d rows in %.2fs", name, len(y_test), predict_seconds)
    result = evaluate_regression(y_test, dist, levels, intervals=intervals)
    result["fit_seconds"] = fit_seconds
    result["predict_seconds"] = predict_seconds
    return result


def result_to_json(result: Mapping[str, Any]) -> dict[str, Any]:
    """Make a result of :func:`evaluate_regression` JSON-serialisable.

    DataFrames (calibration, reliability, width groups, branches) become dicts of lists (NaN
    as None, so the JSON is strict), numpy scalars Python ones, nested results
    (``uncalibrated``, ``model_info``) likewise.

    Parameters
    ----------
    result : mapping
        Output of :func:`evaluate_regression` or :func:`fit_and_evaluate`.

    Returns
    -------
    dict
    """
    out: dict[str, Any] = {}
    for key, value in result.items():
        if isinstance(value, pd.DataFrame):  # NaN (a branch no row reached) as null
            out[key] = {col: [None if isinstance(v, float) and not np.isfinite(v) else v
                              for v in value[col].tolist()] for col in value.columns}
        elif isinstance(value, np.generic):
            out[key] = value.item()
        elif isinstance(value, Mapping) and key != "coverage":
            out[key] = result_to_json(value)  # nested scores (``uncalibrated``)
        else:
            out[key] = value
    return out


def _fmt(value: float | None, spec: str) -> str:
    if value is None or not np.isfinite(value):
        return "n/a" if value is None else str(value)
    return format(value, spec)


def format_report(
    results: Mapping[str, Mapping[str, Any]],
    *,
    title: str | None = None,
) -> str:
    """Format one or more evaluation results as two text tables.

    The first table has one row per model with RMSE, NLPD and (when present) CRPS, fit and
    predict times; the second is the calibration table (paper Table 2): observed minus
    nominal coverage of the central prediction intervals, one column per level.

    Parameters
    ----------
    results : mapping of str to dict
        Model name to the output of :func:`evaluate_regression` / :func:`fit_and_evaluate`.
    title : str, optional
        First line of the report.

    Returns
    -------
    str
        The report, without a trailing newline.

    Examples
    --------
    >>> print(format_report({"MF": res}, title="flights"))  # doctest: +SKIP
    """
    lines: list[str] = []
    if title:
        lines += [title, ""]
    width = max([5] + [len(name) for name in results])
    timed = any("fit_seconds" in r for r in results.values())
    crps = any("crps" in r for r in results.values())
    header = f"{'model':<{width}}  {'RMSE':>9}  {'NLPD':>8}"
    if crps:
        header += f"  {'CRPS':>8}"
    if timed:
        header += f"  {'fit [s]':>9}  {'predict [s]':>11}"
    lines += [header, "-" * len(header)]
    for name, r in results.items():
        row = f"{name:<{width}}  {_fmt(r['rmse'], '9.3f'):>9}  {_fmt(r['nlpd'], '8.3f'):>8}"
        if crps:
            row += f"  {_fmt(r.get('crps'), '8.3f'):>8}"
        if timed:
            row += f"  {_fmt(r.get('fit_seconds'), '9.2f'):>9}"
            row += f"  {_fmt(r.get('predict_seconds'), '11.2f'):>11}"
        lines.append(row)

    tables = {name: r["calibration"] for name, r in results.items() if "calibration" in r}
    if tables:
        lines += ["", *format_calibration(tables, width)]
    return "\n".join(lines)


def format_calibration(tables: Mapping[str, pd.DataFrame], width: int = 5,
                       note: str = "") -> list[str]:
    """The calibration table as text lines: one row per model, one column per level.

    Parameters
    ----------
    tables : mapping of model name to DataFrame
        ``basics.metrics.calibration_table`` outputs (``level``, ``observed_minus_nominal``).
    width : int, default=5
        Width of the model-name column.
    note : str, optional
        Inserted in the legend, e.g. ``"exact mixture intervals; "``.

    Returns
    -------
    list of str
    """
    width = max([width] + [len(name) for name in tables])
    levels = next(iter(tables.values()))["level"].tolist()
    header = f"{'model':<{width}}" + "".join(f"  {lvl:>6.0%}" for lvl in levels)
    lines = [
        "Calibration: observed minus nominal coverage of the central prediction intervals",
        f"({note}0 = calibrated, < 0 over-confident, > 0 under-confident)",
        header,
        "-" * len(header),
    ]
    for name, table in tables.items():
        diffs = table["observed_minus_nominal"].tolist()
        lines.append(f"{name:<{width}}" + "".join(f"  {d:>+6.3f}" for d in diffs))
    return lines


#: What the scores of a model's own mixture share with the model's result (the rows scored).
_SHARED = ("task", "target", "n", "n_missing_target")


def before_after(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Results with every recalibrated model shown twice: ``"<name> recalibrated"`` and
    ``"<name> uncalibrated"`` (its ``uncalibrated`` scores, with the rows scored and
    ``calibrated=False``), for tables and figures.

    Examples
    --------
    >>> list(before_after({"EBF": {"uncalibrated": {}}, "SSF": {}}))
    ['EBF recalibrated', 'EBF uncalibrated', 'SSF']
    """
    out: dict[str, Mapping[str, Any]] = {}
    for name, result in results.items():
        if "uncalibrated" in result:
            out[f"{name} recalibrated"] = result
            out[f"{name} uncalibrated"] = {
                **{k: result[k] for k in _SHARED if k in result},
                **result["uncalibrated"], "calibrated": False}
        else:
            out[name] = result
    return out
