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

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from mondrian.predictive import GaussianMixture

from ._base import (
    ProbabilisticClassifierMixin,
    ProbabilisticRegressorMixin,
    check_target_not_in_features,
    classes_state,
    classification_target,
    input_attributes,
    regression_target,
)
from .bootstrap import resolve_entropy
from .branches import BRANCH_LEARNERS, CLASSIFICATION, REGRESSION, BranchSpec, fit_branch
from .features import FeatureEncoder
from .restore import restore_ebf, restore_ssf
from .trunk import Trunk

#: Trunk size when neither ``trunk_max_leaves`` nor ``trunk_min_leaf_rows`` is given: the
#: paper's five-leaf trunks (Sec. 4.1, footnote 11).
DEFAULT_TRUNK_LEAVES = 5


def subsample_groups(entropy: int, n: int, n_subsamples: int) -> list[np.ndarray]:
    """Rows of every sub-sample of an SSF (Sec. 4): a seeded permutation cut in equal parts.

    The permutation uses the root of the seed tree, ``SeedSequence(entropy)``; the forests
    use the keys ``(k,)`` and ``(k, tree)``, so the two never share a stream. ``ebf.dask``
    calls this same function and routes each row by its global row id.

    Parameters
    ----------
    entropy : int
        The model's resolved seed.
    n : int
        Number of training rows.
    n_subsamples : int
        Number of parts; the first ``n % n_subsamples`` parts have one row more.

    Returns
    -------
    groups : list of ndarray of int64
        Sorted row positions of every part.

    Examples
    --------
    >>> [g.size for g in subsample_groups(0, 7, 3)]
    [3, 2, 2]
    """
    rng = np.random.default_rng(np.random.SeedSequence(int(entropy)))
    perm = rng.permutation(int(n))
    return [np.sort(part) for part in np.array_split(perm, int(n_subsamples))]


def _pad_rows(parts: list[tuple[np.ndarray, GaussianMixture]], n: int) -> GaussianMixture:
    """One mixture for ``n`` rows from per-branch mixtures over disjoint row sets.

    Branches may have different numbers of components (Mondrian paths vary); shorter rows are
    padded with zero-weight components, which :class:`GaussianMixture` ignores.
    """
    width = max((g.n_components for _, g in parts), default=1)
    W = np.zeros((n, width))
    M = np.zeros((n, width))
    V = np.ones((n, width))
    for rows, g in parts:
        k = g.n_components
        W[rows, :k] = g.weights
        M[rows, :k] = g.means
        V[rows, :k] = g.variances
    return GaussianMixture._trusted(W, M, V)


class _BranchedEnsemble(BaseEstimator):
    """Shared by EBF and SSF: parameters, input handling, branch spec, persistence."""

    _task = REGRESSION

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "branch": [StrOptions(set(BRANCH_LEARNERS))],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left")],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "branch_params": [dict, None],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
    }

    def _prepare(self, X: Any, y: Any, sample_weight: Any) -> tuple:
        """Validate parameters and inputs; nothing is assigned yet.

        Returns the encoded ``X``, the target (float64, or class codes), the weights (or
        None) and the fitted attributes that describe the input.
        """
        self._validate_params()
        check_target_not_in_features(X, y)
        encoder = FeatureEncoder()
        A = encoder.fit_transform(X)
        classes = None
        if self._task == CLASSIFICATION:
            y, classes = classification_target(self, y, A.shape[0])
        else:
            y = regression_target(self, y, A.shape[0])
        w = None
        if sample_weight is not None:
            w = _check_sample_weight(sample_weight, A, dtype=np.float64,
                                     ensure_non_negative=True)
        return A, y, w, self._input_attrs(encoder, classes)

    def _input_attrs(self, encoder: FeatureEncoder, classes: np.ndarray | None) -> dict:
        """Fitted attributes of the input and the seed (shared with ``ebf.dask``)."""
        attrs = input_attributes(encoder)
        if self._task == CLASSIFICATION:
            attrs["classes_"] = classes
        attrs["entropy_"] = resolve_entropy(self.random_state)
        return attrs

    def _branch_spec(self, n_classes: int) -> BranchSpec:
        """What every branch shares (``ebf.dask`` sends it to the branch tasks)."""
        return BranchSpec(
            learner=self.branch,
            task=self._task,
            n_estimators=int(self.n_estimators),
            min_samples_leaf=int(self.min_samples_leaf),
            max_features=self.max_features,
            max_depth=self.max_depth,
            n_classes=int(n_classes),
            params=dict(self.branch_params or {}),
            n_jobs=self.n_jobs,
        )

    def _fit_parts(self, A: np.ndarray, y: np.ndarray, w: np.ndarray | None,
                   groups: list[np.ndarray], attrs: dict) -> list:
        """Fit one branch per group of rows; branch ``b`` is seeded by (entropy, b) only."""
        spec = self._branch_spec(len(attrs.get("classes_", ())))
        return [
            fit_branch(spec, A[rows], y[rows], None if w is None else w[rows],
                       attrs["entropy_"], b)
            for b, rows in enumerate(groups)
        ]

    def _assign(self, attrs: dict) -> None:
        """Set all fitted attributes at once (a fit that raised has assigned nothing)."""
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(attrs)

    def _state(self, parts: dict) -> dict:
        from .model import estimator_state

        check_is_fitted(self, "encoder_")
        state = {"encoder": self.encoder_._get_state(), "entropy": int(self.entropy_)}
        if self._task == CLASSIFICATION:
            state.update(classes_state(self.classes_))
        for name, value in parts.items():
            state[name] = [estimator_state(b) for b in value] if isinstance(value, list) else (
                estimator_state(value) if hasattr(value, "_get_state") else value)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


class _EBF(_BranchedEnsemble):
    _parameter_constraints: dict = {
        **_BranchedEnsemble._parameter_constraints,
        "trunk_max_leaves": [Interval(Integral, 1, None, closed="left"), None],
        "trunk_min_leaf_rows": [Interval(Integral, 1, None, closed="left"), None],
        "trunk_max_bins": [Interval(Integral, 2, 255, closed="both")],
    }

    def _trunk(self, n_classes: int) -> Trunk:
        max_leaves = self.trunk_max_leaves
        if max_leaves is None and self.trunk_min_leaf_rows is None:
            max_leaves = DEFAULT_TRUNK_LEAVES
        min_rows = self.trunk_min_leaf_rows
        if min_rows is None:  # every branch must be big enough for a tree to split it
            min_rows = 2 * int(self.min_samples_leaf)
        return Trunk(
            max_leaves=max_leaves,
            min_leaf_rows=min_rows,
            max_bins=self.trunk_max_bins,
            task=self._task,
            n_classes=n_classes or None,
        )

    def _fit(self, X: Any, y: Any, sample_weight: Any):
        A, y, w, attrs = self._prepare(X, y, sample_weight)
        trunk = self._trunk(len(attrs.get("classes_", ()))).fit(A, y, sample_weight=w)
        leaf = trunk.apply(A)
        groups = [np.flatnonzero(leaf == b) for b in range(trunk.n_leaves_)]
        attrs["branches_"] = self._fit_parts(A, y, w, groups, attrs)
        attrs["trunk_"] = trunk
        self._assign(attrs)
        return self

    def apply(self, X: Any) -> np.ndarray:
        """Branch (trunk leaf) id of every row.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,), int64
        """
        return self.trunk_.apply(self._transform(X))

    @property
    def branch_sizes_(self) -> np.ndarray:
        """Training rows per branch (from the trunk's leaf counts)."""
        check_is_fitted(self, "trunk_")
        t = self.trunk_.trunk_
        return t.n_rows[t.leaf_nodes()]

    def export_trunk(self, decimals: int = 3) -> str:
        """The trunk as readable rules with the training feature names."""
        check_is_fitted(self, "trunk_")
        return self.trunk_.export_text(list(self.encoder_.names_), decimals=decimals)

    def _get_state(self) -> dict:
        return self._state({"trunk": self.trunk_, "branches": self.branches_})

    def _set_state(self, state: dict) -> None:
        self._assign(restore_ebf(self, state))

    def _groups(self, Xf: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """``(branch, rows)`` for every branch that has rows in the block."""
        leaf = self.trunk_.apply(Xf)
        order = np.argsort(leaf, kind="stable")
        bounds = np.searchsorted(leaf[order], np.arange(len(self.branches_) + 1))
        return [
            (b, order[bounds[b]:bounds[b + 1]])
            for b in range(len(self.branches_))
            if bounds[b + 1] > bounds[b]
        ]

    def _mixture(self, Xf: np.ndarray) -> GaussianMixture:
        parts = [(rows, self.branches_[b].predict_distribution(Xf[rows]))
                 for b, rows in self._groups(Xf)]
        return _pad_rows(parts, Xf.shape[0])

    def _proba(self, Xf: np.ndarray) -> np.ndarray:
        out = np.full((Xf.shape[0], len(self.classes_)), np.nan)  # every row is written
        for b, rows in self._groups(Xf):
            out[rows] = self.branches_[b].predict_proba(Xf[rows])
        return out


class EmpiricalBayesianForestRegressor(ProbabilisticRegressorMixin, RegressorMixin, _EBF):
    """Empirical Bayesian forest regressor (Taddy et al., 2015, Sec. 4).

    A shallow CART trunk (:class:`~ebf.trunk.Trunk`) is fit to all rows; each trunk leaf
    gets its own branch forest, fit only on the leaf's rows with seeds derived from
    ``(random_state, leaf id)``. A row's predictive distribution is the mixture of its
    branch (one Gaussian component per tree for CART branches: leaf mean and weighted
    within-leaf variance; the Mondrian path mixture for Mondrian branches).

    Parameters
    ----------
    n_estimators : int, default=100
        Trees per branch.
    branch : {"bayesian", "random", "mondrian"}, default="bayesian"
        Branch learner (see :mod:`ebf.branches`).
    trunk_max_leaves : int, optional
        Maximum number of trunk leaves (branches).
    trunk_min_leaf_rows : int, optional
        Minimum rows per trunk leaf (the paper's minimum leaf size, e.g. 3500 of 20640);
        default ``2 * min_samples_leaf``, so that a tree can split every branch. With
        neither this nor ``trunk_max_leaves`` the trunk has up to 5 leaves (Sec. 4.1).
    min_samples_leaf : int, default=5
        Minimum rows per leaf of branch trees (Mondrian: ``min_samples_split = 2 * this``).
        A branch with fewer than ``2 * min_samples_leaf`` rows predicts its own weighted
        mean and variance (:class:`~ebf.branches.ConstantBranch`).
    max_features : int, float or {"sqrt", "log2"}, default=1.0
        Features considered per split by CART branches.
    max_depth : int, optional
        Maximum depth of CART branch trees.
    trunk_max_bins : int, default=255
        Quantile bins per feature for the trunk's histogram split search.
    branch_params : dict, optional
        Extra parameters of the branch learner (e.g. ``{"lifetime": 5.0}`` for Mondrian
        branches, ``{"uncertainty": "tree_spread"}`` for CART branches).
    random_state : int, RandomState or None, default=None
        Seed; the same seed gives the same model.
    n_jobs : int, optional
        Threads over the trees of a branch.

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
        n_estimators: int = 100,
        branch: str = "bayesian",
        trunk_max_leaves: int | None = None,
        trunk_min_leaf_rows: int | None = None,
        min_samples_leaf: int = 5,
        max_features: Any = 1.0,
        max_depth: int | None = None,
        trunk_max_bins: int = 255,
        branch_params: dict | None = None,
        random_state: Any = None,
        n_jobs: int | None = None,
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
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> EmpiricalBayesianForestRegressor:
        """Fit the trunk on all rows, then one branch forest per trunk leaf."""
        return self._fit(X, y, sample_weight)

    def predict(self, X: Any, return_std: bool = False):
        """Predictive mean (and standard deviation): each row's own branch predicts it.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        return_std : bool, default=False

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,), only if ``return_std``
        """
        A = self._transform(X)
        mean, std = np.full(A.shape[0], np.nan), np.full(A.shape[0], np.nan)  # all written
        for b, rows in self._groups(A):
            pred = self.branches_[b].predict(A[rows], return_std=return_std)
            if return_std:
                mean[rows], std[rows] = pred
            else:
                mean[rows] = pred
        return (mean, std) if return_std else mean


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
        n_estimators: int = 100,
        branch: str = "bayesian",
        trunk_max_leaves: int | None = None,
        trunk_min_leaf_rows: int | None = None,
        min_samples_leaf: int = 5,
        max_features: Any = "sqrt",
        max_depth: int | None = None,
        trunk_max_bins: int = 255,
        branch_params: dict | None = None,
        random_state: Any = None,
        n_jobs: int | None = None,
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
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> EmpiricalBayesianForestClassifier:
        """Fit the trunk on all rows, then one branch forest per trunk leaf."""
        return self._fit(X, y, sample_weight)


class _SSF(_BranchedEnsemble):
    _parameter_constraints: dict = {
        **_BranchedEnsemble._parameter_constraints,
        "n_subsamples": [Interval(Integral, 1, None, closed="left")],
    }

    def _fit(self, X: Any, y: Any, sample_weight: Any):
        A, y, w, attrs = self._prepare(X, y, sample_weight)
        if A.shape[0] < self.n_subsamples:
            raise ValueError(
                f"n_subsamples={self.n_subsamples} is more than n_samples={A.shape[0]}; "
                "lower n_subsamples or pass more rows."
            )
        groups = subsample_groups(attrs["entropy_"], A.shape[0], self.n_subsamples)
        attrs["subsamples_"] = self._fit_parts(A, y, w, groups, attrs)
        attrs["subsample_sizes_"] = np.array([g.size for g in groups])
        self._assign(attrs)
        return self

    def _get_state(self) -> dict:
        return self._state({"subsamples": self.subsamples_,
                            "subsample_sizes": self.subsample_sizes_})

    def _set_state(self, state: dict) -> None:
        self._assign(restore_ssf(self, state))

    def _mixture(self, Xf: np.ndarray) -> GaussianMixture:
        return GaussianMixture.concat([s.predict_distribution(Xf) for s in self.subsamples_])

    def _proba(self, Xf: np.ndarray) -> np.ndarray:
        return sum(s.predict_proba(Xf) for s in self.subsamples_) / len(self.subsamples_)


class SubsampleForestRegressor(ProbabilisticRegressorMixin, RegressorMixin, _SSF):
    """Sub-sample forest regressor: the distributed baseline EBF beats (Sec. 4).

    The rows are split into ``n_subsamples`` random, (almost) equal parts; a forest of
    ``n_estimators`` trees is fit on each part, with seeds from ``(random_state, part)``;
    the prediction is the equal-weight mixture of all ``n_subsamples * n_estimators`` trees.

    Parameters
    ----------
    n_estimators : int, default=100
        Trees per sub-sample.
    n_subsamples : int, default=5
        Number of parts (the paper's five equally sized subsets, Sec. 4.1).
    branch, min_samples_leaf, max_features, max_depth, branch_params, random_state, n_jobs
        As in :class:`EmpiricalBayesianForestRegressor`.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf import SubsampleForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((500, 3)); y = X[:, 0] + 0.1 * rng.normal(size=500)
    >>> ssf = SubsampleForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    >>> ssf.predict_distribution(X[:2]).n_components
    25
    """

    def __init__(
        self,
        n_estimators: int = 100,
        n_subsamples: int = 5,
        branch: str = "bayesian",
        min_samples_leaf: int = 5,
        max_features: Any = 1.0,
        max_depth: int | None = None,
        branch_params: dict | None = None,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.n_subsamples = n_subsamples
        self.branch = branch
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.branch_params = branch_params
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SubsampleForestRegressor:
        """Fit one forest per random sub-sample."""
        return self._fit(X, y, sample_weight)


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
        n_estimators: int = 100,
        n_subsamples: int = 5,
        branch: str = "bayesian",
        min_samples_leaf: int = 5,
        max_features: Any = "sqrt",
        max_depth: int | None = None,
        branch_params: dict | None = None,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.n_subsamples = n_subsamples
        self.branch = branch
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.branch_params = branch_params
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SubsampleForestClassifier:
        """Fit one forest per random sub-sample."""
        return self._fit(X, y, sample_weight)
