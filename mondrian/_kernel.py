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

from ._order import preorder
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


# ------------------------------------------------------------------------- the width sweep


@numba.njit(**JIT)
def node_row_ranges(left, right, root, n_nodes, leaf_head, pt_next, rows, start, stop):
    """Training rows of every node as a range of one permutation (``TREE_LAYOUT.md``).

    Writes into ``rows`` the rows of the leaves in preorder (each leaf's list as stored), so
    a node's rows are ``rows[start[j]:stop[j]]``; returns the number of rows written.
    """
    order = preorder(left, right, root, n_nodes)
    k = 0
    for j in order:
        if left[j] == NO_NODE:
            start[j] = k
            r = leaf_head[j]
            while r != NO_NODE:
                rows[k] = r
                k += 1
                r = pt_next[r]
            stop[j] = k
    for i in range(order.shape[0] - 1, -1, -1):
        j = order[i]
        if left[j] != NO_NODE:
            start[j] = start[left[j]]
            stop[j] = stop[right[j]]
    return k


@numba.njit(inline="always", **JIT)
def _remove_slot(A, n, s):
    """Inverse of the regularised covariance without feature ``s`` (a Schur complement):
    ``A[a, c] -= A[a, s] A[s, c] / A[s, s]`` over the other ``n - 1`` active slots. Returns
    ``log A[s, s]``, the change of ``log det G``."""
    piv = A[s, s]
    for a in range(n):
        if a == s:
            continue
        f = A[a, s] / piv
        if f != 0.0:
            for c in range(n):
                A[a, c] -= f * A[s, c]
    return math.log(piv)


@numba.njit(inline="always", **JIT)
def _border_slot(A, n, s, g, d, u):
    """Add feature ``s`` with covariances ``g`` to the other active slots and variance ``d``
    (bordering: ``u = A g``, ``sigma = d - g'u``). Returns ``log sigma``, the change of
    ``log det G``."""
    for a in range(n):
        u[a] = 0.0
    for a in range(n):
        if a == s or g[a] == 0.0:
            continue
        for c in range(n):
            u[c] += A[c, a] * g[a]  # A is symmetric: column a is row a
    u[s] = 0.0
    sigma = d
    for a in range(n):
        if a != s:
            sigma -= g[a] * u[a]
    for a in range(n):
        if a == s:
            continue
        f = u[a] / sigma
        for c in range(n):
            if c != s:
                A[a, c] += f * u[c]
        A[a, s] = -f
        A[s, a] = -f
    A[s, s] = 1.0 / sigma
    return math.log(sigma)


@numba.njit(inline="always", **JIT)
def _child_covariances(tree, lo, hi, rows, cell_of, w, g, Y, yb):
    """Covariances with the other partitions' cells of the child holding ``rows[lo:hi]``
    (each shared row adds ``w = 1 / M``), into ``g``; the sum of its labels into ``yb``."""
    for k in range(yb.shape[0]):
        yb[k] = 0.0
    for i in range(lo, hi):
        r = rows[i]
        for t in range(cell_of.shape[1]):
            if t != tree:
                g[cell_of[r, t]] += w
        for k in range(yb.shape[0]):
            yb[k] += Y[r, k]


@numba.njit(**JIT)
def sweep_cuts(ev_tree, ev_node, e0, e1, left, right, rows, start, stop, cell_of, node_slot,
               A, B, Y, n_active, delta, g, u, yb):  # pragma: no cover - numba
    """Apply the cuts ``e0 .. e1 - 1`` (in time order) to the ridge state (paper Sec. 4.2.1).

    Node ids are global (``left`` / ``right`` hold global ids too); ``rows[t]``, ``start``,
    ``stop`` give the training rows of every node of partition ``t``; ``cell_of[r, t]`` is
    the slot of row ``r``'s cell in partition ``t``, ``node_slot`` the slot of every cell
    node (-1 otherwise). ``A`` is the inverse of ``G = Phi'Phi + delta I`` over the active
    slots ``0 .. n_active - 1`` and ``B = Phi'Y``. A cut of the cell in slot ``s`` removes
    ``s``, then puts the left child in ``s`` and the right one in slot ``n_active``.
    Returns ``(n_active, change of log det G)``.
    """
    m = cell_of.shape[1]
    w = 1.0 / m
    scale = 1.0 / math.sqrt(m)
    dlogdet = 0.0
    for e in range(e0, e1):
        t = ev_tree[e]
        j = ev_node[e]
        s = node_slot[j]
        node_slot[j] = -1
        dlogdet += _remove_slot(A, n_active, s)
        for side in range(2):
            child = left[j] if side == 0 else right[j]
            slot = s if side == 0 else n_active
            n = n_active if side == 0 else n_active + 1
            for a in range(n):
                g[a] = 0.0
            lo, hi = start[child], stop[child]
            _child_covariances(t, lo, hi, rows[t], cell_of, w, g, Y, yb)
            dlogdet += _border_slot(A, n, slot, g, (hi - lo) * w + delta, u)
            for i in range(lo, hi):
                cell_of[rows[t][i], t] = slot
            node_slot[child] = slot
            for k in range(yb.shape[0]):
                B[slot, k] = yb[k] * scale
        n_active += 1
    return n_active, dlogdet
