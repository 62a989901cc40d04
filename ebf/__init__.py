"""Bayesian forests, the CART trunk, Empirical Bayesian Forests and sub-sample forests.

Taddy, Chen, Yu & Wyle (2015), "Bayesian and Empirical Bayesian Forests", ICML. The module
layout and the contracts between modules are in ``docs/architecture.md``.
"""

from basics.scorers import neg_crps_scorer
from basics.versions import library_version

from ._forests import BayesianForestClassifier, BayesianForestRegressor
from .artifact import load, open_model, save
from .bayestrees import BARTRegressor, SMCTreeClassifier, SMCTreeRegressor
from .diagnostics import (
    DriftReport,
    PerformanceDrift,
    TrunkPosterior,
    performance_drift,
    plot_split_posterior,
    trunk_drift,
    trunk_posterior,
    with_performance,
)
from .estimators import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
)
from .trunk import Trunk

__version__ = library_version()

__all__ = [
    "BARTRegressor",
    "BayesianForestClassifier",
    "BayesianForestRegressor",
    "DriftReport",
    "EmpiricalBayesianForestClassifier",
    "EmpiricalBayesianForestRegressor",
    "PerformanceDrift",
    "SMCTreeClassifier",
    "SMCTreeRegressor",
    "SubsampleForestClassifier",
    "SubsampleForestRegressor",
    "Trunk",
    "TrunkPosterior",
    "load",
    "neg_crps_scorer",
    "open_model",
    "performance_drift",
    "plot_split_posterior",
    "save",
    "trunk_drift",
    "trunk_posterior",
    "with_performance",
]
