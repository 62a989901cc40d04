"""Lazy predictions of a fitted local model over a dask DataFrame (``map_partitions``).

Every row is predicted as the single-process model predicts it (EBF: by the branch of its
trunk leaf, Sec. 4; SSF: the pooled mixture of all sub-sample forests), so the numbers are
those of ``model.predict(X.compute(), return_std=True)``, ``model.predict_quantiles(...)``
and ``model.predict_proba(...)``, bit for bit. With a Dask client, an ensemble's parts are
on the workers (:mod:`ebf.dask.live`: where the Dask fit left them, or scattered once) and
the graph holds their keys only: every partition is encoded and routed by the trunk, and
each branch predicts its rows where it lives (:func:`ebf.dask.sharded.sharded_blocks`).
Without a client (Dask's local schedulers) every partition is predicted by the model in one
pass (``model.predict_summary``), the model one key of the graph
(:func:`ebf.dask.graph.shared_model`). Index and row order are kept; empty partitions give
empty frames.

Columns (:mod:`ebf.frames`): regressors ``mean``, ``std`` and one column per quantile
level (``q05``, ``q50``, ``q95``, ...); classifiers ``proba_<class>`` per class and
``predicted``; EBF models also ``branch`` (the trunk leaf).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from basics.levels import DEFAULT_QUANTILES

from ..artifact import ModelReader, open_model
from ..frames import checked_levels, class_dtype, output_meta, predict_block, prediction_meta
from .cache import settle_whole, whole_model
from .client import NoClientError, current_client
from .graph import shared_model
from .live import LiveModel, has_live_parts, is_ensemble, live_model
from .sharded import choose_strategy, predict_sharded

logger = logging.getLogger(__name__)


def _predict_partition(part: pd.DataFrame, saved: Any, levels: np.ndarray,
                       meta: pd.DataFrame) -> pd.DataFrame:
    if len(part) == 0:
        return meta.set_axis(part.index[:0])
    model = whole_model(saved)  # a saved model: loaded once per worker
    out = predict_block(model, part, levels, meta)
    settle_whole(saved, model)
    return out


def _predict_series(part: pd.DataFrame, model: Any, meta: pd.Series) -> pd.Series:
    if len(part) == 0:
        return meta.set_axis(part.index[:0])
    return pd.Series(model.predict(part), index=part.index, name=meta.name, dtype=meta.dtype)


def _checked(model: Any, X: Any) -> None:
    import dask.dataframe as dd

    check_is_fitted(model, "encoder_")
    if not isinstance(X, dd.DataFrame):
        raise TypeError(f"X must be a dask DataFrame, got {type(X).__name__}; call the local "
                        "model's predict methods on in-memory data.")
    # the schema (missing columns, kinds, dtypes) is checked on the empty meta, before
    # any data is read, by the same transform every partition will run
    model.encoder_.transform(X._meta, caller=type(model).__name__)


def on_workers(model: Any, client: Any = None) -> LiveModel | None:
    """The fitted local ensemble ``model`` with its parts on the workers of ``client`` (the
    default client if None; :func:`ebf.dask.live.live_model`), or None when no Dask client
    runs (the graph then runs in this process's scheduler and holds the model itself).

    Raises
    ------
    NoClientError
        If some parts of ``model`` are on workers but no client is running.
    """
    if not is_ensemble(model):
        return None
    if has_live_parts(model):
        return live_model(model, None)
    try:
        return live_model(model, current_client(client))
    except NoClientError:
        return None


def predict_frame(model: Any, X: Any, quantiles: Sequence[float] = DEFAULT_QUANTILES,
                  client: Any = None, strategy: str = "auto") -> Any:
    """Lazy per-row predictions of a fitted EBF / SSF model, in memory or saved.

    Parameters
    ----------
    model : fitted local estimator, ebf.artifact.ModelReader, str or path-like
        An ``EmpiricalBayesianForest{Regressor,Classifier}`` or
        ``SubsampleForest{Regressor,Classifier}`` in memory, its parts local (scattered to
        the workers once) or already there (a Dask estimator's ``model_``). Or a saved
        model (a path or URL, or :func:`ebf.artifact.open_model` of one): the driver reads
        its manifest and head only, and ``strategy`` says how the workers get the branches.
    X : dask.dataframe.DataFrame
        Features by name (extra columns are ignored).
    quantiles : sequence of float, default=DEFAULT_QUANTILES
        Levels of the predictive quantile columns (regressors).
    client : distributed.Client, optional
        Whose workers hold an in-memory model's parts, and where the memory limits are read
        for ``strategy="auto"``; the default client if None. The result is lazy and must be
        computed on that client's cluster when the model's parts are there.
    strategy : {"auto", "broadcast", "sharded"}, default="auto"
        For a saved model: ``"broadcast"`` loads it whole on one worker and shares it with
        the others (one task per partition); ``"sharded"`` predicts every branch from its
        own shard (:mod:`ebf.dask.sharded`); ``"auto"`` chooses from the model's size and
        the workers' memory (:func:`ebf.dask.sharded.choose_strategy`). Same bits either way.

    Returns
    -------
    dask.dataframe.DataFrame
        Same index and partitions as ``X``; columns as in the module docstring. Of a model
        whose parts are on the workers it cannot become a dask array (``to_dask_array``:
        Dask loses the parts' futures there, "lost dependencies"); compute, persist or
        write it, or use :func:`ebf.dask.distribution.predict_proba`.

    Examples
    --------
    >>> out = predict_frame("models/friedman", ddf[features])  # doctest: +SKIP
    >>> out.columns.tolist()  # doctest: +SKIP
    ['mean', 'std', 'q05', 'q50', 'q95', 'branch']
    """
    levels = checked_levels(quantiles)
    if strategy not in ("auto", "broadcast", "sharded"):
        raise ValueError(f"strategy must be 'auto', 'broadcast' or 'sharded'; got {strategy!r}.")
    if isinstance(model, (str, os.PathLike)):
        model = open_model(model)
    if isinstance(model, ModelReader):
        return _predict_saved(model, X, levels, client, strategy)
    if strategy == "sharded":
        raise ValueError("strategy='sharded' predicts a saved model; save the model "
                         "(ebf.save) and pass its path, or use strategy='broadcast'.")
    _checked(model, X)
    live = on_workers(model, client)
    if live is not None:
        return predict_sharded(live, X, levels)
    meta = output_meta(model, levels)
    logger.info("prediction graph: %s over %d partition(s), columns %s", type(model).__name__,
                X.npartitions, list(meta.columns))
    return X.map_partitions(_predict_partition, shared_model(model), levels, meta, meta=meta,
                            align_dataframes=False)


def _predict_saved(reader: Any, X: Any, levels: np.ndarray, client: Any, strategy: str) -> Any:
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
    return X.map_partitions(_predict_partition, reader, levels, meta, meta=meta,
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
    _checked(model, X)
    name = "predicted" if is_classifier(model) else "mean"
    live = on_workers(model, client)
    if live is not None:
        return predict_sharded(live, X, ())[name]
    if is_classifier(model):
        meta = pd.Series([], dtype=class_dtype(model.classes_), name=name)
    else:
        meta = pd.Series(np.empty(0), name=name)
    return X.map_partitions(_predict_series, shared_model(model), meta, meta=meta,
                            align_dataframes=False)
