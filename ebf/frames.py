"""The prediction frame: its columns, their dtypes, and one block of rows predicted into it.

Regressors give ``mean``, ``std`` and one column per quantile level (``q05``, ``q50``,
``q95``, ...); classifiers ``proba_<class>`` per class and ``predicted``; EBF models also
``branch`` (the trunk leaf). Every way of predicting a frame builds on
:func:`prediction_meta`: ``ebf.dask`` (a model whole on every worker, or branch by branch)
and the MLflow flavor (:mod:`ebf.mlflow`), which predict a block of rows with
:func:`predict_block`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import is_classifier

from basics.levels import DEFAULT_QUANTILES, check_levels

__all__ = ["checked_levels", "class_dtype", "output_meta", "predict_block", "prediction_meta",
           "quantile_columns"]


def quantile_columns(levels: Sequence[float]) -> list[str]:
    """Column names of quantile levels: ``q`` + percent, two digits (``0.975 -> q97_5``),
    to six decimals of a percent.

    Raises
    ------
    ValueError
        If two levels give one name, or a level other than 0 or 1 would be named as one
        (its percent rounds to 0 or 100).

    Examples
    --------
    >>> quantile_columns([0.05, 0.5, 0.95, 0.975, 0.9999999])
    ['q05', 'q50', 'q95', 'q97_5', 'q99_99999']
    >>> quantile_columns([1e-9])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: quantile level 1e-09 is too close to 0 to name its column (it would be q00, ...
    """
    out = []
    for q in levels:
        pct = round(100 * float(q), 6)
        name = (f"q{int(pct):02d}" if pct == int(pct)  # not :g, which rounds 99.99999 to 100
                else "q" + f"{pct:.6f}".rstrip("0").replace(".", "_"))
        if pct in (0.0, 100.0) and float(q) not in (0.0, 1.0):
            raise ValueError(
                f"quantile level {float(q)!r} is too close to {int(pct) // 100} to name its "
                f"column (it would be {name}, the name of level {int(pct) // 100}); use a "
                "level at least 1e-08 away from 0 and 1.")
        out.append(name)
    if len(set(out)) != len(out):
        given = [float(q) for q in levels]
        raise ValueError(f"quantile levels {given} give the columns {out}, some twice; give "
                         "each level once (levels closer than 1e-08 share a name).")
    return out


def checked_levels(quantiles: Any) -> np.ndarray:
    """``quantiles`` as a 1-d float64 array of levels (:func:`basics.levels.check_levels`)."""
    return np.atleast_1d(check_levels(quantiles, "quantiles"))


def class_dtype(classes: np.ndarray) -> Any:
    """The dtype of a ``predicted`` column: the classes' own if numeric, pandas' string
    dtype for text labels (Parquet stores an object column only if it can infer its type from
    values, and an empty frame has none), else object."""
    if classes.dtype.kind in "biuf":
        return classes.dtype
    if all(isinstance(c, str) for c in classes):
        return pd.StringDtype()
    return np.dtype(object)


def output_meta(model: Any, quantiles: Any = DEFAULT_QUANTILES) -> pd.DataFrame:
    """Empty frame with the columns and dtypes of :func:`predict_block` (and
    :func:`ebf.dask.predict_frame`).

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
    return prediction_meta(classes, hasattr(model, "trunk_"), checked_levels(quantiles))


def prediction_meta(classes: np.ndarray | None, branch: bool, levels: np.ndarray
                    ) -> pd.DataFrame:
    """Empty prediction frame: ``proba_<class>`` and ``predicted`` (``classes`` given), else
    ``mean``, ``std`` and the quantile columns of ``levels``; ``branch`` if ``branch``."""
    cols: dict[str, Any] = {}
    if classes is not None:
        for c in classes:
            cols[f"proba_{c}"] = np.empty(0)
        cols["predicted"] = pd.Series([], dtype=class_dtype(classes))
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


def predict_block(model: Any, X: Any, levels: np.ndarray, meta: pd.DataFrame) -> pd.DataFrame:
    """The prediction frame of the rows ``X`` (a pandas DataFrame) by a fitted local model.

    One encode, one routing and one mixture per block of rows (``model.predict_summary``):
    every column comes from the same pass, so the numbers equal ``predict``,
    ``predict_quantiles``, ``predict_proba`` and ``apply`` bit for bit.

    Parameters
    ----------
    model : fitted local EBF / SSF estimator
    X : pandas.DataFrame
        The features by name; its index becomes the frame's.
    levels : numpy.ndarray
        Quantile levels (:func:`checked_levels`; regressors).
    meta : pandas.DataFrame
        The empty frame of the model and levels (:func:`prediction_meta`,
        :func:`output_meta`): the columns and their dtypes.

    Returns
    -------
    pandas.DataFrame
    """
    if len(X) == 0:
        return meta.set_axis(X.index[:0])
    cols: dict[str, Any] = {}
    classifier = is_classifier(model)
    summary = model.predict_summary(X) if classifier else model.predict_summary(X, levels)
    if classifier:
        for j, c in enumerate(model.classes_):
            cols[f"proba_{c}"] = summary.proba[:, j]
        cols["predicted"] = summary.predicted
    else:
        cols["mean"], cols["std"] = summary.mean, summary.std
        for j, name in enumerate(meta.columns[2:2 + levels.size]):
            cols[name] = summary.quantiles[:, j]
    if "branch" in meta.columns:
        cols["branch"] = summary.branch
    return pd.DataFrame({k: pd.Series(v, index=X.index, dtype=meta[k].dtype)
                         for k, v in cols.items()}, index=X.index)
