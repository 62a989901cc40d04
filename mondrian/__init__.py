"""Mondrian forests: batch and online, regression and classification, with full
predictive distributions (Lakshminarayanan, Roy & Teh 2014, 2016), and the Mondrian kernel's
random features (Balog et al. 2016).

The predictive mixture they return is :class:`basics.mixture.GaussianMixture`, shared by
every regressor of the project.
"""

from ._compact import PredictOnlyError
from ._forest import MondrianForestClassifier, MondrianForestRegressor
from ._kernel_features import MondrianKernelFeatures
from ._kernel_ridge import MondrianKernelClassifier, MondrianKernelRegressor

__all__ = ["MondrianForestClassifier", "MondrianForestRegressor", "MondrianKernelClassifier",
           "MondrianKernelFeatures", "MondrianKernelRegressor", "PredictOnlyError"]
