"""Empirical Bayesian forests (EBF) and sub-sample forests (SSF), in one process.

Taddy, Chen, Yu & Wyle (2015), Sec. 4: an EBF fits one shallow CART *trunk* to the
(unweighted) data, then an independent Bayesian forest -- a *branch* -- in every trunk leaf;
a row is predicted by the branch of the leaf it falls in. The SSF, the common alternative it
beats, splits the rows into ``n_subsamples`` random equal parts, fits a forest on each and
pools all trees into one equal-weight mixture.

``n_estimators`` is the number of trees per branch (EBF) and per sub-sample (SSF), so that
every row is seen by ``n_estimators`` trees in both and their costs match.

The distributed pipeline (``ebf.dask``) fits the trunk over all partitions and the branches on
workers with the same functions (:func:`ebf.branches.fit_branch`) and assembles exactly these
classes, so save / load / predict are shared.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from basics.tasks import CLASSIFICATION

from ._base import ProbabilisticClassifierMixin, ProbabilisticRegressorMixin
from .config import MAX_BINS, MIN_SAMPLES_LEAF
from .ensemble import _EBF
from .learners import DEFAULT_BRANCH
from .subsample import _SSF

__all__ = [
    "EmpiricalBayesianForestClassifier",
    "EmpiricalBayesianForestRegressor",
    "SubsampleForestClassifier",
    "SubsampleForestRegressor",
]


class EmpiricalBayesianForestRegressor(ProbabilisticRegressorMixin, RegressorMixin, _EBF):
    """Empirical Bayesian forest regressor (Taddy et al., 2015, Sec. 4).

    A shallow CART trunk (:class:`~ebf.trunk.Trunk`) is fit to all rows; each trunk leaf
    gets its own branch forest, fit only on the leaf's rows with seeds derived from
    ``(random_state, leaf id)``. A row's predictive distribution is the mixture of its
    branch (one Gaussian component per tree for CART branches: leaf mean and weighted
    within-leaf variance; the Mondrian path mixture for Mondrian branches).

    Parameters
    ----------
    n_estimators : int, optional
        Trees per branch; by default the branch learner's ``default_trees``
        (:data:`ebf.learners.LEARNERS`: e.g. 100 Bayesian-bootstrap trees, 10 Mondrian
        trees), the same as ``ebf train``'s.
    branch : str, default=DEFAULT_BRANCH
        Branch learner: a name of :data:`ebf.learners.LEARNERS`, the table of learners and
        the tasks each one does; by default :data:`ebf.learners.DEFAULT_BRANCH`
        (``"bayesian"``), as for ``ebf train``.
    trunk_max_leaves : int, optional
        Maximum number of trunk leaves (branches).
    trunk_min_leaf_rows : int, optional
        Minimum rows per trunk leaf (the paper's minimum leaf size, e.g. 3500 of 20640);
        default ``2 * min_samples_leaf``, so that a tree can split every branch. With
        neither this nor ``trunk_max_leaves`` the trunk has up to 5 leaves (Sec. 4.1).
    min_samples_leaf : int, default=MIN_SAMPLES_LEAF
        Minimum rows per leaf of branch trees (Mondrian: ``min_samples_split = 2 * this``).
        A branch with fewer than ``2 * min_samples_leaf`` rows predicts its own weighted
        mean and variance (:class:`~ebf.branches.ConstantBranch`).
    max_features : int, float or {"sqrt", "log2"}, default=1.0
        Features considered per split by CART branches.
    max_depth : int, optional
        Maximum depth of CART branch trees.
    trunk_max_bins : int, default=MAX_BINS
        Quantile bins per feature for the trunk's histogram split search.
    branch_params : dict, optional
        Extra parameters of the branch learner (e.g. ``{"lifetime": 5.0}`` for Mondrian
        branches, ``{"uncertainty": "tree_spread"}`` for CART branches): parameters of its
        estimator class that the ensemble does not set itself
        (:meth:`ebf.learners.BranchLearner.accepted_params`). Any other name is a
        ``ValueError`` at the start of ``fit``, before the trunk is grown.
    calibrate : {"auto", "holdout", "recent", "none"}, default="auto"
        How the predictive CDF is recalibrated (:mod:`basics.calibration`). ``"auto"``: on
        every training row, each predicted by small forests of its branch fit without it
        (5 folds, 10% of the branch's trees each: about 40% more fit time; BART and SMC
        branches are cross-fitted whole); no row is taken from the model. ``"holdout"`` /
        ``"recent"``: fit on 90% of the rows (random, or the first in their order) and
        recalibrate on the rest. ``"none"``: the model's own mixture. ``calibration_``
        records how the map was learnt.
    random_state : int, RandomState or None, default=None
        Seed; the same seed gives the same model.
    n_jobs : int, optional
        Threads over the trees of a branch.
    predict_only : bool, default=False
        Keep only the predict-only form of every branch, made as soon as the branch is
        fit (on the worker, for the Dask estimators): Mondrian branches drop their online
        state (:meth:`mondrian.MondrianForestRegressor.compact`), several times smaller, with
        the same predictions bit for bit and no ``partial_fit``. CART branches are
        predict-only anyway. For models too large to keep their online state.

    Attributes
    ----------
    trunk_ : Trunk
    branches_ : list
        Fitted branch per trunk leaf.
    branch_sizes_ : ndarray
        Training rows per branch.
    encoder_ : FeatureEncoder
        Column names, kinds and categories of the training input.
    entropy_ : int
        The resolved seed (branch ``b``, tree ``t`` use ``SeedSequence(entropy_, (b, t))``).

    Examples
    --------
    >>> import numpy as np
    >>> from ebf import EmpiricalBayesianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((2000, 3)); y = 10 * X[:, 0] + rng.normal(size=2000)
    >>> ebf = EmpiricalBayesianForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    >>> mean, std = ebf.predict(X[:2], return_std=True)
    >>> ebf.trunk_.n_leaves_
    5
    """

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        branch: str = DEFAULT_BRANCH,
        trunk_max_leaves: int | None = None,
        trunk_min_leaf_rows: int | None = None,
        min_samples_leaf: int = MIN_SAMPLES_LEAF,
        max_features: Any = 1.0,
        max_depth: int | None = None,
        trunk_max_bins: int = MAX_BINS,
        branch_params: dict | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
        predict_only: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.branch = branch
        self.trunk_max_leaves = trunk_max_leaves
        self.trunk_min_leaf_rows = trunk_min_leaf_rows
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.trunk_max_bins = trunk_max_bins
        self.branch_params = branch_params
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.predict_only = predict_only

    def fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> EmpiricalBayesianForestRegressor:
        """Fit the trunk on all rows, then one branch forest per trunk leaf."""
        return self._calibrated_fit(self._fit, X, y, sample_weight)

    # one routing per block, each branch summarised alone (ahead of the mixin's default)
    _summary = _EBF._summary
    _predicts_branch = True


class EmpiricalBayesianForestClassifier(ProbabilisticClassifierMixin, ClassifierMixin, _EBF):
    """Empirical Bayesian forest classifier (Taddy et al., 2015, Sec. 4; Gini trunk).

    Parameters are those of :class:`EmpiricalBayesianForestRegressor`, with
    ``max_features="sqrt"`` by default. A branch may hold a single class; its forest then
    predicts that class with probability one (CART) or its smoothed IKN estimate (Mondrian).

    Examples
    --------
    >>> import numpy as np
    >>> from ebf import EmpiricalBayesianForestClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((1000, 3)); y = (X[:, 0] > 0.5).astype(int)
    >>> clf = EmpiricalBayesianForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    _task = CLASSIFICATION

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        branch: str = DEFAULT_BRANCH,
        trunk_max_leaves: int | None = None,
        trunk_min_leaf_rows: int | None = None,
        min_samples_leaf: int = MIN_SAMPLES_LEAF,
        max_features: Any = "sqrt",
        max_depth: int | None = None,
        trunk_max_bins: int = MAX_BINS,
        branch_params: dict | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
        predict_only: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.branch = branch
        self.trunk_max_leaves = trunk_max_leaves
        self.trunk_min_leaf_rows = trunk_min_leaf_rows
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.trunk_max_bins = trunk_max_bins
        self.branch_params = branch_params
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.predict_only = predict_only

    def fit(self, X: Any, y: Any, *,
            sample_weight: Any = None) -> EmpiricalBayesianForestClassifier:
        """Fit the trunk on all rows, then one branch forest per trunk leaf."""
        return self._calibrated_fit(self._fit, X, y, sample_weight)

    # probabilities and branch ids from one routing (ahead of the mixin's default)
    _proba_summary = _EBF._proba_summary
    _predicts_branch = True


    def partial_fit(self, X: Any, y: Any, *, classes: Any = None,
                    previous: tuple | None = None) -> EmpiricalBayesianForestClassifier:
        """:meth:`EmpiricalBayesianForestRegressor.partial_fit` for labels.

        ``classes`` (scikit-learn's convention for incremental classifiers), if given, must
        be the classes of the model: the first call learns them from ``y`` (it is
        :meth:`fit`), and an update cannot add one (``ValueError`` naming the new labels).
        """
        if classes is not None:
            wanted = np.unique(np.asarray(classes))
            known = getattr(self, "classes_", None)
            if known is None:  # the first call is fit: y must hold every class
                known = np.unique(np.asarray(y))
            if not np.array_equal(wanted, known):
                raise ValueError(f"classes {wanted.tolist()[:10]} differ from the model's "
                                 f"(from y at the first call) {known.tolist()[:10]}; an "
                                 "update cannot add or drop a class. Refit with fit(X, y) on "
                                 "rows of every class.")
        out = super().partial_fit(X, y, previous=previous)
        return out


class SubsampleForestRegressor(ProbabilisticRegressorMixin, RegressorMixin, _SSF):
    """Sub-sample forest regressor: the distributed baseline EBF beats (Sec. 4).

    The rows are split into ``n_subsamples`` random, (almost) equal parts; a forest of
    ``n_estimators`` trees is fit on each part, with seeds from ``(random_state, part)``;
    the prediction is the equal-weight mixture of all ``n_subsamples * n_estimators`` trees.

    Parameters
    ----------
    n_estimators : int, optional
        Trees per sub-sample; by default the branch learner's ``default_trees``.
    n_subsamples : int, default=5
        Number of parts (the paper's five equally sized subsets, Sec. 4.1).
    branch, min_samples_leaf, max_features, max_depth, branch_params, calibrate, \
    random_state, n_jobs
        As in :class:`EmpiricalBayesianForestRegressor`.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf import SubsampleForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((500, 3)); y = X[:, 0] + 0.1 * rng.normal(size=500)
    >>> ssf = SubsampleForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    >>> ssf.predict_distribution(X[:2], recalibrated=False).n_components
    25
    """

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        n_subsamples: int = 5,
        branch: str = DEFAULT_BRANCH,
        min_samples_leaf: int = MIN_SAMPLES_LEAF,
        max_features: Any = 1.0,
        max_depth: int | None = None,
        branch_params: dict | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
        predict_only: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.n_subsamples = n_subsamples
        self.branch = branch
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.branch_params = branch_params
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.predict_only = predict_only

    def fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> SubsampleForestRegressor:
        """Fit one forest per random sub-sample."""
        return self._calibrated_fit(self._fit, X, y, sample_weight)


class SubsampleForestClassifier(ProbabilisticClassifierMixin, ClassifierMixin, _SSF):
    """Sub-sample forest classifier (Sec. 4): class probabilities averaged over parts.

    Parameters are those of :class:`SubsampleForestRegressor`, with ``max_features="sqrt"``.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf import SubsampleForestClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((500, 3)); y = (X[:, 0] > 0.5).astype(int)
    >>> SubsampleForestClassifier(n_estimators=5, random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _task = CLASSIFICATION

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        n_subsamples: int = 5,
        branch: str = DEFAULT_BRANCH,
        min_samples_leaf: int = MIN_SAMPLES_LEAF,
        max_features: Any = "sqrt",
        max_depth: int | None = None,
        branch_params: dict | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
        predict_only: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.n_subsamples = n_subsamples
        self.branch = branch
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.branch_params = branch_params
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.predict_only = predict_only

    def fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> SubsampleForestClassifier:
        """Fit one forest per random sub-sample."""
        return self._calibrated_fit(self._fit, X, y, sample_weight)
