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

from basics.pit import ACI_STEP, MIN_ROWS, PITMap, RecalibratedDistribution, pit_counts

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

#: What ``ebf train --calibrate`` and :func:`fit_recalibrated` accept.
CALIBRATION_METHODS = ("none", "holdout", "recent")
#: Default share of the rows kept for calibration.
DEFAULT_FRACTION = 0.1

#: Rows of the window of :func:`rolling_recalibration` when no history gives it.
DEFAULT_WINDOW = 5000

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def check_fraction(fraction: float) -> float:
    """``fraction`` as a float in (0, 1), else a ValueError naming it."""
    fraction = float(fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the calibration fraction must be in (0, 1); got {fraction}.")
    return fraction


def _uniform(seed: int, positions: np.ndarray) -> np.ndarray:
    """A uniform [0, 1) number per position from SplitMix64 of ``seed`` and the position."""
    with np.errstate(over="ignore"):
        z = (positions.astype(np.uint64) + np.uint64(1)) * _GOLDEN + np.uint64(
            seed % 2**64) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53)


def holdout_mask(positions: Any, fraction: float, random_state: int | None = 0) -> np.ndarray:
    """Whether each row (by its position in the whole dataset) is in the holdout set.

    Parameters
    ----------
    positions : array-like of int
        0-based positions of the rows in the dataset.
    fraction : float in (0, 1)
    random_state : int or None, default=0
        None means 0 (the choice must be repeatable to be the same on every worker).

    Returns
    -------
    ndarray of bool

    Examples
    --------
    >>> m = holdout_mask(np.arange(100_000), 0.1)
    >>> round(float(m.mean()), 2)
    0.1
    """
    fraction = check_fraction(fraction)
    seed = 0 if random_state is None else int(random_state)
    return _uniform(seed, np.asarray(positions, dtype=np.int64)) < fraction


def recent_start(n_rows: int, fraction: float) -> int:
    """Position of the first row of the most recent ``fraction`` of ``n_rows`` rows."""
    fraction = check_fraction(fraction)
    return int(n_rows) - int(np.ceil(fraction * int(n_rows)))


def min_training_rows(method: str = "none", fraction: float = DEFAULT_FRACTION) -> int:
    """Fewest rows a fit with this recalibration can use: at least one row to fit on and,
    with a method, :data:`basics.pit.MIN_ROWS` calibration rows.

    For ``"recent"`` that is exact (:func:`recent_start`); ``"holdout"`` picks about
    ``fraction`` of the rows at random, so it may still find too few near this bound.

    Examples
    --------
    >>> min_training_rows("none"), min_training_rows("recent", 0.1)
    (1, 491)
    """
    from basics.pit import MIN_ROWS

    if method == "none":
        return 1
    n = max(2, int((MIN_ROWS - 1) / check_fraction(fraction)))  # the first that may do
    while int(n) - recent_start(n, fraction) < MIN_ROWS or recent_start(n, fraction) < 1:
        n += 1
    return n


def calibration_split(n_rows: int, method: str = "recent", fraction: float = DEFAULT_FRACTION,
                      random_state: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the rows to fit on and of the calibration rows.

    Parameters
    ----------
    n_rows : int
    method : {"recent", "holdout"}, default="recent"
        The last ``fraction`` of the rows (in their order), or a random ``fraction``
        (:func:`holdout_mask`).
    fraction : float in (0, 1), default=0.1
    random_state : int or None, default=0
        For ``"holdout"``.

    Returns
    -------
    fit_rows, calibration_rows : ndarray of int64
        Increasing positions; together they are ``0 .. n_rows - 1``.

    Examples
    --------
    >>> fit, cal = calibration_split(10, "recent", 0.2)
    >>> cal.tolist()
    [8, 9]
    """
    positions = np.arange(int(n_rows), dtype=np.int64)
    if method == "recent":
        in_cal = positions >= recent_start(n_rows, fraction)
    elif method == "holdout":
        in_cal = holdout_mask(positions, fraction, random_state)
    else:
        raise ValueError(f"method must be 'recent' or 'holdout'; got {method!r}.")
    return positions[~in_cal], positions[in_cal]


def _rows(data: Any, positions: np.ndarray) -> Any:
    return data.iloc[positions] if hasattr(data, "iloc") else np.asarray(data)[positions]


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
    calibrate : {"recent", "holdout", "none"}, default="recent"
        Calibration rows (:func:`calibration_split`); ``"none"`` fits on all rows.
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
    if calibrate == "none":
        return estimator.fit(X, y, **fit_params)
    n = len(y)
    fit_rows, cal_rows = calibration_split(n, calibrate, fraction, random_state)
    if cal_rows.size == 0 or fit_rows.size == 0:
        raise ValueError(f"{n} rows leave nothing to fit on or to calibrate on with "
                         f"fraction={fraction}.")
    params = {k: (_rows(v, fit_rows) if hasattr(v, "__len__") and len(v) == n else v)
              for k, v in fit_params.items()}
    estimator.fit(_rows(X, fit_rows), _rows(y, fit_rows), **params)
    return estimator.recalibrate(_rows(X, cal_rows), _rows(y, cal_rows))


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
        X_p, y_p = _rows(X, np.arange(rows.start, rows.stop)), np.asarray(y)[rows]
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
