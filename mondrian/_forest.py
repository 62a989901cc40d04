"""Mondrian forest estimators (batch and online, regression and classification).

Thin scikit-learn estimators over the numba kernels of ``_tree``, ``_sample``, ``_predict``,
``posterior`` and ``ikn``; what both share is in ``_base``.

References
----------
Lakshminarayanan, Roy & Teh (2016), "Mondrian forests for large-scale regression when
uncertainty matters", AISTATS (regression: Sec. 2-3, App. A-C).
Lakshminarayanan (2016), PhD thesis, ch. 5 (classification: HNSP prior, IKN smoothing,
paused Mondrians, Alg. 5.1-5.10).
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np
from numba import typed
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from basics.bounds import state_variance
from basics.class_recalibration import (
    NO_CLASS_MAP,
    class_calibration_from_state,
    class_calibration_state,
)
from basics.flat_tree import INDEX
from basics.mixture import GaussianMixture, check_errors, solver_levels
from basics.predictive import PredictiveClassifierMixin, PredictiveRegressorMixin
from basics.recalibration import (
    CALIBRATE_CONSTRAINT,
    NO_MAP,
    recalibration_from_state,
    recalibration_state,
)
from basics.tasks import CLASSIFICATION, REGRESSION
from basics.validation import (
    check_finite,
    check_regression_target,
    state_int,
    unchanged_on_error,
)

from . import _predict
from ._base import (
    TreePosteriors,
    _BaseMondrianForest,
    _sigmoid,
    classes_entry,
    classes_from_entry,
)
from ._config import NODE_REG_STATS
from ._ikn import ikn_posterior
from ._noise import gamma_test
from ._posterior import (
    NOISE_PRIOR_SHAPE,
    belief_propagation,
    empirical_moments,
    hyperparameters,
    node_noise_variance,
)
from ._predict import (
    N_NODE_PARAMS,
    NODE_MEAN,
    NODE_NOISE,
    NODE_VAR,
    OFF_MEAN,
    OFF_VAR,
)
from ._records import Messages, Prior
from ._tree import TreeArrays


class MondrianForestRegressor(PredictiveRegressorMixin, RegressorMixin, _BaseMondrianForest):
    """Mondrian forest regressor with a hierarchical Gaussian posterior.

    Each tree is a Mondrian tree (paper Alg. 1-2) grown on inputs scaled to [0, 1] by
    the training min/max; labels follow a hierarchical Gaussian prior along the tree
    (Sec. 3) whose posterior is computed by exact belief propagation (Sec. 3.1) or by the
    fast empirical approximation (App. C). A prediction is a Gaussian mixture over the
    path nodes of every tree (eq. 3-5), so it widens away from the training data.

    Parameters
    ----------
    n_estimators : int, default=10
        Number of trees.
    lifetime : float, default=inf
        Lifetime lambda of the Mondrian process.
    min_samples_split : int, default=10
        A block with fewer points is not split (paused, and resumed online once it
        holds enough points).
    posterior : {"exact", "empirical"}, default="exact"
        ``"exact"``: belief propagation with the hyperparameter heuristic of App. B,
        recomputed lazily after ``partial_fit`` for the trees that changed.
        ``"empirical"``: node mean and variance of the labels (App. C), O(log n) updates.
    noise : {"per_leaf", "estimated", "forest"}, default="per_leaf"
        ``"forest"``: one label noise variance for the whole forest (Sec. 3 eq. 1, set by
        App. B, ``gamma1 / K``, about ``var(y) / 1000``), the paper's model: use it to
        reproduce the paper. It is not the default because App. B's variance is far below
        the noise of most data: at an input the forest has seen (a repeated input, a
        retraining holdout) every tree's component is narrower than the noise and a fresh
        label is improbable (Friedman #1, fresh noise at training inputs: NLPD 8.5 against
        2.8 at new inputs; flights 52 against 5.1; ``benchmarks/bench_mondrian_noise.py``).
        ``"estimated"`` (our extension): one noise variance for the whole forest, estimated
        from the rows seen by the Gamma test (:func:`mondrian._noise.gamma_test`; never
        below App. B's), recomputed lazily after ``partial_fit``: honest at seen inputs too.
        ``"per_leaf"`` (our extension, the default):
        every node has its own noise variance, the posterior mode of an inverse-gamma prior
        whose mode is the forest's and that weighs as a few rows
        (:func:`mondrian._posterior.node_noise_variance`), so leaves with few rows stay near
        the forest's variance and well-populated nodes track their local spread; the
        leaves' enter belief propagation, and every node's the component of the predictive
        mixture it gives (eq. 3), so intervals widen where the labels are noisier; a leaf
        that branches off holds no rows and adds the forest's variance (its prior variance
        already carries the labels' spread; adding the node's too made the raw intervals
        too wide between dense data, issue 42). Measured
        (``benchmarks/results/issue11/noise.md``): with ``"exact"`` alone it lowers held-out
        NLPD on Friedman #1 and shuffled flights but widens intervals that were already too
        wide; after :meth:`recalibrate` it has the lowest NLPD on Friedman and the flights
        at the same calibration. With ``"empirical"``, whose node variance already is the
        labels' spread, it counts that spread twice and is worse. Chosen as the default by
        ``bench_mondrian_noise.py``, before that branch-off change (10 trees, 20k rows;
        NLPD at new inputs, raw /
        recalibrated): Friedman #1 2.800 / 2.736 (``"forest"`` 2.803 / 2.764,
        ``"estimated"`` 2.782 / 2.736), flights chronological 5.090 / 4.706 (5.059 / 4.749;
        5.169 / 4.714), shuffled 4.852 / 4.729 (5.092 / 4.992; 5.100 / 4.780), California
        housing 0.776 / 0.715 (0.951 / 0.941; 0.982 / 0.790); at seen inputs it has the
        lowest NLPD of the three on every data set (``"forest"``: 6.8 to 52).
    calibrate : {"auto", "holdout", "recent", "none"}, default="auto"
        How the predictive CDF is recalibrated (:mod:`basics.calibration`). ``"auto"``: on
        every training row, each predicted by 2-tree forests (10% of ``n_estimators``, at
        least 2) fit without it on 5 folds; no row is taken from the forest.
        ``"holdout"`` / ``"recent"``: fit on 90% of the rows and recalibrate on the rest.
        ``"none"``: the forest's own mixture. ``partial_fit`` keeps the map.
    random_state : int, RandomState instance or None, default=None
        Seeds every tree: tree t at update u uses word t of ``SeedSequence(seed, spawn_key=(u,))``,
        so results do not depend on ``n_jobs``.
    n_jobs : int or None, default=None
        Threads over trees (fit) and over row blocks (predict); -1 uses all cores.

    Attributes
    ----------
    trees_ : list of TreeArrays
        Flat arrays of every tree.
    x_min_, x_scale_ : ndarray of shape (n_features,)
        The input scaling fixed by the first fit.
    hyperparameters_ : dict
        ``mu_H, gamma1, gamma2, noise_var`` of the posterior (App. B), from the data seen.
    n_samples_seen_ : int
        Training points seen so far.
    compact_ : bool
        Whether this is a compact, predict-only forest (:meth:`compact`).

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian import MondrianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = X[:, 0] + 0.1 * rng.normal(size=200)
    >>> reg = MondrianForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> reg.predict_distribution(X[:3]).quantile([0.05, 0.95]).shape
    (3, 2)
    """

    _task = REGRESSION
    _parameter_constraints: dict = {
        **_BaseMondrianForest._parameter_constraints,
        "posterior": [StrOptions({"exact", "empirical"})],
        "noise": [StrOptions({"forest", "estimated", "per_leaf"})],
        "calibrate": CALIBRATE_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        n_estimators: int = 10,
        lifetime: float = math.inf,
        min_samples_split: int = 10,
        posterior: str = "exact",
        random_state: Any = None,
        n_jobs: int | None = None,
        noise: str = "per_leaf",
        calibrate: str = "auto",
    ) -> None:
        self.calibrate = calibrate
        self.n_estimators = n_estimators
        self.lifetime = lifetime
        self.min_samples_split = min_samples_split
        self.posterior = posterior
        self.noise = noise
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_y(self, y: Any) -> np.ndarray:
        name = getattr(y, "name", None)
        y = np.asarray(self._check_target(y), dtype=np.float64)
        check_regression_target(y, name)  # finite, and small enough for the sums of y^2
        return y

    def fit(self, X: Any, y: Any) -> MondrianForestRegressor:
        """Sample a fresh forest on (X, y) (paper Alg. 1-2), then recalibrate it as
        ``calibrate`` says."""
        return self._calibrated_fit(lambda X, y, w, _: self._fit_forest(X, y), X, y, None)

    def _fit_forest(self, X: Any, y: Any) -> None:
        self._validate_params()
        with unchanged_on_error(self):
            X = self._check_X(X, reset=True)
            y = self._check_y(y)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}.")
        self._init_state(X)
        self._update(X, y, np.zeros(X.shape[0], INDEX))
        self.__dict__.update(NO_MAP)  # a fresh forest: an earlier map no longer applies

    def partial_fit(self, X: Any, y: Any) -> MondrianForestRegressor:
        """Extend every tree with (X, y), one point at a time (paper Alg. 3-4).

        The first call fixes the input scaling. A call that raises leaves the model
        unchanged.
        """
        self._check_updatable()
        first = not hasattr(self, "trees_")
        if first:
            self._validate_params()
        with unchanged_on_error(self):
            X = self._check_X(X, reset=first)
            y = self._check_y(y)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}.")
        if first:
            self._init_state(X)
        self._update(X, y, np.zeros(X.shape[0], INDEX))
        return self

    # ------------------------------------------------------------------ posterior

    def _init_state(self, X: np.ndarray) -> None:
        super()._init_state(X)
        self._noise_cache: dict[int, float] = {}

    def _posterior_context(self) -> dict:
        n, s1, s2 = self.trees_[0].root_stats()
        mu_h, gamma1, gamma2, noise_var = hyperparameters(n, s1, s2, self.n_features_in_)
        if self.noise == "estimated":
            noise_var = max(self._noise_estimate(), noise_var)
        return dict(mu_H=mu_h, gamma1=gamma1, gamma2=gamma2, noise_var=noise_var)

    def _noise_estimate(self) -> float:
        """The Gamma-test noise variance of the rows seen, computed once per
        ``n_samples_seen_`` (a sample seeded by the model's entropy: the same rows, the same
        value, however ``partial_fit`` was called); a compact forest has it from its state.
        """
        n = int(self.n_samples_seen_)
        cache = self._noise_cache
        if n not in cache:
            value = gamma_test(self._X[:n], self._y[:n], floor=float(np.finfo(float).tiny),
                               seed=int(self._entropy))
            cache.clear()
            cache[n] = value
        return cache[n]

    @property
    def hyperparameters_(self) -> dict:
        """``mu_H, gamma1, gamma2, noise_var`` used by the posterior (App. B; ``noise_var``
        estimated with ``noise="estimated"``).

        Computed from the root statistics and the rows seen, so prediction never changes
        ``__dict__``.
        """
        check_is_fitted(self, "trees_")
        return self._posterior_context()

    def _tree_posterior(self, tree: TreeArrays, h: dict) -> tuple:
        """Predictor ``R``, per-node parameters ``P`` and hyperparameters ``h`` of a tree."""
        n = tree.n_nodes
        order, R = self._predictor(tree)
        exact = self.posterior == "exact"
        noise = h["noise_var"]  # the paper's one variance: the kernels take a float too
        if self.noise == "per_leaf":
            noise = np.empty(n)
            node_noise_variance(tree.stats, n, h["noise_var"], NOISE_PRIOR_SHAPE, noise)
        if exact:
            record, prior = tree.record(), Prior(h["mu_H"], h["gamma1"], h["gamma2"])
            messages = Messages.empty(n)
            belief_propagation(record, tree.root, n, prior, noise, messages)
            P = _predict.exact_parameters(order, record, prior, noise, messages)
            if self.noise == "per_leaf":
                # A leaf that branches off holds no rows: its spread about the branch-off
                # node is the new leaf's prior variance, which App. B sizes to carry the
                # labels' variability already; adding the node's own noise on top counted
                # it twice and widened every point between the data boxes (shuffled
                # flights: max gap 0.154 -> 0.112). Seen rows (inside a leaf's box) keep
                # their leaf's noise in NODE_VAR.
                P[:, NODE_NOISE] = h["noise_var"]
        else:
            P = np.zeros((n, N_NODE_PARAMS))
            parent = tree.parent[:n]
            has_parent = parent >= 0
            pidx = np.where(has_parent, parent, 0)
            empirical_moments(tree.stats, n, noise, P[:, NODE_MEAN], P[:, NODE_VAR])
            P[:, NODE_NOISE] = noise
            P[:, OFF_MEAN] = np.where(has_parent, P[pidx, NODE_MEAN], P[tree.root, NODE_MEAN])
            P[:, OFF_VAR] = np.where(has_parent, P[pidx, NODE_VAR], P[tree.root, NODE_VAR])
            P = np.ascontiguousarray(P[order])
        hv = np.array([float(exact), h["gamma1"], h["gamma2"], h["noise_var"],
                       _sigmoid(h["gamma2"] * float(self.lifetime))])
        return R, P, hv

    # ------------------------------------------------------------------ prediction

    def _summary(self, Xs: np.ndarray, levels: np.ndarray) -> tuple:
        """Mean and standard deviation of the forest mixture from the moment kernels (eq.
        4-5, without building the mixture), quantiles from the mixture (eq. 3, 5)."""
        n = Xs.shape[0]
        m1 = np.zeros(n)
        m2 = np.zeros(n)
        for posterior in self._posterior:
            _predict.regression_moments(Xs, posterior, m1, m2)
        mean = m1 / self.n_estimators
        std = np.sqrt(np.maximum(m2 / self.n_estimators - mean * mean, 0.0))
        qs = (self._mixture(Xs).quantile(levels).reshape(n, levels.size) if levels.size
              else np.empty((n, 0)))
        return mean, std, qs, None

    def _fused_trees(self) -> tuple:
        """Every tree's ``(R, P, h)`` in a numba typed list and their path bounds, built
        once per posterior (:class:`._base.TreePosteriors`)."""
        self._ensure_posterior()
        posterior = self._posterior
        fused = getattr(posterior, "fused", None)
        if fused is None:
            fused = (typed.List(posterior),
                     np.array([_predict.path_bound(R) for R, _, _ in posterior], INDEX))
            if isinstance(posterior, TreePosteriors):
                posterior.fused = fused
        return fused

    def _mixture_summary(self, Xs: np.ndarray, levels: np.ndarray) -> tuple:
        """``summarize(self._mixture(Xs), levels)`` in one fused pass per row
        (:func:`._predict.regression_summary`): no count pass, no mixture arrays."""
        trees, bounds = self._fused_trees()
        levels = solver_levels(levels)
        n = Xs.shape[0]
        mean, var, qs = np.empty(n), np.empty(n), np.empty((n, levels.levels.shape[1]))
        errors = np.zeros(6, np.int64)
        _predict.regression_summary(Xs, trees, bounds, levels, (mean, var, qs), errors)
        check_errors(errors)
        return mean, np.sqrt(var), qs

    def _mixture(self, Xs: np.ndarray) -> GaussianMixture:
        """The full predictive Gaussian mixture of the rows ``Xs``: paths of all trees (eq.
        3, 5), one walk per tree and row (:func:`._predict.regression_mixture`)."""
        return GaussianMixture(*_predict.regression_mixture(Xs, *self._fused_trees()))

    def _task_state(self) -> dict:
        state = recalibration_state(self)
        if self.noise == "estimated":
            state["noise_variance"] = self._noise_estimate()
        return state

    def _task_from_state(self, state: dict) -> tuple[dict, int]:
        """The recalibration map and, with ``noise="estimated"``, the estimated noise
        variance (positive, within :data:`basics.bounds.MAX_VARIANCE`; a compact forest
        cannot recompute it)."""
        attrs = recalibration_from_state(state)
        cache = {}
        if state.get("noise_variance") is not None:
            value = state_variance(state, "noise_variance")
            cache[state_int(state, "n_samples_seen_", 1)] = value
        elif self.noise == "estimated" and state.get("compact_", False):
            raise ValueError("a compact forest with noise='estimated' needs its "
                             "noise_variance in the state")
        return {**attrs, "_noise_cache": cache}, NODE_REG_STATS


class MondrianForestClassifier(PredictiveClassifierMixin, ClassifierMixin, _BaseMondrianForest):
    """Mondrian forest classifier with HNSP / interpolated Kneser-Ney smoothing.

    Trees are paused Mondrian trees (thesis Alg. 5.9-5.10): a block whose labels are all
    identical, or with fewer than ``min_samples_split`` points, is not split until that
    changes online. Predictions follow thesis Alg. 5.8: per tree a mixture over the
    branch-off points of the path with the expected discount under the truncated
    exponential, averaged over trees.

    Parameters
    ----------
    n_estimators : int, default=10
    lifetime : float, default=inf
    min_samples_split : int, default=2
    discount_scale : float or None, default=None
        gamma of the discount d_j = exp(-gamma (tau_j - tau_parent(j))); None means
        ``10 * n_features`` (thesis Sec. 5.7).
    calibrate : {"auto", "holdout", "recent", "none"}, default="auto"
        How the class probabilities are recalibrated, as for
        :class:`MondrianForestRegressor` (a class calibration map,
        :class:`basics.class_calibration.ClassCalibrationMap`). ``partial_fit`` keeps it.
    random_state : int, RandomState instance or None, default=None
    n_jobs : int or None, default=None

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian import MondrianForestClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = (X[:, 0] > 0.5).astype(int)
    >>> clf = MondrianForestClassifier(random_state=0).partial_fit(X, y, classes=[0, 1])
    >>> clf.predict_proba(X[:2]).sum(axis=1)
    array([1., 1.])
    """

    _task = CLASSIFICATION
    _parameter_constraints: dict = {
        **_BaseMondrianForest._parameter_constraints,
        "discount_scale": [Interval(Real, 0, None, closed="left"), None],
        "calibrate": CALIBRATE_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        n_estimators: int = 10,
        lifetime: float = math.inf,
        min_samples_split: int = 2,
        discount_scale: float | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.lifetime = lifetime
        self.min_samples_split = min_samples_split
        self.discount_scale = discount_scale
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _n_stats(self) -> int:
        return len(self.classes_)

    def _task_state(self) -> dict:
        return {"classes_": classes_entry(self.classes_), **class_calibration_state(self)}

    def _task_from_state(self, state: dict) -> tuple[dict, int]:
        classes = classes_from_entry(state["classes_"])
        return {"classes_": classes, **class_calibration_from_state(
            state, int(classes.shape[0]))}, int(classes.shape[0])

    def _encode(self, y: Any, classes: np.ndarray) -> np.ndarray:
        y = self._check_target(y)
        if y.dtype.kind == "f":
            check_finite(y[:, None], ["y"], "y")
        codes = np.searchsorted(classes, y)
        codes = np.clip(codes, 0, len(classes) - 1)
        unknown = classes[codes] != y
        if np.any(unknown):
            new = np.unique(y[unknown])
            raise ValueError(
                f"y has {int(unknown.sum())} rows with classes {new.tolist()[:10]} that are "
                f"not among the declared classes {classes.tolist()}; pass every class in "
                "`classes=` on the first partial_fit call (or refit)."
            )
        return codes.astype(INDEX)

    def fit(self, X: Any, y: Any) -> MondrianForestClassifier:
        """Sample a fresh forest of paused Mondrian trees (thesis Alg. 5.1, 5.9), then
        recalibrate its probabilities as ``calibrate`` says."""
        return self._calibrated_fit(lambda X, y, w, _: self._fit_forest(X, y), X, y, None)

    def _fit_forest(self, X: Any, y: Any) -> None:
        self._validate_params()
        with unchanged_on_error(self):
            X = self._check_X(X, reset=True)
            y = self._check_target(y)
            if y.dtype.kind == "f":
                check_finite(y[:, None], ["y"], "y")
            check_classification_targets(y)
            classes = np.unique(y)
            labels = self._encode(y, classes)
            if labels.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {labels.shape[0]}.")
        self.classes_ = classes
        self._init_state(X)
        self._update(X, np.zeros(X.shape[0]), labels)
        self.__dict__.update(NO_CLASS_MAP)  # a fresh forest: an earlier map no longer applies

    def partial_fit(self, X: Any, y: Any, *, classes: Any = None) -> MondrianForestClassifier:
        """Extend every tree with (X, y) (thesis Alg. 5.5, 5.10).

        ``classes`` (all classes that will ever be seen) is required on the first call.
        A call that raises leaves the model unchanged.
        """
        self._check_updatable()
        first = not hasattr(self, "trees_")
        if first:
            self._validate_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit.")
            classes = np.unique(np.asarray(classes))
        else:
            if classes is not None and not np.array_equal(np.unique(classes), self.classes_):
                raise ValueError(
                    f"classes={list(classes)} differs from the classes of the first call "
                    f"{self.classes_.tolist()}."
                )
            classes = self.classes_
        with unchanged_on_error(self):
            X = self._check_X(X, reset=first)
            labels = self._encode(y, classes)
            if labels.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {labels.shape[0]}.")
        if first:
            self.classes_ = classes
            self._init_state(X)
        self._update(X, np.zeros(X.shape[0]), labels)
        return self

    def _posterior_context(self) -> float:
        if self.discount_scale is None:
            return 10.0 * self.n_features_in_
        return float(self.discount_scale)

    def _tree_posterior(self, tree: TreeArrays, gamma: float) -> tuple:
        G = np.empty((tree.n_nodes, len(self.classes_)))
        ikn_posterior(tree.left, tree.right, tree.tau, tree.stats, tree.root, tree.n_nodes,
                      gamma, G)
        order, R = self._predictor(tree)
        parent = tree.parent[order]
        G_parent = np.where((parent >= 0)[:, None], G[np.maximum(parent, 0)],
                            1.0 / len(self.classes_))
        return R, np.ascontiguousarray(tree.stats[order]), np.ascontiguousarray(G[order]), G_parent

    def _proba(self, Xs: np.ndarray) -> np.ndarray:
        """Class probabilities averaged over trees (thesis Alg. 5.8)."""
        gamma = self._posterior_context()
        out = np.zeros((Xs.shape[0], len(self.classes_)))
        for posterior in self._posterior:
            _predict.classification_proba(Xs, posterior, gamma, out)
        return out / self.n_estimators
