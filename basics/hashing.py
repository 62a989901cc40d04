"""Counter-based random numbers for numba kernels: splitmix64 (Steele, Lea & Flood 2014).

A kernel that needs random draws in an order of its own (a node's feature subset, a row's
cut-off time) hashes a seed with a counter instead of advancing a generator, so a draw
depends only on what it is for, never on the threads or the order of the work.
"""

from __future__ import annotations

import numba
import numpy as np

from .jit import JIT

__all__ = ["GOLDEN", "mix64", "uniform53"]

#: The golden-ratio increment of splitmix64; ``(counter + 1) * GOLDEN`` spreads counters.
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
#: 2^-53: a 53-bit integer times this is a uniform double in [0, 1).
_TO_UNIT = 1.0 / 9007199254740992.0


@numba.njit(inline="always", **JIT)
def mix64(h):
    """The splitmix64 finaliser: a bijection of uint64 whose output bits all depend on
    every input bit."""
    h = (h ^ (h >> _S30)) * _M1
    h = (h ^ (h >> _S27)) * _M2
    return h ^ (h >> _S31)


@numba.njit(inline="always", **JIT)
def uniform53(h, j):
    """A uniform double in (0, 1] from the hash ``h`` and the counter ``j >= 0``."""
    u = mix64(h ^ (np.uint64(j + 1) * GOLDEN)) >> _S11
    return (float(u) + 1.0) * _TO_UNIT
