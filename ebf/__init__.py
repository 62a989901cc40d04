"""Bayesian forests, the CART trunk, Empirical Bayesian Forests and sub-sample forests.

Taddy, Chen, Yu & Wyle (2015), "Bayesian and Empirical Bayesian Forests", ICML. The module
layout and the contracts between modules are in ``docs/architecture.md``.
"""

from basics.lazy import lazy_exports
from basics.versions import library_version

#: Where each public name lives: imported on first use (:mod:`basics.lazy`), so that a
#: process that needs one corner of ebf (the command line's driver reading a model's
#: manifest) does not import every estimator and SciPy's statistics with it.
_HOMES = {
    "load": ".artifact", "open_model": ".artifact", "save": ".artifact",
    "BARTRegressor": ".bayestrees", "SMCTreeClassifier": ".bayestrees",
    "SMCTreeRegressor": ".bayestrees",
    "DriftReport": ".diagnostics", "TrunkPosterior": ".diagnostics",
    "plot_split_posterior": ".diagnostics", "trunk_drift": ".diagnostics",
    "trunk_posterior": ".diagnostics",
    "EmpiricalBayesianForestClassifier": ".estimators",
    "EmpiricalBayesianForestRegressor": ".estimators",
    "SubsampleForestClassifier": ".estimators", "SubsampleForestRegressor": ".estimators",
    "BayesianForestClassifier": ".forests", "BayesianForestRegressor": ".forests",
    "Trunk": ".trunk",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _HOMES)

__version__ = library_version()

__all__ = [  # noqa: F822 - defined on first use (_HOMES)
    "BARTRegressor",
    "BayesianForestClassifier",
    "BayesianForestRegressor",
    "DriftReport",
    "EmpiricalBayesianForestClassifier",
    "EmpiricalBayesianForestRegressor",
    "SMCTreeClassifier",
    "SMCTreeRegressor",
    "SubsampleForestClassifier",
    "SubsampleForestRegressor",
    "Trunk",
    "TrunkPosterior",
    "load",
    "open_model",
    "plot_split_posterior",
    "save",
    "trunk_drift",
    "trunk_posterior",
]
