"""Diagnostics of a trunk: how stable its splits are, and whether new rows still fit it.

``stability``    the trunk's posterior under the Bayesian bootstrap (Taddy et al. 2015,
                 Sec. 3, eq. 6-11): :func:`trunk_posterior` and its plot; the signed eq. (11)
                 at a given split
``drift``        :func:`trunk_drift`: eq. (11) at every stored split of a fitted EBF on a new
                 window of rows
``performance``  :func:`performance_drift`: is the model's per-row score on new rows worse
                 than a reference (a block Bayesian bootstrap of the mean difference)?
``drift_report`` the :class:`DriftReport` and its rule: the splits and the performance test
                 as one family at a family-wise level (:func:`with_performance`); its
                 one-line summary in words (:func:`drift_summary`)
``window``       what those tests share: the level, blocks of dependent rows, the fewest rows
"""

from ._drift import DEFAULT_THRESHOLD, trunk_drift
from ._drift_report import DriftReport, drift_summary, with_performance
from ._stability import TrunkPosterior, plot_split_posterior, trunk_posterior
from .performance import PerformanceDrift, performance_drift

__all__ = ["DEFAULT_THRESHOLD", "DriftReport", "PerformanceDrift", "TrunkPosterior",
           "drift_summary", "performance_drift", "plot_split_posterior", "trunk_drift",
           "trunk_posterior", "with_performance"]
