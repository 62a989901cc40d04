"""Numba kernels of the Mondrian kernel (Balog, Lakshminarayanan, Ghahramani, Roy & Teh 2016).

The Mondrian samples are ordinary flat Mondrian trees (``TREE_LAYOUT.md``) grown on the raw
inputs with ``min_samples_split = 1``: by the projectivity of the Mondrian process (paper
Sec. 2; regression paper Sec. 2), a tree cut only inside its nodes' data extents puts the
training points in cells with the law of the process on the whole box. A cell of the
partition at width ``lam`` is a node ``j`` with ``tau_parent(j) <= lam`` that is a leaf or
splits after ``lam`` (``tau_j > lam``): the partition of every width up to the trees'
lifetime is read off one sample (paper Sec. 4).

A point outside a node's box may be cut off from it before the node's own split by the
conditional Mondrian (regression paper Alg. 4 line 3): at rate ``E`` = the L1 distance from
the point to the box, after the parent's time. :func:`cells` samples that event from a
counter-based hash of the row's bits, the tree and the node, so a row always gets the same
features (``transform`` has no state to advance), and a cut-off point lands in a cell of its
own that no training point shares (the tree's "unseen" column).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .config import JIT, NO_NODE

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
#: 2^-53: a 53-bit integer times this is a uniform double in [0, 1).
_TO_UNIT = 1.0 / 9007199254740992.0


@numba.njit(inline="always", **JIT)
def mix64(h):
    """The splitmix64 finaliser: a bijection of uint64 whose output bits all depend on
    every input bit (Steele, Lea & Flood 2014)."""
    h = (h ^ (h >> _S30)) * _M1
    h = (h ^ (h >> _S27)) * _M2
    return h ^ (h >> _S31)


@numba.njit(inline="always", **JIT)
def row_hash(seed, bits, i):
    """Hash of row ``i`` of ``bits`` (the rows' float64 values viewed as uint64) under
    ``seed``: equal rows hash equal."""
    h = mix64(seed)
    for d in range(bits.shape[1]):
        h = mix64(h ^ (bits[i, d] + _GOLDEN))
    return h


@numba.njit(inline="always", **JIT)
def node_uniform(h, j):
    """A uniform in (0, 1] for row hash ``h`` at node slot ``j``."""
    u = mix64(h ^ (np.uint64(j + 1) * _GOLDEN)) >> _S11
    return (float(u) + 1.0) * _TO_UNIT


@numba.njit(**JIT)
def cells(X, bits, left, right, feature, threshold, tau, lower, upper, root, column, unseen,
          lam, seed, out):  # pragma: no cover - numba
    """The cell of every row of ``X`` in one tree's partition at width ``lam``.

    Descends from the root; at node ``j`` (parent time ``tau_p``), a row at L1 distance
    ``E > 0`` from the box is cut off at time ``tau_p + Exp(E)`` if that comes before
    ``min(tau_j, lam)``, and then gets ``unseen``; otherwise a cell ``j`` gives
    ``column[j]`` and an earlier split sends the row on by its threshold. ``bits`` is ``X``
    viewed as uint64 (the hash input), ``seed`` the tree's hash seed.
    """
    n_features = X.shape[1]
    for i in range(X.shape[0]):
        h = row_hash(seed, bits, i)
        j = root
        tau_p = 0.0
        while True:
            rate = 0.0
            for d in range(n_features):
                v = X[i, d]
                rate += max(lower[j, d] - v, 0.0) + max(v - upper[j, d], 0.0)
            if rate > 0.0:
                s = tau_p - math.log(node_uniform(h, j)) / rate
                if s < min(tau[j], lam):
                    out[i] = unseen
                    break
            if column[j] != NO_NODE:
                out[i] = column[j]
                break
            tau_p = tau[j]
            j = left[j] if X[i, feature[j]] <= threshold[j] else right[j]
