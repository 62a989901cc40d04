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
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from . import calibration as cal
from .mixture import GaussianMixture
from .pit import ACI_STEP, MIN_ROWS, PITMap, RecalibratedDistribution, pit_counts
from .prior_choice import held_out_scores

__all__ = ["CALIBRATE_CONSTRAINT", "NO_MAP", "RecalibrationMixin", "calibration_from_state",
           "map_state", "recalibration_from_state", "recalibration_state"]

_KEY = "recalibration"
_PROVENANCE = "calibration"
#: The fitted attributes of a regressor without a map: what a fit sets (a new fit drops the
#: map of an earlier one, and its provenance with it).
NO_MAP: dict = {"recalibration_": None, "calibration_": None}
#: scikit-learn's parameter constraint of ``calibrate``.
CALIBRATE_CONSTRAINT = [StrOptions(set(cal.CALIBRATION_METHODS))]
#: Provenance fields of a map (``calibration_``) and their largest values when loaded.
_PROVENANCE_INTS = {"rows": 2**62, "folds": 1000, "group_trees": 2**31, "model_trees": 2**31,
                    "parts": 2**31}
_PROVENANCE_METHODS = ("folds", "subsamples", "holdout", "recent", "rows", "window", "aci")


def map_state(estimator: Any, attribute: str, key: str) -> dict:
    """``{key: map state, "calibration": provenance}`` of an estimator whose map is in
    ``attribute`` (a PIT map, a class calibration map), else ``{}``."""
    cal_map = getattr(estimator, attribute, None)
    if cal_map is None:
        return {}
    out = {key: cal_map.to_state()}
    provenance = getattr(estimator, "calibration_", None)
    if provenance:
        out[_PROVENANCE] = dict(provenance)
    return out


def recalibration_state(estimator: Any) -> dict:
    """``{"recalibration": map state, "calibration": provenance}`` of a recalibrated
    estimator, else ``{}``."""
    return map_state(estimator, "recalibration_", _KEY)


def calibration_from_state(state: Any, where: str = _PROVENANCE) -> dict | None:
    """A map's provenance from a state, every field checked (files are untrusted)."""
    if state is None:
        return None
    if not isinstance(state, dict) or state.get("method") not in _PROVENANCE_METHODS:
        raise ValueError(f"{where}: a calibration provenance needs a method among "
                         f"{_PROVENANCE_METHODS}; got {state!r:.200}.")
    out = {"method": str(state["method"])}
    for key, top in _PROVENANCE_INTS.items():
        if key in state:
            value = state[key]
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not (
                    0 <= int(value) <= top):
                raise ValueError(f"{where}.{key} must be an integer in [0, {top}]; got "
                                 f"{value!r:.100}.")
            out[key] = int(value)
    unknown = set(state) - {"method", *_PROVENANCE_INTS}
    if unknown:
        raise ValueError(f"{where} has unknown fields {sorted(unknown)}.")
    return out


def recalibration_from_state(state: dict) -> dict:
    """``{"recalibration_": PITMap or None, "calibration_": provenance or None}`` from a
    state (checked: files are untrusted)."""
    value = state.get(_KEY)
    pit_map = None if value is None else PITMap.from_state(value, _KEY)
    provenance = calibration_from_state(state.get(_PROVENANCE)) if pit_map is not None else None
    return {"recalibration_": pit_map, "calibration_": provenance}


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


class RecalibrationMixin(cal.CalibratedFitMixin):
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
            Segments of the map (default: one per 50 rows, between 4 and 200).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On missing targets or fewer than 50 rows (the model is unchanged).
        """
        counts = pit_counts(self.pit(X, y))
        return self.set_recalibration(PITMap.from_counts(counts, n_knots),
                                      {"method": "rows", "rows": int(counts.sum())})

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
        u = self.pit(X, y)
        rows = int(u.size) + int((getattr(self, "calibration_", None) or {}).get("rows", 0))
        return self.set_recalibration(current.updated(u, step), {"method": "aci", "rows": rows})

    def set_recalibration(self, pit_map: PITMap | None, provenance: dict | None = None) -> Any:
        """Use ``pit_map`` from now on (None: predict with the model's own CDF).

        The seam the distributed layer uses: it sums :func:`basics.pit.pit_counts` over the
        cluster and sets :meth:`basics.pit.PITMap.from_counts` of the total.

        Parameters
        ----------
        pit_map : basics.pit.PITMap or None
        provenance : dict, optional
            How the map was learnt (``calibration_``): ``method`` (``"folds"``,
            ``"holdout"``, ``"recent"``, ``"rows"``, ``"window"`` or ``"aci"``) and the
            integers ``rows``, ``folds``, ``group_trees``, ``model_trees`` that apply.

        Returns
        -------
        self
        """
        check_is_fitted(self)
        if pit_map is not None and not isinstance(pit_map, PITMap):
            raise TypeError(f"pit_map must be a basics.pit.PITMap or None; got "
                            f"{type(pit_map).__name__}.")
        provenance = None if pit_map is None else calibration_from_state(
            provenance or {"method": "rows"}, "provenance")
        self.recalibration_ = pit_map
        self.calibration_ = provenance
        return self

    def _held_out(self, fitted: list, X: Any, y: np.ndarray) -> Any:
        """A calibration group's PIT counts of rows it never saw (``calibrate="auto"``), or
        its scores of every candidate leaf prior (:func:`basics.prior_choice.held_out_scores`)."""
        (group,) = fitted
        return held_out_scores(group, X, y)

    def _set_auto_map(self, held: tuple) -> None:
        """The PIT map of the groups' counts, extrapolated to the model's trees: ``held``
        is ``(counts, group, model)`` with an optional method (``"subsamples"``)."""
        counts, group, model = held[:3]
        if isinstance(counts, list):  # the clones' (rows, counts) per fold
            counts = sum((c for _, c in counts), cal.HeldOutCounts.empty())
        if counts.n_rows >= MIN_ROWS:
            self.set_recalibration(cal.extrapolated_map(counts, group, model),
                                   cal.auto_provenance(counts.n_rows, group, model, *held[3:]))

    def _set_provenance(self, provenance: dict) -> None:
        self.set_recalibration(self.recalibration_, provenance)

    def _recalibrated(self, mixture: GaussianMixture) -> Any:
        """The mixture as predicted: recalibrated if the model has a map."""
        pit_map = getattr(self, "recalibration_", None)
        return mixture if pit_map is None else RecalibratedDistribution(mixture, pit_map)

    def _base_levels(self, levels: np.ndarray) -> np.ndarray:
        """The levels of the model's own CDF whose quantiles are the recalibrated ``levels``
        (``R^-1(levels)``; the levels themselves without a map)."""
        pit_map = getattr(self, "recalibration_", None)
        return levels if pit_map is None else pit_map.inverse(levels)
