"""Restoring the branched ensembles (EBF, SSF) from a state that may come from a file.

The state of an ensemble (``_BranchedEnsemble._state`` in :mod:`ebf.estimators`) holds its
encoder, seed, classes and its parts (the trunk and the branches of an EBF, the sub-sample
forests of an SSF) as nested estimator states. Each part validates its own arrays in its
``_set_state``; this module checks that the parts fit together, so that a model whose
pieces were swapped or dropped fails at load, naming the part, instead of predicting
garbage: every branch is the class its learner fits for the task (or a
:class:`~ebf.branches.ConstantBranch`), reads the ensemble's features and predicts its class
codes; an EBF has one branch per trunk leaf and a trunk of its task, features and classes;
an SSF has ``n_subsamples`` forests and as many sub-sample sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from basics.class_recalibration import class_calibration_from_state
from basics.recalibration import recalibration_from_state
from basics.tasks import CLASSIFICATION
from basics.validation import check_classes, state_array, state_int

from ._base import classes_from_state, input_attributes
from .artifact.classes import estimator_from_state
from .branches import ConstantBranch
from .features import FeatureEncoder
from .learners import get_learner
from .trunk import Trunk

__all__ = ["check_branch", "fitted_update_record", "restore_ensemble", "restore_head",
           "restore_part"]


def check_branch(branch: Any, learner: str, task: str, n_features: int, n_classes: int) -> None:
    """Raise ``ValueError`` unless a loaded branch can predict for its ensemble.

    It must be the class ``learner`` fits for ``task`` (or a :class:`ConstantBranch` of the
    task), read ``n_features`` encoded columns, and, for classification, predict the
    ensemble's class codes ``0 .. n_classes - 1`` (one probability column each).

    Parameters
    ----------
    branch : estimator
        A branch restored by ``ebf.artifact.estimator_from_state``.
    learner : str
        The ensemble's ``branch`` parameter.
    task : {"regression", "classification"}
    n_features : int
        Columns of the ensemble's encoded input.
    n_classes : int
        Number of classes of the ensemble (classification).
    """
    if isinstance(branch, ConstantBranch):
        if branch.task != task or (task == CLASSIFICATION and branch.value_.size != n_classes):
            raise ValueError(f"a {branch.task} ConstantBranch of {branch.value_.size} values "
                             f"does not fit a {task} ensemble of {n_classes} classes.")
        return
    expected = get_learner(learner).classes[task]
    if type(branch) is not expected:
        raise ValueError(f"it is a {type(branch).__name__}, but branch={learner!r} {task} branches "
                         f"are {expected.__name__} or ConstantBranch.")
    if branch.n_features_in_ != n_features:
        raise ValueError(f"the branch reads {branch.n_features_in_} features, the ensemble "
                         f"{n_features}.")
    if task == CLASSIFICATION and not np.array_equal(branch.classes_, np.arange(n_classes)):
        raise ValueError(f"the branch's classes are not the ensemble's class codes "
                         f"0 .. {n_classes - 1}.")


def restore_head(est: Any, state: dict, n_parts: int) -> dict:
    """Fitted attributes of ensemble ``est`` but its parts: encoder, seed, classes and, for an
    EBF, the trunk, which must be of the ensemble's task, features and classes and have one
    leaf per part (``n_parts`` branches). Raises ``ValueError`` naming what does not fit.

    The Dask prediction of a sharded model routes rows with this head alone and loads each
    branch where its rows are (:meth:`ebf.artifact.ModelReader.head`).
    """
    encoder = FeatureEncoder()
    encoder._set_state(state["encoder"])
    attrs = {**input_attributes(encoder), "entropy_": state_int(state, "entropy", 0)}
    n_classes = 0
    if est._task == CLASSIFICATION:
        attrs["classes_"] = check_classes(classes_from_state(state))
        n_classes = len(attrs["classes_"])
        attrs.update(class_calibration_from_state(state, n_classes))
    else:
        attrs.update(recalibration_from_state(state))
    if est._parts == "subsamples":
        if n_parts != est.n_subsamples:
            raise ValueError(f"{n_parts} sub-sample forests but n_subsamples is "
                             f"{est.n_subsamples}.")
        sizes = state_array(state, "subsample_sizes", np.int64, (n_parts,))
        if not (sizes >= 1).all():
            raise ValueError(f"subsample_sizes {sizes.tolist()[:10]} must be row counts >= 1.")
        return {**attrs, "subsample_sizes_": sizes}
    trunk = estimator_from_state(state["trunk"], where="trunk")
    if not isinstance(trunk, Trunk) or trunk.task != est._task or (
            trunk.n_features_in_ != attrs["n_features_in_"]) or (
            n_classes and trunk.n_classes_ != n_classes):
        raise ValueError(f"the trunk is not a {est._task} Trunk over the ensemble's "
                         f"{attrs['n_features_in_']} features" +
                         (f" and {n_classes} classes." if n_classes else "."))
    if n_parts != trunk.n_leaves_:
        raise ValueError(f"{n_parts} branches for a trunk of {trunk.n_leaves_} leaves; every "
                         "leaf needs its branch.")
    return {**attrs, "trunk_": trunk, **_update_record(state, trunk)}


def fitted_update_record(trunk: Trunk) -> dict:
    """The update record of an EBF as fit (no update yet): its branches hold the trunk's
    leaf counts of rows, all produced by the fit (update 0)."""
    return {"branch_rows_": trunk.leaf_rows_.astype(np.int64),
            "branch_updates_": np.zeros(trunk.n_leaves_, np.int64), "n_updates_": 0}


def _update_record(state: dict, trunk: Trunk) -> dict:
    """``branch_rows_``, ``branch_updates_``, ``n_updates_`` of an EBF (``partial_fit``);
    models saved before updates existed have none: :func:`fitted_update_record`."""
    n = trunk.n_leaves_
    if "n_updates" not in state:
        return fitted_update_record(trunk)
    n_updates = state_int(state, "n_updates", 0)
    rows = state_array(state, "branch_rows", np.int64, (n,))
    produced = state_array(state, "branch_updates", np.int64, (n,))
    if (rows < trunk.leaf_rows_).any():
        raise ValueError("branch_rows must be at least the trunk's leaf counts (updates only "
                         "add rows).")
    if ((produced < 0) | (produced > n_updates)).any():
        raise ValueError(f"branch_updates must be update numbers in 0 .. n_updates "
                         f"({n_updates}).")
    return {"branch_rows_": rows, "branch_updates_": produced, "n_updates_": n_updates}


def restore_part(est: Any, head: dict, value: Any, i: int) -> Any:
    """Part ``i`` of ensemble ``est`` (a branch or a sub-sample forest) from its estimator
    state, checked by :func:`check_branch` against the ``head`` (:func:`restore_head`)."""
    where = f"{est._parts}[{i}]"
    part = estimator_from_state(value, where=where)
    try:
        check_branch(part, est.branch, est._task, head["n_features_in_"],
                     len(head.get("classes_", ())))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return part


def restore_ensemble(est: Any, state: dict) -> dict:
    """Fitted attributes of ensemble ``est`` (an EBF or an SSF) from a state: the head
    (:func:`restore_head`) and every part (:func:`restore_part`)."""
    values = state[est._parts]
    if not isinstance(values, list) or not values:
        raise ValueError(f"{est._parts} must be a non-empty list of estimators.")
    head = restore_head(est, state, len(values))
    parts = [restore_part(est, head, value, i) for i, value in enumerate(values)]
    return {**head, est._parts + "_": parts}
