"""Oracles of the predictive mixtures (``basics.mixture``) and of recalibration
(``basics.metrics``, ``basics.pit``): moments, cdf, pdf, quantiles, CRPS, PIT knots, ACI."""

from __future__ import annotations

import numpy as np
from scipy import stats

# ---------------------------------------------------------------- predictive mixtures (oracles)


def naive_mixture_moments(weights, means, variances):
    """Row-by-row mean and variance of Gaussian mixtures (law of total variance)."""
    w = np.atleast_2d(np.asarray(weights, float))
    m = np.atleast_2d(np.asarray(means, float))
    v = np.atleast_2d(np.asarray(variances, float))
    mean = np.empty(w.shape[0])
    var = np.empty(w.shape[0])
    for i in range(w.shape[0]):
        total = 0.0
        ey = 0.0
        ey2 = 0.0
        for k in range(w.shape[1]):
            if w[i, k] == 0:
                continue
            total += w[i, k]
            ey += w[i, k] * m[i, k]
            ey2 += w[i, k] * (v[i, k] + m[i, k] ** 2)
        mean[i] = ey / total
        var[i] = ey2 / total - mean[i] ** 2
    return mean, var


def naive_mixture_cdf(weights, means, variances, y):
    """``sum_k w_k Phi((y - m_k) / s_k) / sum_k w_k`` for one row and a scalar y."""
    out = 0.0
    for wk, mk, vk in zip(weights, means, variances, strict=True):
        if wk > 0:
            out += wk * stats.norm.cdf(y, mk, np.sqrt(vk))
    return out / np.sum(weights)


def naive_mixture_pdf(weights, means, variances, y):
    """Explicit sum of weighted normal densities for one row and a scalar y."""
    out = 0.0
    for wk, mk, vk in zip(weights, means, variances, strict=True):
        if wk > 0:
            out += wk * stats.norm.pdf(y, mk, np.sqrt(vk))
    return out / np.sum(weights)


def naive_mixture_logpdf(weights, means, variances, y):
    """Log density for one row via scipy's logsumexp over the live components."""
    from scipy.special import logsumexp

    terms = [
        np.log(wk / np.sum(weights)) + stats.norm.logpdf(y, mk, np.sqrt(vk))
        for wk, mk, vk in zip(weights, means, variances, strict=True)
        if wk > 0
    ]
    return logsumexp(terms)


def naive_mixture_quantile(weights, means, variances, q):
    """Quantile of one row's mixture by Brent's method on a wide bracket."""
    from scipy.optimize import brentq

    live = np.asarray(weights) > 0
    m = np.asarray(means, float)[live]
    s = np.sqrt(np.asarray(variances, float)[live])
    lo = np.min(m - 40 * s)
    hi = np.max(m + 40 * s)
    return brentq(
        lambda y: naive_mixture_cdf(weights, means, variances, y) - q,
        lo,
        hi,
        xtol=1e-14,
        rtol=4 * np.finfo(float).eps,
        maxiter=500,
    )


# ----------------------------------------------------------------------------- recalibration


def naive_crps_mixture(weights, means, variances, y):
    """CRPS of one Gaussian mixture at ``y`` in closed form, ``E|X - y| - E|X - X'| / 2``,
    with ``E|Z| = mu (2 Phi(mu / s) - 1) + 2 s phi(mu / s)`` for ``Z ~ N(mu, s^2)``
    (Grimit et al. (2006), eq. (5)); pairwise over components."""
    w, m, v = (np.asarray(a, dtype=np.float64) for a in (weights, means, variances))
    w = w / w.sum()

    def abs_mean(mu, var):
        s = np.sqrt(var)
        return mu * (2 * stats.norm.cdf(mu / s) - 1) + 2 * s * stats.norm.pdf(mu / s)

    first = np.sum(w * abs_mean(m - y, v))
    pair = np.sum(w[:, None] * w[None, :] * abs_mean(m[:, None] - m[None, :],
                                                     v[:, None] + v[None, :]))
    return float(first - 0.5 * pair)


def naive_crps_numeric(cdf, y, lo, hi, n=400_001):
    """``int (G(t) - 1{t >= y})^2 dt`` on a dense grid over ``[lo, hi]`` (``cdf`` vectorised)."""
    t = np.linspace(lo, hi, n)
    return float(np.trapezoid((cdf(t) - (t >= y)) ** 2, t))


def naive_pit_knots(u, n_knots):
    """Knots of the PIT map: the empirical ``j / K`` quantiles of ``u`` (linear between order
    statistics), pinned to 0 and 1 at the ends."""
    nominal = np.linspace(0.0, 1.0, n_knots + 1)
    levels = np.quantile(np.asarray(u, dtype=np.float64), nominal)
    levels[0], levels[-1] = 0.0, 1.0
    return nominal, levels


def naive_aci(u, nominal, levels, step):
    """Adaptive conformal inference on every interior knot (Gibbs & Candes (2021), eq. 2),
    one PIT value at a time."""
    levels = np.array(levels, dtype=np.float64)
    for ut in u:
        for j in range(1, len(levels) - 1):
            levels[j] += step * (nominal[j] - (1.0 if ut <= levels[j] else 0.0))
    return levels


# ---------------------------------------------------------------- calibration scores (oracles)


def naive_one_sided(y, quantile_fn, levels):
    """Fraction of targets at or below each level's quantile, by a loop over rows and levels
    (``quantile_fn(i, q)``: row ``i``'s predictive quantile at level ``q``)."""
    out = []
    for q in levels:
        below = 0
        for i, yi in enumerate(y):
            if yi <= quantile_fn(i, q):
                below += 1
        out.append(below / len(y))
    return np.array(out)


def naive_pit_distance(u):
    """sup_t |G(t) - t| of the empirical CDF ``G`` of ``u``: at every value and just below it
    (the supremum of a step function minus the identity is reached at a jump), counted by
    loops."""
    n = len(u)
    best = 0.0
    for t in u:
        at = sum(1 for v in u if v <= t) / n
        below = sum(1 for v in u if v < t) / n
        best = max(best, abs(at - t), abs(below - t))
    return best


def naive_interval_score(y, lower, upper, level):
    """Interval score (Gneiting & Raftery (2007), eq. (43)) row by row."""
    alpha = 1.0 - level
    out = []
    for yi, lo, hi in zip(y, lower, upper, strict=True):
        s = hi - lo
        if yi < lo:
            s += 2.0 / alpha * (lo - yi)
        elif yi > hi:
            s += 2.0 / alpha * (yi - hi)
        out.append(s)
    return np.array(out)
