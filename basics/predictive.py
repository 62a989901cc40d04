"""The predictive API of every estimator of ``mondrian`` and ``ebf``, written once.

A regressor implements ``_mixture(A)`` (a :class:`basics.mixture.GaussianMixture` for a
block of prepared rows ``A``) and :class:`PredictiveRegressorMixin` gives it
``predict_summary``, ``predict``, ``predict_quantiles`` and ``predict_distribution``: one
kernel call per block of rows on that mixture (:func:`basics.mixture.summarize`, through
``_summary``, which an estimator may override: an EBF routes once and summarises each
branch's mixture, a Mondrian forest reads mean and std off its moment kernels), so the
three agree bit for bit. A classifier implements ``_proba(A)`` (and ``_proba_summary(A)``
for branch ids) and :class:`PredictiveClassifierMixin` gives it ``predict_summary``,
``predict_proba``, ``predict_log_proba`` and ``predict``, all through its class calibration
map if it has one (:class:`basics.class_recalibration.ClassRecalibrationMixin`).

Both take their rows from ``_predict_rows(X)``: the checked rows in the estimator's
representation (``ebf``: the fitted encoder's output; ``mondrian``: rows scaled to the unit
box, sorted for locality) and the permutation that puts results back in the order of ``X``
(None: already in order). Blocks of :data:`PREDICT_BLOCK` rows run in ``n_jobs`` threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .class_recalibration import ClassRecalibrationMixin
from .levels import DEFAULT_QUANTILES, check_levels
from .mixture import GaussianMixture, MixtureSummary, summarize
from .pit import RecalibratedDistribution
from .recalibration import RecalibrationMixin
from .threads import n_threads, thread_map
from .validation import check_scored_targets

__all__ = ["PREDICT_BLOCK", "ClassifierSummary", "PredictiveClassifierMixin",
           "PredictiveRegressorMixin", "PredictiveSummary", "predicted_quantiles",
           "row_blocks"]

#: Rows per prediction block. A block's predictive mixture takes memory per row times the
#: block size (a pooled SSF mixture of 80 Mondrian trees has ~900 components per row: 2,048
#: rows x 900 x 3 float64 arrays is 44 MB, 65,536 rows 1.4 GB), and a small block's mixture
#: stays in cache while it is summarised; against that, every block walks every tree once
#: more. Measured (50k rows, one thread, 5 features): an SSF of 40-tree Mondrian branches
#: predicts in 9.4 s with 2,048-row blocks, 14.5 s with 8,192, 40.9 s with 65,536 (quantiles
#: 18 / 27 / 49 s); a lone 10-tree Mondrian forest loses a little at 2,048 (mean and std
#: 0.26 s against 0.17 s at 65,536, quantiles 1.25 s against 1.07 s). The EBF is as fast
#: either way. Fewer rows than threads x blocks are split evenly over the threads.
PREDICT_BLOCK = 2048


def row_blocks(n: int, n_jobs: int | None) -> list[slice]:
    """Consecutive blocks of at most :data:`PREDICT_BLOCK` rows covering ``range(n)``,
    at least one per thread of ``n_jobs`` while there are rows for it.

    Examples
    --------
    >>> row_blocks(5, 2)
    [slice(0, 3, None), slice(3, 5, None)]
    """
    step = max(1, min(PREDICT_BLOCK, -(-n // n_threads(n_jobs))))
    return [slice(a, min(a + step, n)) for a in range(0, n, step)]


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


def _unsort(a: np.ndarray | None, perm: np.ndarray | None) -> np.ndarray | None:
    """Rows of ``a`` (computed for ``X[perm]``) back in the order of ``X``."""
    if perm is None or a is None:
        return a
    out = np.empty_like(a)
    out[perm] = a
    return out


class _BlockwiseMixin:
    """Prepared rows in blocks run in ``n_jobs`` threads, results joined in row order.

    The host provides ``_predict_rows(X) -> (A, perm)``: the rows of ``X`` prepared for
    ``_mixture`` / ``_proba``, and the permutation of ``X`` they are in (None: as given).
    """

    #: Whether ``predict_summary`` names the branch of every row (EBF models).
    _predicts_branch = False

    def _map_blocks(self, fn: Callable[[slice], Any], n: int) -> list:
        return thread_map(fn, row_blocks(n, self.n_jobs), self.n_jobs)

    def _blockwise(self, X: Any, fn: Callable[[np.ndarray], tuple],
                   empty: Callable[[], tuple]) -> list:
        """Per-output concatenation of ``fn`` over the blocks of the prepared rows of ``X``
        (``empty()`` without rows; the branch output last), in the order of ``X``."""
        A, perm = self._predict_rows(X)
        parts = self._map_blocks(lambda b: fn(A[b]), A.shape[0])
        branch = np.empty(0, np.int64) if self._predicts_branch else None
        if not parts:
            return [*empty(), branch]
        return [None if parts[0][k] is None else _unsort(np.concatenate([p[k] for p in parts]),
                                                         perm)
                for k in range(len(parts[0]))]


def _no_rows(levels: np.ndarray) -> tuple:
    """Mean, std and quantiles of no rows."""
    return np.empty(0), np.empty(0), np.empty((0, levels.size))


class PredictiveRegressorMixin(RecalibrationMixin, _BlockwiseMixin):
    """``predict_summary``, ``predict``, ``predict_quantiles`` and ``predict_distribution``
    from ``_mixture``, one mixture per block of rows; recalibration by
    :class:`basics.recalibration.RecalibrationMixin` (quantiles and distributions follow the
    map, mean and std are the model's)."""

    def _summary(self, A: np.ndarray, levels: np.ndarray) -> tuple:
        """``(mean, std, quantiles, branch or None)`` of a block of prepared rows."""
        return (*summarize(self._mixture(A), levels), None)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of the predictive mean (scikit-learn's ``RegressorMixin.score``), once the
        targets are known to be within ``±basics.validation.MAX_ABS_TARGET``: beyond it the
        sums of squares overflow (:func:`basics.validation.check_scored_targets`).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        check_scored_targets(y)
        return super().score(X, y, sample_weight=sample_weight)  # type: ignore[misc]

    def _mixture_summary(self, A: np.ndarray, levels: np.ndarray) -> tuple:
        """``(mean, std, quantiles)`` of the mixture of a block of prepared rows; an estimator
        whose kernels summarise without building the mixture overrides it."""
        return tuple(summarize(self._mixture(A), levels))

    def summarize_mixture(self, X: Any, quantiles: Any = DEFAULT_QUANTILES) -> MixtureSummary:
        """Mean, standard deviation and quantiles of the model's own predictive mixture.

        The numbers of ``summarize(self.predict_distribution(X, recalibrated=False),
        quantiles)`` (:func:`basics.mixture.summarize`), computed per block of rows; a
        Mondrian forest reads them off its trees in one pass per row, without building the
        mixture. This is what an EBF or SSF asks of each of its branches.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        quantiles : float or array-like of shape (n_levels,), default=DEFAULT_QUANTILES
            Levels in [0, 1] (:func:`basics.levels.check_levels`); may be empty.

        Returns
        -------
        basics.mixture.MixtureSummary
        """
        levels = np.atleast_1d(check_levels(quantiles, "quantiles"))
        out = self._blockwise(X, lambda A: self._mixture_summary(A, levels),
                              lambda: _no_rows(levels))
        return MixtureSummary(*out[:3])

    def _summaries(self, X: Any, levels: np.ndarray) -> PredictiveSummary:
        base = self._base_levels(levels)  # recalibrated quantiles: remapped levels
        return PredictiveSummary(*self._blockwise(X, lambda A: self._summary(A, base),
                                                  lambda: _no_rows(levels)))

    def predict_summary(self, X: Any, quantiles: Any = DEFAULT_QUANTILES) -> PredictiveSummary:
        """Mean, standard deviation, quantiles (and branch ids) of every row, in one pass.

        Each block of rows is prepared, routed and turned into its predictive mixture once;
        one kernel call (:func:`basics.mixture.summarize`) reads everything off it. The
        numbers are those of :meth:`predict` with ``return_std=True`` and of
        :meth:`predict_quantiles`, bit for bit.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        quantiles : float or array-like of shape (n_levels,), default=DEFAULT_QUANTILES
            Levels in [0, 1] (:func:`basics.levels.check_levels`); may be empty.

        Returns
        -------
        PredictiveSummary
            ``mean``, ``std``, ``quantiles`` of shape (n_samples, n_levels) and ``branch``
            (the trunk leaf of every row for EBF models, else None).

        """
        return self._summaries(X, np.atleast_1d(check_levels(quantiles, "quantiles")))

    def predict(self, X: Any, *, return_std: bool = False, quantiles: Any = None):
        """Predictive mean (and standard deviation), or quantiles, of every row.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of :meth:`predict_distribution`.
        quantiles : float or array-like of shape (n_levels,), optional
            Return these quantiles instead of the mean (:meth:`predict_quantiles`), as
            quantile regression forests' ``predict(X, quantiles=...)`` does.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,), only if ``return_std``
        quantiles : ndarray of shape (n_samples,) for a scalar level, else (n_samples,
            n_levels); only if ``quantiles`` is given

        Examples
        --------
        >>> model.predict(X, quantiles=[0.1, 0.9]).shape  # doctest: +SKIP
        (100, 2)
        """
        if quantiles is not None:
            return predicted_quantiles(self, X, quantiles, return_std)
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
        A, perm = self._predict_rows(X)
        parts = self._map_blocks(lambda b: self._mixture(A[b]), A.shape[0])
        mixture = GaussianMixture.stack(parts) if parts else self._mixture(A)
        if perm is not None:
            mixture = GaussianMixture._trusted(*(_unsort(a, perm) for a in (
                mixture.weights, mixture.means, mixture.variances)))
        return self._recalibrated(mixture) if recalibrated else mixture

    def predict_quantiles(self, X: Any, q: Any = DEFAULT_QUANTILES) -> np.ndarray:
        """Quantiles of the predictive distribution (recalibrated, if the model has a map),
        computed in blocks of rows.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        q : float or array-like of shape (n_levels,), default=DEFAULT_QUANTILES
            Levels in [0, 1] (:func:`basics.levels.check_levels`).

        Returns
        -------
        ndarray of shape (n_samples, n_levels)
        """
        return self._summaries(X, np.atleast_1d(check_levels(q, "q"))).quantiles


def predicted_quantiles(estimator: Any, X: Any, quantiles: Any, return_std: bool) -> Any:
    """``estimator.predict(X, quantiles=quantiles)``: its ``predict_quantiles``, one column
    less for a scalar level (the convention of quantile regression forests). Shared by every
    regressor's ``predict``, the Dask ones included (their quantiles are dask arrays).

    Raises
    ------
    ValueError
        If ``return_std`` is asked for too.
    """
    if return_std:
        raise ValueError("predict returns the quantiles or the mean and std, not both: drop "
                         "return_std=True, or call predict_summary for all of them at once.")
    out = estimator.predict_quantiles(X, quantiles)
    return out[:, 0] if np.ndim(quantiles) == 0 else out


class PredictiveClassifierMixin(ClassRecalibrationMixin, _BlockwiseMixin):
    """``predict_summary``, ``predict_proba``, ``predict_log_proba`` and ``predict`` from
    ``_proba``; recalibration by :class:`basics.class_recalibration.ClassRecalibrationMixin`
    (all of them follow the map)."""

    def _proba_summary(self, A: np.ndarray) -> tuple:
        """``(proba, branch or None)`` of a block of prepared rows."""
        return self._proba(A), None

    def _probas(self, X: Any, recalibrated: bool = True) -> list:
        proba, branch = self._blockwise(X, self._proba_summary,
                                        lambda: (np.empty((0, len(self.classes_))),))
        return [self._calibrated(proba) if recalibrated else proba, branch]

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

        """
        proba, branch = self._probas(X)
        return ClassifierSummary(proba, self.classes_[np.argmax(proba, axis=1)], branch)

    def predict_proba(self, X: Any, *, recalibrated: bool = True) -> np.ndarray:
        """Class probabilities (calibrated, if the model has a class calibration map).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
        recalibrated : bool, default=True
            False gives the model's own probabilities even if it has a map.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to one; columns follow ``classes_``.
        """
        return self._probas(X, recalibrated)[0]

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
