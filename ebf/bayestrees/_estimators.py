"""Bayesian decision trees by SMC as scikit-learn estimators (thesis Ch. 3, Algorithm 3.1).

:class:`SMCTreeClassifier` (Dirichlet-multinomial leaves, eq. 3.2) and
:class:`SMCTreeRegressor` (Normal leaves with a Normal prior on the mean, eq. 4.9) fit
``n_islands`` independent particle systems of ``n_particles`` trees (:func:`.smc.run_smc`)
and predict with the posterior average of eq. (2.1): over each island's particles by their
weights, then over islands (uniformly by default, Sec. 3.4.1.3, or by their evidence).

Defaults are the thesis' experimental settings (Sec. 3.4.1): alpha_s = 0.95, beta_s = 0.5,
Dirichlet concentration alpha = 5, the prior proposal with node-wise (breadth-first)
expansion, multinomial resampling at ESS < C / 10, and I = 5 islands of C = 100 particles
(Sec. 3.4.1.3: fewer than 100 particles per island lose accuracy; 5 islands of 100 beat
one filter of 500).

**Branch learner seam** (for EBF / SSF branches): :meth:`_SMCTree._fit_branch` takes rows
already encoded (finite float64) and, for the classifier, class codes ``0 .. n_classes -
1`` with a fixed ``n_classes``, so ``predict_proba`` has a column for every class of the
ensemble even when the branch's rows lack some; island ``i`` is seeded by
``SeedSequence(entropy, spawn_key=(branch, i))``. Unequal sample weights are refused (the
likelihood of eq. 3.1 has no weights): equal weights are the unweighted fit, and a weight
of zero drops its row.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, is_classifier
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from basics.bounds import state_location, state_variance
from basics.class_recalibration import class_calibration_from_state, class_calibration_state
from basics.leaf_noise import nig_predictive_variance
from basics.mixture import GaussianMixture
from basics.recalibration import NO_MAP, recalibration_from_state, recalibration_state
from basics.seeds import resolve_entropy
from basics.threads import N_JOBS
from basics.validation import check_classes, check_target_not_in_features, state_int

from .._base import (
    ProbabilisticClassifierMixin,
    ProbabilisticRegressorMixin,
    classes_from_state,
    classes_state,
    classifier_target,
    input_attributes,
    regression_target,
    unweighted_rows,
    variance_floor,
)
from ..features import FeatureEncoder
from ._likelihood import LeafLikelihood, nig_posterior
from ._particles import COMBINE, ParticleTrees, leaf_values, weighted_values
from ._proposals import PROPOSALS
from ._resampling import RESAMPLING
from ._smc import EXPANSIONS, SMC_ALPHA_S, SMC_BETA_S, run_smc
from .backfitting import noise_prior, sigma_hat2

__all__ = ["SMCTreeClassifier", "SMCTreeRegressor"]

#: The thesis' Dirichlet concentration (Sec. 3.4.1).
DEFAULT_ALPHA = 5.0


def _summary(name: str, doc: str) -> property:
    """A fitted attribute read off ``trees_`` (:class:`.particles.ParticleTrees`)."""
    def get(self: _SMCTree) -> Any:
        check_is_fitted(self, "trees_")
        return getattr(self.trees_, name)
    return property(get, doc=doc)


def _store(estimator: BaseEstimator, params: dict[str, Any]) -> None:
    """``__init__``: store every constructor parameter as it is (scikit-learn's rule)."""
    for name, value in params.items():
        if name != "self":
            setattr(estimator, name, value)


class _SMCTree(BaseEstimator):
    """What both estimators share: parameters, the fit, summaries, persistence."""

    _parameter_constraints: dict = {
        "n_particles": [Interval(Integral, 1, None, closed="left")],
        "n_islands": [Interval(Integral, 1, None, closed="left")],
        "proposal": [StrOptions(set(PROPOSALS))],
        "expansion": [StrOptions(set(EXPANSIONS))],
        "ess_threshold": [Interval(Real, 0.0, 1.0, closed="both")],
        "resampling": [StrOptions(set(RESAMPLING))],
        "max_stages": [Interval(Integral, 1, None, closed="left"), None],
        "alpha_s": [Interval(Real, 0.0, 1.0, closed="neither")],
        "beta_s": [Interval(Real, 0.0, None, closed="left")],
        "island_weights": [StrOptions(set(COMBINE))],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    }

    # ------------------------------------------------------------------ fitting

    def fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> _SMCTree:
        """Run the SMC of Algorithm 3.1 on ``(X, y)``.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
            Categorical and string columns of a DataFrame are coded by ``FeatureEncoder``.
        y : array-like of shape (n_samples,)
            Class labels (classifier) or a finite target (regressor); missing values raise
            an error stating how many rows have them.
        sample_weight : array-like of shape (n_samples,), optional
            Rows of weight zero are dropped; the other weights must be equal (there is no
            weighted likelihood).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def _fit(self, X: Any, y: Any, sample_weight: Any, *, entropy: int | None = None,
             branch: int = 0, n_classes: int | None = None) -> _SMCTree:
        """Validate everything, run the SMC, then set all fitted attributes at once (a call
        that raises leaves the model as it was)."""
        self._validate_params()
        check_target_not_in_features(X, y)
        encoder = FeatureEncoder()
        A = encoder.fit_transform(X)
        target, extra = self._encode_target(y, A.shape[0], n_classes)
        rows = unweighted_rows(sample_weight, A, type(self).__name__)
        if rows is not None:
            A, target = A[rows], target[rows]
        likelihood, labels = self._likelihood(A, target, extra)
        entropy = resolve_entropy(self.random_state) if entropy is None else int(entropy)
        trees = run_smc(
            A, labels, likelihood, n_particles=self.n_particles, n_islands=self.n_islands,
            proposal=self.proposal, expansion=self.expansion,
            ess_threshold=self.ess_threshold, resampling=self.resampling,
            max_stages=self.max_stages, alpha_s=self.alpha_s, beta_s=self.beta_s,
            random_state=entropy, branch=branch, n_jobs=self.n_jobs)
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(self._fitted(encoder, trees, entropy, extra))
        return self

    def _fit_branch(self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None, *,
                    entropy: int, branch: int, n_classes: int | None = None) -> _SMCTree:
        """Fit as branch ``branch`` of an ensemble (the branch-learner seam).

        ``X`` is already encoded (finite float64), ``y`` already checked: class codes
        ``0 .. n_classes - 1`` for the classifier, so ``predict_proba`` has ``n_classes``
        columns whatever codes the rows hold. Island ``i`` uses
        ``SeedSequence(entropy, spawn_key=(branch, i))``. Rows of ``sample_weight`` zero are
        dropped; unequal positive weights raise.
        """
        return self._fit(X, y, sample_weight, entropy=entropy, branch=branch,
                         n_classes=n_classes)

    def _fitted(self, encoder: FeatureEncoder, trees: ParticleTrees, entropy: int,
                extra: dict[str, Any]) -> dict[str, Any]:
        """Every fitted attribute, from the parts (a fit and a loaded state alike)."""
        return {**input_attributes(encoder), **extra, "trees_": trees,
                "tree_weight_": trees.tree_weights(self.island_weights),
                "log_evidence_": trees.log_evidence.copy(), "entropy_": int(entropy),
                "_node_value": self._node_values(trees.stats, extra)}

    # ------------------------------------------------------------------ summaries

    n_trees_ = _summary("n_trees", "Distinct trees kept over all islands (copies made by "
                        "resampling merged), an int.")
    n_leaves_ = _summary("n_leaves", "Leaves of every kept tree, shape ``(n_trees_,)`` (weights "
                         "in ``tree_weight_``).")
    max_depth_ = _summary("max_depth", "Depth of every kept tree (root 0), shape "
                         "``(n_trees_,)``.")
    n_stages_ = _summary("n_stages", "Stages of Algorithm 3.1 run by every island, shape "
                         "(n_islands,).")
    n_resampled_ = _summary("n_resampled", "Resampling steps taken by every island, shape "
                            "(n_islands,).")

    @property
    def expected_n_leaves_(self) -> float:
        """Posterior mean of the number of leaves, sum of ``tree_weight_ * n_leaves_``."""
        return float(self.tree_weight_ @ self.n_leaves_)

    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict[str, Any]:
        """Fitted state (the persistence contract of the model format): encoder, particle trees (all
        islands' distinct trees back to back with offsets, node statistics, weights, log
        evidences), seed, and the task's entries."""
        check_is_fitted(self, "trees_")
        return {"encoder": self.encoder_._get_state(), "trees": self.trees_.get_state(),
                "entropy": int(self.entropy_), **self._task_state()}

    def _set_state(self, state: dict[str, Any]) -> None:
        """Restore a state of :meth:`_get_state`; everything is checked before anything is
        set (``ParticleTrees.from_state``: structure, statistics, weights; the task's own
        entries; one island per ``n_islands``; finite node predictives). A bad state raises
        ``ValueError`` naming the entry and leaves the model unchanged."""
        encoder = FeatureEncoder()
        encoder._set_state(state["encoder"])
        extra, n_stats = self._task_from_state(state)
        if not isinstance(state["trees"], dict):
            raise ValueError("trees must be a dict of arrays")
        trees = ParticleTrees.from_state(state["trees"], n_features=encoder.n_features_in_,
                                         n_stats=n_stats, regression=not is_classifier(self))
        if trees.n_islands != self.n_islands:
            raise ValueError(f"the trees come from {trees.n_islands} islands but n_islands is "
                             f"{self.n_islands}")
        entropy = state_int(state, "entropy", 0)
        fitted = self._fitted(encoder, trees, entropy, extra)
        if not np.isfinite(fitted["_node_value"]).all():
            raise ValueError("the node predictives of trees.stats under the leaf prior are not "
                             "finite")
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(fitted)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


_DOC_PARAMS = """n_particles : int, default=100
        Particles C per island.
    n_islands : int, default=5
        Independent particle systems I (Sec. 3.4.1.3), run in ``n_jobs`` threads.
    proposal : {"prior", "empirical", "optimal"}, default="prior"
        Proposal kernel (Sec. 3.3, 3.3.1). The thesis found the prior proposal the best
        accuracy per second; the one-step optimal one needs fewer particles (C = 10) but
        costs a sorted scan of every dimension at every node.
    expansion : {"node", "layer"}, default="node"
        Node-wise breadth-first expansion (one node per stage, the thesis' choice) or
        layer-wise (all eligible nodes per stage).
    ess_threshold : float, default=0.1
        Resample when the effective sample size is below ``ess_threshold * C``.
    resampling : {"multinomial", "systematic"}, default="multinomial"
    max_stages : int or None, default=None
        Cap on the stages (None: until every tree has stopped growing).
    alpha_s, beta_s : float, default=(0.95, 0.5)
        The tree prior of eq. (3.3), alpha_s (1 + depth)^(-beta_s): a node splits less
        often the deeper it is. Under the defaults prior trees have 18.5 nodes on average.
    island_weights : {"equal", "evidence"}, default="equal"
        How islands are averaged: uniformly (the thesis' islands), or by their marginal
        likelihood estimates (all particles as one importance sample).
    random_state : int, RandomState instance or None, default=None
        Seed; ``None`` draws one at fit and keeps it in ``entropy_``. Island ``i`` uses
        ``SeedSequence(entropy_, spawn_key=(0, i))``, whatever ``n_jobs``.
    n_jobs : int or None, default=None
        Threads over islands (fit) and row blocks (predict); -1 uses all cores."""

_DOC_ATTRS = """trees_ : ebf.bayestrees._particles.ParticleTrees
        The distinct final particles of every island, node statistics, weights.
    tree_weight_ : ndarray of shape ``(n_trees_,)``
        Weight of every tree in the prediction (sums to one).
    log_evidence_ : ndarray of shape (n_islands,)
        Every island's estimate of log p(Y | X), the SMC marginal likelihood (Alg. 3.1).
    n_trees_, n_leaves_, max_depth_, expected_n_leaves_, n_stages_, n_resampled_
        Model size and run summaries.
    encoder_ : ebf.features.FeatureEncoder
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fit on a DataFrame.
    entropy_ : int
        The resolved seed."""


class SMCTreeClassifier(ProbabilisticClassifierMixin, ClassifierMixin, _SMCTree):
    __doc__ = f"""Bayesian decision tree classifier sampled by SMC (thesis Ch. 3, Alg. 3.1).

    The model is the Chipman et al. prior (eq. 3.3-3.4) with a Dirichlet-multinomial
    likelihood at the leaves (eq. 3.2); the posterior over trees is approximated by the
    weighted particles of ``n_islands`` SMC runs. A class probability is the weighted average
    over trees of the leaf's Dirichlet predictive ``(c_k + alpha / K) / (n + alpha)``.

    Parameters
    ----------
    {_DOC_PARAMS}
    alpha : float, default=5.0
        Total concentration of the symmetric Dirichlet prior (alpha / K per class).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    {_DOC_ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.bayestrees import SMCTreeClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = (X[:, 0] > 0.5).astype(int)
    >>> clf = SMCTreeClassifier(n_particles=20, n_islands=2, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:3]).shape, clf.log_evidence_.shape
    ((3, 2), (2,))
    """

    _parameter_constraints: dict = {
        **_SMCTree._parameter_constraints,
        "alpha": [Interval(Real, 0.0, None, closed="neither")],
    }

    def __init__(self, *, n_particles: int = 100, n_islands: int = 5, proposal: str = "prior",
                 expansion: str = "node", ess_threshold: float = 0.1,
                 resampling: str = "multinomial", max_stages: int | None = None,
                 alpha_s: float = SMC_ALPHA_S, beta_s: float = SMC_BETA_S,
                 alpha: float = DEFAULT_ALPHA, island_weights: str = "equal",
                 random_state: Any = None, n_jobs: int | None = None) -> None:
        _store(self, locals())

    def _encode_target(self, y: Any, n: int, n_classes: int | None) -> tuple:
        return classifier_target(self, y, n, n_classes)

    def _likelihood(self, A: np.ndarray, codes: np.ndarray,
                    extra: dict) -> tuple[LeafLikelihood, np.ndarray]:
        return LeafLikelihood.dirichlet_multinomial(self.alpha, len(extra["classes_"])), codes

    def _node_values(self, stats: np.ndarray, extra: dict) -> np.ndarray:
        """The Dirichlet predictive of every node, ``(c + alpha / K) / (n + alpha)``."""
        k = stats.shape[1]
        return (stats + self.alpha / k) / (stats.sum(axis=1, keepdims=True) + self.alpha)

    def _proba(self, A: np.ndarray) -> np.ndarray:
        """Weighted average over trees of the leaves' Dirichlet predictives (eq. 2.1)."""
        return weighted_values(self.trees_, A, self.tree_weight_, self._node_value)

    def _task_state(self) -> dict[str, Any]:
        return {**classes_state(self.classes_), **class_calibration_state(self)}

    def _task_from_state(self, state: dict[str, Any]) -> tuple[dict, int]:
        """``classes_``, whose number is the width of the node statistics (all counts), and
        the class calibration map, if any."""
        classes = check_classes(classes_from_state(state))
        return {"classes_": classes,
                **class_calibration_from_state(state, len(classes))}, len(classes)


class SMCTreeRegressor(ProbabilisticRegressorMixin, RegressorMixin, _SMCTree):
    __doc__ = f"""Bayesian regression tree sampled by SMC (thesis Alg. 3.1).

    The leaf means and noise are scaled from the training target as BART's are for one tree
    (Chipman et al. 2010 Sec. 2.2; thesis Sec. 4.2.4 with m = 1): mu_0 is the midrange of y,
    tau = (max y - min y) / (2 k), so a leaf mean lies in the range of y with probability
    0.95 for k = 2, and sigma_hat^2 is ``noise_variance`` or, by default, the residual
    variance of a least-squares linear fit (the variance of y when there are no more rows
    than columns). ``noise`` chooses the leaf likelihood:

    - ``"leaf"`` (default): every leaf has its own variance, the mean-variance shift model
      of Chipman, George and McCulloch (1998, Sec. 4): sigma_j^2 ~ IG(nu / 2, nu lambda / 2)
      with ``P(sigma_j^2 < sigma_hat^2) = q`` as BART's prior (Sec. 4.2.4), and mu_j |
      sigma_j^2 ~ N(mu_0, sigma_j^2 tau^2 / lambda), so Var(mu_j) = tau^2 at the prior's
      scale. Both are integrated out; a leaf's predictive is a Student-t with ``nu + n_j``
      degrees of freedom, entered in the mixture as the Normal of its mean and variance.
    - ``"shared"``: eq. (4.9), Normal noise of the fixed variance sigma_hat^2 in every leaf
      and mu_j ~ N(mu_0, tau^2); a leaf's predictive is N(posterior mean, sigma_hat^2 +
      posterior variance of mu_j). sigma_hat^2 over-estimates the noise (it is meant as
      the upper end of a prior), so these intervals are too wide.

    The predictive distribution is a Gaussian mixture with one component per tree, weighted
    by ``tree_weight_``; :meth:`recalibrate` can correct its calibration.

    Parameters
    ----------
    {_DOC_PARAMS}
    noise : {{"leaf", "shared"}}, default="leaf"
        A variance per leaf (integrated out) or one fixed variance (eq. 4.9).
    noise_variance : float or None, default=None
        sigma_hat^2; None estimates it as above (``noise_variance_``).
    k : float, default=2.0
        Prior scale of the leaf means: tau = range(y) / (2 k).
    nu, q : float, default=(3.0, 0.9)
        ``noise="leaf"``: degrees of freedom and quantile of the leaves' variance prior.

    Attributes
    ----------
    noise_variance_, leaf_prior_mean_, leaf_prior_var_ : float
        sigma_hat^2, mu_0 and tau^2, in the units of y.
    {_DOC_ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.bayestrees import SMCTreeRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = np.where(X[:, 0] > 0.5, 2.0, 0.0) + rng.normal(size=200)
    >>> reg = SMCTreeRegressor(n_particles=20, n_islands=2, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> reg.predict_quantiles(X[:3], q=(0.05, 0.95)).shape
    (3, 2)
    """

    _parameter_constraints: dict = {
        **_SMCTree._parameter_constraints,
        "noise": [StrOptions({"leaf", "shared"})],
        "noise_variance": [Interval(Real, 0.0, None, closed="neither"), None],
        "k": [Interval(Real, 0.0, None, closed="neither")],
        "nu": [Interval(Real, 2.0, None, closed="neither")],
        "q": [Interval(Real, 0.0, 1.0, closed="neither")],
    }

    def __init__(self, *, n_particles: int = 100, n_islands: int = 5, proposal: str = "prior",
                 expansion: str = "node", ess_threshold: float = 0.1,
                 resampling: str = "multinomial", max_stages: int | None = None,
                 alpha_s: float = SMC_ALPHA_S, beta_s: float = SMC_BETA_S,
                 noise: str = "leaf", noise_variance: float | None = None, k: float = 2.0,
                 nu: float = 3.0, q: float = 0.9, island_weights: str = "equal",
                 random_state: Any = None,
                 n_jobs: int | None = None) -> None:
        _store(self, locals())

    def _encode_target(self, y: Any, n: int, n_classes: None = None) -> tuple:
        y = regression_target(self, y, n)
        return y, dict(NO_MAP)  # a fit drops a recalibration map

    def _likelihood(self, A: np.ndarray, y: np.ndarray,
                    extra: dict) -> tuple[LeafLikelihood, np.ndarray]:
        """The leaf likelihood of the class docstring, and the labels centred at mu_0 (the
        statistics of y - mu_0 keep ``sum y^2`` small, so no cancellation)."""
        floor = variance_floor(y)
        lo, hi = float(y.min()), float(y.max())
        sigma2 = self.noise_variance
        if sigma2 is None:  # on the target scaled to span 1, as BART's
            sigma2 = sigma_hat2(A, (y - lo) / (hi - lo)) * (hi - lo) ** 2 if hi > lo else 0.0
        extra.update(noise_variance_=max(float(sigma2), floor), leaf_prior_mean_=0.5 * (lo + hi),
                     leaf_prior_var_=max(((hi - lo) / (2.0 * self.k)) ** 2, floor))
        return self._leaf_likelihood(extra), y - extra["leaf_prior_mean_"]

    def _leaf_likelihood(self, extra: dict) -> LeafLikelihood:
        """The likelihood of labels centred at mu_0, from the fitted prior scales."""
        s2, t2 = extra["noise_variance_"], extra["leaf_prior_var_"]
        if self.noise == "shared":
            return LeafLikelihood.normal(s2, 0.0, t2)
        lam = noise_prior(s2, float(self.nu), float(self.q))
        return LeafLikelihood.normal_inverse_gamma(self.nu, lam, 0.0, lam / t2)

    def _node_values(self, stats: np.ndarray, extra: dict) -> np.ndarray:
        """Predictive mean and variance of every node. ``"shared"``: N(mu_0 + m, sigma^2 +
        v) with ``v = 1 / (n / sigma^2 + 1 / tau^2)`` and ``m = v * sum(y - mu_0) /
        sigma^2``; ``"leaf"``: the Student-t's mean mu_0 + m_n and variance
        ``b_n (kappa_n + 1) / (kappa_n (a_n - 1))`` (:func:`.likelihood.nig_posterior`)."""
        likelihood = self._leaf_likelihood(extra)
        mu0 = extra["leaf_prior_mean_"]
        if self.noise == "shared":
            s2, _, t2 = likelihood.params
            v = 1.0 / (stats[:, 0] / s2 + 1.0 / t2)
            return np.column_stack([mu0 + v * stats[:, 1] / s2, s2 + v])
        mean, kappa_n, a_n, b_n = nig_posterior(likelihood.params, stats)
        return np.column_stack([mu0 + mean,
                                nig_predictive_variance(kappa_n, 2.0 * a_n, b_n / a_n)])

    def _mixture(self, A: np.ndarray) -> GaussianMixture:
        means, variances = leaf_values(self.trees_, A, self._node_value)
        weights = np.broadcast_to(self.tree_weight_, means.shape)
        return GaussianMixture._trusted(np.ascontiguousarray(weights), means, variances)

    def _task_state(self) -> dict[str, Any]:
        return {"noise_variance": float(self.noise_variance_),
                "leaf_prior_mean": float(self.leaf_prior_mean_),
                "leaf_prior_var": float(self.leaf_prior_var_), **recalibration_state(self)}

    def _task_from_state(self, state: dict[str, Any]) -> tuple[dict, int]:
        """sigma^2, mu_0, tau^2 (positive variances and a location within
        :mod:`basics.bounds`) and the recalibration map; the node statistics are ``[n,
        sum(y - mu_0), sum((y - mu_0)^2)]``."""
        out = {"noise_variance_": state_variance(state, "noise_variance"),
               "leaf_prior_mean_": state_location(state, "leaf_prior_mean"),
               "leaf_prior_var_": state_variance(state, "leaf_prior_var")}
        try:
            self._leaf_likelihood(out)
        except ValueError as exc:  # e.g. a subnormal variance whose prior scale underflows
            noise, prior = float(out["noise_variance_"]), float(out["leaf_prior_var_"])
            raise ValueError(f"noise_variance={noise!r} and leaf_prior_var={prior!r} give no "
                             f"leaf prior: {exc}") from None
        return {**out, **recalibration_from_state(state)}, 3

