"""Oracle of the performance-drift test (``ebf.diagnostics.performance``): the block Bayesian
bootstrap of a mean difference, with loops over draws and rows."""

from __future__ import annotations

import math

import numpy as np


def _naive_blocks(x, blocks):
    """Rows ``ceil(b n / B) .. ceil((b + 1) n / B) - 1`` form block ``b`` (B = ``blocks``,
    at most one block per row)."""
    n = len(x)
    B = n if blocks is None else min(blocks, n)
    cuts = [math.ceil(b * n / B) for b in range(B + 1)]
    return [list(x[cuts[b]:cuts[b + 1]]) for b in range(B)]


def _naive_draws(x, blocks, n_draws, seed, key):
    """Bayesian-bootstrap means: every block's rows weighted by its draw's Exp(1) weight."""
    groups = _naive_blocks(x, blocks)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(key,)))
    weights = rng.standard_exponential((n_draws, len(groups)))
    out = []
    for k in range(n_draws):
        num = den = 0.0
        for w, rows in zip(weights[k], groups, strict=True):
            for v in rows:
                num += w * v
                den += w
        out.append(num / den)
    return out


def _naive_quantile(values, q):
    """Linear interpolation between order statistics at position ``q (K - 1)``."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


def naive_performance_drift(scores, reference, n_reference, blocks, level, tolerance,
                            n_draws, seed):
    """``(difference, lower, upper, pvalue)`` of the window's mean minus the reference's.

    A per-row ``reference`` is bootstrapped as the window is (stream ``(seed, 1)``); a mean
    with ``n_reference`` rows gets draws ``reference + sqrt(n / n_reference) (m* - mean)``
    from window means ``m*`` of stream ``(seed, 1)``; a mean alone is exact. The p-value
    counts draws of the difference at most ``tolerance``: ``(1 + count) / (1 + draws)``.
    """
    x = [float(v) for v in scores]
    n = len(x)
    mean = sum(x) / n
    window = _naive_draws(x, blocks, n_draws, seed, 0)
    if np.ndim(reference):
        ref_rows = [float(v) for v in reference]
        ref = sum(ref_rows) / len(ref_rows)
        ref_draws = _naive_draws(ref_rows, blocks, n_draws, seed, 1)
    elif n_reference is None:
        ref = float(reference)
        ref_draws = [ref] * n_draws
    else:
        ref = float(reference)
        scale = math.sqrt(n / n_reference)
        ref_draws = [ref + scale * (m - mean) for m in _naive_draws(x, blocks, n_draws, seed, 1)]
    d = [a - b for a, b in zip(window, ref_draws, strict=True)]
    pvalue = (1 + sum(v <= tolerance for v in d)) / (n_draws + 1)
    return mean - ref, _naive_quantile(d, level), _naive_quantile(d, 1 - level), pvalue
