"""The machinery of Empirical Bayesian forests and sub-sample forests (Taddy et al. 2015, Sec. 4).

:class:`FitPlan` says what a fit is once its input is known; :class:`_BranchedEnsemble`
plans a fit (``_fit_plan``), fits one branch per group of rows, assembles the fitted parts
(``_from_parts``) and stores and restores them; ``_EBF`` groups rows by the trunk's leaves
(``_SSF``, in :mod:`ebf.subsample`, by a seeded permutation). The public estimators are in
:mod:`ebf.estimators`; ``ebf.dask`` plans and assembles through the same two seams.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from basics import calibration as cal
from basics.class_recalibration import NO_CLASS_MAP, class_calibration_state
from basics.mixture import GaussianMixture
from basics.recalibration import CALIBRATE_CONSTRAINT, NO_MAP, recalibration_state
from basics.seeds import resolve_entropy
from basics.tasks import CLASSIFICATION, REGRESSION
from basics.threads import N_JOBS, thread_map
from basics.validation import check_target_not_in_features

from ._base import (
    classes_state,
    classification_target,
    input_attributes,
    regression_target,
)
from ._restore import fitted_update_record, restore_ensemble, restore_head, restore_part
from .artifact.classes import estimator_state
from .branches import BranchSpec, fit_branch, fit_calibrated_branch
from .config import MAX_BINS
from .features import FeatureEncoder
from .importance import normalised, total_decrease, trunk_decrease
from .learners import check_branch_task, get_learner
from .trunk import Trunk
from .updates import OnlineUpdates

#: Trunk size when neither ``trunk_max_leaves`` nor ``trunk_min_leaf_rows`` is given: the
#: paper's five-leaf trunks (Sec. 4.1, footnote 11).
DEFAULT_TRUNK_LEAVES = 5


def pad_rows(parts: list[tuple[np.ndarray, GaussianMixture]], n: int) -> GaussianMixture:
    """One mixture for ``n`` rows from per-branch mixtures over disjoint row sets.

    Branches may have different numbers of components (Mondrian paths vary); shorter rows are
    padded with zero-weight components, which :class:`GaussianMixture` ignores. ``parts`` is
    ``[(rows, mixture of those rows), ...]``. The local EBF joins a block's branches with it,
    :mod:`ebf.dask.distribution` a partition's.
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


def _branch_jobs(spec: BranchSpec) -> int | None:
    """Threads over the branches of a fit in one process: ``n_jobs`` for a learner whose
    fit is one thread (:attr:`ebf.learners.BranchLearner.sequential_fit`), else 1 (its
    threads work on one branch's trees)."""
    return spec.n_jobs if get_learner(spec.learner).sequential_fit else 1


@dataclass(frozen=True)
class FitPlan:
    """What a fit of a branched ensemble is, once its input is known (``_fit_plan``).

    The local fit and the Dask fit (``ebf.dask``) both build one with
    :meth:`_BranchedEnsemble._fit_plan`, fit the branches it describes, and hand the fitted
    parts to :meth:`_BranchedEnsemble._from_parts`: one definition of seeds, branch
    parameters, trunk parameters and fitted attributes for both.

    Attributes
    ----------
    encoder : FeatureEncoder
        The fitted input encoder.
    classes : ndarray or None
        Sorted class labels (classification).
    entropy : int
        The resolved seed; branch ``b`` draws from ``(entropy, b)`` only.
    spec : BranchSpec
        What every branch learner shares.
    n_rows : int
        Training rows.
    trunk : Trunk or None
        EBF: the unfitted trunk with its parameters (grow it with ``fit`` or
        :func:`ebf.grower.grow_trunk` and :meth:`Trunk._from_arrays`).
    subsample_sizes : ndarray or None
        SSF: rows of every sub-sample (:func:`ebf.subsample.subsample_groups`).
    """

    encoder: FeatureEncoder
    classes: np.ndarray | None
    entropy: int
    spec: BranchSpec
    n_rows: int
    trunk: Trunk | None = None
    subsample_sizes: np.ndarray | None = None

    @property
    def n_classes(self) -> int:
        """Number of classes (0 for regression)."""
        return 0 if self.classes is None else len(self.classes)


class _BranchedEnsemble(BaseEstimator):
    """Shared by EBF and SSF: parameters, input handling, the fit plan, persistence.

    Seams for ``ebf.dask`` (documented in ``docs/architecture.md``): :meth:`_fit_plan` and
    :meth:`_from_parts`.
    """

    _task = REGRESSION
    #: The state entry of the independent parts (``"branches"`` of an EBF, ``"subsamples"``
    #: of an SSF): a list of estimator states, each stored in its own shard by
    #: :func:`ebf.artifact.save` (format 2) and loadable alone (``ebf.artifact._reader``).
    _parts = ""

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left"), None],
        "branch": [str],  # a name of ebf.learners.LEARNERS, checked by _validate_params
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left")],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "branch_params": [dict, None],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
        "predict_only": ["boolean"],
        "calibrate": CALIBRATE_CONSTRAINT,
    }

    def _validate_params(self) -> None:
        """scikit-learn's parameter checks, then the branch learner: whether it does the task
        and takes every ``branch_params`` name (before any work, with the names it takes)."""
        super()._validate_params()
        check_branch_task(self.branch, self._task)
        get_learner(self.branch).check_params(self.branch_params, self._task)

    def _n_trees(self) -> int:
        """Trees per branch: ``n_estimators``, or the branch learner's ``default_trees``
        (:data:`ebf.learners.LEARNERS`) when it is None."""
        if self.n_estimators is None:
            return get_learner(self.branch).default_trees
        return int(self.n_estimators)

    def _prepare(self, X: Any, y: Any, sample_weight: Any) -> tuple:
        """Validate parameters and inputs; nothing is assigned yet.

        Returns the encoded ``X``, the target (float64, or class codes), the weights (or
        None) and the :class:`FitPlan`.
        """
        self._validate_params()
        check_target_not_in_features(X, y)
        encoder = FeatureEncoder()
        A = encoder.fit_transform(X, allow_nan=self._missing_values)
        classes = None
        if self._task == CLASSIFICATION:
            y, classes = classification_target(self, y, A.shape[0])
        else:
            y = regression_target(self, y, A.shape[0])
        w = None
        if sample_weight is not None:
            w = _check_sample_weight(sample_weight, A, dtype=np.float64,
                                     ensure_non_negative=True)
        return A, y, w, self._fit_plan(encoder, classes, A.shape[0])

    def _fit_plan(self, encoder: FeatureEncoder, classes: np.ndarray | None,
                  n_rows: int) -> FitPlan:
        """The plan of a fit on ``n_rows`` rows of this input (a seam used by ``ebf.dask``).

        Validates the parameters; changes nothing on the estimator.

        Parameters
        ----------
        encoder : FeatureEncoder
            Fitted on the training input (``fit`` or ``FeatureEncoder.from_summaries``).
        classes : ndarray or None
            Sorted class labels (classifiers), None for regressors.
        n_rows : int
            Training rows.

        Returns
        -------
        FitPlan
        """
        self._validate_params()
        if (classes is None) != (self._task == REGRESSION):
            raise ValueError(f"{type(self).__name__} needs classes exactly when it classifies.")
        n_classes = 0 if classes is None else len(classes)
        spec = BranchSpec(
            learner=self.branch,
            task=self._task,
            n_estimators=self._n_trees(),
            min_samples_leaf=int(self.min_samples_leaf),
            max_features=self.max_features,
            max_depth=self.max_depth,
            n_classes=int(n_classes),
            params=dict(self.branch_params or {}),
            n_jobs=self.n_jobs,
            predict_only=bool(self.predict_only),
        )
        return FitPlan(encoder=encoder, classes=classes,
                       entropy=resolve_entropy(self.random_state), spec=spec,
                       n_rows=int(n_rows), **self._plan_parts(int(n_rows), n_classes))

    def _plan_parts(self, n_rows: int, n_classes: int) -> dict:
        """The :class:`FitPlan` fields of the subclass (``trunk`` or ``subsample_sizes``)."""
        return {}

    def _fit_groups(self, A: np.ndarray, y: np.ndarray, w: np.ndarray | None,
                    groups: list[np.ndarray], plan: FitPlan,
                    crossfit: bool = False) -> tuple[list, tuple | None]:
        """Fit one branch per group of rows; branch ``b`` is seeded by (entropy, b) only.

        With ``crossfit`` (``calibrate="auto"``) each branch follows its calibration groups
        (:func:`ebf.branches.fit_calibrated_branch`), and the second value is their
        ``(held_out, group_trees, model_trees)``: the PIT counts summed (regressors), or
        every fold's held-out probabilities (classifiers); else None. Branches of a learner
        whose fit is one thread are fit ``n_jobs`` at a time (:func:`_branch_jobs`).
        """
        def fit(b: int) -> Any:
            rows = groups[b]
            args = (plan.spec, A[rows], y[rows], None if w is None else w[rows], plan.entropy,
                    b)
            return fit_calibrated_branch(*args, rows) if crossfit else fit_branch(*args)

        parts = thread_map(fit, range(len(groups)), _branch_jobs(plan.spec))
        if not crossfit:
            return parts, None
        total: Any = cal.HeldOutCounts.empty() if self._task == REGRESSION else []
        for _, held, _ in parts:  # in branch order, whatever the threads
            total = total + held
        group = parts[-1][2] if parts else plan.spec.n_estimators
        return [p[0] for p in parts], (total, group, plan.spec.n_estimators)

    def _from_parts(self, plan: FitPlan, branches: list, trunk: Trunk | None = None) -> Any:
        """Set every fitted attribute from the fitted parts, at once (a seam for ``ebf.dask``).

        Parameters
        ----------
        plan : FitPlan
            From :meth:`_fit_plan` of an estimator with the same parameters.
        branches : list
            Fitted branch learners in branch order (``ebf.branches.fit_branch``).
        trunk : Trunk, optional
            The fitted trunk (EBF).

        Returns
        -------
        self
        """
        attrs = {**input_attributes(plan.encoder), "entropy_": int(plan.entropy)}
        if self._task == CLASSIFICATION:
            attrs["classes_"] = plan.classes
        # a fit drops the map of an earlier fit
        attrs.update(NO_CLASS_MAP if self._task == CLASSIFICATION else NO_MAP)
        attrs.update(self._fitted_parts(plan, list(branches), trunk))
        self._assign(attrs)
        return self

    def _set_state(self, state: dict) -> None:
        self._assign(restore_ensemble(self, state))

    def _restore_head(self, state: dict, n_parts: int) -> dict:
        """The fitted attributes but the parts, from a state whose parts are elsewhere (a
        seam of ``ebf.artifact``; checked as :meth:`_set_state` checks them). Assigns nothing.
        """
        return restore_head(self, state, n_parts)

    def _restore_part(self, head: dict, value: Any, i: int) -> Any:
        """Part ``i`` from its estimator state, checked against ``head``
        (:meth:`_restore_head`); a seam of ``ebf.artifact._reader``."""
        return restore_part(self, head, value, i)

    def compact(self) -> Any:
        """A new, predict-only copy whose Mondrian branches are compact.

        Every branch that offers ``compact()`` (Mondrian forests, see
        :meth:`mondrian.MondrianForestRegressor.compact`) is replaced by its compact copy;
        the others (Bayesian / random forests, constant branches) are already predict-only
        and are shared with this model, as is the trunk. Predictions are those of this model,
        bit for bit; the copy is assembled through :meth:`_from_parts`, as a fit is. This
        model is unchanged.

        Returns
        -------
        estimator
            Of the same class and parameters, with ``compact_ = True``.

        Examples
        --------
        >>> import numpy as np
        >>> from ebf import EmpiricalBayesianForestRegressor
        >>> X = np.random.default_rng(0).random((400, 3)); y = X[:, 0]
        >>> full = EmpiricalBayesianForestRegressor(
        ...     n_estimators=2, branch="mondrian", random_state=0).fit(X, y)
        >>> small = full.compact()
        >>> bool(np.array_equal(small.predict(X), full.predict(X))), small.compact_
        (True, True)
        """
        check_is_fitted(self, "encoder_")
        return self._with_parts([b.compact() if hasattr(b, "compact") else b
                                 for b in self._compact_parts()[0]])

    def _with_parts(self, parts: list) -> Any:
        """A new model equal to this one but for its parts (branches or sub-sample forests),
        replaced by ``parts`` in the same order; encoder, trunk, update record and
        calibration maps are kept, and the copy is assembled through :meth:`_from_parts`, as
        a fit is. A seam of :meth:`compact` and ``ebf.dask`` (whose models keep their parts
        on the workers, as handles, until gathered). This model is unchanged.

        Parameters
        ----------
        parts : list
            One part per part of this model.

        Returns
        -------
        estimator
        """
        check_is_fitted(self, "encoder_")
        _, trunk, n_rows, plan_parts = self._compact_parts()
        classes = self.classes_ if self._task == CLASSIFICATION else None
        plan = replace(self._fit_plan(self.encoder_, classes, n_rows),
                       entropy=int(self.entropy_), **plan_parts)
        out = clone(self)._from_parts(plan, list(parts), trunk)
        # the update record as it is; _assign would drop the input's feature names
        out.__dict__.update(self._update_record())
        if self._task != CLASSIFICATION:
            out.set_recalibration(self.recalibration_, getattr(self, "calibration_", None))
        else:
            out.set_class_calibration(getattr(self, "class_calibration_", None))
            out._set_provenance(getattr(self, "calibration_", None))
        return out

    @property
    def feature_importances_(self) -> np.ndarray:
        """Impurity importances (:mod:`ebf.importance`): each feature's share of the impurity
        decrease of the trunk's splits (EBF) and of every branch forest's average tree,
        shape ``(n_features_in_,)``, summing to 1. Only models whose branches are CART forests
        (``branch="bayesian"`` or ``"random"``) have it."""
        check_is_fitted(self, "encoder_")
        branches, trunk, _, _ = self._compact_parts()
        d = self.encoder_.n_features_in_
        total = total_decrease(branches, d, type(self).__name__)
        if trunk is not None:
            total += trunk_decrease(trunk)
        return normalised(total)

    @property
    def compact_(self) -> bool:
        """Whether every branch is predict-only (no Mondrian branch keeps online state)."""
        check_is_fitted(self, "encoder_")
        return all(getattr(b, "compact_", True) for b in self._compact_parts()[0])

    def _update_record(self) -> dict:
        """The fitted attributes recording updates (EBF), kept by :meth:`compact`."""
        return {}

    def _assign(self, attrs: dict) -> None:
        """Set all fitted attributes at once (a fit that raised has assigned nothing)."""
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(attrs)

    def _state(self, parts: dict) -> dict:
        check_is_fitted(self, "encoder_")
        state = {"encoder": self.encoder_._get_state(), "entropy": int(self.entropy_)}
        if self._task == CLASSIFICATION:
            state.update(classes_state(self.classes_))
            state.update(class_calibration_state(self))
        else:
            state.update(recalibration_state(self))
        for name, value in parts.items():
            state[name] = [estimator_state(b) for b in value] if isinstance(value, list) else (
                estimator_state(value) if hasattr(value, "_get_state") else value)
        return state

    @property
    def _missing_values(self) -> bool:
        """Whether ``X`` may hold missing values: the branch learner takes them (the trunk
        always does)."""
        return get_learner(self.branch).missing_values

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        try:
            tags.input_tags.allow_nan = self._missing_values
        except ValueError:  # an unknown branch: fit will say so
            pass
        return tags


class _EBF(OnlineUpdates, _BranchedEnsemble):
    _parts = "branches"
    _parameter_constraints: dict = {
        **_BranchedEnsemble._parameter_constraints,
        "trunk_max_leaves": [Interval(Integral, 1, None, closed="left"), None],
        "trunk_min_leaf_rows": [Interval(Integral, 1, None, closed="left"), None],
        "trunk_max_bins": [Interval(Integral, 2, MAX_BINS, closed="both")],
    }

    def _plan_parts(self, n_rows: int, n_classes: int) -> dict:
        max_leaves = self.trunk_max_leaves
        if max_leaves is None and self.trunk_min_leaf_rows is None:
            max_leaves = DEFAULT_TRUNK_LEAVES
        min_rows = self.trunk_min_leaf_rows
        if min_rows is None:  # every branch must be big enough for a tree to split it
            min_rows = 2 * int(self.min_samples_leaf)
        trunk = Trunk(
            max_leaves=max_leaves,
            min_leaf_rows=min_rows,
            max_bins=self.trunk_max_bins,
            task=self._task,
            n_classes=n_classes or None,
        )
        return {"trunk": trunk}

    def _compact_parts(self) -> tuple[list, Trunk | None, int, dict]:
        """Branches, trunk, training rows and :class:`FitPlan` fields of ``compact()``."""
        return self.branches_, self.trunk_, int(np.sum(self.trunk_.leaf_rows_)), {}

    def _fitted_parts(self, plan: FitPlan, branches: list, trunk: Trunk | None) -> dict:
        if trunk is None or len(branches) != trunk.n_leaves_:
            raise ValueError(f"an EBF needs its fitted trunk and one branch per trunk leaf; got "
                             f"{len(branches)} branches for "
                             f"{None if trunk is None else trunk.n_leaves_} leaves.")
        return {"trunk_": trunk, "branches_": branches, **fitted_update_record(trunk)}

    def _fit(self, X: Any, y: Any, sample_weight: Any, crossfit: bool = False):
        """Fit; with ``crossfit``, return the held-out results of :meth:`_fit_groups`."""
        A, y, w, plan = self._prepare(X, y, sample_weight)
        trunk = clone(plan.trunk).fit(A, y, sample_weight=w)
        leaf = trunk.apply(A)
        groups = [np.flatnonzero(leaf == b) for b in range(trunk.n_leaves_)]
        branches, held = self._fit_groups(A, y, w, groups, plan, crossfit)
        self._from_parts(plan, branches, trunk)
        return held if crossfit else self

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
        """Training rows per branch: the trunk's leaf counts plus the rows of every update."""
        check_is_fitted(self, "trunk_")
        return self.branch_rows_

    def export_trunk(self, decimals: int = 3) -> str:
        """The trunk as readable rules with the training feature names."""
        check_is_fitted(self, "trunk_")
        return self.trunk_.export_text(list(self.encoder_.names_), decimals=decimals)

    def _get_state(self) -> dict:
        return self._state({"trunk": self.trunk_, "branches": self.branches_,
                            "branch_rows": self.branch_rows_,
                            "branch_updates": self.branch_updates_,
                            "n_updates": int(self.n_updates_)})

    def _groups(self, leaf: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """``(branch, rows)`` for every branch that has rows among the trunk leaves ``leaf``."""
        order = np.argsort(leaf, kind="stable")
        bounds = np.searchsorted(leaf[order], np.arange(len(self.branches_) + 1))
        return [
            (b, order[bounds[b]:bounds[b + 1]])
            for b in range(len(self.branches_))
            if bounds[b + 1] > bounds[b]
        ]

    def _mixture(self, Xf: np.ndarray) -> GaussianMixture:
        parts = [(rows, self.branches_[b].predict_distribution(Xf[rows]))
                 for b, rows in self._groups(self.trunk_.apply(Xf))]
        return pad_rows(parts, Xf.shape[0])

    def _summary(self, Xf: np.ndarray, levels: np.ndarray) -> tuple:
        """One routing; each branch's rows summarised from that branch's mixture alone
        (what the sharded prediction of one branch computes, bit for bit)."""
        n = Xf.shape[0]
        leaf = self.trunk_.apply(Xf)
        # a row no branch takes (only a corrupt trunk routes one nowhere) stays NaN
        mean, std, qs = np.full(n, np.nan), np.full(n, np.nan), np.full((n, levels.size), np.nan)
        for b, rows in self._groups(leaf):
            mean[rows], std[rows], qs[rows] = self.branches_[b].summarize_mixture(Xf[rows],
                                                                                   levels)
        return mean, std, qs, leaf

    def _proba_summary(self, Xf: np.ndarray) -> tuple:
        leaf = self.trunk_.apply(Xf)
        out = np.full((Xf.shape[0], len(self.classes_)), np.nan)  # rows routed nowhere: NaN
        for b, rows in self._groups(leaf):
            out[rows] = self.branches_[b].predict_proba(Xf[rows])
        return out, leaf

    def _proba(self, Xf: np.ndarray) -> np.ndarray:
        return self._proba_summary(Xf)[0]
