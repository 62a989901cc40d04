"""Branch learners: the forests grown inside one trunk leaf (EBF) or one sub-sample (SSF).

Taddy et al. (2015), Sec. 4: "sample a BF ensemble of branches at each terminal node of this
trunk"; each branch is fit without communication with the others, so it only needs its own
rows and a seed derived from ``(random_state, branch id)``.

A branch learner is a name in :data:`BRANCH_LEARNERS`. Fitting one returns a fitted
estimator that offers ``predict_distribution(X)`` (regression) or ``predict_proba(X)`` with
one column per class of the *whole* training set (classification), and the persistence
methods ``_get_state`` / ``_set_state``:

``"bayesian"``
    :class:`~ebf.forests.BayesianForestRegressor` / ``...Classifier`` with Exp(1) weights
    (the paper's BF, Algorithm 1): histogram CART trees over the branch's own bins;
    ``branch_params`` may set ``splitter="exact"`` (scikit-learn's CART), ``max_bins`` or
    ``leaf_prior_rows`` (regression: the leaf-noise prior, centred on pooled within-leaf
    variances of the branch's own trees, so every trunk leaf has its own).
``"random"``
    the same with Poisson(1) weights (Breiman's random forest).
``"mondrian"``
    :class:`mondrian.MondrianForestRegressor` / ``...Classifier`` (Lakshminarayanan, Roy &
    Teh, 2016). ``min_samples_split`` is ``2 * min_samples_leaf`` (so the default 5 gives
    the Mondrian default 10); ``branch_params`` may set ``lifetime``, ``posterior``, ...
``"smc"``
    :class:`~ebf.bayestrees.SMCTreeRegressor` / ``...Classifier``: a posterior over single
    Bayesian decision trees by sequential Monte Carlo (Lakshminarayanan, thesis Ch. 3),
    ``n_estimators`` particles per island; ``branch_params`` may set ``n_islands``,
    ``proposal``, ``alpha_s``, ...
``"bart"``
    :class:`~ebf.bayestrees.BARTRegressor` (regression only): BART sampled by particle Gibbs
    (thesis Ch. 4) with ``n_estimators`` trees; ``branch_params`` may set ``n_iter``,
    ``burn_in``, ``sampler``, ...

The Bayesian-tree learners (``"mondrian"``, ``"smc"``, ``"bart"``) have no weighted
likelihood: they refuse unequal sample weights (``"smc"`` and ``"bart"`` drop rows of weight
zero, :func:`ebf._base.unweighted_rows`).

A branch with fewer than ``2 * min_samples_leaf`` rows cannot be split by any tree, so it
becomes a :class:`ConstantBranch`: the weighted mean and variance of its rows (regression)
or their weighted class fractions (classification).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from basics.bounds import check_locations, check_variances
from basics.mixture import GaussianMixture
from basics.tasks import CLASSIFICATION, REGRESSION
from mondrian import MondrianForestClassifier, MondrianForestRegressor

from ._base import variance_floor
from .bayestrees import BARTRegressor, SMCTreeClassifier, SMCTreeRegressor
from .bootstrap import branch_seed
from .forests import BayesianForestClassifier, BayesianForestRegressor


@dataclass(frozen=True)
class BranchSpec:
    """What every branch of one ensemble shares: the learner and its parameters."""

    learner: str
    task: str
    n_estimators: int
    min_samples_leaf: int
    max_features: Any
    max_depth: int | None
    n_classes: int
    params: dict
    n_jobs: int | None
    predict_only: bool = False

    @property
    def min_rows(self) -> int:
        """Rows below which a branch is a :class:`ConstantBranch`."""
        return max(2, 2 * int(self.min_samples_leaf))


def _cart(weights: str) -> Callable:
    def fit(spec: BranchSpec, X, y, sample_weight, entropy: int, branch: int):
        cls = BayesianForestRegressor if spec.task == REGRESSION else BayesianForestClassifier
        est = cls(
            n_estimators=spec.n_estimators,
            weights=weights,
            min_samples_leaf=spec.min_samples_leaf,
            max_features=spec.max_features,
            max_depth=spec.max_depth,
            random_state=entropy,
            n_jobs=spec.n_jobs,
            **spec.params,
        )
        n_classes = spec.n_classes if spec.task == CLASSIFICATION else None
        return est._fit_branch(X, y, sample_weight, entropy=entropy, branch=branch,
                               n_classes=n_classes)

    return fit


def _check_unweighted(learner: str, sample_weight: np.ndarray | None) -> None:
    if sample_weight is not None and not np.all(sample_weight == sample_weight[0]):
        raise ValueError(
            f"branch={learner!r} does not support unequal sample weights (its trees have no "
            "weighted likelihood); use branch='bayesian' or drop sample_weight."
        )


def _mondrian(spec: BranchSpec, X, y, sample_weight, entropy: int, branch: int):
    _check_unweighted(spec.learner, sample_weight)
    params = dict(
        n_estimators=spec.n_estimators,
        min_samples_split=max(2, 2 * int(spec.min_samples_leaf)),
        random_state=branch_seed(entropy, branch),
        n_jobs=spec.n_jobs,
    )
    params.update(spec.params)
    if spec.task == REGRESSION:
        return MondrianForestRegressor(**params).fit(X, y)
    # partial_fit on an empty forest is the batch fit; ``classes`` fixes full-width output
    return MondrianForestClassifier(**params).partial_fit(X, y, classes=np.arange(spec.n_classes))


def _smc(spec: BranchSpec, X, y, sample_weight, entropy: int, branch: int):
    cls = SMCTreeRegressor if spec.task == REGRESSION else SMCTreeClassifier
    est = cls(**{"n_particles": spec.n_estimators, "n_jobs": spec.n_jobs, **spec.params})
    n_classes = spec.n_classes if spec.task == CLASSIFICATION else None
    # islands are seeded by (entropy, branch, island); rows of weight 0 are dropped there
    # and unequal positive weights refused
    return est._fit_branch(X, y, sample_weight, entropy=entropy, branch=branch,
                           n_classes=n_classes)


def _bart(spec: BranchSpec, X, y, sample_weight, entropy: int, branch: int):
    params = dict(n_trees=spec.n_estimators, random_state=branch_seed(entropy, branch),
                  n_jobs=spec.n_jobs)
    return BARTRegressor(**{**params, **spec.params}).fit(X, y, sample_weight)


#: Name -> function fitting one branch ``(spec, X, y, sample_weight, entropy, branch)``.
BRANCH_LEARNERS: dict[str, Callable] = {
    "bayesian": _cart("exponential"),
    "random": _cart("poisson"),
    "mondrian": _mondrian,
    "smc": _smc,
    "bart": _bart,
}


#: Name -> the estimator class of a fitted branch, by task (any branch may also be a
#: :class:`ConstantBranch`); ``ebf.restore`` checks branches read from a model file.
BRANCH_CLASSES: dict[str, dict[str, type]] = {
    "bayesian": {REGRESSION: BayesianForestRegressor, CLASSIFICATION: BayesianForestClassifier},
    "random": {REGRESSION: BayesianForestRegressor, CLASSIFICATION: BayesianForestClassifier},
    "mondrian": {REGRESSION: MondrianForestRegressor, CLASSIFICATION: MondrianForestClassifier},
    "smc": {REGRESSION: SMCTreeRegressor, CLASSIFICATION: SMCTreeClassifier},
    "bart": {REGRESSION: BARTRegressor},
}


def check_branch_task(learner: str, task: str) -> None:
    """Raise ``ValueError`` before any work if branch learner ``learner`` cannot do ``task``
    (``"bart"`` is regression only: the BART of thesis Ch. 4 has Gaussian noise)."""
    if task not in BRANCH_CLASSES.get(learner, {task: None}):
        can = sorted(name for name, tasks in BRANCH_CLASSES.items() if task in tasks)
        raise ValueError(f"branch={learner!r} does not do {task}; choose one of {can}.")


def fit_branch(
    spec: BranchSpec,
    X: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None,
    entropy: int,
    branch: int,
) -> Any:
    """Fit the forest of one branch on its rows (or a :class:`ConstantBranch`).

    Parameters
    ----------
    spec : BranchSpec
        Learner name and shared parameters.
    X : ndarray of shape (n_rows, n_features)
        Encoded features of the branch's rows, in training-row order.
    y : ndarray of shape (n_rows,)
        Targets (class codes ``0..n_classes-1`` for classification).
    sample_weight : ndarray of shape (n_rows,) or None
        Data weights (multiplying the bootstrap weights of CART branches).
    entropy : int
        The ensemble's resolved seed.
    branch : int
        Branch id (trunk leaf id for EBF, sub-sample id for SSF): the seed of every tree in
        the branch is derived from ``(entropy, branch)`` only.

    Returns
    -------
    estimator
        A fitted branch (see the module docstring).
    """
    if spec.learner not in BRANCH_LEARNERS:
        raise ValueError(
            f"Unknown branch learner {spec.learner!r}; choose one of {sorted(BRANCH_LEARNERS)}."
        )
    if X.shape[0] < spec.min_rows:
        return ConstantBranch.from_rows(y, sample_weight, spec.task, spec.n_classes)
    learner = BRANCH_LEARNERS[spec.learner](spec, X, y, sample_weight, entropy, branch)
    if spec.predict_only and callable(getattr(learner, "compact", None)):
        return learner.compact()  # the online state goes before the branch leaves its task
    return learner


class ConstantBranch:
    """A branch too small for a forest: predicts from all of its rows.

    Regression: one Gaussian with the weighted mean and weighted variance of the branch's
    targets (the variance floored as in :func:`ebf.forests.variance_floor`). Classification:
    the weighted class fractions. This is what a CART tree with a single leaf would predict.
    """

    def __init__(self, task: str = REGRESSION) -> None:
        self.task = task

    def _validate_params(self) -> None:
        if self.task not in (REGRESSION, CLASSIFICATION):
            raise ValueError(
                f"task must be {REGRESSION!r} or {CLASSIFICATION!r}; got {self.task!r}.")

    @classmethod
    def from_rows(
        cls, y: np.ndarray, sample_weight: np.ndarray | None, task: str, n_classes: int
    ) -> ConstantBranch:
        """Summarise the rows ``y`` (with optional weights) of a branch."""
        w = np.ones(y.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
        total = w.sum()
        out = cls(task)
        if task == REGRESSION:
            mean = float(np.dot(w, y) / total) if total > 0 else float(np.mean(y))
            var = float(np.dot(w, (y - mean) ** 2) / total) if total > 0 else 0.0
            out.value_ = np.array([mean, max(var, variance_floor(y))])
        else:
            counts = np.bincount(y.astype(np.int64), weights=w, minlength=n_classes)
            out.value_ = counts / counts.sum() if counts.sum() > 0 else np.full(
                n_classes, 1.0 / n_classes)
        return out

    def predict(self, X: np.ndarray, return_std: bool = False):
        n = X.shape[0]
        mean = np.full(n, self.value_[0])
        return (mean, np.full(n, np.sqrt(self.value_[1]))) if return_std else mean

    def predict_distribution(self, X: np.ndarray) -> GaussianMixture:
        n = X.shape[0]
        return GaussianMixture.from_moments(np.full(n, self.value_[0]), np.full(n, self.value_[1]))

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.tile(self.value_, (X.shape[0], 1))

    def get_params(self, deep: bool = False) -> dict:
        return {"task": self.task}

    def _get_state(self) -> dict:
        return {"value": self.value_}

    def _set_state(self, state: dict) -> None:
        """Restore ``value``: regression ``[mean, variance]``, a location and a positive
        variance within :mod:`basics.bounds`; classification, class fractions summing to 1."""
        value = np.asarray(state["value"], dtype=np.float64)
        ok = value.ndim == 1 and np.isfinite(value).all()
        if self.task == REGRESSION:
            ok = ok and value.shape == (2,) and value[1] > 0
        else:
            ok = ok and value.size >= 1 and (value >= 0).all() and abs(value.sum() - 1) < 1e-9
        if not ok:
            raise ValueError(f"invalid ConstantBranch value {value!r} for task {self.task!r}.")
        if self.task == REGRESSION:
            check_locations("value (the mean)", value[:1])
            check_variances("value (the variance)", value[1:], positive=True)
        self.value_ = value
