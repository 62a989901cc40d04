"""Bayesian forests and random forests (Taddy, Chen, Yu & Wyle 2015, Sec. 2, Algorithm 1).

A Bayesian forest (BF) fits ``B`` weighted-sample CART trees, tree ``b`` on *all* rows with
weights ``theta^b ~ iid Exp(1)`` (the Bayesian bootstrap, Sec. 2.1-2.3); each tree is a draw
from the posterior of the population CART tree and their average approximates its posterior
mean. Breiman's random forest (RF) differs only in the weights: Poisson(1) counts
(``weights="poisson"``). Thin scikit-learn estimators over :mod:`ebf._cart`.

Predictive distributions (regression) are Gaussian mixtures
(:class:`basics.mixture.GaussianMixture`, the one mixture module of the project):

- ``uncertainty="leaf"``: one component per tree, equal weights: its leaf's weighted mean
  and the variance of the leaf's posterior predictive under the package's leaf-noise
  prior (:mod:`basics.leaf_noise`: normal-inverse-gamma, ``leaf_prior_rows`` pseudo-rows
  at the pooled within-leaf variance of the leaf's neighbourhood, rows counted by their
  effective size), so a leaf of a few equal targets cannot make a prediction certain;
- ``uncertainty="tree_spread"``: the simpler baseline, one Gaussian with the mean and the
  variance of the tree predictions (the spread of the posterior draws of the tree).

Component variances are floored at :data:`VAR_FLOOR_REL` times the variance of the training
target (:func:`variance_floor`), since a point where all trees agree has spread zero and a
Gaussian needs a positive variance.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from basics.bounds import state_float, state_variance
from basics.class_recalibration import class_calibration_from_state, class_calibration_state
from basics.mixture import GaussianMixture
from basics.recalibration import (
    CALIBRATE_CONSTRAINT,
    NO_MAP,
    recalibration_from_state,
    recalibration_state,
)
from basics.seeds import resolve_entropy
from basics.tasks import CLASSIFICATION, REGRESSION
from basics.threads import N_JOBS
from basics.validation import check_classes, check_target_not_in_features, state_int

from . import _cart as cart
from . import _cart_fit as cart_fit
from ._base import (
    ProbabilisticClassifierMixin,
    ProbabilisticRegressorMixin,
    classes_from_state,
    classes_state,
    classifier_target,
    input_attributes,
    regression_target,
    variance_floor,
)
from ._leaf_knots import LEAF_KNOTS, LEAF_MODELS, MAX_LEAF_KNOTS, check_knots
from ._leaf_prior import LearntLeafPriorMixin
from .bootstrap import WEIGHT_KINDS
from .config import MAX_WIDE_BINS, MIN_SAMPLES_LEAF
from .features import FeatureEncoder
from .importance import forest_decrease, normalised

__all__ = ["BayesianForestClassifier", "BayesianForestRegressor"]

class _BaseBayesianForest(BaseEstimator):
    """Shared machinery: validation, fitting the flat forest, row blocks, persistence."""

    _task: str = REGRESSION
    #: Missing values get a bin of their own in the histogram trees (scikit-learn's exact
    #: trees learn their side too): they are accepted in ``X``.
    _missing_values = True

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "weights": [StrOptions(set(WEIGHT_KINDS))],
        "min_samples_leaf": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="neither"),
        ],
        "max_features": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="right"),
            StrOptions({"sqrt", "log2"}),
            None,
        ],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "splitter": [StrOptions(set(cart_fit.SPLITTERS))],
        "max_bins": [Interval(Integral, 2, MAX_WIDE_BINS, closed="both"), StrOptions({"auto"})],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
        "calibrate": CALIBRATE_CONSTRAINT,
    }

    # ------------------------------------------------------------------ fitting

    def _fit(self, X: Any, y: Any, sample_weight: Any, *, entropy: int | None = None,
             branch: int = 0, n_classes: int | None = None, **leaf: Any) -> BaseEstimator:
        """Validate everything, fit the forest, then set all fitted attributes at once.

        Nothing is assigned before the forest is built, so a call that raises leaves the
        model exactly as it was. ``entropy``, ``branch`` and ``n_classes`` are set by
        :meth:`_fit_branch` only; ``leaf`` options go to :meth:`_leaf_model`.
        """
        self._validate_params()
        check_target_not_in_features(X, y)
        encoder = FeatureEncoder()
        A = encoder.fit_transform(X, allow_nan=True)  # histogram and scikit-learn trees
        codes, extra = self._encode_target(y, A.shape[0], n_classes)
        sw = None
        if sample_weight is not None:
            sw = _check_sample_weight(sample_weight, A, dtype=np.float64,
                                      ensure_non_negative=True)
        X32 = cart_fit.as_float32(A, encoder.names_)
        entropy = resolve_entropy(self.random_state) if entropy is None else int(entropy)
        forest, weight_sq = cart_fit.fit_cart_trees(
            X32, codes, sw, task=self._task, n_classes=len(extra.get("classes_", [0])),
            n_estimators=self.n_estimators, weights=self.weights,
            min_samples_leaf=self.min_samples_leaf, max_features=self.max_features,
            max_depth=self.max_depth, entropy=entropy, branch=branch, n_jobs=self.n_jobs,
            splitter=self.splitter, max_bins=self.max_bins, leaf_knots=self._knots_per_leaf(),
        )
        forest = self._leaf_model(forest, weight_sq, extra, **leaf)
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(self._fitted(encoder, forest, entropy), **extra)
        return self

    def _fit_branch(self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None, *,
                    entropy: int, branch: int, n_classes: int | None = None,
                    **leaf: Any) -> BaseEstimator:
        """Fit as branch ``branch`` of an ensemble (EBF trunk leaf or SSF sub-sample).

        ``X`` is already encoded, ``y`` already checked (class codes ``0 .. n_classes-1``
        for classifiers, so that ``predict_proba`` has a column for every class of the
        ensemble); tree ``b`` uses ``SeedSequence(entropy, spawn_key=(branch, b))``.
        ``leaf`` options: as for :meth:`_leaf_model`.
        """
        return self._fit(X, y, sample_weight, entropy=entropy, branch=branch,
                         n_classes=n_classes, **leaf)

    def _leaf_model(self, forest: cart.CartForest, weight_sq: np.ndarray,
                    extra: dict[str, Any], **options: Any) -> cart.CartForest:
        """The forest as it predicts, from the raw leaf statistics of the fit (the
        regressor's leaf prior; may add fitted attributes to ``extra``). Classifiers take
        no options."""
        return forest

    def _knots_per_leaf(self) -> int:
        """Most knots a leaf keeps (:mod:`ebf._leaf_knots`); 0: none."""
        return 0

    @staticmethod
    def _fitted(encoder: FeatureEncoder, forest: cart.CartForest,
                entropy: int) -> dict[str, Any]:
        return {**input_attributes(encoder), "forest_": forest, "entropy_": int(entropy)}

    # ------------------------------------------------------------------ prediction helpers

    def apply(self, X: Any) -> np.ndarray:
        """Leaf of every row in every tree (scikit-learn's node ids within each tree).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_estimators), int64
        """
        A = self._transform(X)
        parts = self._map_blocks(lambda b: cart.apply(self.forest_, A[b]), A.shape[0])
        leaves = np.concatenate(parts) if parts else np.empty((0, self.forest_.n_trees), int)
        return leaves - self.forest_.roots[None, :]

    @property
    def n_nodes_(self) -> np.ndarray:
        """Number of nodes of every tree (the model size), shape (n_estimators,)."""
        check_is_fitted(self, "forest_")
        return self.forest_.n_nodes

    @property
    def n_leaves_(self) -> np.ndarray:
        """Number of leaves of every tree, shape (n_estimators,)."""
        check_is_fitted(self, "forest_")
        return self.forest_.n_leaves

    def _impurity_decrease(self) -> np.ndarray:
        """Mean over the trees of each feature's impurity decrease (:mod:`ebf.importance`)."""
        check_is_fitted(self, "forest_")
        return forest_decrease(self.forest_, self.n_features_in_)

    @property
    def feature_importances_(self) -> np.ndarray:
        """Impurity importances: each feature's share of the impurity decrease of the splits,
        averaged over the trees (:mod:`ebf.importance`), shape ``(n_features_in_,)``, summing to
        1 (all zero if no tree split)."""
        return normalised(self._impurity_decrease())

    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict[str, Any]:
        """Fitted state (``docs/model-format.md`` persistence contract): encoder, forest, seed."""
        check_is_fitted(self, "forest_")
        return {
            "encoder": self.encoder_._get_state(),
            "forest": self.forest_.get_state(),
            "entropy": int(self.entropy_),
        }

    def _set_state(self, state: dict[str, Any]) -> None:
        """Restore a state of :meth:`_get_state` (constructor parameters are set apart).

        Everything is validated before any attribute is set: the encoder, the task's own
        entries (:meth:`_task_from_state`), and the forest in full against the encoder's
        features and the classes (:meth:`ebf._cart.CartForest.from_state`), with one tree per
        ``n_estimators``. A bad state raises ``ValueError`` and leaves the model unchanged.
        """
        encoder = FeatureEncoder()
        encoder._set_state(state["encoder"])
        extra, n_classes = self._task_from_state(state)
        forest = cart.CartForest.from_state(
            state["forest"], n_features=encoder.n_features_in_, n_classes=n_classes)
        if forest.n_trees != self.n_estimators:
            raise ValueError(f"the forest has {forest.n_trees} trees but n_estimators is "
                             f"{self.n_estimators}.")
        check_knots(forest, self._knots_per_leaf())
        entropy = state_int(state, "entropy", 0)
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(self._fitted(encoder, forest, entropy), **extra)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        tags.input_tags.allow_nan = True
        return tags


class BayesianForestRegressor(LearntLeafPriorMixin, ProbabilisticRegressorMixin, RegressorMixin,
                              _BaseBayesianForest):
    """Bayesian forest regressor (Taddy et al. 2015, Sec. 2.3, Algorithm 1).

    For ``b = 1 .. B``: draw ``theta^b ~ iid Exp(1)`` over the rows and fit a weighted CART
    tree ``T(theta^b)`` to all rows (squared-error impurity weighted by ``theta``, eq. 4).
    The mean prediction is the average of the trees, an approximate posterior mean;
    ``weights="poisson"`` gives Breiman's random forest, ``weights="none"`` unweighted CART.

    Parameters
    ----------
    n_estimators : int, default=100
        Number of trees ``B``.
    weights : {"exponential", "poisson", "none"}, default="exponential"
        Bootstrap weights: Bayesian bootstrap (BF), Poisson counts (RF) or none.
    min_samples_leaf : int or float, default=MIN_SAMPLES_LEAF
        Minimum number of positively weighted rows in a leaf (a fraction of the rows if
        float), as in scikit-learn.
    max_features : int, float, {"sqrt", "log2"} or None, default=1.0
        Features considered per split, as in scikit-learn.
    max_depth : int or None, default=None
        Maximum tree depth.
    splitter : {"hist", "exact"}, default="hist"
        ``"hist"``: every tree is a histogram CART over the bins of ``max_bins``, binned
        once for the whole forest (:mod:`ebf._hist_tree`); where a feature has one bin per
        value, its splits are those of exact CART. ``"exact"``: scikit-learn's CART over
        every distinct value, the paper's implementation.
    max_bins : int or "auto", default="auto"
        Bins per feature of ``splitter="hist"`` (:mod:`ebf.config`). ``"auto"``: a feature
        with at most ``EXACT_BINS`` distinct values (times in minutes, categorical codes)
        keeps one bin per value, so its thresholds are those of exact CART; a continuous
        one gets ``MAX_BINS`` quantile bins (finer ones measured no better, and every bin
        is a candidate threshold). An int (2 to ``MAX_WIDE_BINS``) caps every feature at
        that many bins. Codes take one byte per value up to ``MAX_BINS`` bins, two beyond.
    uncertainty : {"leaf", "tree_spread"}, default="leaf"
        ``"leaf"``: the predictive distribution is an equal-weight Gaussian mixture with one
        component per tree (leaf mean, leaf predictive variance). ``"tree_spread"``:
        one Gaussian with the mean and variance of the tree predictions.
    leaf_prior_rows : "auto", float or None, default="auto"
        Weight, in pseudo-rows, of the inverse-gamma prior on every leaf's noise variance,
        centred on the pooled within-leaf variance ``s0^2`` of the smallest subtree around
        the leaf whose leaves hold that many residual degrees of freedom (the residual
        variance of the leaf's neighbourhood; :func:`ebf._cart_fit.prior_centres`). A leaf of
        ``n`` effective rows (``(sum w)^2 / sum w^2`` of its bootstrap weights) and weighted
        variance ``v`` predicts with the Student-t variance ``(nu0 s0^2 + n v) (n + 1) /
        (n (nu0 + n - 2))`` (:mod:`basics.leaf_noise`): never less than the prior gives a
        leaf of equal targets, and its own spread as ``n`` grows. Must be > 1. ``None``:
        the leaf's weighted sample variance as it is (the behaviour before the prior, and of
        models saved then). ``"auto"``: learnt from the rows the model never saw, with
        ``calibrate="auto"``: the calibration groups score every strength of
        :data:`basics.leaf_noise.LEAF_PRIOR_CANDIDATES` on their held-out rows, and the
        model takes the one with the highest recalibrated held-out log density
        (:mod:`basics.prior_choice`; no extra trees are fit); with any other
        ``calibrate``, :data:`basics.leaf_noise.LEAF_PRIOR_ROWS`. As an EBF branch, each
        branch learns its own.
    leaf_model : {"gaussian", "empirical"}, default="gaussian"
        ``uncertainty="leaf"``: a leaf is one Gaussian (its mean, its predictive variance),
        or ``"empirical"``: at most ``leaf_knots`` knots of its weighted targets (a
        weighted quantile sketch), each a Gaussian kernel, with the Gaussian leaf's mean and
        variance but the shape of the data (skewed, integer-valued targets;
        :mod:`ebf._leaf_knots`). The mean prediction does not change.
    leaf_knots : int, default=LEAF_KNOTS
        Most knots per leaf of ``leaf_model="empirical"`` (1 to ``MAX_LEAF_KNOTS``).
    calibrate : {"auto", "holdout", "recent", "none"}, default="auto"
        How the predictive CDF is recalibrated (:mod:`basics.calibration`). ``"auto"``: on
        every training row, each predicted by a small forest fit without it (5 folds, 10%
        of ``n_estimators`` trees each, about 40% more fit time); no row is taken from the
        model. ``"holdout"`` / ``"recent"``: fit on 90% of the rows (random, or the first
        in their order) and recalibrate on the rest. ``"none"``: the model's own mixture.
        ``calibration_`` records how the map was learnt.
    random_state : int, RandomState instance or None, default=None
        Seed; ``None`` draws one at fit and keeps it in ``entropy_``. Tree ``b`` uses
        ``SeedSequence(entropy_, spawn_key=(0, b))``, whatever ``n_jobs``.
    n_jobs : int or None, default=None
        Threads over trees (fit) and row blocks (predict); -1 uses all cores.

    Attributes
    ----------
    recalibration_ : basics.pit.PITMap or None
        The PIT map of ``calibrate`` (or of :meth:`recalibrate`).
    calibration_ : dict or None
        How it was learnt: ``method`` (``"folds"`` for ``"auto"``) and its row and tree
        counts.
    forest_ : ebf._cart.CartForest
        Flat arrays of all trees.
    encoder_ : ebf.features.FeatureEncoder
        Column names, kinds and categories of the training input.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fit on a DataFrame.
    entropy_ : int
        The resolved seed: refitting with ``random_state=entropy_`` reproduces the model.
    var_floor_ : float
        Floor of component variances (:func:`variance_floor` of the training target).
    leaf_prior_rows_ : float or None
        The prior strength the leaves use (None: no prior; NaN: not recorded, a model saved
        before it was).
    leaf_noise_var_ : float or None
        The pooled within-leaf variance of all the forest's leaves (``sum n v / sum (n -
        1)``, at least ``var_floor_``): the forest's residual variance, and the prior's
        centre in a tree too small for a local one; None without the prior.
    n_nodes_, n_leaves_ : ndarray of shape (n_estimators,)
        Model size per tree.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf._forests import BayesianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 3)); y = 10 * X[:, 0] + rng.normal(size=200)
    >>> bf = BayesianForestRegressor(n_estimators=20, random_state=0).fit(X, y)
    >>> mean, std = bf.predict(X[:2], return_std=True)
    >>> bf.predict_quantiles(X[:2], q=(0.05, 0.5, 0.95)).shape
    (2, 3)
    >>> bf.predict_distribution(X[:2], recalibrated=False).n_components  # one per tree
    20
    """

    _task = REGRESSION
    _parameter_constraints: dict = {
        **_BaseBayesianForest._parameter_constraints,
        "uncertainty": [StrOptions({"leaf", "tree_spread"})],
        "leaf_prior_rows": [Interval(Real, 1.0, 1e9, closed="neither"), StrOptions({"auto"}),
                            None],
        "leaf_model": [StrOptions(set(LEAF_MODELS))],
        "leaf_knots": [Interval(Integral, 1, MAX_LEAF_KNOTS, closed="both")],
    }

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        weights: str = "exponential",
        min_samples_leaf: int | float = MIN_SAMPLES_LEAF,
        max_features: int | float | str | None = 1.0,
        max_depth: int | None = None,
        splitter: str = "hist",
        max_bins: int | str = "auto",
        uncertainty: str = "leaf",
        leaf_prior_rows: float | str | None = "auto",
        leaf_model: str = "gaussian",
        leaf_knots: int = LEAF_KNOTS,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.calibrate = calibrate
        self.n_estimators = n_estimators
        self.weights = weights
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.splitter = splitter
        self.max_bins = max_bins
        self.uncertainty = uncertainty
        self.leaf_prior_rows = leaf_prior_rows
        self.leaf_model = leaf_model
        self.leaf_knots = leaf_knots
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _encode_target(self, y: Any, n: int, n_classes: None = None) -> tuple:
        y = regression_target(self, y, n)
        return y, {"var_floor_": variance_floor(y), **NO_MAP}  # a fit drops a map

    def fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> BayesianForestRegressor:
        """Fit ``n_estimators`` weighted CART trees (Algorithm 1).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
            Categorical and string columns of a DataFrame are coded by ``FeatureEncoder``.
        y : array-like of shape (n_samples,)
            Finite target; missing values raise an error stating how many rows have them.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative row weights; they multiply the bootstrap weights.

        Returns
        -------
        self
        """
        return self._calibrated_fit(self._fit_learning_prior, X, y, sample_weight)

    def _knots_per_leaf(self) -> int:
        empirical = self.leaf_model == "empirical" and self.uncertainty == "leaf"
        return int(self.leaf_knots) if empirical else 0

    def _mixture(self, A: np.ndarray) -> GaussianMixture:
        if self.uncertainty == "tree_spread":
            mean, spread, _ = cart.regression_moments(self.forest_, A, self.var_floor_)
            return GaussianMixture.from_moments(mean, np.maximum(spread, self.var_floor_))
        # finite leaf means, variances >= the positive floor: nothing left to check, and
        # weights 1 / n_trees are what normalising equal weights gives
        if self.forest_.knot_offsets.size:
            return GaussianMixture._trusted(*cart.knot_components(self.forest_, A,
                                                                  self.var_floor_))
        means, variances = cart.leaf_components(self.forest_, A, self.var_floor_)
        weights = np.full(means.shape, 1.0 / self.forest_.n_trees)
        return GaussianMixture._trusted(weights, means, variances)

    def _get_state(self) -> dict[str, Any]:
        leaf = {} if self.leaf_noise_var_ is None else {
            "leaf_noise_var": float(self.leaf_noise_var_)}
        if self.leaf_prior_rows_ is not None and np.isfinite(self.leaf_prior_rows_):
            leaf["leaf_prior_rows"] = float(self.leaf_prior_rows_)
        return {**super()._get_state(), "var_floor": float(self.var_floor_), **leaf,
                **recalibration_state(self)}

    @staticmethod
    def _task_from_state(state: dict[str, Any]) -> tuple[dict[str, Any], None]:
        """``var_floor_`` (a positive variance: it floors every component variance), the
        leaf prior's ``leaf_noise_var_`` (a variance ``>= var_floor``; absent from models
        saved before the prior, whose leaves keep their sample variances), both within
        :data:`basics.bounds.MAX_VARIANCE`, and the recalibration map, if any."""
        floor = state_variance(state, "var_floor")
        s0_sq = state.get("leaf_noise_var")
        prior_rows = None
        if s0_sq is not None:
            s0_sq = state_variance(state, "leaf_noise_var", low=floor,
                                   bound="from var_floor to MAX_VARIANCE")
            prior_rows = (state_float(state, "leaf_prior_rows", 1.0, 1e9, "the parameter's range")
                          if "leaf_prior_rows" in state else float("nan"))
        return {"var_floor_": floor, "leaf_noise_var_": s0_sq, "leaf_prior_rows_": prior_rows,
                "_leaf_stats": None, **recalibration_from_state(state)}, None


class BayesianForestClassifier(ProbabilisticClassifierMixin, ClassifierMixin,
                               _BaseBayesianForest):
    """Bayesian forest classifier (Taddy et al. 2015, Sec. 2.3, Algorithm 1).

    Each tree is a weighted-sample CART fit with the Gini impurity (Sec. 2.2) and weights
    ``theta^b ~ iid Exp(1)``; class probabilities are the mean over trees of the weighted
    class fractions of the leaves. ``weights="poisson"`` gives Breiman's random forest.

    Parameters
    ----------
    n_estimators : int, default=100
        Number of trees ``B``.
    weights : {"exponential", "poisson", "none"}, default="exponential"
        Bootstrap weights: Bayesian bootstrap (BF), Poisson counts (RF) or none.
    min_samples_leaf : int or float, default=MIN_SAMPLES_LEAF
        Minimum number of positively weighted rows in a leaf.
    max_features : int, float, {"sqrt", "log2"} or None, default="sqrt"
        Features considered per split, as in scikit-learn.
    max_depth : int or None, default=None
        Maximum tree depth.
    splitter : {"hist", "exact"}, default="hist"
        Histogram CART (Gini over the same bins) or scikit-learn's exact CART, as in
        :class:`BayesianForestRegressor`.
    max_bins : int or "auto", default="auto"
        Bins per feature of ``splitter="hist"``, as in :class:`BayesianForestRegressor`.
    calibrate : {"auto", "holdout", "recent", "none"}, default="auto"
        How the class probabilities are recalibrated
        (:class:`basics.class_calibration.ClassCalibrationMap`, chosen on held-out log
        loss). ``"auto"``: on every training row's probabilities from small forests fit
        without it (5 folds, 10% of ``n_estimators`` trees each); ``"holdout"`` /
        ``"recent"``: fit on 90% of the rows and recalibrate on the rest; ``"none"``: the
        forest's own probabilities.
    random_state : int, RandomState instance or None, default=None
        Seed; ``None`` draws one at fit and keeps it in ``entropy_``.
    n_jobs : int or None, default=None
        Threads over trees (fit) and row blocks (predict).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels (sorted).
    forest_ : ebf._cart.CartForest
        Flat arrays of all trees; leaf rows have one column per class of ``classes_``.
    encoder_ : ebf.features.FeatureEncoder
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fit on a DataFrame.
    entropy_ : int
        The resolved seed.
    n_nodes_, n_leaves_ : ndarray of shape (n_estimators,)
        Model size per tree.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf._forests import BayesianForestClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = np.where(X[:, 0] > 0.5, "a", "b")
    >>> clf = BayesianForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), clf.predict_proba(X[:3]).shape
    (['a', 'b'], (3, 2))
    """

    _task = CLASSIFICATION

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        weights: str = "exponential",
        min_samples_leaf: int | float = MIN_SAMPLES_LEAF,
        max_features: int | float | str | None = "sqrt",
        max_depth: int | None = None,
        splitter: str = "hist",
        max_bins: int | str = "auto",
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.weights = weights
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.splitter = splitter
        self.max_bins = max_bins
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _encode_target(self, y: Any, n: int, n_classes: int | None = None) -> tuple:
        return classifier_target(self, y, n, n_classes)

    def fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> BayesianForestClassifier:
        """Fit ``n_estimators`` weighted CART classification trees (Algorithm 1).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels; missing labels raise an error stating how many rows have them.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative row weights; they multiply the bootstrap weights.

        Returns
        -------
        self
        """
        return self._calibrated_fit(lambda X, y, w, _: self._fit(X, y, w), X, y, sample_weight)

    def _proba(self, A: np.ndarray) -> np.ndarray:
        """Mean over trees of the leaf class fractions (rows sum to one)."""
        return cart.mean_value(self.forest_, A)

    def _get_state(self) -> dict[str, Any]:
        return {**super()._get_state(), **classes_state(self.classes_),
                **class_calibration_state(self)}

    @staticmethod
    def _task_from_state(state: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """``classes_``, whose number is the width of the forest's leaf values, and the class
        calibration map, if any."""
        classes = check_classes(classes_from_state(state))
        return {"classes_": classes,
                **class_calibration_from_state(state, len(classes))}, len(classes)
