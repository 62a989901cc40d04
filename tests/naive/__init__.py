"""Plain-NumPy reference implementations (oracles) that the numba kernels are tested against.

Every function here is written for clarity, not speed: loops, dense linear algebra and
enumeration. Tests import them from this package (``from tests.naive import ...``); each
module belongs to one area of the library:

- ``mixture``: predictive Gaussian mixtures and recalibration (CRPS, PIT knots, ACI), and
  calibration scores (one-sided coverage, PIT distance, interval score).
- ``cart``: weighted CART routing and node statistics, empirical leaf knots, flat-tree
  structure checks.
- ``trunk``: EBF trunk: split stability, histograms, best splits, growth, subtraction; the
  family-wise (Holm) test of its drift check.
- ``mondrian``: Mondrian tree sampling and invariants, compact trees, the Mondrian kernel.
- ``posterior``: Mondrian posterior: dense Gaussian conditioning, branch-off moments, IKN.
- ``noise``: per-node noise variances, the Gamma test, the CART leaf-noise prior.
- ``bayestrees``: Bayesian trees and BART: prior, marginals, enumeration, SMC, MCMC.
- ``drift``: the performance-drift test (a block Bayesian bootstrap of a mean difference).
- ``calibration``: class-probability calibration (the ECE, the Dirichlet map's prediction).
- ``discrete``: scores of integer-valued targets (the ranked probability score, the CRPS of a
  discrete distribution).
"""

from __future__ import annotations

from .bayestrees import (
    naive_bayestree_log_prior,
    naive_bayestree_rows,
    naive_chain_ess,
    naive_conditional_smc,
    naive_dirichlet_multinomial_polya,
    naive_draws_predict,
    naive_enumerate_trees_1d,
    naive_expand_empirical,
    naive_mh_log_ratio,
    naive_nig_marginal_sequential,
    naive_normal_marginal_quad,
    naive_optimal_proposal,
    naive_prior_cut,
    naive_relabel,
    naive_resample,
    naive_sample_prior,
    naive_split_sums,
    naive_structure_1d,
    naive_tree_from_structure_1d,
)
from .calibration import naive_dirichlet_predict, naive_ece, naive_half
from .cart import (
    naive_apply,
    naive_check_trees,
    naive_class_fractions,
    naive_knot_leaf,
    naive_leaf_knots,
    naive_node_stats,
    naive_path,
)
from .discrete import naive_discrete_crps, naive_rps
from .drift import naive_performance_drift
from .mixture import (
    naive_aci,
    naive_crps_mixture,
    naive_crps_numeric,
    naive_interval_score,
    naive_mixture_cdf,
    naive_mixture_logpdf,
    naive_mixture_moments,
    naive_mixture_pdf,
    naive_mixture_quantile,
    naive_one_sided,
    naive_pit_distance,
    naive_pit_knots,
)
from .mondrian import (
    check_tree_invariants,
    flat_tree_leaf_rows,
    naive_cell_columns,
    naive_expand,
    naive_forest_components,
    naive_kernel_cells,
    naive_laplace_kernel,
    naive_mix64,
    naive_mondrian_box_cells,
    naive_preorder_structure,
    naive_sample_mondrian_block,
    naive_tree_leaves,
)
from .noise import (
    naive_gamma_test,
    naive_held_out_log_scores,
    naive_leaf_predictive_variance,
    naive_pooled_leaf_variance,
    naive_prior_centres,
    node_noise_variance_naive,
)
from .posterior import (
    branch_off_G_naive,
    expected_discount_mc,
    expected_discount_quad,
    gaussian_posterior_dense,
    ikn_counts_naive,
    ikn_posterior_naive,
    naive_branch_off_moments,
)
from .trunk import (
    naive_best_split,
    naive_clt_split_match,
    naive_grow,
    naive_histogram,
    naive_holm,
    naive_impurity,
    naive_impurity_terms,
    naive_scale,
    naive_stats,
    naive_stored_split_match,
    naive_subtract_histogram,
    naive_trunk_apply,
    naive_trunk_requests,
)

__all__ = [
    "naive_dirichlet_predict",
    "naive_ece",
    "naive_half",
    "naive_holm",
    "naive_knot_leaf",
    "naive_laplace_kernel",
    "naive_leaf_knots",
    "branch_off_G_naive",
    "check_tree_invariants",
    "expected_discount_mc",
    "expected_discount_quad",
    "flat_tree_leaf_rows",
    "gaussian_posterior_dense",
    "ikn_counts_naive",
    "ikn_posterior_naive",
    "naive_aci",
    "naive_apply",
    "naive_bayestree_log_prior",
    "naive_bayestree_rows",
    "naive_best_split",
    "naive_branch_off_moments",
    "naive_cell_columns",
    "naive_chain_ess",
    "naive_check_trees",
    "naive_class_fractions",
    "naive_clt_split_match",
    "naive_conditional_smc",
    "naive_crps_mixture",
    "naive_crps_numeric",
    "naive_discrete_crps",
    "naive_interval_score",
    "naive_dirichlet_multinomial_polya",
    "naive_draws_predict",
    "naive_enumerate_trees_1d",
    "naive_expand",
    "naive_forest_components",
    "naive_expand_empirical",
    "naive_gamma_test",
    "naive_held_out_log_scores",
    "naive_grow",
    "naive_histogram",
    "naive_impurity",
    "naive_impurity_terms",
    "naive_kernel_cells",
    "naive_leaf_predictive_variance",
    "naive_mh_log_ratio",
    "naive_mix64",
    "naive_mixture_cdf",
    "naive_mixture_logpdf",
    "naive_mixture_moments",
    "naive_mixture_pdf",
    "naive_mixture_quantile",
    "naive_mondrian_box_cells",
    "naive_nig_marginal_sequential",
    "naive_node_stats",
    "naive_normal_marginal_quad",
    "naive_optimal_proposal",
    "naive_prior_cut",
    "naive_path",
    "naive_performance_drift",
    "naive_one_sided",
    "naive_pit_distance",
    "naive_pit_knots",
    "naive_pooled_leaf_variance",
    "naive_preorder_structure",
    "naive_prior_centres",
    "naive_relabel",
    "naive_resample",
    "naive_rps",
    "naive_sample_mondrian_block",
    "naive_sample_prior",
    "naive_split_sums",
    "naive_scale",
    "naive_stats",
    "naive_stored_split_match",
    "naive_structure_1d",
    "naive_subtract_histogram",
    "naive_tree_from_structure_1d",
    "naive_tree_leaves",
    "naive_trunk_apply",
    "naive_trunk_requests",
    "node_noise_variance_naive",
]
