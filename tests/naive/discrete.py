"""Oracles of the scores of integer-valued targets (``basics.discrete``): the ranked
probability score of a Gaussian mixture discretised to the integers, and the CRPS of a
discrete distribution."""

from __future__ import annotations

import math

import numpy as np


def _mixture_cdf(weights, means, variances, t):
    total = 0.0
    for wk, mk, vk in zip(weights, means, variances, strict=True):
        if wk > 0:
            total += wk * 0.5 * (1.0 + math.erf((t - mk) / math.sqrt(2.0 * vk)))
    return total / float(np.sum(weights))


def naive_rps(weights, means, variances, y, reach=40.0):
    """``sum_k (F(k + 1/2) - 1{y <= k})^2`` of one row's mixture, term by term over every
    integer from ``reach`` component sds below the lowest component (or ``y``) to ``reach``
    above the highest (or ``y``)."""
    live = np.asarray(weights) > 0
    m = np.asarray(means, float)[live]
    s = np.sqrt(np.asarray(variances, float)[live])
    lo = math.floor(min(np.min(m - reach * s), y)) - 1
    hi = math.ceil(max(np.max(m + reach * s), y)) + 1
    total = 0.0
    for k in range(lo, hi + 1):
        f = _mixture_cdf(weights, means, variances, k + 0.5)
        total += (f - (1.0 if y <= k else 0.0)) ** 2
    return total


def naive_discrete_crps(support, probs, y):
    """CRPS of a discrete distribution, ``E|X - y| - E|X - X'| / 2``: the double sum over
    every pair of support points, as a dense matrix."""
    x = np.asarray(support, float)
    p = np.asarray(probs, float)
    first = np.sum(p * np.abs(x - y))
    second = np.sum(np.outer(p, p) * np.abs(x[:, None] - x[None, :]))
    return float(first - 0.5 * second)
