"""Diagnostics of a trunk: how stable its splits are, and whether new rows still fit it.

``stability``  the trunk's posterior under the Bayesian bootstrap (Taddy et al. 2015,
               Sec. 3, eq. 6-11): :func:`trunk_posterior` and its plot; the signed eq. (11)
               at a given split
``drift``      :func:`trunk_drift`: eq. (11) at every stored split of a fitted EBF on a new
               window of rows, and its :class:`DriftReport`
"""

from .drift import DEFAULT_THRESHOLD, DriftReport, trunk_drift
from .stability import TrunkPosterior, plot_split_posterior, trunk_posterior

__all__ = ["DEFAULT_THRESHOLD", "DriftReport", "TrunkPosterior", "plot_split_posterior",
           "trunk_drift", "trunk_posterior"]
