"""Bayesian decision trees (thesis Ch. 3) and BART (Ch. 4).

Flat trees grown node by node (:mod:`.trees`), the Chipman et al. prior (:mod:`.prior`)
and leaf marginal likelihoods (:mod:`.likelihood`); the SMC of Algorithm 3.1
(:mod:`.proposals`, :mod:`.smc`, :mod:`.particles`) and its estimators
(:mod:`.estimators`); BART by particle Gibbs (:mod:`.pgbart`), CGM / GrowPrune moves
(:mod:`.mcmc`) and Bayesian backfitting (:mod:`.backfitting`), the estimator
:class:`BARTRegressor` (:mod:`.bart`). The layout: ``docs/families/bayesian-trees.md``.
"""

from ._bart import BARTRegressor
from ._estimators import SMCTreeClassifier, SMCTreeRegressor
from ._likelihood import LeafLikelihood, log_likelihood
from ._particles import ParticleTrees
from ._prior import DEFAULT_ALPHA_S, DEFAULT_BETA_S, log_prior, sample_prior
from ._smc import run_smc
from ._trees import BayesTree, apply, partition_rows

__all__ = ["BARTRegressor", "DEFAULT_ALPHA_S", "DEFAULT_BETA_S", "BayesTree", "LeafLikelihood",
           "ParticleTrees", "SMCTreeClassifier", "SMCTreeRegressor", "apply", "log_likelihood",
           "log_prior", "partition_rows", "run_smc", "sample_prior"]
