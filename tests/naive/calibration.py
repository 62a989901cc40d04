"""Plain-NumPy oracles of class-probability calibration: the expected calibration error, the
Dirichlet calibration map's prediction and the hash that halves the calibration rows."""

from __future__ import annotations

import math

import numpy as np

from .mondrian import naive_mix64

_U64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def naive_half(position: int, seed: int) -> bool:
    """Whether a row is in the second half: splitmix64's uniform in (0, 1] of the seed's hash
    and the position (``basics.hashing.uniform53``) above one half, on Python ints."""
    h = naive_mix64(seed & _U64)
    u = naive_mix64(h ^ (((position + 1) * _GOLDEN) & _U64)) >> 11
    return (u + 1) / 2.0 ** 53 > 0.5


def naive_ece(proba: np.ndarray, codes: np.ndarray, n_bins: int = 15) -> float:
    """Guo et al. (2017), eq. (3), bin by bin: rows whose top-class probability lies in
    ``(k / n_bins, (k + 1) / n_bins]`` (the first bin also takes 0), weighted by their share,
    times ``|accuracy - mean confidence|``."""
    n = proba.shape[0]
    conf = [max(row) for row in proba.tolist()]
    correct = [int(np.argmax(row)) == int(c) for row, c in zip(proba, codes, strict=True)]
    total = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        rows = [i for i in range(n) if (lo < conf[i] <= hi) or (k == 0 and conf[i] <= lo)]
        if rows:
            acc = sum(correct[i] for i in rows) / len(rows)
            mean_conf = sum(conf[i] for i in rows) / len(rows)
            total += len(rows) / n * abs(acc - mean_conf)
    return total


def naive_dirichlet_predict(proba: np.ndarray, weights: np.ndarray, intercepts: np.ndarray,
                            floor: float) -> np.ndarray:
    """``softmax(W log p + b)`` row by row (``p`` floored at ``floor`` before the log), each
    probability then floored at ``floor`` and the row renormalised."""
    k = proba.shape[1]
    out = np.empty_like(proba, dtype=np.float64)
    for i in range(proba.shape[0]):
        logp = [math.log(max(float(p), floor)) for p in proba[i]]
        z = [sum(weights[a, j] * logp[j] for j in range(k)) + intercepts[a] for a in range(k)]
        top = max(z)
        e = [math.exp(v - top) for v in z]
        q = [max(v / sum(e), floor) for v in e]
        out[i] = [v / sum(q) for v in q]
    return out
