"""What every ``ebf`` estimator shares: targets, row blocks and the predictive API.

Regressors implement ``_mixture(A)`` (a :class:`basics.mixture.GaussianMixture` for a
block of encoded rows ``A``); ``predict_summary``, ``predict`` and ``predict_quantiles`` are
one kernel call on it per block (:func:`basics.mixture.summarize`, through ``_summary``,
which an EBF overrides to route once and summarise each branch's mixture), so the mixture
math lives in one place and the three agree bit for bit. Classifiers implement ``_proba(A)``
(and ``_proba_summary(A)`` for branch ids). ``A`` is the output of the fitted ``encoder_``
(:class:`ebf.features.FeatureEncoder`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, column_or_1d

from basics.mixture import GaussianMixture, summarize
from basics.pit import RecalibratedDistribution
from basics.recalibration import RecalibrationMixin
from basics.threads import n_threads, thread_map
from basics.validation import check_finite, check_regression_target, is_missing

#: Rows per prediction block: bounds the memory of leaf matrices and mixtures, and keeps a
#: block's mixture in cache while it is summarised (a pooled SSF mixture of 80 Mondrian
#: trees has ~900 components per row: 2048 rows x 900 x 3 arrays is 44 MB). Measured on the
#: demo's SSF: 2048-row blocks ~25% faster than 65,536-row blocks; no loss for the EBF.
PREDICT_BLOCK = 2048

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
    """Encoded input and row blocks run in ``n_jobs`` threads (results in block order)."""

    def _transform(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "encoder_")
        return self.encoder_.transform(X, caller=type(self).__name__)

    def _row_blocks(self, n: int) -> list[slice]:
        threads = n_threads(self.n_jobs)
        step = max(1, min(PREDICT_BLOCK, -(-n // threads)))
        return [slice(a, min(a + step, n)) for a in range(0, n, step)]

    def _map_blocks(self, fn, n: int) -> list:
        return thread_map(fn, self._row_blocks(n), self.n_jobs)


def check_levels(q: Any) -> np.ndarray:
    """Quantile levels as a 1-D float64 array in [0, 1]; the error quotes the bad input."""
    levels = np.atleast_1d(np.asarray(q, dtype=np.float64))
    if levels.ndim != 1 or np.any(~((levels >= 0) & (levels <= 1))):
        raise ValueError(f"q must be levels in [0, 1]; got {q!r}.")
    return levels


class PredictiveSummary(NamedTuple):
    """Per-row predictive summary of a regressor (``predict_summary``).

    Attributes
    ----------
    mean, std : ndarray of shape (n_samples,)
    quantiles : ndarray of shape (n_samples, n_levels)
    branch : ndarray of shape (n_samples,), int64, or None
        The trunk leaf (branch) that predicted each row: EBF models only.
    """

    mean: np.ndarray
    std: np.ndarray
    quantiles: np.ndarray
    branch: np.ndarray | None


class ClassifierSummary(NamedTuple):
    """Per-row prediction of a classifier (``predict_summary``).

    Attributes
    ----------
    proba : ndarray of shape (n_samples, n_classes)
    predicted : ndarray of shape (n_samples,)
        The most probable class (the first of ``classes_`` on ties).
    branch : ndarray of shape (n_samples,), int64, or None
        The trunk leaf (branch) that predicted each row: EBF models only.
    """

    proba: np.ndarray
    predicted: np.ndarray
    branch: np.ndarray | None


def _joined(parts: list, n_outputs: int, empty: tuple) -> list:
    """Per-output concatenation of block results (``empty`` when there are no rows)."""
    if not parts:
        return list(empty)
    return [None if parts[0][k] is None else np.concatenate([p[k] for p in parts])
            for k in range(n_outputs)]


def _empty_branch(est: Any) -> np.ndarray | None:
    return np.empty(0, np.int64) if hasattr(est, "trunk_") else None


class ProbabilisticRegressorMixin(RecalibrationMixin, EncodedInputMixin):
    """``predict_summary``, ``predict``, ``predict_quantiles`` and ``predict_distribution``
    from ``_mixture``, one mixture per block of rows; recalibration by
    :class:`basics.recalibration.RecalibrationMixin` (quantiles and distributions follow the
    map, mean and std are the model's)."""

    def _summary(self, A: np.ndarray, levels: np.ndarray) -> tuple:
        """``(mean, std, quantiles, branch or None)`` of a block of encoded rows."""
        return (*summarize(self._mixture(A), levels), None)

    def _summaries(self, X: Any, levels: np.ndarray) -> PredictiveSummary:
        A = self._transform(X)
        base = self._base_levels(levels)  # recalibrated quantiles: remapped levels
        parts = self._map_blocks(lambda b: self._summary(A[b], base), A.shape[0])
        empty = (np.empty(0), np.empty(0), np.empty((0, levels.size)), _empty_branch(self))
        return PredictiveSummary(*_joined(parts, 4, empty))

    def predict_summary(self, X: Any, quantiles: Any = (0.05, 0.5, 0.95)) -> PredictiveSummary:
        """Mean, standard deviation, quantiles (and branch ids) of every row, in one pass.

        Each block of rows is encoded, routed and turned into its predictive mixture once;
        one kernel call (:func:`basics.mixture.summarize`) reads everything off it. The
        numbers are those of :meth:`predict` with ``return_std=True`` and of
        :meth:`predict_quantiles`, bit for bit.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        quantiles : float or array-like of shape (n_levels,), default=(0.05, 0.5, 0.95)
            Levels in [0, 1]; may be empty.

        Returns
        -------
        PredictiveSummary
            ``mean``, ``std``, ``quantiles`` of shape (n_samples, n_levels) and ``branch``
            (the trunk leaf of every row for EBF models, else None).

        Examples
        --------
        >>> import numpy as np
        >>> from ebf.forests import BayesianForestRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.random((100, 2)); y = X[:, 0] + 0.1 * rng.normal(size=100)
        >>> bf = BayesianForestRegressor(n_estimators=5, random_state=0).fit(X, y)
        >>> s = bf.predict_summary(X[:3], quantiles=(0.1, 0.9))
        >>> s.quantiles.shape, bool(np.all(s.mean == bf.predict(X[:3])))
        ((3, 2), True)
        """
        return self._summaries(X, check_levels(quantiles))

    def predict(self, X: Any, return_std: bool = False):
        """Predictive mean (and standard deviation) of every row.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of :meth:`predict_distribution`.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,), only if ``return_std``
        """
        s = self._summaries(X, np.empty(0))
        return (s.mean, s.std) if return_std else s.mean

    def predict_distribution(self, X: Any, *, recalibrated: bool = True
                             ) -> GaussianMixture | RecalibratedDistribution:
        """The predictive distribution of every row: the model's Gaussian mixture, or (after
        :meth:`recalibrate`) that mixture with its CDF recalibrated.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        recalibrated : bool, default=True
            False gives the model's own mixture even if it has a recalibration map.

        Returns
        -------
        basics.mixture.GaussianMixture or basics.pit.RecalibratedDistribution
        """
        A = self._transform(X)
        parts = self._map_blocks(lambda b: self._mixture(A[b]), A.shape[0])
        if len(parts) <= 1:
            mixture = parts[0] if parts else self._mixture(A)
        else:
            width = max(p.n_components for p in parts)
            mixture = GaussianMixture._trusted(*(
                np.concatenate([_pad(getattr(p, k), width, fill) for p in parts])
                for k, fill in (("weights", 0.0), ("means", 0.0), ("variances", 1.0))
            ))
        return self._recalibrated(mixture) if recalibrated else mixture

    def predict_quantiles(self, X: Any, q: Any = (0.05, 0.5, 0.95)) -> np.ndarray:
        """Quantiles of the predictive distribution, computed in blocks of rows.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        q : float or array-like of shape (n_levels,), default=(0.05, 0.5, 0.95)
            Levels in [0, 1].

        Returns
        -------
        ndarray of shape (n_samples, n_levels)
        """
        return self._summaries(X, check_levels(q)).quantiles


def _pad(a: np.ndarray, width: int, fill: float) -> np.ndarray:
    """Right-pad the component columns of a block (zero-weight padding components)."""
    if a.shape[1] == width:
        return a
    out = np.full((a.shape[0], width), fill)
    out[:, : a.shape[1]] = a
    return out


class ProbabilisticClassifierMixin(EncodedInputMixin):
    """``predict_summary``, ``predict_proba``, ``predict_log_proba`` and ``predict`` from
    ``_proba``."""

    def _proba_summary(self, A: np.ndarray) -> tuple:
        """``(proba, branch or None)`` of a block of encoded rows."""
        return self._proba(A), None

    def _probas(self, X: Any) -> tuple:
        A = self._transform(X)
        parts = self._map_blocks(lambda b: self._proba_summary(A[b]), A.shape[0])
        return _joined(parts, 2, (np.empty((0, len(self.classes_))), _empty_branch(self)))

    def predict_summary(self, X: Any) -> ClassifierSummary:
        """Class probabilities, the predicted class (and branch ids), in one pass.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)

        Returns
        -------
        ClassifierSummary
            ``proba`` (as :meth:`predict_proba`), ``predicted`` (as :meth:`predict`) and
            ``branch`` (the trunk leaf of every row for EBF models, else None).

        Examples
        --------
        >>> import numpy as np
        >>> from ebf.forests import BayesianForestClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.random((100, 2)); y = (X[:, 0] > 0.5).astype(int)
        >>> clf = BayesianForestClassifier(n_estimators=5, random_state=0).fit(X, y)
        >>> s = clf.predict_summary(X[:3])
        >>> s.proba.shape, s.branch is None
        ((3, 2), True)
        """
        proba, branch = self._probas(X)
        return ClassifierSummary(proba, self.classes_[np.argmax(proba, axis=1)], branch)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to one; columns follow ``classes_``.
        """
        return self._probas(X)[0]

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba` (``-inf`` for probability zero)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """Most probable class (the first of ``classes_`` on ties).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self.predict_summary(X).predicted
