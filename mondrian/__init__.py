"""Mondrian forests: batch and online, regression and classification, with full
predictive distributions (Lakshminarayanan, Roy & Teh 2014, 2016)."""

from .forest import MondrianForestClassifier, MondrianForestRegressor
from .predictive import GaussianMixture

__all__ = ["MondrianForestClassifier", "MondrianForestRegressor", "GaussianMixture"]
