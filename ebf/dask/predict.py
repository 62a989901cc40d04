"""Lazy predictions of a fitted local model over a dask DataFrame (``map_partitions``).

Every partition is predicted by the single-process model (EBF: each row by the branch of
its trunk leaf, Sec. 4; SSF: the pooled mixture of all sub-sample forests) in one pass
(``model.predict_summary``: one encode, one routing, one mixture per block), so the numbers
are those of ``model.predict(X.compute(), return_std=True)``,
``model.predict_quantiles(...)`` and ``model.predict_proba(...)``, bit for bit. The model
enters the graph once, as one ``dask.delayed`` key (:func:`shared_model`) every partition
task depends on: workers fetch it from each other, and if the worker holding a copy dies the
scheduler recomputes that key from the graph like any lost result, so a killed worker costs
a retry, never a hang or a lost-dependency error (data put on workers with ``scatter``
cannot be recomputed). Index and row order are kept; empty partitions give empty frames.

Columns: regressors ``mean``, ``std`` and one column per quantile level (``q05``, ``q50``,
``q95``, ...); classifiers ``proba_<class>`` per class and ``predicted``; EBF models also
``branch`` (the trunk leaf).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

logger = logging.getLogger(__name__)


def quantile_columns(levels: Sequence[float]) -> list[str]:
    """Column names of quantile levels: ``q`` + percent, two digits (``0.975 -> q97_5``).

    Examples
    --------
    >>> quantile_columns([0.05, 0.5, 0.95, 0.975])
    ['q05', 'q50', 'q95', 'q97_5']
    """
    out = []
    for q in levels:
        pct = round(100 * float(q), 6)
        name = f"q{int(pct):02d}" if pct == int(pct) else "q" + f"{pct:g}".replace(".", "_")
        out.append(name)
    if len(set(out)) != len(out):
        raise ValueError(f"quantile levels {list(levels)} give duplicated columns {out}.")
    return out


def _levels(quantiles: Any) -> np.ndarray:
    levels = np.atleast_1d(np.asarray(quantiles, dtype=np.float64))
    if levels.ndim != 1 or np.any(~((levels >= 0) & (levels <= 1))):
        raise ValueError(f"quantiles must be levels in [0, 1]; got {quantiles!r}.")
    return levels


def _class_dtype(classes: np.ndarray) -> np.dtype:
    return classes.dtype if classes.dtype.kind in "biuf" else np.dtype(object)


def output_meta(model: Any, quantiles: Any = (0.05, 0.5, 0.95)) -> pd.DataFrame:
    """Empty frame with the columns and dtypes :func:`predict_frame` produces.

    Parameters
    ----------
    model : fitted local EBF / SSF estimator
    quantiles : sequence of float
        Ignored for classifiers.

    Returns
    -------
    pandas.DataFrame
    """
    cols: dict[str, Any] = {}
    if is_classifier(model):
        for c in model.classes_:
            cols[f"proba_{c}"] = np.empty(0)
        cols["predicted"] = np.empty(0, _class_dtype(model.classes_))
    else:
        cols["mean"] = np.empty(0)
        cols["std"] = np.empty(0)
        for name in quantile_columns(_levels(quantiles)):
            cols[name] = np.empty(0)
    if hasattr(model, "trunk_"):
        cols["branch"] = np.empty(0, np.int64)
    if len(cols) != len(set(cols)):
        raise ValueError(f"prediction columns collide: {list(cols)}.")
    return pd.DataFrame({k: pd.Series(v, dtype=v.dtype) for k, v in cols.items()})


def _predict_partition(part: pd.DataFrame, model: Any, levels: np.ndarray,
                       meta: pd.DataFrame) -> pd.DataFrame:
    if len(part) == 0:
        return meta.set_axis(part.index[:0])
    # one encode, one routing and one mixture per block of rows: every column comes from
    # the same pass (numbers equal predict / predict_quantiles / apply bit for bit)
    cols: dict[str, Any] = {}
    summary = model.predict_summary(part) if is_classifier(model) else model.predict_summary(
        part, levels)
    if is_classifier(model):
        for j, c in enumerate(model.classes_):
            cols[f"proba_{c}"] = summary.proba[:, j]
        cols["predicted"] = summary.predicted
    else:
        cols["mean"], cols["std"] = summary.mean, summary.std
        for j, name in enumerate(meta.columns[2:2 + levels.size]):
            cols[name] = summary.quantiles[:, j]
    if "branch" in meta.columns:
        cols["branch"] = summary.branch
    return pd.DataFrame({k: pd.Series(v, index=part.index, dtype=meta[k].dtype)
                         for k, v in cols.items()}, index=part.index)


def _predict_series(part: pd.DataFrame, model: Any, meta: pd.Series) -> pd.Series:
    if len(part) == 0:
        return meta.set_axis(part.index[:0])
    return pd.Series(model.predict(part), index=part.index, name=meta.name, dtype=meta.dtype)


def shared_model(model: Any) -> Any:
    """``model`` as one key of a Dask graph, recomputable if the worker holding it dies.

    Parameters
    ----------
    model : object
        Any picklable object (a fitted local model).

    Returns
    -------
    dask.delayed.Delayed
        Pass it to ``map_partitions`` or ``dask.delayed`` calls in place of the model: the
        graph holds the pickled model once, each task holds its key.

    Examples
    --------
    >>> from dask import delayed
    >>> shared = shared_model({"scale": 2.0})
    >>> delayed(lambda m, x: m["scale"] * x)(shared, 3.0).compute()
    6.0
    """
    from dask import delayed

    return delayed(model, name=f"ebf-model-{uuid.uuid4().hex[:12]}", pure=True)


def _checked(model: Any, X: Any) -> Any:
    import dask.dataframe as dd

    check_is_fitted(model, "encoder_")
    if not isinstance(X, dd.DataFrame):
        raise TypeError(f"X must be a dask DataFrame, got {type(X).__name__}; call the local "
                        "model's predict methods on in-memory data.")
    # the schema (missing columns, kinds, dtypes) is checked on the empty meta, before
    # any data is read, by the same transform every partition will run
    model.encoder_.transform(X._meta, caller=type(model).__name__)
    return shared_model(model)


def predict_frame(model: Any, X: Any, quantiles: Sequence[float] = (0.05, 0.5, 0.95),
                  client: Any = None) -> Any:
    """Lazy per-row predictions of a fitted local EBF / SSF model.

    Parameters
    ----------
    model : fitted local estimator
        ``EmpiricalBayesianForest{Regressor,Classifier}`` or
        ``SubsampleForest{Regressor,Classifier}`` (e.g. ``DaskModel.to_local()`` or
        ``ebf.load(path)``).
    X : dask.dataframe.DataFrame
        Features by name (extra columns are ignored).
    quantiles : sequence of float, default=(0.05, 0.5, 0.95)
        Levels of the predictive quantile columns (regressors).
    client : distributed.Client, optional
        Not used: the result is lazy and runs wherever it is computed (the model travels in
        the graph). Accepted for the signature every ``ebf.dask`` function shares.

    Returns
    -------
    dask.dataframe.DataFrame
        Same index and partitions as ``X``; columns as in the module docstring.

    Examples
    --------
    >>> out = predict_frame(model, ddf[features])  # doctest: +SKIP
    >>> out.columns.tolist()  # doctest: +SKIP
    ['mean', 'std', 'q05', 'q50', 'q95', 'branch']
    """
    levels = _levels(quantiles)
    meta = output_meta(model, levels)
    shared = _checked(model, X)
    logger.info("prediction graph: %s over %d partition(s), columns %s", type(model).__name__,
                X.npartitions, list(meta.columns))
    return X.map_partitions(_predict_partition, shared, levels, meta, meta=meta,
                            align_dataframes=False)


def predict_series(model: Any, X: Any, client: Any = None) -> Any:
    """Lazy ``model.predict``: the predictive mean (regressors) or class (classifiers).

    Parameters
    ----------
    model : fitted local estimator
    X : dask.dataframe.DataFrame
    client : distributed.Client, optional
        As in :func:`predict_frame`.

    Returns
    -------
    dask.dataframe.Series
        Named ``mean`` (regressors) or ``predicted`` (classifiers), with the index of ``X``.

    Examples
    --------
    >>> predict_series(model, ddf[features]).compute()  # doctest: +SKIP
    """
    shared = _checked(model, X)
    if is_classifier(model):
        meta = pd.Series(np.empty(0, _class_dtype(model.classes_)), name="predicted")
    else:
        meta = pd.Series(np.empty(0), name="mean")
    return X.map_partitions(_predict_series, shared, meta, meta=meta, align_dataframes=False)
