"""Updating an Empirical Bayesian Forest with new rows under its stored trunk.

Taddy et al. (2015), Sec. 4: the trunk is stable (its posterior, Sec. 3, eq. 11, says how
much) and only sorts rows into branches, which never talk to each other. New rows can
therefore go through the stored trunk (its encoder, bin edges and thresholds) and change only
the branches they land in:

- a **Mondrian** branch is extended online by its own ``partial_fit``. A Mondrian forest
  extended with new points has the distribution of one sampled on all the points at once
  (Lakshminarayanan, Roy & Teh 2014, Sec. 3-4, projectivity; regression paper 2016, Alg. 3-4),
  so an updated EBF and an EBF fit on all rows under the same trunk agree in distribution.
  The extension's randomness comes from the branch's seed ``(random_state, branch)`` and the
  branch's own update count (``SeedSequence(seed, spawn_key=(update,))``, see
  :meth:`mondrian.MondrianForestRegressor.partial_fit`): the same updates give the same model
  whatever the workers or the order of the tasks.
- a **Bayesian / random** (CART) branch keeps no rows, so it cannot be extended. It is refit
  on its earlier rows plus the new ones when the caller passes the earlier rows
  (``previous``); with the batch fit's seed ``(random_state, branch)``, the refit branch is
  the one a batch fit on all rows under the same trunk grows, bit for bit.

:func:`update_branch` is the one implementation of a branch update; the local
``partial_fit`` and the Dask one (``ebf.dask``) both call it, one branch per call.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from basics.tasks import CLASSIFICATION
from basics.threads import thread_map

from ._base import class_codes, regression_target
from .branches import BranchSpec, ConstantBranch, fit_branch, with_learnt_options
from .learners import get_learner, online_learners

__all__ = [
    "OnlineUpdates",
    "check_updatable",
    "check_update",
    "encode_rows",
    "previous_rows",
    "update_branch",
    "update_groups",
]

def encode_rows(model: Any, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Rows for fitted ensemble ``model`` encoded as at fit, and their targets (class codes
    of the fitted classes for classifiers; a label never seen raises)."""
    A = model._transform(X)
    if model._task != CLASSIFICATION:
        return A, regression_target(model, y, A.shape[0])
    return A, class_codes(model, y, A.shape[0])


def previous_rows(model: Any, A: np.ndarray, target: np.ndarray, branches: list[int]) -> dict:
    """Branch id -> its earlier rows and targets, from the encoded earlier rows ``A``.

    Raises ``ValueError`` unless ``A`` holds exactly as many rows of every branch in
    ``branches`` as that branch was trained on (``model.branch_sizes_``).
    """
    found = dict(model._groups(model.trunk_.apply(A)))
    out = {}
    for b in branches:
        rows = found.get(b, np.empty(0, np.int64))
        if rows.size != model.branch_sizes_[b]:
            raise ValueError(
                f"previous has {rows.size} rows in branch {b}, which was trained on "
                f"{int(model.branch_sizes_[b])}: pass every row the model was trained on "
                "(the fit's and the earlier updates'), in the same order.")
        out[b] = (A[rows], target[rows])
    return out


def check_update(learner: str, has_previous: bool) -> None:
    """Refuse, before any work, an update the branch learner cannot do.

    Parameters
    ----------
    learner : str
        The ensemble's ``branch`` parameter.
    has_previous : bool
        Whether the caller passed the earlier rows (``previous=``).

    Raises
    ------
    ValueError
        For a batch learner (``"bayesian"``, ``"random"``, ``"smc"``, ``"bart"``) without the
        earlier rows.
    """
    if not get_learner(learner).online and not has_previous:
        raise ValueError(
            f"partial_fit cannot extend branch={learner!r} branches: they are fit in one "
            "batch and keep no rows, and only "
            f"{', '.join(repr(s) for s in online_learners())} branches are extended online. "
            "Pass the rows the model was trained on as previous=(X_old, y_old) "
            "(the branches that receive new rows are refit on their old and new rows), refit "
            "with fit(X, y), or train with branch='mondrian'."
        )


def check_updatable(spec: BranchSpec, branch: Any, b: int) -> None:
    """Raise ``ValueError`` if online branch ``b`` cannot take rows: a predict-only (compact)
    Mondrian forest, or a :class:`~ebf.branches.ConstantBranch` (too few rows at fit to keep
    a forest). CART branches are refit from their rows, so any of them can be."""
    if not get_learner(spec.learner).online:
        return
    if isinstance(branch, ConstantBranch):
        raise ValueError(
            f"branch {b} is a constant branch (it had fewer than {spec.min_rows} rows at fit, "
            "too few for a forest) and keeps no rows to extend. Refit with fit(X, y), or "
            f"train with a trunk whose leaves hold at least {spec.min_rows} rows.")
    if getattr(branch, "compact_", False):
        raise ValueError(
            f"branch {b} is predict-only (compact, e.g. trained with predict_only=True): it "
            "dropped the rows online updates need. Refit with fit(X, y), and keep the full "
            "model (predict_only=False) for the models you update.")


def update_branch(spec: BranchSpec, branch: Any, X: np.ndarray, y: np.ndarray, entropy: int,
                  b: int, previous: tuple[np.ndarray, np.ndarray] | None = None) -> Any:
    """Branch ``b`` with the new rows ``(X, y)``; ``branch`` itself is not modified.

    Parameters
    ----------
    spec : BranchSpec
        The ensemble's branch learner and parameters.
    branch : estimator
        The fitted branch.
    X : ndarray of shape (n, n_features)
        Encoded new rows of the branch, in arrival order.
    y : ndarray of shape (n,)
        Their targets (class codes for classification).
    entropy : int
        The ensemble's resolved seed.
    b : int
        Branch id.
    previous : (ndarray, ndarray), optional
        The branch's earlier rows and targets (encoded), for a batch branch (every learner
        but ``"mondrian"``): it is refit on them followed by the new rows, with the seed of a
        batch fit.

    Returns
    -------
    estimator
        The updated branch (a new object).

    Raises
    ------
    ValueError
        If the branch cannot take rows (:func:`check_updatable`), or a batch branch comes
        without ``previous``.
    """
    if not get_learner(spec.learner).online:
        check_update(spec.learner, previous is not None)
        Xp, yp = previous
        return fit_branch(with_learnt_options(spec, branch), np.concatenate([Xp, X]),
                          np.concatenate([yp, y]), None, entropy, b)
    check_updatable(spec, branch, b)
    new = copy.deepcopy(branch)
    if spec.task == CLASSIFICATION:
        return new.partial_fit(X, y, classes=np.arange(spec.n_classes))
    return new.partial_fit(X, y)


def update_groups(spec: BranchSpec, branches: list, A: np.ndarray, target: np.ndarray,
                  groups: list[tuple[int, np.ndarray]], entropy: int, previous: dict,
                  n_jobs: int | None) -> dict:
    """:func:`update_branch` of every ``(branch id, rows)`` in ``groups``, over ``n_jobs``
    threads: branch id -> updated branch. The branches are independent (their own copies,
    their own seeds), so the threads change nothing but the time."""

    def update(group: tuple[int, np.ndarray]) -> Any:
        b, rows = group
        return update_branch(spec, branches[b], A[rows], target[rows], entropy, b,
                             previous.get(b))

    return dict(zip([b for b, _ in groups], thread_map(update, groups, n_jobs), strict=True))


class OnlineUpdates:
    """``partial_fit`` of an EBF and its seams (``_update_encoded``, ``_take_updates``):
    the model's half of this module, mixed into the EBF estimators."""

    def partial_fit(self, X: Any, y: Any, *, previous: tuple | None = None) -> Any:
        """Take new rows under the stored trunk: only the branches they land in change.

        The rows are encoded with the stored encoder (bin edges, category codes) and routed
        by the stored trunk; each branch that receives rows is updated by
        :func:`ebf.updates.update_branch`: a Mondrian branch is extended online (the result
        has the distribution of a batch fit on all its rows), a Bayesian / random branch is
        refit on its earlier rows (from ``previous``) and the new ones. The other branches,
        the trunk and the recalibration map are kept. ``branch_updates_`` records which
        update produced each branch. Called on an unfitted model, it is ``fit(X, y)``.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            New rows, with the training columns.
        y : array-like of shape (n_samples,)
            Their targets (classifiers: labels seen at fit).
        previous : (X_old, y_old), optional
            Required for ``branch="bayesian"`` / ``"random"``: the rows the model was
            trained on so far (at least every row of the branches that receive new rows; the
            counts are checked against ``branch_sizes_``).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Before anything changes: CART branches without ``previous``, a predict-only or
            constant branch that receives rows, labels never seen, wrong columns.
        """
        if not hasattr(self, "trunk_"):
            return self.fit(X, y)
        A, target = encode_rows(self, X, y)  # wrong columns or labels first, as at fit
        check_update(self.branch, previous is not None)
        old = None if previous is None else encode_rows(self, *previous)
        return self._update_encoded(A, target, self.trunk_.apply(A), old)

    def _update_encoded(self, A: np.ndarray, target: np.ndarray, leaf: np.ndarray,
                        previous: tuple | None = None, n_jobs: int | None = None) -> Any:
        """:meth:`partial_fit` on rows already encoded and routed (a seam of ``ebf.dask``,
        whose workers encode and route the new rows).

        Parameters
        ----------
        A : ndarray of shape (n, n_features)
            Rows encoded with ``encoder_``, in arrival order.
        target : ndarray of shape (n,)
            Their targets (class codes for classifiers, :func:`ebf.updates.encode_rows`).
        leaf : ndarray of shape (n,)
            Their branches (``trunk_.apply(A)``).
        previous : (ndarray, ndarray), optional
            The earlier rows, encoded, and their targets (CART branches).
        n_jobs : int, optional
            Threads over the branches (None: the model's ``n_jobs``).

        Returns
        -------
        self
        """
        groups = self._groups(leaf)
        n_jobs = self.n_jobs if n_jobs is None else n_jobs
        old = {} if previous is None else previous_rows(self, *previous,
                                                        [b for b, _ in groups])
        spec = self._fit_plan(self.encoder_, getattr(self, "classes_", None), 1).spec
        for b, _ in groups:  # every branch that gets rows can take them, before any work
            check_updatable(spec, self.branches_[b], b)
        updates = update_groups(spec, self.branches_, A, target, groups, int(self.entropy_),
                                old, n_jobs)
        return self._take_updates(updates, {b: rows.size for b, rows in groups})

    def _take_updates(self, updates: dict, counts: dict) -> Any:
        """Record one update: branch ``b`` replaced by ``updates[b]``, which took
        ``counts[b]`` new rows (a seam of ``ebf.dask``, whose workers update the branches;
        the update count grows only if some branch took rows).

        Returns
        -------
        self
        """
        if not updates:
            return self
        branches = list(self.branches_)
        sizes = self.branch_rows_.copy()
        produced = self.branch_updates_.copy()
        n_updates = self.n_updates_ + 1
        for b, new in updates.items():
            branches[b] = new
            sizes[b] += counts[b]
            produced[b] = n_updates
        # at once, and only these: the input attributes (feature names...) stay
        self.__dict__.update({"branches_": branches, "branch_rows_": sizes,
                              "branch_updates_": produced, "n_updates_": n_updates})
        return self

    def _update_record(self) -> dict:
        return {name: getattr(self, name)
                for name in ("branch_rows_", "branch_updates_", "n_updates_")}
