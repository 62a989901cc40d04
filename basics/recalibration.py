"""What every probabilistic regressor of the package offers to recalibrate its predictions.

:class:`RecalibrationMixin` gives a regressor ``recalibrate`` (learn the PIT map of
:mod:`basics.pit` on a calibration set), ``update_recalibration`` (adaptive conformal
updates from new rows, for streams), ``set_recalibration`` (a map learnt elsewhere, e.g. from
PIT counts summed on a cluster) and ``pit``; the host regressor applies the map in its
predictions through :meth:`RecalibrationMixin._recalibrated` and
:meth:`RecalibrationMixin._base_levels`, and stores it with
:func:`recalibration_state` / :func:`recalibration_from_state`. It lives here, below ``ebf``
and ``mondrian``, because both packages' regressors use it.

The host provides ``predict_distribution(X, recalibrated=True)``; the mixin checks the
targets (1-D, finite, one per row of ``X``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .mixture import GaussianMixture
from .pit import ACI_STEP, PITMap, RecalibratedDistribution, pit_counts

__all__ = ["RecalibrationMixin", "recalibration_from_state", "recalibration_state"]

_KEY = "recalibration"


def recalibration_state(estimator: Any) -> dict:
    """``{"recalibration": map state}`` of a recalibrated estimator, else ``{}``."""
    pit_map = getattr(estimator, "recalibration_", None)
    return {} if pit_map is None else {_KEY: pit_map.to_state()}


def recalibration_from_state(state: dict) -> dict:
    """``{"recalibration_": PITMap or None}`` from a state (checked: files are untrusted)."""
    value = state.get(_KEY)
    return {"recalibration_": None if value is None else PITMap.from_state(value, _KEY)}


def _targets(y: Any, n: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be 1-D with one target per row of X ({n}); got shape "
                         f"{y.shape}.")
    bad = ~np.isfinite(y)
    if np.any(bad):
        raise ValueError(f"y has {int(bad.sum())} missing or infinite targets of {n}; drop "
                         "those rows before calibrating.")
    return y


class RecalibrationMixin:
    """Recalibration of a probabilistic regressor's predictive CDF (:mod:`basics.pit`).

    After :meth:`recalibrate`, ``predict_distribution`` returns a
    :class:`~basics.pit.RecalibratedDistribution` and the quantiles of ``predict_quantiles``
    / ``predict_summary`` are the recalibrated ones; ``predict`` (mean and std) is unchanged.
    A new ``fit`` drops the map; ``partial_fit`` keeps it (update it with
    :meth:`update_recalibration`).
    """

    def pit(self, X: Any, y: Any) -> np.ndarray:
        """PIT values ``F(y|x)`` of the model's own (not recalibrated) predictive CDF.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Finite targets.

        Returns
        -------
        ndarray of shape (n_samples,), values in [0, 1]
        """
        base = self.predict_distribution(X, recalibrated=False)
        return np.clip(base.cdf(_targets(y, base.n_rows)), 0.0, 1.0)

    def recalibrate(self, X: Any, y: Any, *, n_knots: int | None = None) -> Any:
        """Learn the PIT map on a calibration set; later predictions are recalibrated.

        The calibration rows must not have been used to fit the model (their PIT would be
        too central): hold out a fraction or, for data that drifts, the most recent window
        (:func:`ebf.calibration.calibration_split`). Replaces any earlier map. Kuleshov,
        Fenner & Ermon (2018), Sec. 3, Algorithm 1 (see :mod:`basics.pit`).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        n_knots : int, optional
            Segments of the map (default: one per 200 rows, between 4 and 200).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On missing targets or fewer than 50 rows (the model is unchanged).
        """
        return self.set_recalibration(PITMap.from_counts(pit_counts(self.pit(X, y)), n_knots))

    def update_recalibration(self, X: Any, y: Any, *, step: float = ACI_STEP) -> Any:
        """Adapt the map to new rows, in order, by adaptive conformal inference.

        Gibbs & Candes (2021), eq. (2), on every knot of the map (starting from the identity
        with 20 segments if the model has none): see :meth:`basics.pit.PITMap.updated` for
        the guarantee this gives (long-run coverage at every knot level, for any sequence)
        and the ones it does not (coverage at a given time or ``x``; the density).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            New rows, oldest first; score them before updating the model with them.
        y : array-like of shape (n_samples,)
        step : float, default=0.005

        Returns
        -------
        self
        """
        current = getattr(self, "recalibration_", None) or PITMap.identity()
        return self.set_recalibration(current.updated(self.pit(X, y), step))

    def set_recalibration(self, pit_map: PITMap | None) -> Any:
        """Use ``pit_map`` from now on (None: predict with the model's own CDF).

        The seam the distributed layer uses: it sums :func:`basics.pit.pit_counts` over the
        cluster and sets :meth:`basics.pit.PITMap.from_counts` of the total.

        Returns
        -------
        self
        """
        check_is_fitted(self)
        if pit_map is not None and not isinstance(pit_map, PITMap):
            raise TypeError(f"pit_map must be a basics.pit.PITMap or None; got "
                            f"{type(pit_map).__name__}.")
        self.recalibration_ = pit_map
        return self

    def _recalibrated(self, mixture: GaussianMixture) -> Any:
        """The mixture as predicted: recalibrated if the model has a map."""
        pit_map = getattr(self, "recalibration_", None)
        return mixture if pit_map is None else RecalibratedDistribution(mixture, pit_map)

    def _base_levels(self, levels: np.ndarray) -> np.ndarray:
        """The levels of the model's own CDF whose quantiles are the recalibrated ``levels``
        (``R^-1(levels)``; the levels themselves without a map)."""
        pit_map = getattr(self, "recalibration_", None)
        return levels if pit_map is None else pit_map.inverse(levels)
