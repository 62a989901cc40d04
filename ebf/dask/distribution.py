"""The distribution API of a regressor over a dask DataFrame: quantiles and the predictive
distribution, lazily, one partition per task; and class probabilities of a classifier.

What the local estimators give on ``X.compute()``, partition by partition, computed where
the model is (:func:`ebf.dask._predict.on_workers`: each branch of a model fit on the
cluster where the fit left it, so no graph carries a model; a saved model shard by shard,
:func:`ebf.dask.sharded.sharded_blocks`; without a client, the model one key of the graph):

- :func:`predict_quantiles` a dask array of ``model.predict_quantiles`` (the quantiles of
  every row's recalibrated distribution, bit for bit: one summary per branch and row, as in
  :func:`ebf.dask.predict_frame`);
- :func:`predict_distribution` a :class:`DaskDistribution`: one
  :class:`~basics.mixture.GaussianMixture` (or, with a recalibration map,
  :class:`~basics.pit.RecalibratedDistribution`) per partition, with their methods
  (``mean``, ``std``, ``quantile``, ``cdf``, ``logpdf``, ``interval``, ...) as dask arrays
  and ``crps`` for scoring (:func:`basics.scorers.neg_crps_scorer`);
- :func:`predict_proba` a dask array of ``model.predict_proba``.

Row counts per block are unknown until computed, as for ``X.to_dask_array()``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import is_classifier

from basics.levels import DEFAULT_QUANTILES
from basics.metrics import crps_rows
from basics.mixture import GaussianMixture
from basics.pit import RecalibratedDistribution

from ..artifact import ModelReader, open_model
from ..ensemble import pad_rows
from ..frames import checked_levels
from ._predict import _checked, on_workers
from .graph import shared_model
from .sharded import PredictJob, part_output, sharded_blocks

__all__ = ["DaskDistribution", "DistributionJob", "predict_distribution", "predict_proba",
           "predict_quantiles"]


#: Columns a distribution's targets (and weights) ride in beside the features, so that each
#: partition's rows and targets are the same rows however Dask partitions the input.
_TARGET, _WEIGHT = "__ebf_target__", "__ebf_weight__"


class DistributionJob:
    """The job of :func:`ebf.dask.sharded.sharded_blocks` whose rows are predictive mixtures:
    each branch's mixture of its rows (an SSF's pooled mixture as it is), with the rows'
    targets if any, joined into the mixture of the partition's rows in order
    (:func:`ebf.ensemble.pad_rows`, as the local EBF joins a block's branches)."""

    def rows(self, output: Any, y: Any) -> tuple:
        return output, y

    def part_rows(self, part: Any, A: np.ndarray, y: Any) -> tuple:
        return part_output(part, A), y

    @staticmethod
    def join(pieces: list, n: int) -> tuple | None:
        if not pieces:
            return None
        mixture = pad_rows([(pos, out[0]) for pos, out in pieces], n)
        first = pieces[0][1][1]
        if first is None:
            return mixture, None
        y = np.full((n, *np.shape(first)[1:]), np.nan)
        for pos, (_, values) in pieces:
            y[pos] = values
        return mixture, y


def _empty_mixture() -> GaussianMixture:
    return GaussianMixture(np.ones((0, 1)), np.zeros((0, 1)), np.ones((0, 1)))


def _with_map(mixture: GaussianMixture, pit_map: Any) -> Any:
    return mixture if pit_map is None else RecalibratedDistribution(mixture, pit_map)


def _assembled_distribution(assembled: tuple, pit_map: Any) -> tuple:
    """``(distribution, targets or None)`` of one partition from its assembled ``(index,
    (mixture, targets), branch)``: the model's mixture, recalibrated by ``pit_map`` if it
    has one."""
    block = assembled[1]
    if block is None:
        return _with_map(_empty_mixture(), pit_map), np.empty((0, 2))
    return _with_map(block[0], pit_map), block[1]


def _model_distribution(part: pd.DataFrame, model: Any, target: list | None) -> tuple:
    """``(model.predict_distribution(rows), targets or None)`` of one partition (a model
    held whole)."""
    y = None if target is None else part[target].to_numpy(dtype=np.float64)
    if len(part) == 0:
        return _with_map(_empty_mixture(), getattr(model, "recalibration_", None)), y
    features = part if target is None else part.drop(columns=target)
    return model.predict_distribution(features), y


def _block_columns(assembled: tuple, start: int, width: int) -> np.ndarray:
    block = assembled[1]
    return np.empty((0, width)) if block is None else block[:, start:start + width]


def _model_call(part: pd.DataFrame, model: Any, method: str, width: int, *args: Any
                ) -> np.ndarray:
    if len(part) == 0:
        return np.empty((0, width))
    return getattr(model, method)(part, *args)


def _source(model: Any, X: Any, client: Any) -> tuple[Any, Any]:
    """``(model, source)``: ``source`` predicts part by part (a model whose parts are on the
    workers, or a saved model read shard by shard) or is None (``model`` is held whole: an
    in-memory model without a client, a non-ensemble, or an old saved model)."""
    if isinstance(model, (str, os.PathLike)):
        model = open_model(model)
    if isinstance(model, ModelReader):
        if model.format_version == 1 or model.n_parts == 0:
            model = model.load()  # small or old: one piece, loaded here
        else:
            return model, model
    _checked(model, X)
    return model, on_workers(model, client)


def _classes(model: Any) -> Any:
    return model.head().classes if isinstance(model, ModelReader) else (
        model.classes_ if is_classifier(model) else None)


def _require(model: Any, classifier: bool, what: str) -> None:
    if (_classes(model) is not None) != classifier:
        wanted, got = ("classifier", "regressor") if classifier else ("regressor", "classifier")
        raise TypeError(f"{what} needs a fitted {wanted}; got a {got}.")


def _array(tasks: list, width: int | None) -> Any:
    """One dask array of per-partition blocks of unknown length (``width`` None: 1-d)."""
    import dask.array as da

    tail = () if width is None else (width,)
    blocks = [da.from_delayed(t, shape=(np.nan, *tail), dtype=np.float64) for t in tasks]
    return da.concatenate(blocks, axis=0) if blocks else da.empty((0, *tail))


def _columns(model: Any, source: Any, X: Any, job: Callable[[Any], Any], start: int,
             width: int, method: str, *args: Any) -> Any:
    """A dask array of ``width`` columns per row of ``X``: columns ``start:start + width`` of
    the rows of ``job(head)`` (:class:`ebf.dask.sharded.PredictJob`) where the parts are, or
    ``model.<method>(rows, *args)`` of a model held whole (``source`` None)."""
    from dask import delayed

    if source is not None:
        tasks = [delayed(_block_columns, pure=True)(b, start, width)
                 for b in sharded_blocks(source, X, job(source.head()))]
    else:
        shared = shared_model(model)
        tasks = [delayed(_model_call, pure=True)(p, shared, method, width, *args)
                 for p in X.to_delayed()]
    return _array(tasks, width)


def predict_quantiles(model: Any, X: Any, q: Any = DEFAULT_QUANTILES,
                      client: Any = None) -> Any:
    """Lazy quantiles of every row's predictive distribution (recalibrated, if the model has
    a map): a dask array, one block per partition of ``X``.

    Parameters
    ----------
    model : fitted local EBF / SSF regressor, its parts local or on the workers, or a saved
        model (a path or URL, or :func:`ebf.artifact.open_model` of one)
    X : dask.dataframe.DataFrame
    q : float or sequence of float, default=DEFAULT_QUANTILES
        Levels in [0, 1].
    client : distributed.Client, optional
        As in :func:`ebf.dask.predict_frame`.

    Returns
    -------
    dask.array.Array of shape (n_rows, n_levels)
        ``model.predict_quantiles(X.compute(), q)``, bit for bit.

    Examples
    --------
    >>> predict_quantiles(model, ddf[features], [0.1, 0.9]).compute()  # doctest: +SKIP
    """
    levels = checked_levels(q)
    model, source = _source(model, X, client)
    _require(model, False, "predict_quantiles")
    return _columns(model, source, X, lambda head: PredictJob(levels, head.recalibration),
                    2, levels.size, "predict_quantiles", levels)  # after mean and std


def predict_proba(model: Any, X: Any, client: Any = None) -> Any:
    """Lazy class probabilities of a fitted classifier: a dask array, one block per
    partition of ``X`` (rows in its order), columns in ``model.classes_`` order.

    Parameters
    ----------
    model : fitted local EBF / SSF classifier, or a saved one (as :func:`predict_quantiles`)
    X : dask.dataframe.DataFrame
    client : distributed.Client, optional
        Whose workers hold (or get) the model's parts (:func:`ebf.dask.predict_frame`).

    Returns
    -------
    dask.array.Array of shape (n_rows, n_classes)
        ``model.predict_proba(X.compute())``.

    Examples
    --------
    >>> predict_proba(clf, ddf[features]).compute().shape  # doctest: +SKIP
    (1000, 2)
    """
    model, source = _source(model, X, client)
    _require(model, True, "predict_proba")
    return _columns(model, source, X,
                    lambda head: PredictJob(np.empty(0), class_map=head.class_calibration),
                    0, len(_classes(model)), "predict_proba")


def predict_distribution(model: Any, X: Any, client: Any = None) -> DaskDistribution:
    """The lazy predictive distribution of every row: one distribution per partition of
    ``X``, what ``model.predict_distribution`` gives on its rows.

    Parameters
    ----------
    model : fitted local EBF / SSF regressor, or a saved one (as :func:`predict_quantiles`)
    X : dask.dataframe.DataFrame
    client : distributed.Client, optional
        As in :func:`ebf.dask.predict_frame`.

    Returns
    -------
    DaskDistribution

    Examples
    --------
    >>> dist = predict_distribution(model, ddf[features])  # doctest: +SKIP
    >>> dist.cdf(ddf["y"]).compute()  # the PIT of every row  # doctest: +SKIP
    """
    model, source = _source(model, X, client)
    _require(model, False, "predict_distribution")
    return DaskDistribution(model, source, X)


# ----------------------------------------------------------------------------- the object


def _call(pair: tuple, method: str, *args: Any) -> Any:
    return getattr(pair[0], method)(*args)


def _attribute(pair: tuple, name: str) -> np.ndarray:
    return getattr(pair[0], name)


def _call_y(pair: tuple, method: str, y: float | None) -> np.ndarray:
    """``method`` of the partition's distribution at ``y``, or at its own targets (None)."""
    return getattr(pair[0], method)(pair[1][:, 0] if y is None else y)


def _crps(pair: tuple, y: float | None) -> np.ndarray:
    dist, targets = pair
    if dist.n_rows == 0:
        return np.empty(0)
    return crps_rows(dist, np.full(dist.n_rows, y) if y is not None else targets[:, 0])


def _crps_sums(pair: tuple) -> np.ndarray:
    rows = _crps(pair, None)
    w = pair[1][:, 1] if pair[1].shape[1] > 1 else np.ones(rows.size)
    return np.array([float(w @ rows), float(w.sum())])


def _stacked(*pairs: tuple) -> Any:
    dists = [d for d, _ in pairs]
    bases = [d.base if isinstance(d, RecalibratedDistribution) else d for d in dists]
    mixture = GaussianMixture.stack(bases)
    if isinstance(dists[0], RecalibratedDistribution):
        return RecalibratedDistribution(mixture, dists[0].pit_map)
    return mixture


class DaskDistribution:
    """The predictive distributions of the rows of a dask DataFrame, one
    :class:`~basics.mixture.GaussianMixture` (or
    :class:`~basics.pit.RecalibratedDistribution`) per partition, computed when asked
    (:func:`predict_distribution` makes it).

    Its methods are the local distribution's, each a dask array with one block per
    partition (row counts unknown until computed). Targets ``y`` are a number or a dask
    Series indexed like the rows (``ddf[target]`` of the frame the features come from):
    they join the features as a column, so every partition's rows and targets are the
    same rows however Dask partitions either. Each call builds its own graph: compute
    several together (``dask.compute(d.mean, d.quantile(q))``) to predict the rows once for
    all of those without targets.

    A partition's mixture holds every component of every row (an SSF pools all its
    forests' paths): for the mean, std and quantiles alone, ``predict_frame`` and
    ``predict_quantiles`` summarise each branch's rows without building it.

    Examples
    --------
    >>> dist = model.predict_distribution(ddf[features])  # doctest: +SKIP
    >>> lo, hi = dist.interval(0.9)  # doctest: +SKIP
    >>> pit = dist.cdf(ddf["y"])  # doctest: +SKIP
    """

    def __init__(self, model: Any, source: Any, X: Any) -> None:
        self._model, self._source, self._X = model, source, X
        self._parts = self._predict(X, None)

    def _predict(self, frame: Any, target: list | None) -> list:
        """Per partition of ``frame``, a lazy ``(distribution, targets or None)``."""
        from dask import delayed

        if self._source is not None:
            pit_map = self._source.head().recalibration
            return [delayed(_assembled_distribution, pure=True)(b, pit_map)
                    for b in sharded_blocks(self._source, frame, DistributionJob(),
                                            target=target)]
        shared = shared_model(self._model)
        return [delayed(_model_distribution, pure=True)(p, shared, target)
                for p in frame.to_delayed()]

    @property
    def npartitions(self) -> int:
        return len(self._parts)

    def __repr__(self) -> str:
        return f"DaskDistribution(npartitions={self.npartitions})"

    def to_delayed(self) -> list:
        """The per-partition distributions as ``dask.delayed`` objects."""
        from dask import delayed

        return [delayed(_distribution_only, pure=True)(p) for p in self._parts]

    def compute(self, **kwargs: Any) -> Any:
        """The whole distribution in this process: one mixture (or recalibrated
        distribution) of all rows, in order, as the local ``predict_distribution``."""
        import dask
        from dask import delayed

        if not self._parts:
            return _empty_mixture()
        return dask.compute(delayed(_stacked, pure=True)(*self._parts), **kwargs)[0]

    # ---------------------------------------------------------------- lazy arrays

    def _map(self, parts: list, fn: Callable, args: tuple, width: int | None) -> Any:
        from dask import delayed

        return _array([delayed(fn, pure=True)(p, *args) for p in parts], width)

    def _with_targets(self, y: Any, sample_weight: Any = None) -> list:
        """The partitions predicted again with ``y`` (and weights) beside the features."""
        import dask.dataframe as dd

        for name, values in (("y", y), ("sample_weight", sample_weight)):
            if values is not None and not isinstance(values, dd.Series):
                raise TypeError(f"{name} must be a dask Series indexed like the rows (e.g. "
                                f"ddf[target] of the frame the features come from); got "
                                f"{type(values).__name__}.")
        columns = {_TARGET: y, _WEIGHT: 1.0 if sample_weight is None else sample_weight}
        return self._predict(self._X.assign(**columns), [_TARGET, _WEIGHT])

    def _at(self, y: Any, fn: Callable, method: str | None) -> Any:
        """``fn`` of every partition at ``y``: a number, or targets (a dask Series)."""
        args = () if method is None else (method,)
        if np.ndim(y) == 0 and not hasattr(y, "__dask_graph__"):
            return self._map(self._parts, fn, (*args, float(y)), None)
        return self._map(self._with_targets(y), fn, (*args, None), None)

    @property
    def mean(self) -> Any:
        """Predictive mean of every row (dask array of shape (n_rows,))."""
        return self._map(self._parts, _attribute, ("mean",), None)

    @property
    def var(self) -> Any:
        """Predictive variance of every row."""
        return self._map(self._parts, _attribute, ("var",), None)

    @property
    def std(self) -> Any:
        """Predictive standard deviation of every row."""
        return self._map(self._parts, _attribute, ("std",), None)

    def quantile(self, q: Any) -> Any:
        """Quantiles at levels ``q`` (the same for every row): shape (n_rows,) for a scalar,
        else (n_rows, n_levels); as :meth:`basics.mixture.GaussianMixture.quantile`."""
        levels = checked_levels(q)
        scalar = np.ndim(q) == 0
        return self._map(self._parts, _call, ("quantile", levels[0] if scalar else levels),
                         None if scalar else levels.size)

    def interval(self, level: Any = 0.9) -> tuple[Any, Any]:
        """Central interval ``[Q((1 - level) / 2), Q((1 + level) / 2)]`` of every row."""
        level = np.asarray(level, dtype=np.float64)
        return self.quantile((1.0 - level) / 2.0), self.quantile((1.0 + level) / 2.0)

    def cdf(self, y: Any) -> Any:
        """``P(Y_i <= y_i)`` of every row (at targets: the PIT)."""
        return self._at(y, _call_y, "cdf")

    def logpdf(self, y: Any) -> Any:
        """Log density at ``y`` of every row."""
        return self._at(y, _call_y, "logpdf")

    def pdf(self, y: Any) -> Any:
        """Density at ``y`` of every row."""
        return self._at(y, _call_y, "pdf")

    def crps(self, y: Any) -> Any:
        """Continuous ranked probability score of every row (:func:`basics.metrics.crps_rows`;
        lower is better)."""
        return self._at(y, _crps, None)

    def mean_crps(self, y: Any, sample_weight: Any = None) -> float:
        """The (weighted) mean CRPS over all rows, computed partition by partition.

        Parameters
        ----------
        y : dask.dataframe.Series
            Targets indexed like the rows.
        sample_weight : dask.dataframe.Series, optional
            Indexed like the rows.

        Returns
        -------
        float
        """
        import dask
        from dask import delayed

        sums = [delayed(_crps_sums, pure=True)(p) for p in self._with_targets(y, sample_weight)]
        total, weight = np.sum(dask.compute(*sums), axis=0) if sums else (0.0, 0.0)
        if weight <= 0:
            raise ValueError("mean_crps needs rows with a positive weight; there are none.")
        return float(total / weight)


def _distribution_only(pair: tuple) -> Any:
    return pair[0]
