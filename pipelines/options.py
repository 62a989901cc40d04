"""The options of a training job, checked once: :class:`TrainOptions`.

``ebf train`` and ``ebf retrain`` build one from their arguments
(:func:`pipelines.cli.arguments.train_options`), :func:`pipelines.train.train` fits with it,
a model registry records it (:meth:`TrainOptions.to_dict`) and refits with it
(:meth:`TrainOptions.from_dict`). Every field is checked in ``__post_init__``, before any
data is read: a bad value raises ``ValueError`` naming the field, the value and the fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from numbers import Integral
from typing import Any

from ebf.calibration import CALIBRATION_METHODS, DEFAULT_FRACTION, check_fraction
from ebf.dask.branches import parse_branch_memory
from ebf.learners import DEFAULT_BRANCH, get_learner
from pipelines.sizing import AUTO_MODEL_MEMORY, check_sized_by_rows

__all__ = ["CALIBRATE", "TASKS", "TrainOptions"]

#: ``task`` values.
TASKS: tuple[str, ...] = ("auto", "regression", "classification")
#: ``calibrate`` values: the methods of :mod:`basics.calibration`.
CALIBRATE: tuple[str, ...] = CALIBRATION_METHODS


@dataclass(frozen=True)
class TrainOptions:
    """How a training job fits its model (everything but the data and the columns).

    Parameters
    ----------
    task : {"auto", "regression", "classification"}, default="auto"
        ``"auto"`` follows :func:`pipelines.train.infer_task`.
    branch : str, default=DEFAULT_BRANCH
        Branch learner, a name of :data:`ebf.learners.LEARNERS`; by default
        :data:`ebf.learners.DEFAULT_BRANCH`, as for the estimators.
    n_estimators : int, optional
        Trees per branch (and per sub-sample of the baseline); by default the learner's
        ``default_trees`` (fewer if ``model_memory`` says so).
    trunk_leaves : int, optional
        Maximum trunk leaves (branches); ``trunk_max_leaves`` of the estimator.
    min_leaf_rows : int, optional
        Minimum rows per trunk leaf; ``trunk_min_leaf_rows``. With neither limit the trunk
        has up to 5 leaves (the paper's default).
    branch_memory : int or str, optional
        Memory budget per branch task (``"2GB"``): the trunk grows until every branch fits.
    min_samples_split : int, optional
        Leaf size of the learners that take it (Mondrian: a block with fewer rows is not
        split; default 10); a learner that does not take it is refused.
    model_memory : int or str, optional
        Budget for the whole model (``"2GB"``): :func:`pipelines.sizing.plan_model_size`
        picks the trees per branch (if not given) or the leaf size; only for the learners
        whose model grows with the rows (:func:`pipelines.sizing.sized_by_rows`).
        ``"auto"`` (the command line's default): CART leaves grow with the rows
        (:func:`pipelines.sizing.rows_leaf`), in a budget of
        :data:`pipelines.sizing.DEFAULT_MODEL_MEMORY`.
    compact : bool, default=False
        Fit predict-only models (``predict_only=True``: every branch compacted on its
        worker as soon as it is fit): Mondrian branches without their online state.
    calibrate : {"auto", "recent", "holdout", "none"}, default="auto"
        Recalibrate the predictive distributions of regressors (:mod:`basics.calibration`).
        ``"auto"``: on every training row, each predicted by small calibration forests of
        its branch fit without it (no row is held out of the model); ``"recent"`` /
        ``"holdout"``: on held-out rows, the last ``calibration_fraction`` in dataset order
        or a position-hashed random fraction. Classifiers take ``"auto"`` (a class
        calibration map of the groups' held-out probabilities) or ``"none"``.
    calibration_fraction : float in (0, 1), default=0.1
    random_state : int or None, default=0
        Seed; the same seed gives the same model on any cluster.

    Examples
    --------
    >>> TrainOptions(branch="mondrian").trees()
    10
    >>> TrainOptions(branch="bayesian", min_samples_split=20)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: branch_params ['min_samples_split'] are not options of branch='bayesian'; ...
    """

    task: str = "auto"
    branch: str = DEFAULT_BRANCH
    n_estimators: int | None = None
    trunk_leaves: int | None = None
    min_leaf_rows: int | None = None
    branch_memory: int | str | None = None
    min_samples_split: int | None = None
    model_memory: int | str | None = None
    compact: bool = False
    calibrate: str = "auto"
    calibration_fraction: float = DEFAULT_FRACTION
    random_state: int | None = 0

    def __post_init__(self) -> None:
        _one_of("task", self.task, TASKS)
        _one_of("calibrate", self.calibrate, CALIBRATE)
        learner = get_learner(self.branch)
        for name, low in (("n_estimators", 1), ("trunk_leaves", 1), ("min_leaf_rows", 1),
                          ("min_samples_split", 2)):
            _count(name, getattr(self, name), low)
        learner.check_params(self.branch_params())
        parse_branch_memory(self.branch_memory)
        if self.model_memory != AUTO_MODEL_MEMORY:
            parse_branch_memory(self.model_memory, "model_memory")
        if self.model_memory is not None:
            check_sized_by_rows(self.branch)
        if not isinstance(self.compact, bool):
            raise ValueError(f"compact must be True or False, got {self.compact!r}.")
        if self.calibrate != "none":
            check_fraction(self.calibration_fraction)
        if self.random_state is not None and not isinstance(self.random_state, Integral):
            raise ValueError(f"random_state must be an integer or None, got "
                             f"{self.random_state!r}.")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any],
                  defaults: TrainOptions | None = None) -> TrainOptions:
        """Options from a mapping of field names (a registry record, a scheduler's JSON),
        the unnamed fields from ``defaults``; an unknown name raises ``ValueError``."""
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise ValueError(f"unknown train_options {unknown}; known: {list(cls.names())}.")
        return dataclasses.replace(defaults or cls(), **dict(values))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The field names, in order."""
        return tuple(f.name for f in fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (what a registry records)."""
        return {name: getattr(self, name) for name in self.names()}

    def replace(self, **changes: Any) -> TrainOptions:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)

    def trees(self) -> int:
        """Trees per branch: ``n_estimators``, else the learner's ``default_trees``."""
        if self.n_estimators is None:
            return get_learner(self.branch).default_trees
        return int(self.n_estimators)

    def branch_params(self, min_samples_split: int | None = None) -> dict[str, int] | None:
        """The ``branch_params`` of the estimator: ``min_samples_split`` (this one, or the
        one a size plan chose) when set, else None."""
        value = self.min_samples_split if min_samples_split is None else min_samples_split
        return None if value is None else {"min_samples_split": int(value)}


def _one_of(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")


def _count(name: str, value: Any, low: int) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, Integral)
                              or value < low):
        raise ValueError(f"{name} must be an integer >= {low} or None, got {value!r}.")

