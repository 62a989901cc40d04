"""Scores of probabilistic regression predictions, shared by estimators, benchmarks and the CLI.

A predictive distribution ``dist`` is a :class:`~basics.mixture.GaussianMixture`
(one mixture per row, Lakshminarayanan, Roy & Teh (2016), Sec. 3.3, eq. (3)-(5)), a
:class:`~basics.pit.RecalibratedDistribution` (a mixture whose CDF a learnt map recalibrates)
or a ``(mean, std)`` pair of arrays describing one Gaussian per row. The calibration table follows
the paper's Table 2: the observed fraction of targets inside the central ``z`` interval minus
``z``.

Central intervals can look calibrated while the whole distribution sits too low or too high
(as many targets above the interval as should be, but too few below it). The one-sided table
checks each quantile: the observed fraction of targets at or below the predictive ``q``
quantile minus ``q`` (:func:`one_sided_coverage`); :func:`pit_distance` sums all of them up as
the Kolmogorov-Smirnov distance of the PIT values ``F(y|x)`` from the uniform distribution, and
:func:`interval_score` is the proper score of a central interval (Gneiting & Raftery (2007),
Sec. 6.2, eq. (43)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .crps_kernels import PitMaps, Quadrature, crps_kernel
from .levels import check_levels
from .mixture import GaussianMixture
from .pit import PITMap, RecalibratedDistribution
from .validation import check_scored_targets

__all__ = [
    "CALIBRATION_LEVELS",
    "CRPS_GRID",
    "CRPS_TOLERANCE",
    "ECE_BINS",
    "ONE_SIDED_LEVELS",
    "as_mixture",
    "calibration_table",
    "class_rows",
    "confidence_bins",
    "coverage",
    "coverage_levels",
    "crps",
    "crps_many",
    "crps_quadrature",
    "crps_rows",
    "ece_binned",
    "expected_calibration_error",
    "gaussian_nlpd",
    "interval_score",
    "interval_score_rows",
    "nlpd",
    "one_sided_coverage",
    "one_sided_table",
    "pit_distance",
    "pit_distance_binned",
    "pit_maps",
    "quantile_coverage",
    "rmse",
]

Distribution = GaussianMixture | RecalibratedDistribution | tuple[Any, Any]

#: Rows of at most this many live components get the exact closed-form CRPS of the mixture
#: (``n (n + 1) / 2`` pairs); larger mixtures, and recalibrated CDFs, the quadrature.
CRPS_CLOSED_FORM_MAX = 64
#: Nodes of the CRPS quadrature, in predictive standard deviations about the mean.
CRPS_GRID: np.ndarray = np.linspace(-6.0, 6.0, 7)
#: Largest error of the CDF's cubic interpolant at a span's midpoint (else the span is halved).
CRPS_TOLERANCE = 1e-3
_GL = np.polynomial.legendre.leggauss(6)
_GL_X, _GL_W = (_GL[0] + 1.0) / 2.0, _GL[1] / 2.0  # Gauss-Legendre on [0, 1]
_IDENTITY = PITMap.identity(1)

_EPS = float(np.finfo(np.float64).eps)

#: Nominal coverages of the central intervals of the calibration table (the paper's Table 2:
#: 10% to 90% in steps of 10%).
CALIBRATION_LEVELS: tuple[float, ...] = tuple(round(0.1 * k, 1) for k in range(1, 10))
#: Quantile levels of the one-sided calibration table: 5% to 95% in steps of 5%.
ONE_SIDED_LEVELS: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(1, 20))
#: Equal-width bins of the top-class probability of the expected calibration error.
ECE_BINS = 15


def _targets(y: Any, n: int | None = None) -> np.ndarray:
    check_scored_targets(y)  # before any score overflows
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of targets; got shape {y.shape}.")
    if n is not None and y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} values but the prediction has {n} rows.")
    if y.shape[0] == 0:
        raise ValueError("y is empty; scores need at least one row.")
    return y


def as_mixture(dist: Distribution) -> GaussianMixture | RecalibratedDistribution:
    """A :class:`GaussianMixture` from a ``(mean, std)`` pair; distributions as they are.

    Parameters
    ----------
    dist : GaussianMixture, RecalibratedDistribution or tuple (mean, std)
        ``mean`` and ``std`` are 1-D arrays of the same length, ``std > 0``.

    Returns
    -------
    GaussianMixture or RecalibratedDistribution

    Examples
    --------
    >>> as_mixture(([0.0, 1.0], [1.0, 2.0])).var.tolist()
    [1.0, 4.0]
    """
    if isinstance(dist, (GaussianMixture, RecalibratedDistribution)):
        return dist
    if isinstance(dist, tuple) and len(dist) == 2:
        mean, std = (np.asarray(a, dtype=np.float64) for a in dist)
        return GaussianMixture.from_moments(mean, std * std)
    raise TypeError(
        "dist must be a GaussianMixture, a RecalibratedDistribution or a (mean, std) tuple "
        "of arrays; "
        f"got {type(dist).__name__}."
    )


def rmse(y: Any, mean: Any) -> float:
    """Root mean squared error of point predictions.

    Parameters
    ----------
    y, mean : array-like of shape (n_rows,)
        Targets and predicted means.

    Returns
    -------
    float

    Examples
    --------
    >>> rmse([0.0, 0.0], [3.0, -3.0])
    3.0
    """
    mean = np.asarray(mean, dtype=np.float64)
    y = _targets(y, mean.shape[0] if mean.ndim == 1 else None)
    if mean.shape != y.shape:
        raise ValueError(f"mean must have shape {y.shape}; got {mean.shape}.")
    return float(np.sqrt(np.mean((y - mean) ** 2)))


def class_rows(proba: Any, classes: Any, y: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row scores of class probabilities: correct, log loss, label never seen.

    Parameters
    ----------
    proba : array-like of shape (n_rows, n_classes)
        Predicted probabilities, columns in the order of ``classes``.
    classes : array-like of shape (n_classes,)
        The classifier's ``classes_``.
    y : array-like of shape (n_rows,)
        True labels; a label not in ``classes`` is scored as wrong with probability ``eps``.

    Returns
    -------
    correct : ndarray of shape (n_rows,), bool
        The most probable class (the first of ``classes`` on ties) is the label.
    log_loss : ndarray of shape (n_rows,)
        ``-log p(label)``, the probability clipped to ``[eps, 1 - eps]`` as scikit-learn
        does, so a confident mistake costs about 36, not infinity.
    unseen : ndarray of shape (n_rows,), bool
        The label is not in ``classes``.

    Examples
    --------
    >>> ok, loss, unseen = class_rows([[0.9, 0.1], [0.5, 0.5]], ["a", "b"], ["a", "c"])
    >>> ok.tolist(), round(float(loss[0]), 4), unseen.tolist()
    ([True, False], 0.1054, [False, True])
    """
    proba = np.asarray(proba, dtype=np.float64)
    code = pd.Index(np.asarray(classes)).get_indexer(np.asarray(y))
    seen = code >= 0
    p_true = np.where(seen, proba[np.arange(code.size), np.maximum(code, 0)], 0.0)
    return (np.argmax(proba, axis=1) == code, -np.log(np.clip(p_true, _EPS, 1.0 - _EPS)),
            ~seen)


def confidence_bins(confidence: Any, correct: Any, n_bins: int = ECE_BINS) -> np.ndarray:
    """The partial sums of the expected calibration error (they add up over partitions):
    rows binned by their top-class probability, bin ``k`` being ``(k / n_bins, (k + 1) /
    n_bins]``.

    Parameters
    ----------
    confidence : array-like of shape (n_rows,)
        The largest class probability of every row.
    correct : array-like of bool, shape (n_rows,)
        Whether the most probable class is the label.
    n_bins : int, default=ECE_BINS

    Returns
    -------
    ndarray of shape (3 * n_bins,)
        Rows, correct predictions and summed confidence, per bin (:func:`ece_binned`).
    """
    conf = np.asarray(confidence, dtype=np.float64)
    bins = np.clip(np.ceil(conf * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    ok = np.asarray(correct, dtype=np.float64)
    return np.concatenate([np.bincount(bins, minlength=n_bins).astype(np.float64),
                           np.bincount(bins, ok, n_bins), np.bincount(bins, conf, n_bins)])


def ece_binned(sums: Any) -> float:
    """The expected calibration error from :func:`confidence_bins` (summed over
    partitions): the row-weighted mean over bins of ``|accuracy - mean confidence|``."""
    rows, correct, conf = np.asarray(sums, dtype=np.float64).reshape(3, -1)
    return float(np.abs(correct - conf).sum() / rows.sum())


def expected_calibration_error(proba: Any, y: Any, n_bins: int = ECE_BINS) -> float:
    """Expected calibration error of the top-label confidence (Guo et al. 2017, eq. (3)).

    Parameters
    ----------
    proba : array-like of shape (n_rows, n_classes)
    y : array-like of shape (n_rows,)
        Class codes ``0 .. n_classes - 1`` (the columns of ``proba``).
    n_bins : int, default=ECE_BINS
        Equal-width bins of the top-class probability (:func:`confidence_bins`).

    Examples
    --------
    >>> expected_calibration_error([[0.2, 0.8]] * 5, [1, 1, 1, 1, 0])
    0.0
    """
    proba = np.asarray(proba, dtype=np.float64)
    correct = proba.argmax(axis=1) == np.asarray(y)
    return ece_binned(confidence_bins(proba.max(axis=1), correct, n_bins))


def gaussian_nlpd(y: Any, mean: Any, std: Any) -> float:
    """Mean negative log predictive density of one Gaussian per row.

    Parameters
    ----------
    y, mean, std : array-like of shape (n_rows,)
        Targets, predicted means and predicted standard deviations (> 0).

    Returns
    -------
    float

    Examples
    --------
    >>> round(gaussian_nlpd([0.0], [0.0], [1.0]), 6)
    0.918939
    """
    mean = np.asarray(mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    y = _targets(y, mean.shape[0] if mean.ndim == 1 else None)
    if mean.shape != y.shape or std.shape != y.shape:
        raise ValueError(
            f"mean and std must have shape {y.shape}; got {mean.shape} and {std.shape}."
        )
    if np.any(~(std > 0)):
        raise ValueError(f"std has {int(np.sum(~(std > 0)))} values that are not > 0.")
    z = (y - mean) / std
    return float(np.mean(0.5 * z * z + np.log(std) + 0.5 * math.log(2.0 * math.pi)))


def nlpd(y: Any, dist: Distribution) -> float:
    """Mean negative log predictive density, ``-mean_i log p_i(y_i)``.

    Parameters
    ----------
    y : array-like of shape (n_rows,)
    dist : GaussianMixture or tuple (mean, std)

    Returns
    -------
    float
    """
    if isinstance(dist, tuple):
        return gaussian_nlpd(y, *dist)
    gm = as_mixture(dist)
    y = _targets(y, gm.n_rows)
    return float(-np.mean(gm.logpdf(y)))


def crps_rows(dist: Distribution, y: Any) -> np.ndarray:
    """Continuous ranked probability score of every row, ``int (G(t) - 1{t >= y})^2 dt``.

    Gneiting & Raftery (2007), "Strictly proper scoring rules, prediction, and estimation"
    (JASA), eq. (20): in the units of ``y``, lower is better, a point forecast scores its
    absolute error. A mixture of at most :data:`CRPS_CLOSED_FORM_MAX` live components gets
    the exact closed form ``E|X - y| - E|X - X'| / 2``
    (:func:`basics.crps_kernels.crps_closed_form`). Any other predictive CDF ``G`` of
    :mod:`basics` (a larger mixture, or a mixture recalibrated by a PIT map) is integrated by
    quadrature on the nodes :data:`CRPS_GRID` and ``y``, halved where the CDF's cubic Hermite
    interpolant misses it by more than :data:`CRPS_TOLERANCE` at a midpoint (one numba pass
    per row, :func:`basics.crps_kernels.crps_kernel`): a median relative error of about
    1e-5 against the closed form, at most about 1% on mixtures of narrow components far
    apart.

    Parameters
    ----------
    dist : GaussianMixture, RecalibratedDistribution or tuple (mean, std)
    y : array-like of shape (n_rows,)

    Returns
    -------
    ndarray of shape (n_rows,)

    Examples
    --------
    >>> exact = (math.sqrt(2) - 1) / math.sqrt(math.pi)  # N(0, 1) at y = 0
    >>> bool(abs(crps_rows(([0.0], [1.0]), [0.0])[0] / exact - 1) < 2e-3)
    True
    """
    dist = as_mixture(dist)
    if isinstance(dist, RecalibratedDistribution):
        return crps_many(dist.base, y, [dist.pit_map])[:, 0]
    return crps_many(dist, y, [None])[:, 0]


def crps_many(mixture: GaussianMixture, y: Any, maps: Sequence[PITMap | None]) -> np.ndarray:
    """CRPS of every row under the mixture recalibrated by each map (None: not recalibrated),
    from one pass over the mixture; shape (n_rows, len(maps)). See :func:`crps_rows`."""
    y = _targets(y, mixture.n_rows)
    if not np.all(np.isfinite(y)):
        raise ValueError(f"y has {int(np.sum(~np.isfinite(y)))} values that are not finite.")
    out = np.empty((mixture.n_rows, len(maps)))
    # writeable: targets read from Parquet are read-only arrays, which numba would compile
    # the kernel for once more
    crps_kernel(mixture.weights, mixture.means, mixture.variances,
                np.require(y, requirements=("C", "W")), pit_maps(maps), crps_quadrature(), out)
    return out


def pit_maps(maps: Sequence[PITMap | None]) -> PitMaps:
    """The PIT maps (None: the identity) packed as the CRPS kernels read them."""
    identity = np.array([r is None for r in maps])
    maps = [_IDENTITY if r is None else r for r in maps]
    knots = np.ascontiguousarray(np.hstack([[r.base, r.nominal] for r in maps]))
    offsets = np.cumsum([0] + [r.base.size for r in maps]).astype(np.int64)
    return PitMaps(knots, offsets, identity)


def crps_quadrature() -> Quadrature:
    """How :func:`crps_many` integrates (:data:`CRPS_GRID`, :data:`CRPS_TOLERANCE`, six
    Gauss-Legendre nodes per span, :data:`CRPS_CLOSED_FORM_MAX`)."""
    return Quadrature(CRPS_GRID, CRPS_TOLERANCE, _GL_X, _GL_W, CRPS_CLOSED_FORM_MAX)


def crps(y: Any, dist: Distribution) -> float:
    """Mean continuous ranked probability score (:func:`crps_rows`).

    Parameters
    ----------
    y : array-like of shape (n_rows,)
    dist : GaussianMixture, RecalibratedDistribution or tuple (mean, std)

    Returns
    -------
    float
    """
    return float(np.mean(crps_rows(dist, y)))


def coverage_levels(levels: Any) -> np.ndarray:
    """Nominal coverages of central intervals, checked: one or more levels in (0, 1)
    (:func:`basics.levels.check_levels` with ``interior``); 0-D for a scalar.

    Examples
    --------
    >>> coverage_levels([0.5, 0.9]).tolist()
    [0.5, 0.9]
    """
    lv = check_levels(levels, "levels", interior=True)
    if lv.size == 0:
        raise ValueError("levels is empty; pass one or more coverages in (0, 1), e.g. 0.9.")
    return lv


def coverage(y: Any, dist: Distribution, levels: Any = 0.9) -> float | np.ndarray:
    """Fraction of targets inside the central predictive interval of each level.

    Parameters
    ----------
    y : array-like of shape (n_rows,)
    dist : GaussianMixture or tuple (mean, std)
    levels : float or array-like of shape (n_levels,), default 0.9
        Nominal probability mass of the central interval(s), in (0, 1).

    Returns
    -------
    float for a scalar level, else ndarray of shape (n_levels,)

    Examples
    --------
    >>> coverage([0.0, 5.0], ([0.0, 0.0], [1.0, 1.0]), 0.9)
    0.5
    """
    lv = coverage_levels(levels)
    gm = as_mixture(dist)
    y = _targets(y, gm.n_rows)
    lower, upper = gm.interval(np.atleast_1d(lv))
    inside = (lower <= y[:, None]) & (y[:, None] <= upper)
    frac = inside.mean(axis=0)
    return float(frac[0]) if lv.ndim == 0 else frac


def calibration_table(
    y: Any, dist: Distribution, levels: Any = CALIBRATION_LEVELS
) -> pd.DataFrame:
    """Calibration of central predictive intervals, as in the paper's Table 2.

    Parameters
    ----------
    y : array-like of shape (n_rows,)
    dist : GaussianMixture or tuple (mean, std)
    levels : array-like of shape (n_levels,), default (0.1, 0.2, ..., 0.9)

    Returns
    -------
    pandas.DataFrame
        Columns ``level`` (nominal z), ``observed`` (fraction of targets inside the central
        z interval) and ``observed_minus_nominal``; negative values mean over-confidence.

    Examples
    --------
    >>> t = calibration_table([0.0, 0.1, 3.0], ([0.0] * 3, [1.0] * 3), levels=[0.5])
    >>> t.columns.tolist()
    ['level', 'observed', 'observed_minus_nominal']
    """
    lv = np.atleast_1d(coverage_levels(levels))
    observed = np.atleast_1d(coverage(y, dist, lv))
    return pd.DataFrame(
        {"level": lv, "observed": observed, "observed_minus_nominal": observed - lv}
    )


def quantile_coverage(y: Any, quantiles: Any) -> np.ndarray:
    """Fraction of targets at or below each column of predicted quantiles.

    For models that predict quantiles rather than a distribution (quantile regression).

    Parameters
    ----------
    y : array-like of shape (n_rows,)
    quantiles : array-like of shape (n_rows, n_levels)
        Each row's predicted quantiles, one column per level.

    Returns
    -------
    ndarray of shape (n_levels,)

    Examples
    --------
    >>> quantile_coverage([0.0, 2.0], [[1.0, 3.0], [1.0, 3.0]]).tolist()
    [0.5, 1.0]
    """
    q = np.asarray(quantiles, dtype=np.float64)
    if q.ndim != 2:
        raise ValueError(f"quantiles must be a 2-D array (rows, levels); got shape {q.shape}.")
    y = _targets(y, q.shape[0])
    return (y[:, None] <= q).mean(axis=0)


def one_sided_coverage(y: Any, dist: Distribution, levels: Any = ONE_SIDED_LEVELS
                       ) -> float | np.ndarray:
    """Fraction of targets at or below the predictive quantile of each level.

    ``y <= F^-1(q)`` exactly when the PIT ``F(y)`` is at most ``q`` (a continuous, strictly
    increasing ``F``), so this costs one CDF evaluation per row and no quantile search.

    Parameters
    ----------
    y : array-like of shape (n_rows,)
    dist : GaussianMixture, RecalibratedDistribution or tuple (mean, std)
    levels : float or array-like of shape (n_levels,), default 0.05, 0.10, ..., 0.95
        Quantile levels in (0, 1).

    Returns
    -------
    float for a scalar level, else ndarray of shape (n_levels,)

    Examples
    --------
    >>> one_sided_coverage([-1.0, 0.5, 3.0], ([0.0] * 3, [1.0] * 3), [0.5, 0.95]).tolist()
    [0.3333333333333333, 0.6666666666666666]
    """
    lv = coverage_levels(levels)
    gm = as_mixture(dist)
    u = gm.cdf(_targets(y, gm.n_rows))
    frac = (u[:, None] <= np.atleast_1d(lv)[None, :]).mean(axis=0)
    return float(frac[0]) if lv.ndim == 0 else frac


def one_sided_table(y: Any, dist: Distribution, levels: Any = ONE_SIDED_LEVELS) -> pd.DataFrame:
    """One-sided calibration: for each level ``q``, the fraction of targets at or below the
    predictive ``q`` quantile.

    Returns
    -------
    pandas.DataFrame
        Columns ``level``, ``observed`` and ``observed_minus_nominal``: negative values mean
        the distribution sits too low at that level (too few targets below its quantile).

    Examples
    --------
    >>> one_sided_table([0.0, 5.0], ([0.0] * 2, [1.0] * 2), [0.5]).observed.tolist()
    [0.5]
    """
    lv = np.atleast_1d(coverage_levels(levels))
    observed = np.atleast_1d(one_sided_coverage(y, dist, lv))
    return pd.DataFrame(
        {"level": lv, "observed": observed, "observed_minus_nominal": observed - lv}
    )


def pit_distance(u: Any) -> float:
    """Kolmogorov-Smirnov distance of PIT values from the uniform distribution.

    ``sup_t |G(t) - t|`` over ``t`` in [0, 1], with ``G`` the empirical CDF of ``u = F(y|x)``:
    0 for a calibrated model on many rows (about ``0.87 / sqrt(n)`` by chance), and the largest
    one-sided coverage gap over all levels at once.

    Parameters
    ----------
    u : array-like of shape (n_rows,)
        PIT values in [0, 1] (``dist.cdf(y)``).

    Returns
    -------
    float

    Examples
    --------
    >>> pit_distance([0.1, 0.2, 0.3])
    0.7
    """
    u = np.sort(np.asarray(u, dtype=np.float64).ravel())
    n = u.size
    if n == 0:
        raise ValueError("u is empty; the PIT distance needs at least one value.")
    if np.any(~((u >= 0.0) & (u <= 1.0))):
        raise ValueError("PIT values must lie in [0, 1]; drop rows with missing targets or "
                         "predictions first.")
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - u), np.max(u - (i - 1) / n)))


def pit_distance_binned(counts: Any) -> float:
    """:func:`pit_distance` from a histogram of PIT values on ``len(counts)`` equal bins.

    The empirical CDF is known at the bin edges only, so this is the largest ``|G(t) - t|``
    over the edges ``t = k / m``: within ``1 / m`` of the exact distance. Histograms add up
    over partitions, so a cluster job gets this number from its sums.

    Examples
    --------
    >>> pit_distance_binned([3, 0, 0, 1])
    0.5
    """
    c = np.asarray(counts, dtype=np.float64).ravel()
    if c.size == 0 or c.sum() <= 0 or np.any(c < 0):
        raise ValueError("counts must be non-negative with a positive total.")
    cum = np.concatenate([[0.0], np.cumsum(c) / c.sum()])
    return float(np.max(np.abs(cum - np.linspace(0.0, 1.0, c.size + 1))))


def interval_score_rows(y: Any, lower: Any, upper: Any, level: float = 0.9) -> np.ndarray:
    """Interval score of central ``level`` intervals, per row (lower is better).

    ``(u - l) + (2 / a) (l - y)_+ + (2 / a) (y - u)_+`` with ``a = 1 - level``: Gneiting &
    Raftery (2007), Sec. 6.2, eq. (43), a proper score of the pair of ``a / 2`` and
    ``1 - a / 2`` quantiles, in the target's units.

    Parameters
    ----------
    y, lower, upper : array-like of shape (n_rows,)
    level : float, default 0.9

    Returns
    -------
    ndarray of shape (n_rows,)

    Examples
    --------
    >>> interval_score_rows([0.0, 3.0], [-1.0, -1.0], [1.0, 1.0], level=0.5).tolist()
    [2.0, 10.0]
    """
    alpha = 1.0 - float(coverage_levels(level))
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    y = _targets(y, lo.shape[0] if lo.ndim == 1 else None)
    if lo.shape != y.shape or hi.shape != y.shape:
        raise ValueError(f"lower {lo.shape} and upper {hi.shape} must have the shape of y "
                         f"{y.shape}.")
    return (hi - lo) + (2.0 / alpha) * (np.maximum(lo - y, 0.0) + np.maximum(y - hi, 0.0))


def interval_score(y: Any, dist: Distribution, level: float = 0.9) -> float:
    """Mean interval score of the central ``level`` intervals of a predictive distribution
    (:func:`interval_score_rows`)."""
    gm = as_mixture(dist)
    lower, upper = gm.interval(np.atleast_1d(coverage_levels(level)))
    return float(np.mean(interval_score_rows(_targets(y, gm.n_rows), lower[:, 0], upper[:, 0],
                                             level)))
