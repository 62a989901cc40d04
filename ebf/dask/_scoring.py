"""``score`` of a fitted local model over Dask collections.

What scikit-learn's ``score`` gives on the computed data, in one pass over the partitions:
the coefficient of determination R² for regressors (``sklearn.metrics.r2_score``) and the
accuracy for classifiers (``accuracy_score``), both with optional sample weights. Every
partition returns a few sums (rows, weight, the weighted mean of the target and its
centred sum of squares, the squared or 0/1 errors); the driver combines them with the
pairwise update of Chan, Golub & LeVeque (1979), so no pass over the rows waits for the
mean of the target and the result does not depend on the partitioning beyond rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from basics.validation import MAX_ABS_TARGET, refuse_scored_targets

from ._predict import on_workers
from .graph import shared_model
from .sharded import PredictJob, sharded_blocks

__all__ = ["score"]

_TARGET, _WEIGHT = "__ebf_target__", "__ebf_weight__"


def _sums(y: np.ndarray, w: np.ndarray, pred: np.ndarray, classifier: bool) -> np.ndarray:
    """``[weight, weighted mean of y, centred sum of squares of y, weighted errors]``."""
    if y.size == 0:
        return np.zeros(4)
    if classifier:
        return np.array([w.sum(), 0.0, 0.0, float(w @ (pred != y))])
    y = y.astype(np.float64)
    total = w.sum()
    mean = float(w @ y / total) if total > 0 else 0.0
    return np.array([total, mean, float(w @ (y - mean) ** 2), float(w @ (y - pred) ** 2)])


def _partition_sums(part: pd.DataFrame, model: Any) -> np.ndarray:
    """:func:`_sums` of one partition (target in ``_TARGET``, weights in ``_WEIGHT``)."""
    if len(part) == 0:
        return np.zeros(4)
    w = (part[_WEIGHT].to_numpy(dtype=np.float64) if _WEIGHT in part.columns
         else np.ones(len(part)))
    X = part.drop(columns=[c for c in (_TARGET, _WEIGHT) if c in part.columns])
    return _sums(part[_TARGET].to_numpy(), w, model.predict(X), is_classifier(model))


class _ScoreJob:
    """The job of :func:`ebf.dask.sharded.sharded_blocks` behind :func:`score` for a model
    whose parts are on the workers: per row its weight and error (classifiers: 0/1) or its
    weight, target and predictive mean (regressors), from ``y`` = ``[target, weight]``."""

    def __init__(self, classes: Any, class_map: Any = None) -> None:
        self.classes, self.predict = classes, PredictJob(np.empty(0), class_map=class_map)

    def rows(self, output: Any, y: np.ndarray) -> np.ndarray:
        return self._rows(self.predict.rows(output, None), y)

    def part_rows(self, part: Any, A: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self._rows(self.predict.part_rows(part, A, None), y)

    def _rows(self, out: np.ndarray, y: np.ndarray) -> np.ndarray:
        w = y[:, 1].astype(np.float64)
        if self.classes is not None:
            wrong = self.classes[np.argmax(out, axis=1)] != y[:, 0]
            return np.column_stack([w, wrong.astype(np.float64)])
        return np.column_stack([w, y[:, 0].astype(np.float64), out[:, 0]])


def _block_sums(assembled: tuple, classifier: bool) -> np.ndarray:
    block = assembled[1]
    if block is None:
        return np.zeros(4)
    if classifier:  # errors are 0/1 already
        return _sums(np.zeros(len(block)), block[:, 0], block[:, 1], True)
    return _sums(block[:, 1], block[:, 0], block[:, 2], False)


def _combine(sums: np.ndarray) -> np.ndarray:
    """Partition sums combined in order (Chan et al.'s update of the mean and sum of squares)."""
    weight, mean, m2, errors = 0.0, 0.0, 0.0, 0.0
    for w, m, s, e in sums:
        if w <= 0:
            continue
        delta = m - mean
        new = weight + w
        mean += delta * w / new
        m2 += s + delta * delta * weight * w / new
        weight, errors = new, errors + e
    return np.array([weight, mean, m2, errors])


def score(model: Any, X: Any, y: Any, sample_weight: Any = None, client: Any = None) -> float:
    """R² (regressor) or accuracy (classifier) of ``model`` on Dask collections.

    Parameters
    ----------
    model : fitted local estimator
    X : dask.dataframe.DataFrame
    y : dask.dataframe.Series
        Partitioned like ``X``.
    sample_weight : dask.dataframe.Series, optional
        Partitioned like ``X``.
    client : distributed.Client, optional

    Returns
    -------
    float
        As ``model.score(X.compute(), y.compute(), sample_weight)`` up to rounding.

    Raises
    ------
    ValueError
        If ``X`` has no rows (or all weights are zero).

    Examples
    --------
    >>> score(model, ddf[features], ddf["y"])  # doctest: +SKIP
    0.87
    """
    import dask

    check_is_fitted(model, "encoder_")
    frame = X.assign(**{_TARGET: y})
    frame = frame.assign(**{_WEIGHT: 1.0 if sample_weight is None else sample_weight})
    classifier = is_classifier(model)
    if not classifier:  # the target alone, before the models predict a row
        _check_targets(y, client)
    live = on_workers(model, client)
    if live is not None:  # each branch scores its rows where it lives
        job = _ScoreJob(model.classes_, live.head().class_calibration) if classifier \
            else _ScoreJob(None)
        parts = [dask.delayed(_block_sums, pure=True)(b, classifier)
                 for b in sharded_blocks(live, frame, job, target=[_TARGET, _WEIGHT])]
    else:
        shared = shared_model(model)
        parts = [dask.delayed(_partition_sums, pure=True)(p, shared)
                 for p in frame.to_delayed()]
    sums = (dask.compute(*parts) if client is None
            else client.gather(client.compute(parts)))
    weight, _, m2, errors = _combine(np.asarray(sums, dtype=np.float64).reshape(-1, 4))
    if weight <= 0:
        raise ValueError("score needs rows with a positive weight; X has none.")
    if is_classifier(model):
        return float(1.0 - errors / weight)
    if m2 == 0.0:  # a constant target: as sklearn.metrics.r2_score
        return 1.0 if errors == 0.0 else 0.0
    return float(1.0 - errors / m2)


def _check_targets(y: Any, client: Any) -> None:
    """:func:`basics.validation.refuse_scored_targets` over the partitions of ``y``."""
    import dask

    beyond = y.abs() > MAX_ABS_TARGET
    tasks = (beyond.sum(), y.min(), y.max(), y.size)
    count, low, high, n = (dask.compute(*tasks) if client is None
                           else client.gather(client.compute(list(tasks))))
    refuse_scored_targets(int(count), str(y.name) if y.name is not None else "y", int(n),
                          float(low), float(high))
