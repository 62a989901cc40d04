"""The branches of an ensemble: the forests grown inside one trunk leaf (EBF) or one
sub-sample (SSF).

Taddy et al. (2015), Sec. 4: each branch is fit without communication with the others, so it
only needs its own rows and a seed derived from ``(random_state, branch id)``.
:func:`fit_branch` fits one with the learner named in its :class:`BranchSpec` (a record of
:data:`ebf.learners.LEARNERS`, which describes every learner).

A branch with fewer than ``2 * min_samples_leaf`` rows cannot be split by any tree, so it
becomes a :class:`ConstantBranch`: the weighted mean and variance of its rows (regression)
or their weighted class fractions (classification).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from basics import calibration as cal
from basics.bounds import check_locations, check_variances
from basics.levels import DEFAULT_QUANTILES
from basics.mixture import GaussianMixture, MixtureSummary, summarize
from basics.prior_choice import OPTION, held_out_scores, settle
from basics.tasks import CLASSIFICATION, REGRESSION

from ._base import variance_floor
from .learners import get_learner


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
    #: Fit as a calibration group of ``calibrate="auto"``: a learner that learns an option
    #: from its groups keeps what it needs to score its candidates
    #: (:mod:`basics.prior_choice`).
    calibration_group: bool = False

    @property
    def min_rows(self) -> int:
        """Rows below which a branch is a :class:`ConstantBranch`."""
        return max(2, 2 * int(self.min_samples_leaf))


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
        A fitted branch (see :mod:`ebf.learners`).
    """
    fit = get_learner(spec.learner).fit
    if X.shape[0] < spec.min_rows:
        return ConstantBranch.from_rows(y, sample_weight, spec.task, spec.n_classes)
    learner = fit(spec, X, y, sample_weight, entropy, branch)
    if spec.predict_only and callable(getattr(learner, "compact", None)):
        return learner.compact()  # the online state goes before the branch leaves its task
    return learner


def branch_crossfit(
    spec: BranchSpec,
    X: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None,
    entropy: int,
    branch: int,
    positions: np.ndarray,
) -> tuple[Any, int]:
    """What a branch's calibration groups say of its rows, each by a group that never saw it.

    Group ``k`` is the branch learner with :func:`basics.calibration.group_trees` trees, fit
    (as :func:`fit_branch`, seeded by :func:`basics.calibration.fold_seed`) on the branch's
    rows outside fold ``k``; it predicts the rows of fold ``k``. Folds come from the rows'
    positions in the whole training set, so a branch task on a cluster and a fit in one
    process make the same groups. The trunk that chose the branch saw every row.

    Parameters
    ----------
    spec, X, y, sample_weight, entropy, branch
        As for :func:`fit_branch`.
    positions : ndarray of int64, shape (n_rows,)
        The rows' positions in the whole training set.

    Returns
    -------
    held_out : basics.calibration.HeldOutCounts or list
        Regression: the PIT counts of the rows. Classification: per fold, ``(positions,
        (proba, proba, codes))``, the rows' held-out class probabilities from each half of
        the group (:func:`basics.calibration.group_halves`) and their class codes.
    params : dict
        The learner options the groups chose for the branch (regression: the leaf prior of
        ``leaf_prior_rows="auto"``, :mod:`basics.prior_choice`), else empty; the counts
        are those under them.
    group_trees : int
        Trees per group (for :func:`basics.calibration.extrapolated_map`).
    """
    group = cal.group_trees(spec.n_estimators, get_learner(spec.learner).exchangeable_trees)
    group_spec = replace(spec, n_estimators=group, predict_only=False, calibration_group=True)

    def fit_group(keep: np.ndarray, fold: int) -> Any:
        w = None if sample_weight is None else sample_weight[keep]
        return fit_branch(group_spec, X[keep], y[keep], w, cal.fold_seed(entropy, fold), branch)

    if spec.task == REGRESSION:
        def scores(fitted: Any, rows: np.ndarray) -> Any:
            return held_out_scores(fitted, X[rows], y[rows])

        folds = cal.crossfit(fit_group, scores, positions, entropy)
        return (*settle([held for _, held in folds], group, spec.n_estimators), group)

    def fit_halves(keep: np.ndarray, fold: int) -> list:
        w = None if sample_weight is None else sample_weight[keep]
        sizes = cal.group_halves(group) if group >= 2 else (group,)
        return [fit_branch(replace(group_spec, n_estimators=size), X[keep], y[keep], w,
                           cal.fold_seed(entropy, fold + j * cal.N_FOLDS), branch)
                for j, size in enumerate(sizes)]

    def proba(fitted: list, rows: np.ndarray) -> tuple:
        probs = [f.predict_proba(X[rows]) for f in fitted]
        first, second = probs * 2 if len(probs) == 1 else probs  # a 1-tree group: no halves
        return first, second, np.asarray(y[rows], dtype=np.int64)

    # classifiers: each group as two halves, whose class map extrapolates to the model's trees
    folds = cal.crossfit(fit_halves, proba, positions, entropy)
    return [(np.asarray(positions)[rows], out) for rows, out in folds], {}, group


def with_learnt_options(spec: BranchSpec, branch: Any) -> BranchSpec:
    """``spec`` with the options a fitted ``branch`` learnt from its calibration groups (its
    leaf prior strength, where ``branch_params`` leave it ``"auto"``), so that a refit of
    the branch on more rows keeps them."""
    learnt = getattr(branch, "leaf_prior_rows_", np.nan)
    if spec.params.get(OPTION, "auto") != "auto" or (learnt is not None
                                                    and not np.isfinite(learnt)):
        return spec
    return replace(spec, params={**spec.params, OPTION: learnt})


def fit_calibrated_branch(spec: BranchSpec, X: np.ndarray, y: np.ndarray,
                          sample_weight: np.ndarray | None, entropy: int, branch: int,
                          positions: np.ndarray) -> tuple[Any, Any, int]:
    """A branch and what its calibration groups say of its rows (``calibrate="auto"``).

    The groups first (:func:`branch_crossfit`), then the branch (:func:`fit_branch`) with
    the options they chose for it (a leaf prior learnt per branch). Same parameters.

    Returns
    -------
    fitted, held_out, group_trees
    """
    held, params, group = branch_crossfit(spec, X, y, sample_weight, entropy, branch,
                                          positions)
    if params:
        spec = replace(spec, params={**spec.params, **params})
    return fit_branch(spec, X, y, sample_weight, entropy, branch), held, group


class ConstantBranch:
    """A branch too small for a forest: predicts from all of its rows.

    Regression: one Gaussian with the weighted mean and weighted variance of the branch's
    targets (the variance floored as in :func:`ebf._forests.variance_floor`). Classification:
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

    def summarize_mixture(self, X: np.ndarray, quantiles: Any = DEFAULT_QUANTILES
                          ) -> MixtureSummary:
        return summarize(self.predict_distribution(X), quantiles)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.tile(self.value_, (X.shape[0], 1))

    def _impurity_decrease(self) -> float:
        """No split, no impurity removed (:func:`ebf.importance.total_decrease`)."""
        return 0.0

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
