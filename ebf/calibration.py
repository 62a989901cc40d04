"""Calibration sets, and fitting a regressor with a recalibrated predictive distribution.

Recalibration (:mod:`basics.pit`, Kuleshov, Fenner & Ermon (2018), Sec. 3) learns a monotone
map of the PIT ``F(y|x)`` on rows the model was not fit on. This module chooses those rows:

- ``"recent"``: the last ``fraction`` of the rows in their order (time order, for data that
  drifts: the map then corrects the model towards the latest behaviour, which is what the
  next rows most resemble);
- ``"holdout"``: a random ``fraction`` of the rows. Row ``i`` is in it when a hash of
  ``(random_state, i)`` falls below ``fraction``, so the choice depends on the row's
  position alone: the Dask path (:mod:`ebf.dask.calibration`), which sees the rows partition
  by partition, picks the same rows as :func:`calibration_split` whatever the partitioning.

Out-of-bag rows are not offered: a Bayesian forest's trees weight every row by an Exp(1)
draw (Taddy et al. (2015), Algorithm 1), which is never zero, so no row is out of any bag; and
a Mondrian branch sees all its rows.

:func:`rolling_recalibration` is the protocol of a scheduled job on drifting data: each
period is predicted with the map as it stands, then the map is refit on a window of the most
recent outcomes (or moved by adaptive conformal inference) before the next period.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from basics.calibration import (
    CALIBRATION_METHODS,
    DEFAULT_FRACTION,
    calibration_split,
    check_fraction,
    holdout_mask,
    min_training_rows,
    recent_start,
    subset_rows,
)
from basics.pit import ACI_STEP, MIN_ROWS, PITMap, RecalibratedDistribution, pit_counts

#: Rows of the window of :func:`rolling_recalibration` when no history gives it.
DEFAULT_WINDOW = 5000

__all__ = [
    "CALIBRATION_METHODS",
    "DEFAULT_FRACTION",
    "DEFAULT_WINDOW",
    "calibration_split",
    "check_fraction",
    "fit_recalibrated",
    "holdout_mask",
    "min_training_rows",
    "period_blocks",
    "recent_start",
    "rolling_recalibration",
]

def fit_recalibrated(estimator: Any, X: Any, y: Any, *, calibrate: str = "recent",
                     fraction: float = DEFAULT_FRACTION, random_state: int | None = 0,
                     **fit_params: Any) -> Any:
    """Fit ``estimator`` on most rows and recalibrate it on the others.

    Parameters
    ----------
    estimator : regressor of ``ebf`` or ``mondrian``
        Anything with ``fit`` and ``recalibrate``
        (:class:`basics.recalibration.RecalibrationMixin`).
    X : array-like or DataFrame of shape (n_samples, n_features)
        Rows in time order if ``calibrate="recent"``.
    y : array-like of shape (n_samples,)
    calibrate : {"recent", "holdout", "auto", "none"}, default="recent"
        Calibration rows (:func:`calibration_split`); ``"auto"`` and ``"none"`` fit on all
        rows with the estimator's ``calibrate`` set to them. With ``"recent"`` or
        ``"holdout"`` the estimator's ``calibrate`` is set to ``"none"`` (its map is the one
        learnt here).
    fraction : float in (0, 1), default=0.1
    random_state : int or None, default=0
        Chooses the holdout rows (the estimator's own seed is its parameter).
    **fit_params
        Passed to ``estimator.fit`` (e.g. ``sample_weight``, cut to the fit rows).

    Returns
    -------
    estimator
        Fitted and (unless ``"none"``) recalibrated.

    Examples
    --------
    >>> from ebf import BayesianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((2000, 2)); y = X[:, 0] + rng.standard_t(3, 2000) * 0.1
    >>> bf = fit_recalibrated(BayesianForestRegressor(n_estimators=10, random_state=0),
    ...                       X, y, calibrate="holdout", fraction=0.25)
    >>> bf.recalibration_ is not None
    True
    """
    if calibrate not in CALIBRATION_METHODS:
        raise ValueError(f"calibrate must be one of {CALIBRATION_METHODS}; got {calibrate!r}.")
    has_param = "calibrate" in estimator.get_params(deep=False)
    if calibrate in ("auto", "none"):
        if has_param:
            estimator.set_params(calibrate=calibrate)
        elif calibrate == "auto":
            raise ValueError(f"{type(estimator).__name__} has no calibrate='auto'; use "
                             "'holdout' or 'recent'.")
        return estimator.fit(X, y, **fit_params)
    n = len(y)
    fit_rows, cal_rows = calibration_split(n, calibrate, fraction, random_state)
    if cal_rows.size == 0 or fit_rows.size == 0:
        raise ValueError(f"{n} rows leave nothing to fit on or to calibrate on with "
                         f"fraction={fraction}.")
    params = {k: (subset_rows(v, fit_rows) if hasattr(v, "__len__") and len(v) == n else v)
              for k, v in fit_params.items()}
    if has_param:  # the map comes from the held-out rows below, not from the fit
        estimator.set_params(calibrate="none")
    estimator.fit(subset_rows(X, fit_rows), subset_rows(y, fit_rows), **params)
    estimator.recalibrate(subset_rows(X, cal_rows), subset_rows(y, cal_rows))
    return estimator.set_recalibration(estimator.recalibration_,
                                       {"method": calibrate, "rows": int(cal_rows.size)})


def period_blocks(periods: Any) -> list[slice]:
    """The runs of equal labels in ``periods``, in order, as slices of rows.

    Parameters
    ----------
    periods : array-like of shape (n_samples,)
        A period label per row (a month, a day...), rows in time order: each label's rows
        must be consecutive.

    Returns
    -------
    list of slice

    Raises
    ------
    ValueError
        If a label comes back after another one (the rows are not in period order).

    Examples
    --------
    >>> period_blocks(["2013-01", "2013-01", "2013-02"])
    [slice(0, 2, None), slice(2, 3, None)]
    """
    labels = np.asarray(periods)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"periods must be a non-empty 1-D array of labels; got shape "
                         f"{labels.shape}.")
    change = np.flatnonzero(labels[1:] != labels[:-1]) + 1
    starts, stops = np.r_[0, change], np.r_[change, labels.size]
    firsts = labels[starts]
    if np.unique(firsts).size != firsts.size:
        raise ValueError(f"periods has {firsts.size} runs of {np.unique(firsts).size} labels: "
                         "a period's rows are not consecutive. Sort the rows by time first.")
    return [slice(int(a), int(b)) for a, b in zip(starts, stops, strict=True)]


def rolling_recalibration(estimator: Any, X: Any, y: Any, periods: Any, *,
                          update: str = "window", window: int | None = None,
                          history: tuple[Any, Any] | None = None,
                          step: float = ACI_STEP) -> Iterator[tuple[slice, Any]]:
    """Predict period after period, updating the recalibration map with each period's
    outcomes before the next, as a scheduled scoring job would.

    For period ``p``, yields its rows and ``estimator.predict_distribution`` of them with the
    map as it stands, then updates the map with the period's targets. The model itself is
    not refit; its map is replaced in place (after the loop it holds the last one).

    ``update="window"`` (the default) refits the map (Kuleshov et al. (2018), Algorithm 1, as
    :meth:`~basics.recalibration.RecalibrationMixin.recalibrate` does) on the PIT values of
    the most recent periods, dropping the oldest ones while the rest still hold ``window``
    rows: the map follows drift at the pace of the window and keeps the shape of a fitted
    map. ``update="aci"`` instead moves every knot by adaptive conformal inference
    (:meth:`~basics.recalibration.RecalibrationMixin.update_recalibration`, Gibbs & Candes
    (2021), eq. (2)): its guarantee is on long-run coverage when each row is predicted with
    the map of all rows before it; applied a period at a time, the knots overshoot within a
    large period, and the density (NLPD, CRPS) is not what it controls.

    Parameters
    ----------
    estimator : fitted regressor with ``recalibrate`` and ``update_recalibration``
    X : array-like or DataFrame of shape (n_samples, n_features)
        Rows in time order.
    y : array-like of shape (n_samples,)
    periods : array-like of shape (n_samples,)
        A period label per row (:func:`period_blocks`).
    update : {"window", "aci"}, default="window"
    window : int, optional
        Rows the refitted map is fit on (``"window"``); default: the rows of ``history``,
        else 5,000.
    history : tuple (X, y), optional
        The rows just before the first period (the model's calibration rows): the map is
        refit on them first and they start the window. Without it the first period is
        predicted with the estimator's map as it is and the window starts with it.
    step : float, default=0.005
        The adaptive update's step (``"aci"``).

    Yields
    ------
    rows : slice
        The period's rows.
    distribution : RecalibratedDistribution or GaussianMixture
        Their predictive distribution before the period's outcomes were seen.

    Examples
    --------
    >>> from ebf import BayesianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((1200, 2)); y = X[:, 0] + rng.normal(0, 0.1, 1200)
    >>> bf = BayesianForestRegressor(n_estimators=5, random_state=0).fit(X[:600], y[:600])
    >>> months = np.repeat([1, 2, 3], 100)
    >>> got = rolling_recalibration(bf, X[900:], y[900:], months, history=(X[600:900],
    ...                                                                      y[600:900]))
    >>> [d.n_rows for _, d in got]
    [100, 100, 100]
    """
    if update not in ("window", "aci"):
        raise ValueError(f"update must be 'window' or 'aci'; got {update!r}.")
    blocks = period_blocks(periods)
    n = len(y)
    if blocks[-1].stop != n:
        raise ValueError(f"periods has {blocks[-1].stop} labels for {n} rows.")
    if window is not None and int(window) < MIN_ROWS:
        raise ValueError(f"window must be at least {MIN_ROWS} rows; got {window}.")
    counts: list[np.ndarray] = []
    if history is not None:  # recalibrate on it, as the window's first counts
        counts.append(pit_counts(estimator.pit(*history)))
        estimator.set_recalibration(PITMap.from_counts(counts[0]))
    window = int(window) if window is not None else (
        int(counts[0].sum()) if counts else DEFAULT_WINDOW)
    for rows in blocks:
        X_p, y_p = subset_rows(X, np.arange(rows.start, rows.stop)), np.asarray(y)[rows]
        dist = estimator.predict_distribution(X_p)
        yield rows, dist
        if update == "aci":
            estimator.update_recalibration(X_p, y_p, step=step)
            continue
        base = dist.base if isinstance(dist, RecalibratedDistribution) else dist
        counts.append(pit_counts(np.clip(base.cdf(np.asarray(y_p, dtype=np.float64)), 0, 1)))
        while len(counts) > 1 and sum(int(c.sum()) for c in counts[1:]) >= window:
            counts.pop(0)
        estimator.set_recalibration(PITMap.from_counts(np.sum(counts, axis=0)))
