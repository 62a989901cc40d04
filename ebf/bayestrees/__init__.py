"""Bayesian decision trees (thesis Ch. 3) and BART (Ch. 4).

Flat trees grown node by node (:mod:`.trees`), the Chipman et al. prior (:mod:`.prior`)
and leaf marginal likelihoods (:mod:`.likelihood`); BART by particle Gibbs (:mod:`.pgbart`),
CGM / GrowPrune moves (:mod:`.mcmc`) and Bayesian backfitting (:mod:`.backfitting`), the
estimator :class:`BARTRegressor` (:mod:`.bart`). See ``README.md`` for the layout.
"""

from .bart import BARTRegressor
from .likelihood import LeafLikelihood, log_likelihood
from .prior import DEFAULT_ALPHA_S, DEFAULT_BETA_S, log_prior, sample_prior
from .trees import BayesTree, apply, partition_rows

__all__ = ["BARTRegressor", "DEFAULT_ALPHA_S", "DEFAULT_BETA_S", "BayesTree", "LeafLikelihood",
           "apply", "log_likelihood", "log_prior", "partition_rows", "sample_prior"]
