"""The leaf prior of a Bayesian forest regressor, its strength learnt from held-out rows.

A regression leaf predicts with the posterior predictive variance of the package's
normal-inverse-gamma leaf (:mod:`basics.leaf_noise`), ``leaf_prior_rows`` pseudo-rows at
the pooled variance of its neighbourhood (:func:`ebf._cart_fit.with_leaf_prior`). With
``leaf_prior_rows="auto"`` and ``calibrate="auto"`` the strength is learnt:

1. the model is fit once, keeping its raw leaves (weighted variances, effective rows);
2. its calibration groups (:mod:`basics.calibration`), fit the same way, score every strength
   of :data:`basics.leaf_noise.LEAF_PRIOR_CANDIDATES` on the rows they never saw, each by
   re-deriving their leaf variances (no tree is refit; :mod:`basics.prior_choice`);
3. the chosen strength is applied to the model's raw leaves, which are then dropped, and the
   groups' counts under it give the recalibration map.

An EBF branch learns its own (:func:`ebf.branches.fit_calibrated_branch`: the groups first,
then the branch with the strength they chose).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from basics.discrete import is_integer_target
from basics.leaf_noise import LEAF_PRIOR_ROWS
from basics.prior_choice import CANDIDATES, OPTION, CandidateScores, candidate_scores, settle

from . import _cart as cart
from . import _cart_fit as cart_fit

__all__ = ["LearntLeafPriorMixin", "with_prior"]


def with_prior(forest: cart.CartForest, n_eff: np.ndarray, prior_rows: float | None,
               var_floor: float) -> tuple[cart.CartForest, float | None]:
    """The forest under a leaf prior of ``prior_rows`` pseudo-rows (None: none) and the
    forest's pooled leaf variance (None without a prior)."""
    if prior_rows is None:
        return forest, None
    return cart_fit.with_leaf_prior(forest, n_eff, prior_rows=float(prior_rows),
                                    var_floor=var_floor)


class LearntLeafPriorMixin:
    """The leaf prior of :class:`ebf._forests.BayesianForestRegressor` (module docstring):
    its ``_leaf_model`` and the seams of the learnt strength."""

    def _fit_learning_prior(self, X: Any, y: Any, sample_weight: Any, crossfit: bool) -> Any:
        """:meth:`_fit`; with ``crossfit`` and ``leaf_prior_rows="auto"``, then the
        calibration groups, and the strength they chose (returning their counts under it
        for the map)."""
        learn = crossfit and self.leaf_prior_rows == "auto"
        self._fit(X, y, sample_weight, keep_leaf_stats=learn)
        if not learn:
            return self
        folds, group, model = self._crossfit(X, y, sample_weight)
        counts, params = settle([held for _, held in folds], group, model)
        raw, n_eff = self._leaf_stats
        prior_rows = params.get(OPTION, LEAF_PRIOR_ROWS)
        self.forest_, self.leaf_noise_var_ = with_prior(raw, n_eff, prior_rows,
                                                        self.var_floor_)
        self.leaf_prior_rows_ = None if prior_rows is None else float(prior_rows)
        self._leaf_stats = None
        return counts, group, model

    @staticmethod
    def _fit_group(group: Any, X: Any, y: Any, sample_weight: Any) -> Any:
        """A calibration group keeps its raw leaves to score every prior strength."""
        return group._fit(X, y, sample_weight, keep_leaf_stats=True)

    def _leaf_model(self, forest: cart.CartForest, weight_sq: np.ndarray,
                    extra: dict[str, Any], keep_leaf_stats: bool = False) -> cart.CartForest:
        """Leaf variances -> posterior predictive variances under ``leaf_prior_rows`` (with
        ``"auto"``, :data:`LEAF_PRIOR_ROWS` until a strength is learnt). With
        ``keep_leaf_stats`` and ``leaf_prior_rows="auto"`` the raw leaves stay (in
        ``_leaf_stats``, never saved) for :meth:`_candidate_scores` and the learnt strength."""
        prior_rows = self.leaf_prior_rows
        if prior_rows == "auto":
            prior_rows = LEAF_PRIOR_ROWS
        n_eff = cart_fit.effective_rows(forest.weight, weight_sq)
        learn = keep_leaf_stats and self.leaf_prior_rows == "auto"
        extra["_leaf_stats"] = (forest, n_eff) if learn else None
        extra["leaf_prior_rows_"] = None if prior_rows is None else float(prior_rows)
        forest, extra["leaf_noise_var_"] = with_prior(forest, n_eff, prior_rows,
                                                      extra["var_floor_"])
        return forest

    def _candidate_scores(self, X: Any, y: Any) -> CandidateScores | None:
        """Held-out scores of rows ``(X, y)`` under every strength of
        :data:`basics.leaf_noise.LEAF_PRIOR_CANDIDATES` (:mod:`basics.prior_choice`), from
        the raw leaves of a calibration group; None for any other fit."""
        stats = getattr(self, "_leaf_stats", None)
        if stats is None:
            return None
        raw, n_eff = stats
        mixtures = []
        for prior_rows in CANDIDATES:
            scored = copy.copy(self)  # the same model with the candidate's leaves
            scored.forest_ = with_prior(raw, n_eff, prior_rows, self.var_floor_)[0]
            mixtures.append(scored.predict_distribution(X, recalibrated=False))
        return candidate_scores(mixtures, y, is_integer_target(y))
