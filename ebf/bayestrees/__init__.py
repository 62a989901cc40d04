"""Bayesian decision trees (thesis Ch. 3) and BART trees (Ch. 4): the model.

Flat trees grown node by node (:mod:`.trees`), the Chipman et al. prior (:mod:`.prior`)
and leaf marginal likelihoods (:mod:`.likelihood`). See ``README.md`` for the layout and
how a sequential Monte Carlo particle reuses it.
"""

from .likelihood import LeafLikelihood, log_likelihood
from .prior import DEFAULT_ALPHA_S, DEFAULT_BETA_S, log_prior, sample_prior
from .trees import BayesTree, apply, partition_rows

__all__ = ["DEFAULT_ALPHA_S", "DEFAULT_BETA_S", "BayesTree", "LeafLikelihood", "apply",
           "log_likelihood", "log_prior", "partition_rows", "sample_prior"]
