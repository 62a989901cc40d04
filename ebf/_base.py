"""What every ``ebf`` estimator shares: targets, and the predictive API over encoded rows.

The predictive API is :mod:`basics.predictive`'s (the one shared with ``mondrian``):
regressors implement ``_mixture(A)``, classifiers ``_proba(A)`` (and ``_proba_summary(A)``
for branch ids; an EBF overrides ``_summary`` to route once and summarise each branch's
mixture). ``A`` is the output of the fitted ``encoder_``
(:class:`ebf.features.FeatureEncoder`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, column_or_1d

from basics.class_recalibration import NO_CLASS_MAP
from basics.predictive import PredictiveClassifierMixin, PredictiveRegressorMixin
from basics.validation import check_finite, check_regression_target, is_missing

#: Component variances are at least ``VAR_FLOOR_REL * var(y_train)``: a standard deviation
#: of 1e-6 training standard deviations, far below any resolution that matters, far above 0.
VAR_FLOOR_REL = 1e-12


def unweighted_rows(sample_weight: Any, A: np.ndarray, owner: str) -> np.ndarray | None:
    """The rows a fit uses: all (None) without weights, else those of positive weight.

    For the Bayesian trees (``ebf.bayestrees``), whose likelihood (thesis eq. 3.1, 4.2) has
    no weights: the positive weights must be equal; a weight of zero drops a row (as in
    scikit-learn), any other difference raises ``ValueError`` naming the count and the fix.
    """
    if sample_weight is None:
        return None
    sw = _check_sample_weight(sample_weight, A, dtype=np.float64, ensure_non_negative=True)
    positive = sw > 0  # at least one: scikit-learn refuses all-zero weights
    w = sw[positive]
    if not np.all(w == w[0]):
        raise ValueError(
            f"{owner} does not support unequal sample weights (the tree likelihood of thesis "
            f"eq. 3.1 has no weights; {int(np.sum(w != w[0]))} of {w.size} positive weights "
            "differ from the first); drop sample_weight, or repeat rows by integer weights "
            "(np.repeat). Zero weights are fine: they drop their rows."
        )
    return None if positive.all() else positive


def variance_floor(y: np.ndarray) -> float:
    """Smallest component variance of the predictive mixtures, from the training target.

    ``1e-12 * var(y)``, so the floor scales with the target's units (a fixed absolute floor
    would swamp a target measured in micro-units). A constant target has no spread; its
    floor is ``1e-12 * max(1, mean(y)^2)``, relative to its magnitude.

    Parameters
    ----------
    y : ndarray of shape (n_rows,)
        Finite training target.

    Returns
    -------
    float
        A finite, strictly positive variance.

    Examples
    --------
    >>> variance_floor(np.array([0.0, 2.0]))
    1e-12
    >>> variance_floor(np.array([3.0, 3.0]))
    9e-12
    """
    with np.errstate(over="ignore", invalid="ignore"):
        v = float(np.var(y))
        if not v > 0:
            v = max(1.0, float(np.mean(y)) ** 2)
    if not math.isfinite(v):
        v = float(np.finfo(np.float64).max)
    return VAR_FLOOR_REL * v


def _one_column(est: Any, y: Any, n: int) -> np.ndarray:
    """``y`` as a 1-D array of ``n`` values (a column vector warns, as in scikit-learn)."""
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y is None.")
    if hasattr(y, "to_numpy") and not hasattr(y, "columns"):
        y = y.to_numpy()
    y = np.asarray(y)
    if not (y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1)):
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    y = column_or_1d(y, warn=True)
    if y.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {y.shape[0]}.")
    return y


def regression_target(est: Any, y: Any, n: int) -> np.ndarray:
    """Finite float64 targets within ``±MAX_ABS_TARGET``; errors name the count or the range.

    The checks are :func:`basics.validation.check_regression_target`, shared with the
    Mondrian forests.
    """
    name = getattr(y, "name", None)
    y = _one_column(est, y, n)
    if y.dtype == object:
        y = np.where(is_missing(y), np.nan, y)
    try:
        y = y.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"y must be numeric for regression; got dtype {y.dtype}.") from exc
    check_regression_target(y, name)
    return y


def classification_target(est: Any, y: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Class codes ``0 .. C-1`` and the sorted classes; missing labels raise with the count."""
    y = _one_column(est, y, n)
    if y.dtype.kind == "f":
        check_finite(y[:, None], ["y"], "y")
    missing = is_missing(y)
    if missing.any():
        raise ValueError(
            f"y has {int(missing.sum())} missing values out of {n} rows; drop those rows "
            "or give them a class."
        )
    check_classification_targets(y)
    classes, codes = np.unique(y, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), classes


def classifier_target(est: Any, y: Any, n: int, n_classes: int | None) -> tuple:
    """``(codes, fitted attributes)`` of a classifier's target: the labels' codes and
    ``classes_`` (a branch's ``y`` already holds the ensemble's codes of ``n_classes``
    classes), with no class calibration map (a fit drops the map of an earlier one)."""
    if n_classes is not None:
        return np.asarray(y, dtype=np.int64), {"classes_": np.arange(n_classes),
                                               **NO_CLASS_MAP}
    codes, classes = classification_target(est, y, n)
    return codes, {"classes_": classes, **NO_CLASS_MAP}


def class_codes(est: Any, y: Any, n: int) -> np.ndarray:
    """Codes of labels ``y`` in the fitted ``est.classes_``; labels never seen raise with the
    count (a model cannot learn a new class without a refit)."""
    labels = _one_column(est, y, n)
    codes = pd.Index(est.classes_).get_indexer(labels)
    unknown = codes < 0
    if unknown.any():
        examples = pd.unique(labels[unknown])[:5].tolist()
        raise ValueError(
            f"y has {int(unknown.sum())} labels the model never saw (e.g. {examples}); its "
            f"classes are {est.classes_.tolist()[:10]}. Refit with fit(X, y) to add a class.")
    return codes.astype(np.int64)


def input_attributes(encoder: Any) -> dict[str, Any]:
    """Fitted attributes that describe the input: ``encoder_``, ``n_features_in_`` and
    ``feature_names_in_`` (DataFrames only)."""
    out = {"encoder_": encoder, "n_features_in_": encoder.n_features_in_}
    if hasattr(encoder, "feature_names_in_"):
        out["feature_names_in_"] = encoder.feature_names_in_
    return out


def classes_state(classes: np.ndarray) -> dict[str, Any]:
    """``classes_`` in a storable form (object labels as a unicode array plus a flag)."""
    as_object = classes.dtype == object
    stored = np.array(classes.tolist()) if as_object else classes
    if stored.dtype == object:
        raise TypeError("classes_ of mixed types cannot be stored; use one label type.")
    return {"classes": stored, "classes_object": bool(as_object)}


def classes_from_state(state: dict[str, Any]) -> np.ndarray:
    """Inverse of :func:`classes_state`."""
    classes = np.asarray(state["classes"])
    return classes.astype(object) if state["classes_object"] else classes


class EncodedInputMixin:
    """The rows of the predictive API (:mod:`basics.predictive`): ``X`` encoded by the
    fitted ``encoder_``, in the given order.

    A model that learns where missing values (NaN in a numeric feature) go says so with
    ``_missing_values = True`` (a class attribute or property of its base); its encoder then
    keeps them instead of refusing them."""

    def _transform(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "encoder_")
        return self.encoder_.transform(X, caller=type(self).__name__,
                                       allow_nan=getattr(self, "_missing_values", False))

    def _predict_rows(self, X: Any) -> tuple[np.ndarray, None]:
        return self._transform(X), None


class ProbabilisticRegressorMixin(PredictiveRegressorMixin, EncodedInputMixin):
    """:class:`basics.predictive.PredictiveRegressorMixin` over encoded rows."""


class ProbabilisticClassifierMixin(PredictiveClassifierMixin, EncodedInputMixin):
    """:class:`basics.predictive.PredictiveClassifierMixin` over encoded rows."""
