"""Numba kernels of :mod:`basics.mixture`: checking and normalising mixtures, and the one-pass
predictive summary (mean, standard deviation and quantiles of every row).

Every kernel treats a row on its own, visits its components in column order with sequential
sums, and skips zero-weight (padding) components whatever their mean and variance: a row's
result depends only on its non-zero-weight components in their order, so a row computed inside
a wider padded block is bit-identical to the same row computed alone. That is what lets the
sharded prediction of a branch (its rows only) equal the prediction of a whole partition.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .jit import JIT

#: Root finding: relative tolerance in y, and iteration caps of the safeguarded Newton phase
#: and of the bisection that follows it for the (rare) levels Newton did not settle.
QUANTILE_RTOL = 1e-13
NEWTON_ITER = 40
BISECT_ITER = 200

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

#: ``ndtr(z)`` rounds to exactly 1.0 above this (``ndtr(-8.5) ~ 1e-17 < 2**-54``), so the
#: kernel skips the ``erfc`` there without changing a bit.
_Z_ONE = 8.5

#: Positions in the error counts of :func:`check_normalise`.
BAD_WEIGHT, NEGATIVE_WEIGHT, ZERO_ROWS, FIRST_ZERO_ROW, BAD_MEAN, BAD_VARIANCE = range(6)


class Levels(NamedTuple):
    """The quantile levels the summary kernels solve, with their normal quantiles computed
    once by the caller (:func:`basics.mixture.solver_levels`): ``z_level = ndtri(levels)``
    and ``z_reflected = ndtri(min(q, 1 - q))``. Each of shape ``(1, n_levels)`` (the same
    levels for every row) or ``(n_rows, n_levels)`` (levels of each row)."""

    levels: np.ndarray
    z_level: np.ndarray
    z_reflected: np.ndarray


class RowScratch(NamedTuple):
    """One row's live components, gathered by :func:`gather_row` or
    :func:`normalise_raw_row`: weights ``w``, means ``m``, variances ``v``, standard
    deviations ``s``, and ``neg`` for the reflected means of the upper-tail quantiles.
    Each of length at least the row's number of components."""

    w: np.ndarray
    m: np.ndarray
    v: np.ndarray
    s: np.ndarray
    neg: np.ndarray


@njit(**JIT)
def row_scratch(k_max):  # pragma: no cover - jitted
    """A :class:`RowScratch` for rows of up to ``k_max`` components."""
    return RowScratch(np.empty(k_max), np.empty(k_max), np.empty(k_max), np.empty(k_max),
                      np.empty(k_max))


@njit(inline="always", **JIT)
def _checked_total(w, m, v, n, i, errors):  # pragma: no cover - jitted
    """Sequential sum of row ``i``'s positive weights among its first ``n`` components
    (1 if there are none); every problem is counted in ``errors``."""
    total = 0.0
    for j in range(n):
        wij = w[j]
        if not np.isfinite(wij):
            errors[BAD_WEIGHT] += 1
        elif wij < 0.0:
            errors[NEGATIVE_WEIGHT] += 1
        elif wij > 0.0:
            total += wij
            if not np.isfinite(m[j]):
                errors[BAD_MEAN] += 1
            if not (np.isfinite(v[j]) and v[j] > 0.0):
                errors[BAD_VARIANCE] += 1
    if not total > 0.0:
        errors[ZERO_ROWS] += 1
        if errors[FIRST_ZERO_ROW] < 0:
            errors[FIRST_ZERO_ROW] = i
        total = 1.0
    return total


@njit(**JIT)
def check_normalise(w, m, v, w_out, m_out, v_out, errors):  # pragma: no cover - jitted
    """Validate and normalise mixtures in one pass; counts of every problem go to ``errors``.

    Live components (weight > 0) keep their mean and variance; padding gets mean 0 and
    variance 1. Weights are divided by their row's sequential sum, which padding zeros
    cannot change. Outputs are only meaningful when every count is zero.
    """
    errors[FIRST_ZERO_ROW] = -1
    for i in range(w.shape[0]):
        total = _checked_total(w[i], m[i], v[i], w.shape[1], i, errors)
        for j in range(w.shape[1]):
            if w[i, j] > 0.0:
                w_out[i, j] = w[i, j] / total
                m_out[i, j] = m[i, j]
                v_out[i, j] = v[i, j]
            else:
                w_out[i, j] = 0.0
                m_out[i, j] = 0.0
                v_out[i, j] = 1.0


@njit(**JIT)
def _ndtr(z):  # pragma: no cover - jitted
    """Standard normal CDF, as scipy's (Cephes) ``ndtr``: ``erf`` near 0, ``erfc`` in tails."""
    x = z * _SQRT1_2
    a = abs(x)
    if a < _SQRT1_2:
        return 0.5 + 0.5 * math.erf(x)
    y = 0.5 * math.erfc(a)
    return 1.0 - y if x > 0.0 else y


@njit(**JIT)
def _cdf_and_density(x, n, cw, cm, cs, with_density):  # pragma: no cover - jitted
    """CDF ``sum_k w_k Phi(z_k)``, ``z_k = (x - m_k) / s_k``, over live components, and (if
    asked) the density and its derivative (up to the factor ``1 / sqrt(2 pi)``)."""
    c = 0.0
    d = 0.0
    d1 = 0.0
    for k in range(n):
        z = (x - cm[k]) / cs[k]
        if z > _Z_ONE:
            c += cw[k]
        else:
            c += cw[k] * _ndtr(z)
        if with_density:
            e = cw[k] / cs[k] * math.exp(-0.5 * z * z)
            d += e
            d1 -= e * z / cs[k]
    return c, d * _INV_SQRT_2PI, d1 * _INV_SQRT_2PI


@njit(**JIT)
def _solve(p, zp, n, cw, cm, cs, mu, sd):  # pragma: no cover - jitted
    """Root of ``F(x) = p`` for one row (means ``cm`` possibly reflected), see ``quantile``.

    Safeguarded Newton in the bracket ``[min_k Q_k(p), max_k Q_k(p)]`` (the mixture CDF is a
    convex combination of the component CDFs), started at the moment-matched normal's
    quantile, with Halley's correction (the density's derivative costs no extra ``exp``;
    cubic convergence saves about one CDF pass of two); a step leaving the bracket or not
    halving ``|F - p|`` bisects instead; after ``NEWTON_ITER`` steps only bisection.
    """
    lo = np.inf
    hi = -np.inf
    for k in range(n):
        qk = cm[k] + cs[k] * zp
        lo = min(lo, qk)
        hi = max(hi, qk)
    x = min(max(mu + sd * zp, lo), hi)
    tol = QUANTILE_RTOL * (abs(lo) + abs(hi) + sd)
    g_prev = np.inf
    for it in range(NEWTON_ITER + BISECT_ITER):
        newton_phase = it < NEWTON_ITER
        c, dens, slope = _cdf_and_density(x, n, cw, cm, cs, newton_phase)
        g = c - p
        if g == 0.0:
            return x
        if g < 0.0:
            lo = x
        else:
            hi = x
        mid = 0.5 * (lo + hi)
        if newton_phase:
            step = g / dens if dens > 0.0 else np.inf
            # Halley: step / (1 - step f' / (2 f)), kept to Newton's when the
            # correction is large (far from the root, where the quadratic model is poor)
            damp = 1.0 - 0.5 * step * slope / dens if dens > 0.0 else 1.0
            if 0.5 < damp < 2.0:
                step = step / damp
            newton = x - step
            if abs(step) <= tol:
                return newton
            # Newton inside the bracket, unless the last step did not halve |F - p| (flat
            # stretches between modes): then bisect, so the bracket keeps shrinking.
            ok = lo < newton < hi and np.isfinite(newton) and abs(g) <= 0.5 * g_prev
            g_prev = abs(g)
            x = newton if ok else mid
        else:
            x = mid
        if hi - lo <= tol:
            return x
    return 0.5 * (lo + hi)


@njit(**JIT)
def _row_moments(n, cw, cm, cv):  # pragma: no cover - jitted
    """Mean and variance (law of total variance, two passes: no cancellation) of one row's
    ``n`` live components."""
    mean = 0.0
    for k in range(n):
        mean += cw[k] * cm[k]
    var = 0.0
    for k in range(n):
        dev = cm[k] - mean
        var += cw[k] * (cv[k] + dev * dev)
    return mean, var


@njit(**JIT)
def gather_row(w, m, v, i, row):  # pragma: no cover - jitted
    """Copy row ``i``'s live components into the :class:`RowScratch` ``row``; return their
    number, mean and variance (law of total variance)."""
    cw, cm, cv, cs = row.w, row.m, row.v, row.s
    n = 0
    for k in range(w.shape[1]):
        if w[i, k] != 0.0:  # padding never enters a sum: results do not depend on it
            cw[n] = w[i, k]
            cm[n] = m[i, k]
            cv[n] = v[i, k]
            cs[n] = math.sqrt(v[i, k])
            n += 1
    mean, var = _row_moments(n, cw, cm, cv)
    return n, mean, var


@njit(**JIT)
def normalise_raw_row(rw, rm, rv, n_raw, i, row, errors):  # pragma: no cover - jitted
    """:func:`check_normalise` and then :func:`gather_row` for one row ``i`` given as its
    first ``n_raw`` raw components ``rw, rm, rv`` (weights not yet normalised), with the
    same arithmetic: a kernel that writes a row's components into scratch arrays gets the
    numbers of building the mixture and summarising it. Problems are counted in ``errors``
    (its ``FIRST_ZERO_ROW`` entry starts at -1) as :func:`check_normalise` counts them."""
    cw, cm, cv, cs = row.w, row.m, row.v, row.s
    total = _checked_total(rw, rm, rv, n_raw, i, errors)
    n = 0
    for k in range(n_raw):
        if rw[k] > 0.0:
            wk = rw[k] / total
            if wk != 0.0:
                cw[n] = wk
                cm[n] = rm[k]
                cv[n] = rv[k]
                cs[n] = math.sqrt(rv[k])
                n += 1
    mean, var = _row_moments(n, cw, cm, cv)
    return n, mean, var


@njit(**JIT)
def summarise_row(n, mean, var, row, lv, r, q_row):  # pragma: no cover - jitted
    """The quantiles of the ``n`` live components in ``row`` (a :class:`RowScratch`, of
    mixture mean ``mean`` and variance ``var``) at the :class:`Levels` ``lv`` into
    ``q_row`` (see :func:`summary_kernel`; ``r`` is the row of ``lv`` to use)."""
    cw, cm, cs, neg = row.w, row.m, row.s, row.neg
    levels, z_level, z_reflected = lv
    sd = math.sqrt(var)
    reflected = False
    for j in range(levels.shape[1]):
        q = levels[r, j]
        if q == 0.0:
            q_row[j] = -np.inf
        elif q == 1.0:
            q_row[j] = np.inf
        elif n == 1:
            q_row[j] = cm[0] + cs[0] * z_level[r, j]
        elif q > 0.5:
            if not reflected:
                for k in range(n):
                    neg[k] = -cm[k]
                reflected = True
            q_row[j] = -_solve(1.0 - q, z_reflected[r, j], n, cw, neg, cs, -mean, sd)
        else:
            q_row[j] = _solve(q, z_reflected[r, j], n, cw, cm, cs, mean, sd)


@njit(inline="always", **JIT)
def summary_row(w, m, v, i, row, lv, mean_out, var_out, q_out):  # pragma: no cover - jitted
    """Row ``i`` of a normalised mixture gathered into ``row`` (:func:`gather_row`) and its
    mean, variance and quantiles written to the outputs (:func:`summarise_row`); return
    its live components, as ``row`` holds them."""
    n, mean, var = gather_row(w, m, v, i, row)
    mean_out[i] = mean
    var_out[i] = var
    summarise_row(n, mean, var, row, lv, i if lv.levels.shape[0] > 1 else 0, q_out[i])
    return n


@njit(**JIT)
def summary_kernel(w, m, v, lv, mean_out, var_out, q_out):  # pragma: no cover - jitted
    """Mean, variance and quantiles of every row of a normalised mixture.

    ``lv`` is a :class:`Levels`: levels of shape ``(1, n_levels)`` (the same levels for
    every row) or ``(n_rows, n_levels)`` (levels of each row), with their normal quantiles
    ``z_level = ndtri(levels)`` and ``z_reflected = ndtri(min(q, 1 - q))`` computed once by
    the caller. Levels above
    1/2 are solved on the reflected mixture (the distribution of ``-Y``), so upper-tail
    quantiles are as accurate as lower-tail ones; a row with one live component gets
    ``m + s * ndtri(q)`` exactly.
    """
    row = row_scratch(w.shape[1])
    for i in range(w.shape[0]):
        summary_row(w, m, v, i, row, lv, mean_out, var_out, q_out)
