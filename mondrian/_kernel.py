"""Numba kernels of the Mondrian kernel (Balog, Lakshminarayanan, Ghahramani, Roy & Teh 2016).

The Mondrian samples are ordinary flat Mondrian trees (the layout in
``docs/families/mondrian-forests.md``) grown on the raw
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
from typing import NamedTuple

import numba
import numpy as np

from basics.flat_tree import NO_NODE, preorder
from basics.hashing import GOLDEN, mix64, uniform53
from basics.jit import JIT

from ._records import child


class Partition(NamedTuple):
    """One tree's partition at width ``lam`` as :func:`cells` reads it: ``column``, the cell
    number of every node slot (``NO_NODE`` if not a cell), ``unseen`` the column of a
    cut-off row, and ``seed`` the tree's hash seed (uint64)."""

    column: np.ndarray
    unseen: int
    lam: float
    seed: np.uint64


class Cuts(NamedTuple):
    """The cuts of the width sweep in time order, cut ``e`` of node ``node[e]`` of partition
    ``tree[e]``, and the forest's nodes (global ids, over the partitions back to back):
    children ``left`` / ``right`` (global ids too), and the training rows of node ``j`` of
    partition ``t``, ``rows[t, start[j]:stop[j]]``."""

    tree: np.ndarray
    node: np.ndarray
    left: np.ndarray
    right: np.ndarray
    rows: np.ndarray
    start: np.ndarray
    stop: np.ndarray


class Cells(NamedTuple):
    """The cells of the sweep so far: ``cell_of[r, t]``, the slot of row ``r``'s cell in
    partition ``t``, and ``node_slot``, the slot of every cell node (``-1`` otherwise)."""

    cell_of: np.ndarray
    node_slot: np.ndarray


class Ridge(NamedTuple):
    """The exact sweep's ridge state: ``A``, the inverse of ``G = Phi'Phi + delta I`` over
    the active slots, ``B = Phi'Y``, the labels ``Y``, the ridge ``delta`` and ``work``,
    scratch of shape (8, capacity)."""

    A: np.ndarray
    B: np.ndarray
    Y: np.ndarray
    delta: float
    work: np.ndarray


@numba.njit(inline="always", **JIT)
def row_hash(seed, bits, i):
    """Hash of row ``i`` of ``bits`` (the rows' float64 values viewed as uint64) under
    ``seed``: equal rows hash equal."""
    h = mix64(seed)
    for d in range(bits.shape[1]):
        h = mix64(h ^ (bits[i, d] + GOLDEN))
    return h


@numba.njit(**JIT)
def cells(X, bits, tree, root, part, out):  # pragma: no cover - numba
    """The cell of every row of ``X`` in one tree's partition ``part`` (:class:`Partition`)
    at width ``part.lam``.

    Descends from the root; at node ``j`` (parent time ``tau_p``), a row at L1 distance
    ``E > 0`` from the box is cut off at time ``tau_p + Exp(E)`` if that comes before
    ``min(tau_j, lam)``, and then gets ``unseen``; otherwise a cell ``j`` gives
    ``column[j]`` and an earlier split sends the row on by its threshold (:func:`child`).
    ``bits`` is ``X`` viewed as uint64 (the hash input), ``tree`` the partition's
    :class:`._records.MondrianTree`.
    """
    n_features = X.shape[1]
    lower, upper, tau, column, lam = tree.lower, tree.upper, tree.tau, part.column, part.lam
    for i in range(X.shape[0]):
        h = row_hash(part.seed, bits, i)
        j = root
        tau_p = 0.0
        while True:
            rate = 0.0
            for d in range(n_features):
                v = X[i, d]
                rate += max(lower[j, d] - v, 0.0) + max(v - upper[j, d], 0.0)
            if rate > 0.0:
                s = tau_p - math.log(uniform53(h, j)) / rate
                if s < min(tau[j], lam):
                    out[i] = part.unseen
                    break
            if column[j] != NO_NODE:
                out[i] = column[j]
                break
            tau_p = tau[j]
            j = child(tree, j, X[i])


# ------------------------------------------------------------------------- the width sweep


@numba.njit(**JIT)
def node_row_ranges(tree, root, n_nodes, rows, start, stop):
    """Training rows of every node of ``tree`` (:class:`._records.MondrianTree`) as a range
    of one permutation.

    Writes into ``rows`` the rows of the leaves in preorder (each leaf's list as stored), so
    a node's rows are ``rows[start[j]:stop[j]]``; returns the number of rows written.
    """
    left, right, leaf_head, pt_next = tree.left, tree.right, tree.leaf_head, tree.pt_next
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
def _child_covariances(cuts, cell_of, tree, c, g, nz, Y, yb):
    """Covariances with the other partitions' cells of the child ``c`` (a node of partition
    ``tree``; each shared row adds ``w = 1 / M``) into ``g``, the slots they touch into
    ``nz`` (returns how many), and the sum of the child's labels into ``yb``."""
    w = 1.0 / cell_of.shape[1]
    rows = cuts.rows[tree]
    lo = cuts.start[c]
    hi = cuts.stop[c]
    k = 0
    for c in range(yb.shape[0]):
        yb[c] = 0.0
    for i in range(lo, hi):
        r = rows[i]
        for t in range(cell_of.shape[1]):
            if t != tree:
                slot = cell_of[r, t]
                if g[slot] == 0.0:
                    nz[k] = slot
                    k += 1
                g[slot] += w
        for c in range(yb.shape[0]):
            yb[c] += Y[r, c]
    return k


@numba.njit(inline="always", **JIT)
def _times_a(A, n, acol, piv, g, nz, k, out):
    """``out = A' g`` with ``A' = A - a a' / piv`` (the inverse without slot ``s``, whose
    column is ``acol``), from the ``k`` non-zeros of ``g``; returns nothing."""
    for a in range(n):
        out[a] = 0.0
    ag = 0.0
    for i in range(k):
        c = nz[i]
        v = g[c]
        ag += acol[c] * v
        for a in range(n):
            out[a] += A[c, a] * v  # A is symmetric: row c, read contiguously
    f = ag / piv
    for a in range(n):
        out[a] -= acol[a] * f


@numba.njit(**JIT)
def sweep_cuts(cuts, e0, e1, cells, ridge, n_active):  # pragma: no cover - numba
    """Apply the cuts ``e0 .. e1 - 1`` of ``cuts`` (:class:`Cuts`, in time order) to the
    ``cells`` (:class:`Cells`) and the ridge state (:class:`Ridge`; paper Sec. 4.2.1), the
    active slots being ``0 .. n_active - 1``.

    A cut of the cell in slot ``s`` removes ``s`` (the Schur complement ``A - a a' /
    A[s, s]``) and borders the left child into ``s`` and the right one into slot
    ``n_active`` (a 2 x 2 Schur complement ``S``; the children share no row, so their
    covariance is 0): one pass of a rank-3 update over ``A``. Returns ``(n_active, change of
    log det G)``, the change being ``log A[s, s] + log det S``.
    """
    A, B, Y, delta, work = ridge
    cell_of, node_slot = cells
    left, right, start, stop = cuts.left, cuts.right, cuts.start, cuts.stop
    m = cell_of.shape[1]
    w = 1.0 / m
    scale = 1.0 / math.sqrt(m)
    gl, gr, acol, ul, ur, vl, vr, fcol = (work[0], work[1], work[2], work[3], work[4],
                                          work[5], work[6], work[7])
    nzl = np.empty(work.shape[1], np.int64)
    nzr = np.empty(work.shape[1], np.int64)
    yb = np.empty(Y.shape[1])
    dlogdet = 0.0
    for e in range(e0, e1):
        t = cuts.tree[e]
        j = cuts.node[e]
        s = node_slot[j]
        n = n_active
        lj, rj = left[j], right[j]
        kl = _child_covariances(cuts, cell_of, t, lj, gl, nzl, Y, yb)
        for c in range(Y.shape[1]):
            B[s, c] = yb[c] * scale
        kr = _child_covariances(cuts, cell_of, t, rj, gr, nzr, Y, yb)
        for c in range(Y.shape[1]):
            B[n, c] = yb[c] * scale
        for a in range(n):
            acol[a] = A[a, s]
        piv = acol[s]
        _times_a(A, n, acol, piv, gl, nzl, kl, ul)
        _times_a(A, n, acol, piv, gr, nzr, kr, ur)
        ul[s] = 0.0
        ur[s] = 0.0
        qll = 0.0
        qlr = 0.0
        for i in range(kl):
            qll += gl[nzl[i]] * ul[nzl[i]]
            qlr += gl[nzl[i]] * ur[nzl[i]]
        qrr = 0.0
        for i in range(kr):
            qrr += gr[nzr[i]] * ur[nzr[i]]
        s00 = (stop[lj] - start[lj]) * w + delta - qll
        s11 = (stop[rj] - start[rj]) * w + delta - qrr
        s01 = -qlr
        det = s00 * s11 - s01 * s01
        i00, i11, i01 = s11 / det, s00 / det, -s01 / det
        for a in range(n):
            vl[a] = ul[a] * i00 + ur[a] * i01
            vr[a] = ul[a] * i01 + ur[a] * i11
            fcol[a] = acol[a] / piv
        for a in range(n):
            if a == s:
                continue
            fa, pa, qa = fcol[a], vl[a], vr[a]
            for c in range(n):
                A[a, c] += pa * ul[c] + qa * ur[c] - fa * acol[c]
            A[a, s] = -pa
            A[a, n] = -qa
        for c in range(n):
            A[s, c] = -vl[c]
            A[n, c] = -vr[c]
        A[s, s] = i00
        A[n, n] = i11
        A[s, n] = i01
        A[n, s] = i01
        dlogdet += math.log(piv) + math.log(det)
        for i in range(kl):
            gl[nzl[i]] = 0.0
        for i in range(kr):
            gr[nzr[i]] = 0.0
        _relabel(cuts, cells, t, j, s, n)
        n_active = n + 1
    return n_active, dlogdet


@numba.njit(inline="always", **JIT)
def _relabel(cuts, cells, t, j, s, n):
    """After the cut of node ``j`` of partition ``t`` (slot ``s``): its left child takes
    slot ``s``, its right child slot ``n``, and the rows of the right child move there."""
    rj = cuts.right[j]
    rows = cuts.rows[t]
    for i in range(cuts.start[rj], cuts.stop[rj]):
        cells.cell_of[rows[i], t] = n
    cells.node_slot[j] = -1
    cells.node_slot[cuts.left[j]] = s
    cells.node_slot[rj] = n


@numba.njit(**JIT)
def relabel_cuts(cuts, e0, e1, cells, W, n_active):  # pragma: no cover - numba
    """Apply the cuts ``e0 .. e1 - 1`` of ``cuts`` to the ``cells`` only, for a gradient
    solver (paper Sec. 4.2.2): the right child's weights start as a copy of the cut cell's
    (the left child keeps its slot and weights), so every prediction is unchanged. Returns
    ``n_active``."""
    for e in range(e0, e1):
        j = cuts.node[e]
        s = cells.node_slot[j]
        _relabel(cuts, cells, cuts.tree[e], j, s, n_active)
        for c in range(W.shape[1]):
            W[n_active, c] = W[s, c]
        n_active += 1
    return n_active


@numba.njit(inline="always", **JIT)
def _gram_times(cell_of, n_active, v, alpha, out):
    """``out = (Phi'Phi + alpha I) v`` for ``Phi[r, cell_of[r, t]] = 1 / sqrt(M)``: one pass
    over the rows (a row's features are its M cells)."""
    m = cell_of.shape[1]
    for a in range(n_active):
        out[a] = alpha * v[a]
    for r in range(cell_of.shape[0]):
        s = 0.0
        for t in range(m):
            s += v[cell_of[r, t]]
        s /= m
        for t in range(m):
            out[cell_of[r, t]] += s


@numba.njit(**JIT)
def ridge_pcg(cell_of, n_active, Y, alpha, W, rtol, max_iter):  # pragma: no cover - numba
    """Solve ``(Phi'Phi + alpha I) W = Phi'Y`` in place by conjugate gradients from ``W``
    (rows ``0 .. n_active - 1``), preconditioned by the diagonal (cell counts / M + alpha),
    until the residual is below ``rtol`` times ``|Phi'y|`` (per output column). Returns the
    largest number of iterations used."""
    m = cell_of.shape[1]
    scale = 1.0 / math.sqrt(m)
    diag = np.full(n_active, alpha)
    for r in range(cell_of.shape[0]):
        for t in range(m):
            diag[cell_of[r, t]] += 1.0 / m
    b = np.empty(n_active)
    res = np.empty(n_active)
    z = np.empty(n_active)
    p = np.empty(n_active)
    ap = np.empty(n_active)
    most = 0
    for c in range(Y.shape[1]):
        b[:] = 0.0
        for r in range(cell_of.shape[0]):
            for t in range(m):
                b[cell_of[r, t]] += Y[r, c] * scale
        x = W[:n_active, c]
        _gram_times(cell_of, n_active, x, alpha, ap)
        bb = 0.0
        rr = 0.0
        rz = 0.0
        for a in range(n_active):
            res[a] = b[a] - ap[a]
            z[a] = res[a] / diag[a]
            p[a] = z[a]
            bb += b[a] * b[a]
            rr += res[a] * res[a]
            rz += res[a] * z[a]
        stop = rtol * rtol * bb
        it = 0
        while rr > stop and it < max_iter:
            _gram_times(cell_of, n_active, p, alpha, ap)
            pap = 0.0
            for a in range(n_active):
                pap += p[a] * ap[a]
            step = rz / pap
            rr = 0.0
            rz_new = 0.0
            for a in range(n_active):
                x[a] += step * p[a]
                res[a] -= step * ap[a]
                z[a] = res[a] / diag[a]
                rr += res[a] * res[a]
                rz_new += res[a] * z[a]
            beta = rz_new / rz
            rz = rz_new
            for a in range(n_active):
                p[a] = z[a] + beta * p[a]
            it += 1
        for a in range(n_active):
            W[a, c] = x[a]
        most = max(most, it)
    return most
