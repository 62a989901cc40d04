"""Plain-NumPy oracle of the held-out PIT counts of :mod:`basics.calibration`."""

from __future__ import annotations

import math

import numpy as np

from basics.pit import PIT_EDGES


def mixture_cdf(weights, means, variances, y):
    """A row at a time: sum_k w_k Phi((y - m_k) / s_k) / sum_k w_k."""
    out = np.empty(len(y))
    for i in range(len(y)):
        num = den = 0.0
        for w, m, v in zip(weights[i], means[i], variances[i], strict=True):
            num += w * 0.5 * (1.0 + math.erf((y[i] - m) / math.sqrt(2.0 * v)))
            den += w
        out[i] = min(max(num / den, 0.0), 1.0)
    return out


def histogram(u):
    """Counts on PIT_EDGES, the last bin closed."""
    counts = np.zeros(PIT_EDGES.size - 1, np.int64)
    for value in u:
        b = int(np.searchsorted(PIT_EDGES, value, side="right")) - 1
        counts[min(b, PIT_EDGES.size - 2)] += 1
    return counts


def held_out_counts(weights, means, variances, y):
    """``(whole, halves)``: the PIT histogram of the mixture, and of its two halves of
    components (first ``k // 2``, then the rest) added together."""
    k = weights.shape[1]
    whole = mixture_cdf(weights, means, variances, y)
    if k < 2:
        return histogram(whole), 2 * histogram(whole)
    cut = k // 2
    halves = [mixture_cdf(weights[:, s], means[:, s], variances[:, s], y)
              for s in (slice(0, cut), slice(cut, k))]
    return histogram(whole), histogram(halves[0]) + histogram(halves[1])
