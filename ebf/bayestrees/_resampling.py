"""Particle weights and resampling for the SMC (thesis Alg. 3.1) and conditional SMC (Alg. 4.2).

Weights live on the log scale; :func:`normalize` turns them into probabilities and returns
the log of their sum (the increment of the log marginal-likelihood estimate). Resampling
draws ancestor indices from uniforms the caller passes in, so a particle system is a
function of its seed alone:

- multinomial (Alg. 3.1 line 14, Alg. 4.2 line 16): ``C`` independent uniforms;
- systematic (Sec. 3.3.1, "other resampling strategies"): one uniform, ``C`` evenly spaced
  points; lower variance, same expectation ``C w_c`` copies of particle ``c``.

Both map sorted points through the inverse of the cumulative weights, one linear merge.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from basics.flat_tree import INDEX
from basics.jit import JIT

__all__ = ["MULTINOMIAL", "RESAMPLING", "SYSTEMATIC", "ancestors", "effective_sample_size",
           "normalize", "resample", "resampling_code"]

MULTINOMIAL, SYSTEMATIC = 0, 1

#: Name -> code of the resampling schemes.
RESAMPLING = {"multinomial": MULTINOMIAL, "systematic": SYSTEMATIC}


def resampling_code(name: str) -> int:
    """Code of a resampling scheme, or ``ValueError`` listing the choices."""
    if name not in RESAMPLING:
        raise ValueError(f"resampling={name!r} is not one of {sorted(RESAMPLING)}")
    return RESAMPLING[name]


@njit(**JIT)
def normalize(log_w, w):  # pragma: no cover - numba
    """Normalised weights of ``log_w`` into ``w``; return ``log sum exp(log_w)``.

    ``-inf`` entries get weight 0; if every entry is ``-inf`` the sum is ``-inf`` and the
    weights are left uniform (no particle explains the data better than another).
    """
    top = -np.inf
    for c in range(log_w.shape[0]):
        if log_w[c] > top:
            top = log_w[c]
    if top == -np.inf:
        w[:] = 1.0 / log_w.shape[0]
        return -np.inf
    total = 0.0
    for c in range(log_w.shape[0]):
        w[c] = math.exp(log_w[c] - top)
        total += w[c]
    for c in range(log_w.shape[0]):
        w[c] /= total
    return top + math.log(total)


@njit(**JIT)
def effective_sample_size(w):  # pragma: no cover - numba
    """``1 / sum(w_c^2)`` of normalised weights (between 1 and ``C``)."""
    s = 0.0
    for c in range(w.shape[0]):
        s += w[c] * w[c]
    return 1.0 / s


@njit(**JIT)
def resample(w, u, scheme, out):  # pragma: no cover - numba
    """Ancestor indices into ``out`` (``len(out)`` draws) from normalised weights ``w``.

    ``u`` holds ``len(out)`` uniforms for ``MULTINOMIAL`` (sorted here, a copy) and at least
    one for ``SYSTEMATIC`` (only ``u[0]`` is read). Point ``p`` picks the first ``c`` with
    ``p < w_0 + ... + w_c`` (the last positive-weight particle if rounding leaves ``p``
    past the total).
    """
    n = out.shape[0]
    if scheme == MULTINOMIAL:
        points = np.sort(u[:n])
    else:
        points = np.empty(n)
        for i in range(n):
            points[i] = (u[0] + i) / n
    last = 0
    for c in range(w.shape[0]):
        if w[c] > 0.0:
            last = c
    c = 0
    cum = w[0]
    for i in range(n):
        while points[i] >= cum and c < last:
            c += 1
            cum += w[c]
        out[i] = c
    return out


def ancestors(w: np.ndarray, rng: np.random.Generator, scheme: int, n: int) -> np.ndarray:
    """``n`` ancestor indices drawn from the normalised weights ``w`` with ``rng``."""
    u = rng.random(n if scheme == MULTINOMIAL else 1)
    return resample(w, u, scheme, np.empty(n, INDEX))
