"""Empirical Bayesian forests and sub-sample forests on a Dask cluster (paper Sec. 4-5).

The distributed layer only orchestrates: every algorithm is the single-process one from
``ebf`` run on the workers, and the fitted model is the local estimator class, so the
distributed fit equals the local fit on the same rows (see ``_fitting.py`` for the
phases). Modules, in data-flow order:

``inputs``      schema checks, the summary pass (encoder, target checks), the encoding pass
``histograms``  bin edges, the distributed histogram source, the trunk
``_shuffle``    routing rows to branches and moving each branch's rows together
``branches``    the per-branch memory budget, one fit task per branch
``frames``      the prediction frame's columns and dtypes
``graph``       a local model as one key of a graph, or small rows brought to it
``sharded``     a saved model predicted branch by branch, each task loading one shard
``_predict``    lazy ``map_partitions`` predictions of a local model, or of a saved one
``distribution`` quantiles, predictive distributions and class probabilities as dask arrays
``_estimators`` the ``Dask*`` estimators (``fit``, ``predict_frame``, ``to_local``)

Examples
--------
>>> from ebf.dask import DaskEmpiricalBayesianForestRegressor
>>> model = DaskEmpiricalBayesianForestRegressor(trunk_max_leaves=32, random_state=0)
>>> model.fit(ddf[features], ddf[target]).predict_frame(ddf[features])  # doctest: +SKIP
"""

from ._estimators import (
    DaskEmpiricalBayesianForestClassifier,
    DaskEmpiricalBayesianForestRegressor,
    DaskSubsampleForestClassifier,
    DaskSubsampleForestRegressor,
)
from ._predict import predict_frame, predict_series
from .branches import BranchMemoryError
from .distribution import (
    DaskDistribution,
    predict_distribution,
    predict_proba,
    predict_quantiles,
)

__all__ = [
    "BranchMemoryError",
    "DaskDistribution",
    "DaskEmpiricalBayesianForestClassifier",
    "DaskEmpiricalBayesianForestRegressor",
    "DaskSubsampleForestClassifier",
    "DaskSubsampleForestRegressor",
    "predict_distribution",
    "predict_frame",
    "predict_proba",
    "predict_quantiles",
    "predict_series",
]
