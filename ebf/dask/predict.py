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
import os
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from basics.levels import check_levels

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
    return np.atleast_1d(check_levels(quantiles, "quantiles"))


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
    classes = model.classes_ if is_classifier(model) else None
    return prediction_meta(classes, hasattr(model, "trunk_"), _levels(quantiles))


def prediction_meta(classes: np.ndarray | None, branch: bool, levels: np.ndarray
                    ) -> pd.DataFrame:
    """Empty prediction frame: ``proba_<class>`` and ``predicted`` (``classes`` given), else
    ``mean``, ``std`` and the quantile columns of ``levels``; ``branch`` if ``branch``."""
    cols: dict[str, Any] = {}
    if classes is not None:
        for c in classes:
            cols[f"proba_{c}"] = np.empty(0)
        cols["predicted"] = np.empty(0, _class_dtype(classes))
    else:
        cols["mean"] = np.empty(0)
        cols["std"] = np.empty(0)
        for name in quantile_columns(levels):
            cols[name] = np.empty(0)
    if branch:
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


#: Rows up to this size (as float64 columns) come to a model held in this process instead of
#: the model going to the workers (:func:`small_frame`).
GATHER_BYTES = 256 * 2**20


def small_frame(frame: Any, client: Any = None, gather_bytes: int = GATHER_BYTES) -> Any:
    """``frame`` computed into this process if it is small, else None.

    A job that runs a model held in this process on a Dask DataFrame either sends the model
    to the workers (in the graph, one copy per worker: hundreds of MB for a Mondrian EBF)
    or brings the rows to the model. Rows of at most ``gather_bytes`` (rows x columns x 8
    bytes, counted in one pass) come here: a calibration slice or a holdout of a few
    thousand rows against a model of hundreds of MB.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
    client : distributed.Client, optional
    gather_bytes : int, default=GATHER_BYTES

    Returns
    -------
    pandas.DataFrame or None
    """
    def compute(collection: Any) -> Any:
        return collection.compute() if client is None else client.compute(collection).result()

    n_rows = int(compute(frame.shape[0]))
    if n_rows * frame.shape[1] * 8 > gather_bytes:
        return None
    return compute(frame)


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


def model_in_graph() -> Any:
    """A context without the "Sending large graph" warning: a graph built with
    :func:`shared_model` holds the model once, by design, which is what that warning advises.
    """
    import dask

    return dask.config.set({"distributed.admin.large-graph-warning-threshold": "64GiB"})


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
                  client: Any = None, strategy: str = "auto") -> Any:
    """Lazy per-row predictions of a fitted EBF / SSF model, in memory or saved.

    Parameters
    ----------
    model : fitted local estimator, ebf.reader.ModelReader, str or path-like
        An ``EmpiricalBayesianForest{Regressor,Classifier}`` or
        ``SubsampleForest{Regressor,Classifier}`` in memory (``DaskModel.to_local()``):
        it travels in the graph, one key every task shares. Or a saved model (a path or URL,
        or :func:`ebf.reader.open_model` of one): the driver reads its manifest and head
        only, and ``strategy`` says how the workers get the branches.
    X : dask.dataframe.DataFrame
        Features by name (extra columns are ignored).
    quantiles : sequence of float, default=(0.05, 0.5, 0.95)
        Levels of the predictive quantile columns (regressors).
    client : distributed.Client, optional
        Where the memory limits are read for ``strategy="auto"``; the default client if
        None. The result is lazy and runs wherever it is computed.
    strategy : {"auto", "broadcast", "sharded"}, default="auto"
        For a saved model: ``"broadcast"`` loads it whole on one worker and shares it with
        the others (one task per partition); ``"sharded"`` predicts every branch from its
        own shard (:mod:`ebf.dask.sharded`); ``"auto"`` chooses from the model's size and
        the workers' memory (:func:`ebf.dask.sharded.choose_strategy`). Same bits either way.

    Returns
    -------
    dask.dataframe.DataFrame
        Same index and partitions as ``X``; columns as in the module docstring.

    Examples
    --------
    >>> out = predict_frame("models/friedman", ddf[features])  # doctest: +SKIP
    >>> out.columns.tolist()  # doctest: +SKIP
    ['mean', 'std', 'q05', 'q50', 'q95', 'branch']
    """
    from ..reader import ModelReader, open_model

    levels = _levels(quantiles)
    if strategy not in ("auto", "broadcast", "sharded"):
        raise ValueError(f"strategy must be 'auto', 'broadcast' or 'sharded'; got {strategy!r}.")
    if isinstance(model, (str, os.PathLike)):
        model = open_model(model)
    if isinstance(model, ModelReader):
        return _predict_saved(model, X, levels, client, strategy)
    if strategy == "sharded":
        raise ValueError("strategy='sharded' predicts a saved model; save the model "
                         "(ebf.save) and pass its path, or use strategy='broadcast'.")
    meta = output_meta(model, levels)
    shared = _checked(model, X)
    logger.info("prediction graph: %s over %d partition(s), columns %s", type(model).__name__,
                X.npartitions, list(meta.columns))
    return X.map_partitions(_predict_partition, shared, levels, meta, meta=meta,
                            align_dataframes=False)


def _predict_saved(reader: Any, X: Any, levels: np.ndarray, client: Any, strategy: str) -> Any:
    from .client import current_client
    from .sharded import choose_strategy, predict_sharded, whole_model

    if strategy == "auto":
        strategy = choose_strategy(reader, current_client(client))
    if reader.format_version == 1 or reader.n_parts == 0:
        if strategy == "sharded":
            raise ValueError(f"the model at {reader.url!r} has no shards (format "
                             f"{reader.format_version}); use strategy='broadcast', or migrate "
                             "it: ebf.save(ebf.load(old), new)")
        return predict_frame(reader.load(), X, levels)  # small or old: the driver loads it
    if strategy == "sharded":
        return predict_sharded(reader, X, levels)
    head = reader.head()
    head.encoder.transform(X._meta, caller=type(head.estimator).__name__)  # schema first
    meta = prediction_meta(head.classes, head.trunk is not None, levels)
    logger.info("prediction graph: %s broadcast from %s over %d partition(s)",
                reader.manifest["class"], reader.url, X.npartitions)
    return X.map_partitions(_predict_partition, whole_model(reader), levels, meta, meta=meta,
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
