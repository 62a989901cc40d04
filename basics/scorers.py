"""Scorers of predictive distributions for scikit-learn's model selection
(``GridSearchCV(scoring=...)``, ``cross_val_score``): callables ``scorer(estimator, X, y,
sample_weight=None)``, greater is better."""

from __future__ import annotations

from typing import Any

import numpy as np

from .metrics import crps_rows

__all__ = ["neg_crps_scorer"]


def neg_crps_scorer(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
    """Scorer of a regressor's predictive distributions: minus the (weighted) mean CRPS
    (:func:`crps_rows`) of ``estimator.predict_distribution(X)`` at ``y``.

    A callable scorer for scikit-learn's model selection (``GridSearchCV(...,
    scoring=neg_crps_scorer)``, ``cross_val_score``): greater is better, as for
    ``"neg_mean_squared_error"``. ``score`` stays R², as scikit-learn expects of a regressor.
    A Dask estimator's distribution (:class:`ebf.dask.DaskDistribution`) is scored partition
    by partition on the cluster, ``y`` and ``sample_weight`` partitioned like ``X``.

    Parameters
    ----------
    estimator : fitted regressor with ``predict_distribution``
    X : array-like, DataFrame or dask DataFrame
    y : array-like of shape (n_samples,), or a dask Series
    sample_weight : array-like of shape (n_samples,), optional

    Returns
    -------
    float
        ``-mean CRPS``, in the units of ``y``.

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV
    >>> search = GridSearchCV(model, {"min_samples_leaf": [5, 20]},
    ...                       scoring=neg_crps_scorer)  # doctest: +SKIP
    """
    dist = estimator.predict_distribution(X)
    if hasattr(dist, "mean_crps"):  # a lazy distribution: reduced where its rows are
        return -float(dist.mean_crps(y, sample_weight))
    rows = crps_rows(dist, y)
    return -float(np.average(rows, weights=sample_weight))
